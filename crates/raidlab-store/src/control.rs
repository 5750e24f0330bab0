//! The control socket `DIR/control.sock` that `raidlab ctl` talks to.
//!
//! One JSON object per line each way. Requests: `{"cmd": "status"}`, `{"cmd": "fail",
//! "slot": K, "force": false}`, `{"cmd": "add-spare", "path": P}`, `{"cmd": "remove",
//! "target": "K or P"}`, `{"cmd": "re-add", "target": "K or P"}`, `{"cmd": "check"}`,
//! `{"cmd": "repair"}`, `{"cmd": "test-event"}`, `{"cmd": "watch"}`.
//! Replies: `{"ok": true, ...}` or `{"ok": false, "error": "..."}`. A bad request gets an
//! error reply; the connection and the server go on. A relative path is taken relative to
//! the array directory (the CLI sends absolute paths, resolved where it runs).
//!
//! `fail` refuses a slot whose failure would fail the array unless `"force": true`, and
//! changes nothing then. `add-spare` locks the device (see `crate::device`) and preallocates
//! a regular file before it joins; `remove` releases the lock.
//!
//! `check` and `repair` run as a background job (`crate::ctrl::checkjob`): `{"cmd":
//! "check", "wait": false}` starts one and answers at once with its progress; without
//! `"wait": false` the reply comes when it ends (the report: rows, mismatches, skipped,
//! first mismatching rows). A request while a job of the same kind runs waits for that
//! one. `"max_kib_s": N` paces it (KiB/s per member); `"cancel": true` stops the one
//! running. `status` carries the last job as `"check"`.
//!
//! `watch` answers `{"ok": true, "watching": true}` and then streams the server's events
//! (`crate::events`), one JSON object per line, until the client closes the connection or
//! the server stops. A watcher that falls `events::WATCH_BUFFER` events behind is dropped:
//! its stream ends with `{"ok": false, "error": "..."}`. `test-event` sends a
//! `TestMessage` event (to the event program and the watchers).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::ctrl::checkjob::Checks;
use crate::ctrl::Controller;
use crate::device::Locks;
use crate::events::Bus;
use crate::format;

#[path = "control_devices.rs"]
mod devices;

/// File name of the control socket inside the array directory.
pub const SOCKET_NAME: &str = "control.sock";
/// Longest request line accepted.
const LINE_BYTES_MAX: u64 = 64 * 1024;
/// Control connections served at once (more are refused with an error line).
const CONNECTIONS_MAX: usize = 8;
/// A connection that sends no whole request for this long is closed (its slot freed);
/// `ctl watch` connections are exempt once watching.
pub const IDLE_MAX: Duration = Duration::from_secs(60);

/// What the control socket needs of its server besides the controller.
#[derive(Debug, Default)]
pub struct Served {
    /// The server's device locks (a spare added is locked, a device removed released).
    pub locks: Locks,
    /// `serve --read-only`: requests that change the array (fail, add-spare, remove,
    /// re-add) are refused.
    pub read_only: bool,
    /// Where events go (`ctl watch` subscribes here).
    pub events: Arc<Bus>,
    /// The check or repair job running, or the last one.
    pub checks: Arc<Checks>,
    /// How long a connection may idle before it is closed (`None`: [`IDLE_MAX`]).
    pub idle_max: Option<Duration>,
    /// `serve --timing`: a spare added, or a device re-added by path, is timed as the
    /// spares are.
    pub timing: crate::member::timed::TimingOptions,
}

/// What `ctl status` shows: the controller's status and the last check job.
pub fn status(ctl: &Controller, served: &Served) -> Value {
    let mut v = ctl.status();
    v["check"] = served.checks.current().map_or(Value::Null, |j| j.status());
    v
}

pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_NAME)
}

/// Whether a server answers on `dir`'s control socket.
pub fn is_served(dir: &Path) -> bool {
    UnixStream::connect(socket_path(dir)).is_ok()
}

