//! `raidlab serve`: assemble an array directory, run its controller and serve it over NBD
//! until asked to stop, then drain, checkpoint and mark it clean.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use raidlab::cache::read::PolicySpec;
use raidlab::rebuild::{OrderSpec, RateSpec};
use raidlab::{Error, Result};

use crate::control;
use crate::ctrl::checkjob::Checks;
use crate::ctrl::{Controller, IoFail, Options};
use crate::device::Locks;
use crate::events::{self, Bus, Monitor};
use crate::format::{self, SuperblockSink};
use crate::member::timed::TimingOptions;
use crate::nbd::{
    self, Backend, BlockSize, Errno, Limits, Listen, ServeStats, Server, ServerTls, TlsMode,
};
use crate::wb::setup::WbOptions;
use crate::wb::WriteBack;

mod options;
pub use options::*;

/// The controller (behind its write-back cache, when there is one) seen as an NBD export.
pub struct Export {
    pub ctl: Arc<Controller>,
    pub wb: Option<Arc<WriteBack>>,
    pub name: String,
    /// Advertised read-only; the NBD layer refuses writes with EPERM.
    pub read_only: bool,
}

fn errno(e: IoFail) -> Errno {
    match e {
        IoFail::Invalid(_) => nbd::EINVAL,
        IoFail::Failed(_) => nbd::EIO,
        IoFail::NoSpace(_) => nbd::ENOSPC,
    }
}

