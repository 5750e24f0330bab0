//! Events of a served array: what `serve --event-program PROG` runs and `ctl DIR watch`
//! streams, as mdadm's `--monitor --program` does.
//!
//! - [`Bus`]: one per server. [`Bus::emit`] logs the event (see `crate::log`), queues it for
//!   the event program and sends it to every watcher. Nothing here waits on a consumer:
//!   - the program runs on a thread of its own, one event at a time, as
//!     `PROG EVENT DIR [DEVICE]` with the event as JSON in `$RAIDLAB_EVENT`; at most
//!     [`PROGRAM_QUEUE`] events wait (more are dropped, with a log line), and a run that
//!     takes longer than its timeout is killed (logged);
//!   - a watcher ([`Bus::subscribe`]) has a buffer of [`WATCH_BUFFER`] events; a watcher
//!     that falls that far behind is dropped (its stream ends with an error line), never
//!     waited for.
//! - [`Monitor`]: turns successive `ctl status` values into events, so the controller needs
//!   no calls of its own: `serve` polls the status every [`POLL`] and feeds it here.
//!
//! Events (mdadm's names, plus raidlab's own for what md reports elsewhere):
//!
//! | event | device | when |
//! | --- | --- | --- |
//! | `Fail` | the member | an in-sync member failed (I/O error or `ctl fail`) |
//! | `Missing` | the member | an in-sync member's host went away (a remote member, raidlab) |
//! | `FailSpare` | the replacement | a member being rebuilt failed; its rebuild stopped |
//! | `RebuildStarted` | the replacement | a rebuild started (or was resumed at start) |
//! | `Rebuild20` .. `Rebuild80` | the replacement | the rebuild passed 20, 40, 60, 80 % |
//! | `RebuildFinished` | the replacement | the rebuild completed |
//! | `SpareActive` | the replacement | the rebuilt device is an in-sync member |
//! | `DegradedArray` | | the server started on a degraded array |
//! | `DeviceDisappeared` | | the server stopped: the export is gone |
//! | `TestMessage` | | `ctl DIR test-event` (to try the alerting) |
//! | `ArrayFailed` | | the array lost more members than its level survives (raidlab) |
//! | `ResyncFinished` | | the resync of dirty regions after an unclean stop ended (raidlab) |
//! | `CheckFinished` | | a check or repair ended; `mismatches` in the JSON (raidlab) |
//! | `BackupLost` | | the write cache lost its backup: write-through or draining (raidlab) |
//! | `BackupRestored` | | the write cache is backed up again (raidlab) |
//!
//! An event as JSON (one line of `ctl watch --json`, and `$RAIDLAB_EVENT`):
//! `{"event": "Fail", "dir": "/srv/tank", "device": "/srv/tank/disk1", "time":
//! "2025-06-01T12:00:00.123Z", "msg": "...", "slot": 1, ...}`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Map, Value};

use crate::log::Level;

/// Events waiting for the event program at most.
pub const PROGRAM_QUEUE: usize = 64;
/// Events buffered for one watcher at most.
pub const WATCH_BUFFER: usize = 256;
/// How often `serve` polls the status for changes.
pub const POLL: Duration = Duration::from_millis(200);
/// The event program's default time limit per run.
pub const PROGRAM_TIMEOUT: Duration = Duration::from_secs(30);
/// Rebuild progress is logged every this many percent ...
const PROGRESS_PCT: f64 = 10.0;
/// ... or this often, whichever comes first.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// `serve --event-program PROG [--event-timeout S]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub path: String,
    pub timeout: Duration,
}

impl Program {
    /// The program and its time limit in seconds; a bad value is a config error naming its
    /// option.
    pub fn parse(path: &str, timeout_s: f64) -> raidlab::Result<Program> {
        if path.is_empty() {
            return Err(raidlab::Error::config(
                "--event-program",
                "expected a program path",
            ));
        }
        if !(timeout_s.is_finite() && timeout_s > 0.0 && timeout_s <= 3600.0) {
            return Err(raidlab::Error::config(
                "--event-timeout",
                format!("expected seconds in (0, 3600], got {timeout_s}"),
            ));
        }
        Ok(Program {
            path: path.to_string(),
            timeout: Duration::from_secs_f64(timeout_s),
        })
    }
}