/// Bind the control socket; a stale socket file (nobody answers) is replaced.
pub fn bind(dir: &Path) -> raidlab::Result<UnixListener> {
    let path = socket_path(dir);
    if is_served(dir) {
        return Err(raidlab::Error::store(
            dir.display().to_string(),
            "the array is already served (its control socket answers); stop that server first",
        ));
    }
    let _ = std::fs::remove_file(&path);
    let l = UnixListener::bind(&path)
        .map_err(|e| raidlab::Error::io(path.display().to_string(), &e))?;
    l.set_nonblocking(true)
        .map_err(|e| raidlab::Error::io(path.display().to_string(), &e))?;
    Ok(l)
}

/// Serve control connections until `stop`; removes the socket file on return.
pub fn run(
    listener: UnixListener,
    dir: PathBuf,
    ctl: Arc<Controller>,
    stop: Arc<AtomicBool>,
    served: Arc<Served>,
) {
    let active = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((mut stream, _)) => {
                if active.load(Ordering::SeqCst) >= CONNECTIONS_MAX {
                    let _ = writeln!(
                        stream,
                        "{}",
                        json!({"ok": false, "error": "too many control connections"})
                    );
                    continue;
                }
                active.fetch_add(1, Ordering::SeqCst);
                let (ctl, dir, active, stop, served) = (
                    ctl.clone(),
                    dir.clone(),
                    active.clone(),
                    stop.clone(),
                    served.clone(),
                );
                handles.push(std::thread::spawn(move || {
                    serve_conn(stream, &dir, &ctl, &stop, &served);
                    active.fetch_sub(1, Ordering::SeqCst);
                }));
                handles.retain(|h: &std::thread::JoinHandle<()>| !h.is_finished());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                crate::warn!("control socket: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    for h in handles {
        let _ = h.join();
    }
    let _ = std::fs::remove_file(socket_path(&dir));
}

fn serve_conn(
    stream: UnixStream,
    dir: &Path,
    ctl: &Arc<Controller>,
    stop: &AtomicBool,
    served: &Served,
) {
    // A read timeout lets the connection notice a stop while a client idles.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let idle_max = served.idle_max.unwrap_or(IDLE_MAX);
    let mut since = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        // A line may arrive in pieces across timeouts: what was read stays in `line`.
        let room = LINE_BYTES_MAX.saturating_sub(line.len() as u64).max(1);
        let mut last = false;
        match (&mut reader).take(room).read_line(&mut line) {
            Ok(0) if line.is_empty() => return,
            // End of stream after a request without its newline: answer it, then close.
            Ok(0) => last = true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if since.elapsed() >= idle_max {
                    let _ = writeln!(
                        out,
                        "{}",
                        json!({"ok": false, "error": format!("no request for {} s: connection closed", idle_max.as_secs_f64())})
                    );
                    return;
                }
                continue;
            }
            Err(_) => return,
        }
        if !line.ends_with('\n') && !last {
            if line.len() as u64 >= LINE_BYTES_MAX {
                let _ = writeln!(
                    out,
                    "{}",
                    json!({"ok": false, "error": "request line too long"})
                );
                return;
            }
            // More to come (or the end of stream, seen by the next read).
            continue;
        }
        let reply = match serde_json::from_str::<Value>(line.trim()) {
            Ok(req) if req.get("cmd").and_then(Value::as_str) == Some("watch") => {
                watch(&mut reader, &mut out, stop, served);
                return;
            }
            Ok(req) => handle_waiting(&req, dir, ctl, served, stop),
            Err(e) => json!({"ok": false, "error": format!("not a JSON request: {e}")}),
        };
        line.clear();
        since = Instant::now();
        if writeln!(out, "{reply}").is_err() || last {
            return;
        }
    }
}

