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
use crate::nbd::{
    self, Backend, BlockSize, Errno, Limits, Listen, ServeStats, Server, ServerTls, TlsMode,
};
use crate::wb::setup::WbOptions;
use crate::wb::WriteBack;

/// What `raidlab serve` was asked for.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// "127.0.0.1:PORT", "[::1]:PORT" or "unix:PATH".
    pub listen: String,
    /// Read cache: policy and capacity in 4 KiB blocks.
    pub cache: Option<(PolicySpec, u64)>,
    pub rebuild_order: OrderSpec,
    pub rebuild_rate: RateSpec,
    /// NBD worker threads (None: the server's default).
    pub workers: Option<usize>,
    /// The write-back cache and its backup (None: writes go straight to the array).
    pub wb: Option<WbOptions>,
    /// Start even when the last run's write-cache backup cannot be read (its pages lost).
    pub backup_discard: bool,
    /// The NBD server's bounds against slow and hostile clients, and the minimum block.
    pub limits: Limits,
    /// Serve on an address other than loopback without `--tls require` (NBD has no other
    /// protection).
    pub insecure: bool,
    /// TLS through NBD_OPT_STARTTLS (`--tls`, `--tls-certificates`, `--tls-verify-peer`).
    pub tls: TlsOptions,
    /// Start an array recorded failed, or with a stale member (md's `--assemble --force`).
    pub force: bool,
    /// Export read-only and write nothing to the members (no resync, rebuild, or superblock
    /// update; `ctl` requests that change the array are refused).
    pub read_only: bool,
    /// The log's format and level (`--log-format`, `--log-level`).
    pub log: crate::log::Config,
    /// `--event-program PROG`: run as `PROG EVENT DIR [DEVICE]` for each event.
    pub event_program: Option<events::Program>,
}

/// `raidlab serve`'s TLS options, as nbdkit's `--tls`, `--tls-certificates DIR` and
/// `--tls-verify-peer` (see `nbd::ServerTls::load` for the directory's files).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    pub mode: TlsMode,
    pub certificates: Option<PathBuf>,
    pub verify_peer: bool,
}

impl TlsOptions {
    /// From the command line's words; a bad mode is a config error naming `--tls`.
    pub fn parse(mode: &str, certificates: Option<&str>, verify_peer: bool) -> Result<Self> {
        Ok(TlsOptions {
            mode: TlsMode::parse(mode).map_err(|m| Error::config("--tls", m))?,
            certificates: certificates.map(PathBuf::from),
            verify_peer,
        })
    }

    /// Load the certificates (None when TLS is off); a config error names the option and
    /// the file at fault.
    pub fn load(&self) -> Result<Option<ServerTls>> {
        ServerTls::load(self.mode, self.certificates.as_deref(), self.verify_peer)
            .map_err(|e| Error::config(e.option, e.to_string()))
    }
}

/// The NBD limits `raidlab serve` uses unless told otherwise: those of the server, with
/// sub-block requests accepted (1-byte minimum, read-modify-write below 4 KiB).
pub fn default_limits() -> Limits {
    Limits {
        min_block: Some(1),
        ..Limits::default()
    }
}