/// The event program's thread and its queue.
struct Runner {
    tx: SyncSender<Arc<Value>>,
    /// Disconnected when the thread ends.
    done: Receiver<()>,
}

/// Where a server's events go: its log, its event program, its watchers.
#[derive(Default)]
pub struct Bus {
    dir: String,
    subs: Mutex<Vec<SyncSender<Arc<Value>>>>,
    runner: Mutex<Option<Runner>>,
    closed: AtomicBool,
}

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus")
            .field("dir", &self.dir)
            .field("watchers", &self.watchers())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Bus {
    /// The bus of the array in `dir`, running `program` (if any) for each event.
    pub fn new(dir: &Path, program: Option<Program>) -> raidlab::Result<Bus> {
        let runner = match program {
            None => None,
            Some(p) => {
                let (tx, rx) = mpsc::sync_channel::<Arc<Value>>(PROGRAM_QUEUE);
                let (done_tx, done) = mpsc::channel::<()>();
                std::thread::Builder::new()
                    .name("raidlab-events".into())
                    .spawn(move || {
                        let _done = done_tx;
                        for ev in rx {
                            run_program(&p, &ev);
                        }
                    })
                    .map_err(|e| raidlab::Error::io("event program thread", &e))?;
                Some(Runner { tx, done })
            }
        };
        Ok(Bus {
            dir: dir.display().to_string(),
            subs: Mutex::new(Vec::new()),
            runner: Mutex::new(runner),
            closed: AtomicBool::new(false),
        })
    }

    /// The array directory events name.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// Log event `name` (about `device`, if any) with message `msg` and `detail` fields,
    /// and hand it to the program and the watchers. Never blocks on either.
    pub fn emit(&self, level: Level, name: &str, device: Option<&str>, msg: &str, detail: Value) {
        let mut m = Map::new();
        m.insert("event".into(), json!(name));
        m.insert("dir".into(), json!(self.dir));
        m.insert("device".into(), json!(device));
        m.insert(
            "time".into(),
            json!(crate::log::timestamp(SystemTime::now())),
        );
        m.insert("msg".into(), json!(msg));
        if let Value::Object(d) = detail {
            for (k, v) in d {
                m.entry(k).or_insert(v);
            }
        }
        if crate::log::enabled(level) {
            let fields: Vec<(&str, Value)> = m
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "time" | "msg" | "dir"))
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect();
            crate::log::emit(level, msg, &fields);
        }
        let ev = Arc::new(Value::Object(m));
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        if let Some(r) = self
            .runner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            if let Err(TrySendError::Full(_)) = r.tx.try_send(ev.clone()) {
                crate::warn!(
                    { "event": "EventDropped", "dropped": name },
                    "event program queue full ({PROGRAM_QUEUE} events waiting): {name} not delivered to it"
                );
            }
        }
        let mut subs = self.subs.lock().unwrap_or_else(|e| e.into_inner());
        subs.retain(|s| match s.try_send(ev.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                crate::warn!(
                    { "event": "WatcherDropped" },
                    "a `ctl watch` client fell {WATCH_BUFFER} events behind: dropped"
                );
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        });
    }

    /// A stream of the events from now on (`None` once the bus is closed). The sender is
    /// dropped when the watcher falls [`WATCH_BUFFER`] events behind or the bus closes.
    pub fn subscribe(&self) -> Option<Receiver<Arc<Value>>> {
        if self.closed.load(Ordering::SeqCst) {
            return None;
        }
        let (tx, rx) = mpsc::sync_channel(WATCH_BUFFER);
        self.subs.lock().unwrap_or_else(|e| e.into_inner()).push(tx);
        Some(rx)
    }

    /// Whether [`Bus::close`] was called (the server is stopping).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Watchers subscribed now.
    pub fn watchers(&self) -> usize {
        self.subs.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// End every watcher's stream and let the event program finish the events queued,
    /// waiting at most `wait` for it.
    pub fn close(&self, wait: Duration) {
        self.closed.store(true, Ordering::SeqCst);
        self.subs.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let runner = self.runner.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(Runner { tx, done }) = runner {
            drop(tx);
            if let Err(RecvTimeoutError::Timeout) = done.recv_timeout(wait) {
                crate::warn!("the event program has not finished within {wait:?} of the stop; not waiting for it");
            }
        }
    }
}