impl Backend for Export {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> String {
        let s = self.ctl.shape();
        format!(
            "raidlab {} of {} members, {} KiB chunks",
            s.level.name(),
            s.disks,
            s.chunk_bytes / 1024
        )
    }
    fn size_bytes(&self) -> u64 {
        self.ctl.size_bytes()
    }
    fn read_only(&self) -> bool {
        self.read_only
    }
    fn block_size(&self) -> BlockSize {
        let chunk = u32::try_from(self.ctl.shape().chunk_bytes).unwrap_or(1 << 30);
        BlockSize {
            minimum: crate::ctrl::column::BLOCK as u32,
            preferred: chunk.clamp(4096, 1 << 20),
            maximum: 32 << 20,
        }
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> std::result::Result<(), Errno> {
        match &self.wb {
            Some(wb) => wb.read(offset, buf),
            None => self.ctl.read(offset, buf),
        }
        .map_err(errno)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> std::result::Result<(), Errno> {
        match &self.wb {
            Some(wb) => wb.write(offset, data, fua),
            None => self.ctl.write(offset, data, fua),
        }
        .map_err(errno)
    }
    fn flush(&self) -> std::result::Result<(), Errno> {
        match &self.wb {
            Some(wb) => wb.flush(),
            None => self.ctl.flush(),
        }
        .map_err(errno)
    }
    fn trim(&self, offset: u64, len: u64, fua: bool) -> std::result::Result<(), Errno> {
        // A trimmed range reads back as zeros: deterministic, and parity stays consistent.
        self.write_zeroes(offset, len, fua)
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> std::result::Result<(), Errno> {
        match &self.wb {
            Some(wb) => wb.write_zeroes(offset, len, fua),
            None => self.ctl.write_zeroes(offset, len, fua),
        }
        .map_err(errno)
    }
    fn connected(&self, id: u64, peer: &str) {
        crate::info!(
            { "event": "ClientConnected", "conn": id, "peer": peer },
            "client {id} connected from {peer}"
        );
    }
    fn disconnected(&self, id: u64, requests: u64, errors: u64, why: Option<&str>) {
        crate::info!(
            { "event": "ClientDisconnected", "conn": id, "requests": requests, "errors": errors, "why": why },
            "client {id} disconnected after {requests} requests ({errors} errors){}",
            why.map(|w| format!(": {w}")).unwrap_or_default()
        );
    }
}

/// How a serve ended.
#[derive(Debug, Clone)]
pub struct ServeSummary {
    pub nbd: ServeStats,
    pub state: &'static str,
    pub clean: bool,
}

/// The controller of an assembled array, as `serve` runs it: superblocks written through a
/// `SuperblockSink`, the clean flag as recorded, the dirty regions queued for resync, and a
/// rebuild in progress resumed from its checkpoint. Nothing is written until it serves.
pub fn controller_from(a: &format::Assembled, opts: Options) -> Result<Controller> {
    let ctl = Controller::new(
        a.shape.clone(),
        a.devs.clone(),
        a.spares.clone(),
        a.recovering,
        a.events,
        Box::new(SuperblockSink::from_assembled(a)),
        opts,
    )?;
    ctl.assume_clean(a.clean);
    ctl.init_intent_regions(a.rows_per_region, a.dirty_regions.clone());
    ctl.init_kept(&a.kept_regions, a.cleared_events);
    ctl.adopt_faulty(&a.faulty);
    ctl.watch_away(&a.away);
    ctl.watch_returned(&a.returned);
    Ok(ctl)
}

/// Assemble `dir` and serve it until `stop` is set. `ready` is called once with the line to
/// print when connections are accepted.
pub fn serve(
    dir: &Path,
    opts: &ServeOptions,
    stop: Arc<AtomicBool>,
    ready: &mut dyn FnMut(&str),
) -> Result<ServeSummary> {
    crate::log::init(opts.log);
    let listen = Listen::parse(&opts.listen).map_err(|m| Error::config("--listen", m))?;
    let tls = opts.tls.load()?;
    check_listen_secure(&listen, opts.insecure, opts.tls.mode)?;
    if let Some(w) = opts.workers {
        let max = crate::nbd::server::WORKERS_MAX;
        if !(1..=max).contains(&w) {
            return Err(Error::config(
                "--workers",
                format!("expected 1 to {max} worker threads, got {w}"),
            ));
        }
    }
    if opts.read_only && opts.force {
        return Err(Error::config(
            "--read-only",
            "--force writes the superblocks; it cannot be combined with --read-only",
        ));
    }
    if opts.read_only && opts.wb.is_some() {
        return Err(Error::config(
            "--read-only",
            "a write cache cannot be combined with --read-only",
        ));
    }
    // Before assembly: it connects to the remote members.
    crate::member::nbd::set_request_timeout(opts.member_timeout);
    let mut a = format::assemble_with(dir, opts.force)?;
    if opts.read_only && std::fs::symlink_metadata(dir.join("wb.json")).is_ok() {
        return Err(Error::store(
            dir.join("wb.json").display().to_string(),
            "the last run's write-cache backup must be replayed (a write): start once without --read-only",
        ));
    }
    // Every device this server may write is locked before anything is written: a second
    // process (another `serve`, a `create --force`) is refused, naming the device.
    let locks = Locks::lock_all(
        a.devs
            .iter()
            .flatten()
            .chain(&a.spares)
            .chain(a.faulty.iter().map(|(d, _)| d))
            .map(|d| d.path()),
    )?;
    apply_timing(&mut a, &opts.timing)?;
    // Events name the directory absolute: the event program runs from its own directory.
    let bus = Arc::new(Bus::new(
        &std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()),
        opts.event_program.clone(),
    )?);
    let checks = Arc::new(Checks::default());
    let served = Arc::new(control::Served {
        locks,
        read_only: opts.read_only,
        events: bus.clone(),
        checks: checks.clone(),
        idle_max: None,
        timing: opts.timing.clone(),
    });
    for w in &a.warnings {
        crate::warn!({ "event": "AssemblyWarning" }, "{w}");
    }
    for f in &a.forced {
        crate::warn!({ "event": "ForcedStart" }, "--force: {f}; every region is resynced");
    }
    let control_listener = control::bind(dir)?;
    let ctl_opts = Options {
        cache: opts.cache.clone(),
        rebuild_order: opts.rebuild_order,
        rebuild_rate: opts.rebuild_rate,
        rebuild_run_bytes: opts.rebuild_run_bytes,
        rebuild_executor: opts.rebuild_executor,
        auto_rebuild: !opts.read_only,
        missing_grace: opts.missing_grace,
    };
    let ctl = Arc::new(controller_from(&a, ctl_opts)?);
    let (wb, started) =
        match crate::wb::setup::start(&a, &ctl, opts.wb.as_ref(), opts.backup_discard) {
            Ok(x) => x,
            Err(e) => {
                drop(control_listener);
                let _ = std::fs::remove_file(control::socket_path(dir));
                return Err(e);
            }
        };
    if let Some(r) = &started.replayed {
        crate::info!(
            { "event": "BackupReplayed", "pages": r.pages, "images": r.images, "synthesized": r.synthesized, "unrecovered": r.unrecovered, "records": r.records, "torn": r.torn },
            "{}: write-cache backup replayed: {} page(s) and {} image(s) ({} rebuilt from partial parities) from {} record(s); {} torn record(s) ignored",
            a.name, r.pages, r.images, r.synthesized, r.records, r.torn
        );
    }
    if started.voided {
        crate::info!("{}: the write-cache backup was voided after a failure (all of it had been destaged); not replayed", a.name);
    }
    if started.retired {
        crate::info!(
            "{}: no write cache this time; the last run's backup is retired",
            a.name
        );
    }
    if let Some(dirty) = &a.dirty_regions {
        let n = dirty.iter().filter(|&&b| b).count();
        crate::info!(
            { "event": "UncleanStart", "dirty_regions": n },
            "{}: not stopped cleanly; resyncing {n} dirty region(s) in the background", a.name
        );
        if a.devs.iter().any(|d| d.is_none()) || a.recovering.is_some() {
            // md refuses such a start without --force; raidlab serves and says what is at risk.
            crate::warn!(
                { "event": "WriteHole" },
                "{} is dirty and degraded: rows that were being written at the crash cannot be resynced, and the missing member's units of those rows may read back wrong (the RAID-5/6 write hole)",
                a.name
            );
        }
    }
    if let Some((slot, checkpoint)) = a.recovering {
        crate::info!(
            { "event": "RebuildResumed", "slot": slot, "row": checkpoint },
            "resuming the rebuild of slot {slot} from row {checkpoint}"
        );
    }
    let inherited = inherited_listener();
    let mut server =
        match inherited.map_or_else(|| Server::bind(&listen), Server::from_inherited_fd) {
            Ok(s) => s,
            Err(e) => {
                // Nothing was served: leave no control socket behind.
                drop(control_listener);
                let _ = std::fs::remove_file(control::socket_path(dir));
                return Err(Error::io(opts.listen.clone(), &e));
            }
        };
    if inherited.is_some() {
        let local = server.local_addr();
        if let Ok(addr) = local.parse::<std::net::SocketAddr>() {
            if let Err(e) = check_listen_secure(&Listen::Tcp(addr), opts.insecure, opts.tls.mode) {
                drop(control_listener);
                let _ = std::fs::remove_file(control::socket_path(dir));
                return Err(e);
            }
        }
        crate::info!(
            { "event": "SocketActivation", "listen": local },
            "socket activation: serving on the inherited socket {local} (--listen is not used)"
        );
    }
    if let Some(w) = opts.workers {
        server = server.with_workers(w);
    } else if !opts.timing.is_empty()
        || opts
            .wb
            .as_ref()
            .is_some_and(|w| w.backup != crate::wb::BackupKind::None)
    {
        // Disk-timed members hold a worker for each operation's service time, and a backed
        // write cache holds one for each write's group commit: one worker per request the
        // server keeps in flight, or the workers, not the disks, bound the depth the array
        // sees (and the writes one backup sync can cover).
        server = server.with_workers(crate::nbd::server::MAX_IN_FLIGHT);
    }
    server = server.with_limits(opts.limits.clone()).with_tls(tls);
    let addr = server.local_addr();
    if !a.forced.is_empty() {
        // The forced start is recorded now (the failure record cleared, the stale member's
        // events brought up), so the next start needs no --force.
        ctl.checkpoint();
    }
    // Read-only: no background work (resync, rebuild and bitmap clearing all write).
    let bg = (!opts.read_only).then(|| ctl.spawn_background());
    if opts.read_only {
        crate::info!(
            "{}: read-only: writes are refused; no resync or rebuild runs",
            a.name
        );
    }
    let destager = wb.as_ref().map(|w| w.spawn_destager());
    let control_stop = Arc::new(AtomicBool::new(false));
    let control_thread = {
        let (ctl, dir, stop) = (ctl.clone(), dir.to_path_buf(), control_stop.clone());
        let served = served.clone();
        std::thread::Builder::new()
            .name("raidlab-ctl".into())
            .spawn(move || control::run(control_listener, dir, ctl, stop, served))
            .map_err(|e| Error::io("control thread", &e))?
    };
    // Events: the status is polled and its changes become events (`crate::events`).
    let monitor_stop = Arc::new(AtomicBool::new(false));
    let monitor_thread = {
        let (ctl, served, stop) = (ctl.clone(), served.clone(), monitor_stop.clone());
        let mut monitor = Monitor::new(a.shape.chunk_bytes);
        std::thread::Builder::new()
            .name("raidlab-events".into())
            .spawn(move || {
                loop {
                    monitor.observe(&control::status(&ctl, &served), &served.events);
                    if take_sighup() {
                        crate::info!(
                            { "event": "Sighup" },
                            "SIGHUP received: ignored (nothing to reload; SIGTERM or SIGINT stops the server)"
                        );
                    }
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(events::POLL);
                }
                monitor
            })
            .map_err(|e| Error::io("event thread", &e))?
    };
    let s = a.shape.clone();
    let line = format!(
        "raidlab serve: {} ({} of {} members, {} bytes, {}) accepting connections on {addr}{}",
        a.name,
        s.level.name(),
        s.disks,
        s.size_bytes(),
        ctl.state_word(),
        match opts.tls.mode {
            TlsMode::Off => "",
            TlsMode::On => " (TLS offered)",
            TlsMode::Require => " (TLS required)",
        },
    );
    crate::info!(
        { "event": "Ready", "name": a.name, "listen": addr.to_string(), "state": ctl.state_word() },
        "{} accepting connections on {addr}", a.name
    );
    ready(&line);
    let export = Arc::new(Export {
        ctl: ctl.clone(),
        wb: wb.clone(),
        name: a.name.clone(),
        read_only: opts.read_only,
    });
    let served = server.run(export, stop);
    // Drained: no request is in flight. Destage the write cache, stop the background work,
    // then the control socket.
    let wb_drained = match (&wb, destager) {
        (Some(w), Some(t)) => crate::wb::setup::stop(w, t),
        _ => true,
    };
    ctl.stop();
    if let Some(bg) = bg {
        let _ = bg.join();
    }
    // A check or repair sees the stop after its current row.
    if let Some(j) = checks.current() {
        j.wait(&AtomicBool::new(false));
    }
    // The last changes, then the export is gone; watchers and the event program hear it.
    monitor_stop.store(true, Ordering::SeqCst);
    let _ = monitor_thread.join();
    bus.emit(
        crate::log::Level::Info,
        "DeviceDisappeared",
        None,
        &format!("{}: the server is stopping; the export is gone", a.name),
        serde_json::json!({}),
    );
    bus.close(
        opts.event_program
            .as_ref()
            .map_or(Duration::ZERO, |p| p.timeout.min(Duration::from_secs(30))),
    );
    control_stop.store(true, Ordering::SeqCst);
    let _ = control_thread.join();
    let nbd = served.map_err(|e| Error::io(addr.clone(), &e))?;
    if opts.read_only {
        let state = ctl.state_word();
        crate::info!(
            { "event": "Stopped", "state": state, "requests": nbd.requests },
            "{} stopped ({state}, read-only: nothing written); {} requests served",
            a.name, nbd.requests
        );
        return Ok(ServeSummary {
            nbd,
            state,
            clean: ctl.is_clean(),
        });
    }
    let _ = ctl.flush();
    let clean = wb_drained && !ctl.resync_pending() && ctl.state_word() != "failed";
    if clean {
        ctl.intent_clear_idle(true);
        ctl.set_clean(true);
    }
    // Records the rebuild checkpoint even when the clean flag did not change.
    ctl.checkpoint();
    let state = ctl.state_word();
    crate::info!(
        { "event": "Stopped", "state": state, "clean": clean, "requests": nbd.requests },
        "{} stopped ({state}{}); {} requests served",
        a.name,
        if clean {
            ", marked clean"
        } else {
            ", left dirty for resync"
        },
        nbd.requests
    );
    Ok(ServeSummary { nbd, state, clean })
}

/// The listening socket systemd passed (socket activation, `sd_listen_fds`): fd 3 when
/// `$LISTEN_PID` is this process and `$LISTEN_FDS` is at least 1. The variables are removed
/// and the fd made close-on-exec, so the event program inherits neither.
fn inherited_listener() -> Option<std::os::fd::RawFd> {
    const SD_LISTEN_FDS_START: std::os::fd::RawFd = 3;
    let pid = std::env::var("LISTEN_PID").ok()?;
    let fds = std::env::var("LISTEN_FDS").ok()?;
    if pid.trim().parse::<u32>().ok()? != std::process::id() {
        return None;
    }
    std::env::remove_var("LISTEN_PID");
    std::env::remove_var("LISTEN_FDS");
    std::env::remove_var("LISTEN_FDNAMES");
    if fds.trim().parse::<u32>().ok()? < 1 {
        return None;
    }
    // SAFETY: fcntl on an fd number; a bad fd fails with EBADF and is then not used.
    let ok = unsafe { libc::fcntl(SD_LISTEN_FDS_START, libc::F_SETFD, libc::FD_CLOEXEC) } == 0;
    ok.then_some(SD_LISTEN_FDS_START)
}

/// Set `stop` on SIGINT and SIGTERM for as long as the guard lives. SIGHUP is ignored with a
/// log line (there is nothing to reload: the options are the command line's), so a closed
/// terminal or a `systemctl reload` never kills the server and leaves the array dirty.
pub struct SignalGuard {
    ids: Vec<signal_hook::SigId>,
}

/// Set by the SIGHUP handler (an atomic store is async-signal-safe); the event thread logs
/// it.
static SIGHUP: AtomicBool = AtomicBool::new(false);

/// Whether a SIGHUP arrived since the last call.
fn take_sighup() -> bool {
    SIGHUP.swap(false, Ordering::SeqCst)
}

impl SignalGuard {
    pub fn install(stop: &Arc<AtomicBool>) -> Result<SignalGuard> {
        let mut ids = Vec::new();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let id = signal_hook::flag::register(sig, stop.clone())
                .map_err(|e| Error::io("signal handler", &e))?;
            ids.push(id);
        }
        // SAFETY: the action only stores to a static atomic, which is async-signal-safe; it
        // allocates and locks nothing.
        let hup = unsafe {
            signal_hook::low_level::register(signal_hook::consts::SIGHUP, || {
                SIGHUP.store(true, Ordering::SeqCst);
            })
        }
        .map_err(|e| Error::io("signal handler", &e))?;
        ids.push(hup);
        Ok(SignalGuard { ids })
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}