/// Build the NBD limits from `serve`'s options; each bad value is a config error naming
/// its option.
pub fn nbd_limits(
    min_block: u32,
    handshake_timeout_s: f64,
    idle_timeout_s: f64,
    max_connections: usize,
    payload_mib: u64,
    conn_payload_mib: u64,
    zero_piece_mib: u64,
) -> Result<Limits> {
    let secs = |v: f64, name: &str| {
        if v.is_finite() && v > 0.0 && v <= 86_400.0 {
            Ok(Duration::from_secs_f64(v))
        } else {
            Err(Error::config(
                name,
                format!("expected seconds in (0, 86400], got {v}"),
            ))
        }
    };
    let mib = |v: u64, name: &str, lo: u64, hi: u64| {
        if (lo..=hi).contains(&v) {
            Ok(v << 20)
        } else {
            Err(Error::config(
                name,
                format!("expected {lo} to {hi} MiB, got {v}"),
            ))
        }
    };
    if !min_block.is_power_of_two() || min_block > 1 << 16 {
        return Err(Error::config(
            "--min-block",
            format!("expected a power of two from 1 to 65536 bytes, got {min_block}"),
        ));
    }
    if !(1..=4096).contains(&max_connections) {
        return Err(Error::config(
            "--max-connections",
            format!("expected 1 to 4096, got {max_connections}"),
        ));
    }
    let payload = mib(payload_mib, "--payload-mib", 4, 1 << 16)?;
    let conn_payload = mib(conn_payload_mib, "--conn-payload-mib", 1, 1 << 16)?;
    if conn_payload > payload {
        return Err(Error::config(
            "--conn-payload-mib",
            format!("{conn_payload_mib} MiB is more than --payload-mib {payload_mib} MiB"),
        ));
    }
    let zero_piece = mib(zero_piece_mib, "--zero-piece-mib", 1, 1 << 12)?;
    if !zero_piece_mib.is_power_of_two() {
        return Err(Error::config(
            "--zero-piece-mib",
            format!("expected a power of two, got {zero_piece_mib}"),
        ));
    }
    let limits = Limits {
        handshake_timeout: secs(handshake_timeout_s, "--handshake-timeout")?,
        idle_timeout: secs(idle_timeout_s, "--idle-timeout")?,
        max_connections,
        payload_budget: payload as usize,
        conn_payload_budget: conn_payload as usize,
        zero_piece,
        min_block: Some(min_block),
    };
    // Everything was checked above; this keeps the two checks from drifting apart.
    limits
        .validate()
        .map_err(|m| Error::config("--payload-mib", m))?;
    Ok(limits)
}

/// A TCP listen address that is not loopback needs `--tls require` or `--insecure`.
pub fn check_listen_secure(listen: &Listen, insecure: bool, tls: TlsMode) -> Result<()> {
    match listen {
        Listen::Tcp(addr)
            if !addr.ip().is_loopback() && !insecure && tls != TlsMode::Require =>
        {
            Err(Error::config(
                "--listen",
                format!(
                    "{addr} is not a loopback address: without --tls require, NBD traffic may be neither encrypted nor authenticated; pass --tls require (with --tls-certificates DIR), or --insecure to serve it anyway"
                ),
            ))
        }
        _ => Ok(()),
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            listen: "127.0.0.1:10809".into(),
            cache: None,
            rebuild_order: OrderSpec::Sequential,
            rebuild_rate: RateSpec::Full,
            workers: None,
            wb: None,
            backup_discard: false,
            limits: default_limits(),
            insecure: false,
            tls: TlsOptions::default(),
            force: false,
            read_only: false,
            log: Default::default(),
            event_program: None,
        }
    }
}

/// Read-cache policies the store does not run: DEMOTE and X-RAY need a host cache in front.
const HOST_CACHE_POLICIES: &[&str] = &["demote", "xray"];

/// Read-cache policies the store runs: every policy of the core but those.
pub fn cache_policies() -> impl Iterator<Item = &'static str> {
    PolicySpec::NAMES
        .iter()
        .copied()
        .filter(|n| !HOST_CACHE_POLICIES.contains(n))
}

/// Largest read cache in MiB (frames are allocated up front).
pub const CACHE_MIB_MAX: u64 = (crate::ctrl::cache::CAPACITY_BLOCKS_MAX * 4096) >> 20;