/// Stream events to a `ctl watch` client until it leaves, falls behind or the server stops.
fn watch(
    reader: &mut BufReader<UnixStream>,
    out: &mut UnixStream,
    stop: &AtomicBool,
    served: &Served,
) {
    let Some(rx) = served.events.subscribe() else {
        let _ = writeln!(out, "{}", fail("watch: the server is stopping"));
        return;
    };
    // A watcher that stops reading is dropped by the bus; the write timeout only bounds
    // this thread's wait on a full socket.
    let _ = out.set_write_timeout(Some(Duration::from_secs(5)));
    let _ = reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(10)));
    if writeln!(out, "{}", json!({"ok": true, "watching": true})).is_err() {
        return;
    }
    let mut scratch = [0u8; 256];
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(ev) => {
                if writeln!(out, "{ev}").is_err() {
                    return;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                // The client closed its end (reads as end of stream): stop watching.
                match reader.get_mut().read(&mut scratch) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => return,
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                if !served.events.is_closed() {
                    let _ = writeln!(
                        out,
                        "{}",
                        fail(format!(
                            "watch: this watcher fell {} events behind and was dropped",
                            crate::events::WATCH_BUFFER
                        ))
                    );
                }
                return;
            }
        }
    }
}

/// `handle`, plus the requests that start background work or wait on it (check, repair).
pub fn handle_waiting(
    req: &Value,
    dir: &Path,
    ctl: &Arc<Controller>,
    served: &Served,
    stop: &AtomicBool,
) -> Value {
    let cmd = req.get("cmd").and_then(Value::as_str).unwrap_or("");
    if !matches!(cmd, "check" | "repair") {
        return handle(req, dir, ctl, served);
    }
    let repair = cmd == "repair";
    if repair && served.read_only {
        return fail(
            "repair: the array is served read-only (`serve --read-only`): nothing is changed",
        );
    }
    if req.get("cancel").and_then(Value::as_bool) == Some(true) {
        return match served.checks.current().filter(|j| j.is_running()) {
            Some(j) => {
                j.cancel();
                j.wait(stop);
                json!({"ok": true, "check": j.status()})
            }
            None => fail(format!("{cmd}: no check or repair is running")),
        };
    }
    let wait = req.get("wait").and_then(Value::as_bool).unwrap_or(true);
    let max_kib_s = req.get("max_kib_s").and_then(Value::as_u64).unwrap_or(0);
    let job = match served.checks.current().filter(|j| j.is_running()) {
        // Asking for the kind already running joins it.
        Some(j) if j.repair == repair => j,
        _ => match served.checks.start(ctl, repair, max_kib_s) {
            Ok(j) => j,
            Err(e) => return fail(format!("{cmd}: {e}")),
        },
    };
    if !wait {
        return json!({"ok": true, "started": true, "check": job.status()});
    }
    if !job.wait(stop) {
        return fail(format!("{cmd}: the server is stopping"));
    }
    let st = job.status();
    if st["state"] == "failed" {
        return fail(format!(
            "{cmd}: {}",
            st["error"].as_str().unwrap_or("the array failed")
        ));
    }
    let mut v = json!({"ok": true, "check": st.clone()});
    // The report's fields at the top level, as before the job existed.
    for k in [
        "rows",
        "mismatches",
        "skipped",
        "first_mismatches",
        "repaired",
        "state",
    ] {
        v[k] = st[k].clone();
    }
    v
}

fn fail(msg: impl Into<String>) -> Value {
    json!({"ok": false, "error": msg.into()})
}