/// Run the event program for `ev`, within its time limit; every failure is logged.
fn run_program(p: &Program, ev: &Value) {
    let name = ev["event"].as_str().unwrap_or("");
    let mut cmd = Command::new(&p.path);
    cmd.arg(name)
        .arg(ev["dir"].as_str().unwrap_or(""))
        .env("RAIDLAB_EVENT", ev.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if let Some(d) = ev["device"].as_str() {
        cmd.arg(d);
    }
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            crate::warn!(
                { "event": "EventProgramFailed", "program": p.path, "for": name, "error": e.to_string() },
                "event program {} cannot be run for {name}: {e}", p.path
            );
            return;
        }
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => {
                crate::debug!({ "program": p.path, "for": name }, "event program ran for {name}");
                return;
            }
            Ok(Some(status)) => {
                crate::warn!(
                    { "event": "EventProgramFailed", "program": p.path, "for": name, "status": status.to_string() },
                    "event program {} failed for {name}: {status}", p.path
                );
                return;
            }
            Ok(None) if started.elapsed() >= p.timeout => {
                let _ = child.kill();
                let _ = child.wait();
                crate::warn!(
                    { "event": "EventProgramFailed", "program": p.path, "for": name, "timeout_s": p.timeout.as_secs_f64() },
                    "event program {} for {name} ran longer than {:?}: killed", p.path, p.timeout
                );
                return;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                crate::warn!(
                    { "event": "EventProgramFailed", "program": p.path, "for": name, "error": e.to_string() },
                    "event program {}: waiting for it failed: {e}", p.path
                );
                return;
            }
        }
    }
}

mod monitor;
pub use monitor::Monitor;

#[cfg(test)]
mod tests {
    use super::*;

    fn status(members: &[(&str, &str)], rebuild: Option<(u64, f64)>) -> Value {
        json!({
            "state": if members.iter().all(|m| m.0 == "in_sync") { "clean" } else { "degraded" },
            "members": members.iter().map(|(s, p)| json!({"state": s, "path": if p.is_empty() { Value::Null } else { json!(p) }})).collect::<Vec<_>>(),
            "failure": null,
            "rebuild": rebuild.map(|(slot, f)| json!({"slot": slot, "fraction": f, "units": 100, "rate_mb_s": 1.0, "order": "sequential"})),
            "resync": {"pending_regions": 0, "resynced_rows": 0, "repaired_rows": 0},
        })
    }

    fn names(rx: &Receiver<Arc<Value>>) -> Vec<String> {
        rx.try_iter()
            .map(|e| {
                format!(
                    "{} {}",
                    e["event"].as_str().unwrap(),
                    e["device"].as_str().unwrap_or("-")
                )
            })
            .collect()
    }