impl ServeOptions {
    /// Build from the command line's values; each bad value is a config error naming its
    /// option.
    pub fn parse(
        listen: &str,
        cache: Option<&str>,
        cache_mib: Option<u64>,
        rebuild_order: &str,
        rebuild_min_kib_s: Option<u64>,
        rebuild_max_kib_s: Option<u64>,
    ) -> Result<ServeOptions> {
        Listen::parse(listen).map_err(|m| Error::config("--listen", m))?;
        let cache = match (cache, cache_mib) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(Error::config("--cache", "--cache-mib needs --cache POLICY"))
            }
            (Some(name), mib) => {
                let spec = PolicySpec::from_name(name)
                    .filter(|_| cache_policies().any(|p| p == name))
                    .ok_or_else(|| {
                        Error::config(
                            "--cache",
                            format!(
                                "unknown policy {name:?}; expected one of {}",
                                cache_policies().collect::<Vec<_>>().join(", ")
                            ),
                        )
                    })?;
                let mib = mib.unwrap_or(64);
                if mib == 0 || mib > CACHE_MIB_MAX {
                    return Err(Error::config(
                        "--cache-mib",
                        format!("expected 1 to {CACHE_MIB_MAX}, got {mib}"),
                    ));
                }
                Some((spec, mib * 256))
            }
        };
        let rebuild_order = match rebuild_order {
            "sequential" => OrderSpec::Sequential,
            "pro" => OrderSpec::Pro(Default::default()),
            other => {
                return Err(Error::config(
                    "--rebuild-order",
                    format!("unknown order {other:?}; expected sequential or pro"),
                ))
            }
        };
        let rebuild_rate = match (rebuild_min_kib_s, rebuild_max_kib_s) {
            (None, None) => RateSpec::Full,
            (min, max) => {
                // md's defaults: speed_limit_min 1000 KiB/s, speed_limit_max 200000 KiB/s.
                let (min, max) = (min.unwrap_or(1000), max.unwrap_or(200_000));
                if min == 0 || max < min {
                    return Err(Error::config(
                        "--rebuild-max-kib",
                        format!("expected 0 < min <= max, got min {min} and max {max} KiB/s"),
                    ));
                }
                RateSpec::Md {
                    min_bytes_s: min as f64 * 1024.0,
                    max_bytes_s: max as f64 * 1024.0,
                }
            }
        };
        Ok(ServeOptions {
            listen: listen.to_string(),
            cache,
            rebuild_order,
            rebuild_rate,
            ..ServeOptions::default()
        })
    }
}

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
    ctl.init_intent(a.dirty_regions.clone());
    ctl.init_kept(&a.kept_regions, a.cleared_events);
    ctl.adopt_faulty(&a.faulty);
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
    let a = format::assemble_with(dir, opts.force)?;
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
        auto_rebuild: !opts.read_only,
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
            { "event": "BackupReplayed", "pages": r.pages, "images": r.images, "records": r.records, "torn": r.torn },
            "{}: write-cache backup replayed: {} page(s) and {} image(s) from {} record(s); {} torn record(s) ignored",
            a.name, r.pages, r.images, r.records, r.torn
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nbd_options_are_checked_and_name_themselves() {
        let l = nbd_limits(512, 10.0, 30.0, 128, 128, 32, 4).unwrap();
        assert_eq!(l.min_block, Some(512));
        assert_eq!(l.conn_payload_budget, 32 << 20);
        assert_eq!(l.max_payload(), 32 << 20);
        for (e, name) in [
            (nbd_limits(3, 10.0, 30.0, 128, 128, 32, 4), "--min-block"),
            (
                nbd_limits(1, 0.0, 30.0, 128, 128, 32, 4),
                "--handshake-timeout",
            ),
            (
                nbd_limits(1, 10.0, f64::NAN, 128, 128, 32, 4),
                "--idle-timeout",
            ),
            (
                nbd_limits(1, 10.0, 30.0, 0, 128, 32, 4),
                "--max-connections",
            ),
            (nbd_limits(1, 10.0, 30.0, 128, 2, 1, 4), "--payload-mib"),
            (
                nbd_limits(1, 10.0, 30.0, 128, 16, 32, 4),
                "--conn-payload-mib",
            ),
            (
                nbd_limits(1, 10.0, 30.0, 128, 128, 32, 3),
                "--zero-piece-mib",
            ),
        ] {
            let msg = e.unwrap_err().to_string();
            assert!(msg.contains(name), "{name}: {msg}");
        }
    }

    #[test]
    fn non_loopback_needs_insecure() {
        let any = Listen::parse("0.0.0.0:10809").unwrap();
        let msg = check_listen_secure(&any, false, TlsMode::Off)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("--insecure"), "{msg}");
        let msg = check_listen_secure(&any, false, TlsMode::On)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("--tls require"), "{msg}");
        check_listen_secure(&any, true, TlsMode::Off).unwrap();
        check_listen_secure(&any, false, TlsMode::Require).unwrap();
        for ok in ["127.0.0.1:0", "[::1]:0", "unix:/tmp/x.sock"] {
            check_listen_secure(&Listen::parse(ok).unwrap(), false, TlsMode::Off).unwrap();
        }
    }
}