/// Answer one request.
pub fn handle(req: &Value, dir: &Path, ctl: &Controller, served: &Served) -> Value {
    let cmd = req.get("cmd").and_then(Value::as_str).unwrap_or("");
    let locks = &served.locks;
    if served.read_only && matches!(cmd, "fail" | "add-spare" | "remove" | "re-add") {
        return fail(format!(
            "{cmd}: the array is served read-only (`serve --read-only`): nothing is changed"
        ));
    }
    match cmd {
        "status" => {
            let mut v = status(ctl, served);
            v["ok"] = json!(true);
            v
        }
        "test-event" => {
            served.events.emit(
                crate::log::Level::Info,
                "TestMessage",
                None,
                "test event (`ctl test-event`)",
                json!({}),
            );
            json!({"ok": true, "event": "TestMessage", "watchers": served.events.watchers()})
        }
        "fail" => {
            let Some(slot) = req.get("slot").and_then(Value::as_u64) else {
                return fail("fail: expected a slot number");
            };
            if slot >= u64::from(ctl.shape().disks) {
                return fail(format!(
                    "fail: slot {slot} out of range (the array has {} members)",
                    ctl.shape().disks
                ));
            }
            let force = req.get("force").and_then(Value::as_bool).unwrap_or(false);
            if !force {
                if let Some(why) = ctl.fail_would_kill(slot as u32) {
                    return fail(format!(
                        "fail: slot {slot}: failing it would fail the array ({why}; slots failed now: {}); nothing changed (`ctl fail {slot} --force` fails it anyway)",
                        failed_slots(ctl)
                    ));
                }
            }
            match ctl.fail_member(slot as u32, "failed by ctl") {
                Ok(()) => json!({"ok": true, "state": ctl.state_word()}),
                Err(e) => json!({"ok": true, "state": ctl.state_word(), "warning": e.to_string()}),
            }
        }
        "add-spare" => {
            let Some(path) = req.get("path").and_then(Value::as_str) else {
                return fail("add-spare: expected a path");
            };
            devices::add_spare(dir, ctl, locks, path, &served.timing)
        }
        "remove" => {
            let Some(target) = req.get("target").and_then(Value::as_str) else {
                return fail("remove: expected a slot number or a path");
            };
            match ctl.remove(target) {
                Ok(path) => {
                    locks.release(&path);
                    if let Err(e) = format::remove_from_manifest(dir, Path::new(&path)) {
                        return fail(e.to_string());
                    }
                    json!({"ok": true, "removed": path})
                }
                Err(e) => fail(e.to_string()),
            }
        }
        "re-add" => {
            let Some(target) = req.get("target").and_then(Value::as_str) else {
                return fail("re-add: expected a slot number or a path");
            };
            let done = if ctl.knows_faulty(target) {
                ctl.re_add(target).map_err(|e| e.to_string())
            } else {
                devices::re_add_path(dir, ctl, locks, target, &served.timing)
            };
            match done {
                Ok(r) => {
                    let mut v = r.json();
                    v["ok"] = json!(true);
                    v["state"] = json!(ctl.state_word());
                    v
                }
                Err(e) => fail(format!("re-add: {e}")),
            }
        }
        "check" => {
            let rep = ctl.check();
            json!({"ok": true, "rows": rep.rows, "mismatches": rep.mismatches, "skipped": rep.skipped})
        }
        "" => fail("expected {\"cmd\": ...}"),
        other => fail(format!(
            "unknown command {other:?} (expected status, fail, add-spare, remove, re-add, check, repair, watch or test-event)"
        )),
    }
}

/// The failed slots, for messages ("1, 3" or "none").
fn failed_slots(ctl: &Controller) -> String {
    let s: Vec<String> = ctl
        .slot_states()
        .iter()
        .enumerate()
        .filter(|(_, st)| **st != crate::ctrl::SlotState::InSync)
        .map(|(i, _)| i.to_string())
        .collect();
    if s.is_empty() {
        "none".into()
    } else {
        s.join(", ")
    }
}

/// Send one request to the server of `dir` and read its reply (tests and the CLI).
pub fn request(dir: &Path, req: &Value) -> raidlab::Result<Value> {
    let path = socket_path(dir);
    let name = path.display().to_string();
    let mut s = UnixStream::connect(&path).map_err(|e| {
        raidlab::Error::store(
            name.clone(),
            format!("no server answers ({e}); is `raidlab serve` running?"),
        )
    })?;
    writeln!(s, "{req}").map_err(|e| raidlab::Error::io(name.clone(), &e))?;
    let mut line = String::new();
    BufReader::new(s)
        .take(16 << 20)
        .read_line(&mut line)
        .map_err(|e| raidlab::Error::io(name.clone(), &e))?;
    serde_json::from_str(&line).map_err(|e| raidlab::Error::store(name, format!("bad reply: {e}")))
}

#[cfg(test)]
#[path = "control_tests.rs"]
mod tests;