    #[test]
    fn the_monitor_turns_status_changes_into_mdadm_events() {
        let bus = Bus::new(Path::new("arr"), None).unwrap();
        let rx = bus.subscribe().unwrap();
        let mut m = Monitor::new(65536);
        m.observe(&status(&[("in_sync", "d0"), ("in_sync", "d1")], None), &bus);
        assert!(names(&rx).is_empty());
        m.observe(&status(&[("in_sync", "d0"), ("failed", "")], None), &bus);
        assert_eq!(names(&rx), ["Fail d1"]);
        m.observe(
            &status(&[("in_sync", "d0"), ("rebuilding", "s0")], Some((1, 0.5))),
            &bus,
        );
        assert_eq!(names(&rx), ["RebuildStarted s0"]);
        m.observe(
            &status(&[("in_sync", "d0"), ("rebuilding", "s0")], Some((1, 0.85))),
            &bus,
        );
        assert_eq!(names(&rx), ["Rebuild60 s0", "Rebuild80 s0"]);
        m.observe(&status(&[("in_sync", "d0"), ("in_sync", "s0")], None), &bus);
        assert_eq!(names(&rx), ["RebuildFinished s0", "SpareActive s0"]);
        // Failed and rebuilt between two polls: nothing is missed.
        m.observe(&status(&[("in_sync", "s1"), ("in_sync", "s0")], None), &bus);
        assert_eq!(
            names(&rx),
            [
                "Fail d0",
                "RebuildStarted s1",
                "RebuildFinished s1",
                "SpareActive s1"
            ]
        );
        // A replacement that fails.
        m.observe(
            &status(&[("in_sync", "s1"), ("rebuilding", "s2")], Some((1, 0.1))),
            &bus,
        );
        m.observe(&status(&[("in_sync", "s1"), ("failed", "")], None), &bus);
        assert_eq!(names(&rx), ["Fail s0", "RebuildStarted s2", "FailSpare s2"]);
        // A monitor starting on a degraded array says so.
        let mut m = Monitor::new(65536);
        m.observe(&status(&[("in_sync", "d0"), ("failed", "")], None), &bus);
        assert_eq!(names(&rx), ["DegradedArray -"]);
    }

    #[test]
    fn a_slow_watcher_is_dropped_not_waited_for() {
        let bus = Bus::new(Path::new("arr"), None).unwrap();
        let slow = bus.subscribe().unwrap();
        let fast = bus.subscribe().unwrap();
        for i in 0..WATCH_BUFFER + 10 {
            bus.emit(Level::Debug, "TestMessage", None, "t", json!({ "i": i }));
            let _ = fast.try_recv();
        }
        assert_eq!(bus.watchers(), 1, "the slow one is gone");
        assert_eq!(slow.try_iter().count(), WATCH_BUFFER);
        assert!(slow.recv().is_err(), "its stream ended");
        bus.close(Duration::from_secs(1));
        assert!(fast.recv().is_err(), "closing ends every stream");
        assert!(bus.subscribe().is_none());
    }

    #[test]
    fn the_event_program_gets_event_dir_and_device() {
        let dir = std::env::temp_dir().join(format!("raidlab-events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("out");
        let prog = dir.join("prog.sh");
        std::fs::write(
            &prog,
            format!(
                "#!/bin/sh\necho \"$@\" >> {}\ncase \"$1\" in Slow) sleep 5;; esac\n",
                out.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let p = Program::parse(&prog.display().to_string(), 0.3).unwrap();
        let bus = Bus::new(Path::new("/srv/tank"), Some(p)).unwrap();
        bus.emit(
            Level::Debug,
            "Fail",
            Some("/srv/tank/disk1"),
            "m",
            json!({}),
        );
        bus.emit(Level::Debug, "Slow", None, "m", json!({}));
        bus.emit(Level::Debug, "TestMessage", None, "m", json!({}));
        bus.close(Duration::from_secs(10));
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(
            text, "Fail /srv/tank /srv/tank/disk1\nSlow /srv/tank\nTestMessage /srv/tank\n",
            "one at a time, in order; the slow run was killed at its timeout"
        );
        // A program that cannot be run is logged, and the next event still goes out.
        let bad = Program::parse("/nonexistent/raidlab-prog", 1.0).unwrap();
        let bus = Bus::new(Path::new("x"), Some(bad)).unwrap();
        bus.emit(Level::Debug, "TestMessage", None, "m", json!({}));
        bus.close(Duration::from_secs(5));
        assert!(Program::parse("p", 0.0).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
