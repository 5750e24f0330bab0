//! `raidlab serve`'s options: what it was asked for, their defaults and checks, and the
//! NBD server's bounds built from them.

use super::*;

/// What `raidlab serve` was asked for.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// "127.0.0.1:PORT", "[::1]:PORT" or "unix:PATH".
    pub listen: String,
    /// Read cache: policy and capacity in 4 KiB blocks.
    pub cache: Option<(PolicySpec, u64)>,
    pub rebuild_order: OrderSpec,
    pub rebuild_rate: RateSpec,
    /// `--rebuild-run-kib` in bytes.
    pub rebuild_run_bytes: u64,
    /// `--rebuild-executor`.
    pub rebuild_executor: crate::ctrl::RebuildExecutor,
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
    /// TLS through NBD_OPT_STARTTLS (`--tls`, `--tls-certificates`, `--tls-psk`,
    /// `--tls-verify-peer`).
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
    /// `--timing`: the disk models that time the members (empty: untimed).
    pub timing: TimingOptions,
    /// `--member-timeout`: a remote member's request deadline (its host is then away).
    pub member_timeout: std::time::Duration,
    /// `--missing-grace`: how long a missing member's slot waits before a spare takes it.
    pub missing_grace: std::time::Duration,
}

/// `raidlab serve`'s TLS options, as nbdkit's `--tls`, `--tls-certificates DIR`,
/// `--tls-psk FILE` and `--tls-verify-peer` (see `nbd::ServerTls::load` for the directory's
/// files, `nbd::tls::pskfile` for the PSK file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    pub mode: TlsMode,
    pub certificates: Option<PathBuf>,
    pub psk: Option<PathBuf>,
    pub verify_peer: bool,
}

impl TlsOptions {
    /// From the command line's words; a bad mode is a config error naming `--tls`.
    pub fn parse(
        mode: &str,
        certificates: Option<&str>,
        psk: Option<&str>,
        verify_peer: bool,
    ) -> Result<Self> {
        Ok(TlsOptions {
            mode: TlsMode::parse(mode).map_err(|m| Error::config("--tls", m))?,
            certificates: certificates.map(PathBuf::from),
            psk: psk.map(PathBuf::from),
            verify_peer,
        })
    }

    /// Load the certificates or the keys (None when TLS is off); a config error names the
    /// option and the file (and line) at fault. Certificates and PSK exclude each other, as
    /// in nbdkit; `--tls-verify-peer` is for certificates (a PSK authenticates the client).
    pub fn load(&self) -> Result<Option<ServerTls>> {
        let loaded = match (&self.certificates, &self.psk) {
            (Some(_), Some(_)) => {
                return Err(Error::config(
                    "--tls-psk",
                    "--tls-psk and --tls-certificates exclude each other: a server uses pre-shared keys or X.509 certificates",
                ))
            }
            (None, Some(_)) if self.verify_peer => {
                return Err(Error::config(
                    "--tls-verify-peer",
                    "--tls-verify-peer is for X.509 client certificates: with --tls-psk every client proves its key already",
                ))
            }
            (None, Some(file)) => ServerTls::load_psk(self.mode, Some(file)),
            (_, None) => {
                ServerTls::load(self.mode, self.certificates.as_deref(), self.verify_peer)
            }
        };
        loaded.map_err(|e| Error::config(e.option, e.to_string()))
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

/// `serve --poll-us`: how long a connection's reader polls for the next request
/// (`nbd::Limits::poll`), 0 to 1,000 µs.
pub fn poll_budget(us: u64) -> Result<Duration> {
    let d = Duration::from_micros(us);
    if d > crate::nbd::POLL_MAX {
        return Err(Error::config(
            "--poll-us",
            format!(
                "expected 0 to {} microseconds, got {us}",
                crate::nbd::POLL_MAX.as_micros()
            ),
        ));
    }
    Ok(d)
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
        poll: Limits::default().poll,
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
                    "{addr} is not a loopback address: without --tls require, NBD traffic may be neither encrypted nor authenticated; pass --tls require (with --tls-certificates DIR or --tls-psk FILE), or --insecure to serve it anyway"
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
            rebuild_run_bytes: crate::ctrl::rebuild_run::RUN_BYTES_MAX,
            rebuild_executor: crate::ctrl::RebuildExecutor::Runs,
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
            timing: TimingOptions::default(),
            member_timeout: std::time::Duration::from_secs(5),
            missing_grace: std::time::Duration::from_secs(30),
        }
    }
}

/// Put the members, spares and faulty devices of `a` behind the disk models `timing` names
/// (a faulty device by the slot it left). Errors name `--timing`: a slot past the array's,
/// a member larger than its model.
pub fn apply_timing(a: &mut format::Assembled, timing: &TimingOptions) -> Result<()> {
    if timing.is_empty() {
        return Ok(());
    }
    timing.check_slots(a.shape.disks)?;
    let wrap = |dev: &mut Arc<dyn crate::member::Member>, slot: Option<u32>| -> Result<()> {
        if let Some(spec) = timing.for_slot(slot) {
            *dev = spec.wrap(dev.clone())?;
        }
        Ok(())
    };
    for (slot, dev) in a.devs.iter_mut().enumerate() {
        if let Some(dev) = dev {
            wrap(dev, Some(slot as u32))?;
        }
    }
    for dev in &mut a.spares {
        wrap(dev, None)?;
    }
    for (dev, slot) in &mut a.faulty {
        wrap(dev, Some(*slot))?;
    }
    Ok(())
}

/// A duration option in seconds, checked to lie in [min, max].
pub fn seconds(option: &str, v: f64, min: f64, max: f64) -> Result<std::time::Duration> {
    if !(min..=max).contains(&v) {
        return Err(Error::config(
            option,
            format!("expected {min} to {max} seconds, got {v}"),
        ));
    }
    Ok(std::time::Duration::from_secs_f64(v))
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

/// `--rebuild-run-kib`: the member bytes one rebuild run reads from each survivor at once,
/// 4 KiB to 1 MiB (a run is whole chunks, at least one: below one chunk it is one unit).
/// Smaller runs hold each disk for less time, so users wait less during a rebuild and the
/// rebuild takes longer: at one chunk a run reads a unit per operation, and the rebuild is
/// stripe-oriented, four rows in flight (the simulator's `executor = "sor"`, `stripes = 4`).
pub fn rebuild_run_bytes(kib: Option<u64>) -> Result<u64> {
    let max_kib = crate::ctrl::rebuild_run::RUN_BYTES_MAX >> 10;
    match kib {
        None => Ok(crate::ctrl::rebuild_run::RUN_BYTES_MAX),
        Some(k) if (4..=max_kib).contains(&k) => Ok(k << 10),
        Some(k) => Err(Error::config(
            "--rebuild-run-kib",
            format!("expected 4 to {max_kib} KiB, got {k}"),
        )),
    }
}

/// `--rebuild-executor`: `runs` (the default), or `dor` with optional `,buffers=N` (1 to
/// 4096 unit buffers, default 64) and `,depth=N` (1 to 64 reads kept at each survivor,
/// default 2), the simulator's `[rebuild]` keys of the same names.
pub fn rebuild_executor(spec: Option<&str>) -> Result<crate::ctrl::RebuildExecutor> {
    use crate::ctrl::RebuildExecutor;
    const OPT: &str = "--rebuild-executor";
    let Some(spec) = spec else {
        return Ok(RebuildExecutor::Runs);
    };
    let mut parts = spec.split(',');
    match parts.next().map(str::trim) {
        Some("runs") => {
            if let Some(extra) = parts.next() {
                return Err(Error::config(
                    OPT,
                    format!("\"runs\" takes no parameters, got {extra:?}"),
                ));
            }
            Ok(RebuildExecutor::Runs)
        }
        Some("dor") => {
            let (mut buffers, mut depth) = (64u32, 2u32);
            for p in parts {
                let (key, value) = p.split_once('=').ok_or_else(|| {
                    Error::config(OPT, format!("expected KEY=N after \"dor,\", got {p:?}"))
                })?;
                let (slot, max) = match key.trim() {
                    "buffers" => (&mut buffers, 4096),
                    "depth" => (&mut depth, 64),
                    other => {
                        return Err(Error::config(
                            OPT,
                            format!("unknown parameter {other:?} (expected buffers or depth)"),
                        ))
                    }
                };
                *slot = value
                    .trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|v| (1..=max).contains(v))
                    .ok_or_else(|| {
                        Error::config(
                            OPT,
                            format!("{}: expected 1 to {max}, got {value:?}", key.trim()),
                        )
                    })?;
            }
            Ok(RebuildExecutor::Dor { buffers, depth })
        }
        _ => Err(Error::config(
            OPT,
            format!("expected \"runs\" or \"dor[,buffers=N][,depth=N]\", got {spec:?}"),
        )),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rebuild_executor_is_parsed_checked_and_names_its_option() {
        use crate::ctrl::RebuildExecutor as X;
        assert_eq!(rebuild_executor(None).unwrap(), X::Runs);
        assert_eq!(rebuild_executor(Some("runs")).unwrap(), X::Runs);
        assert_eq!(rebuild_executor(Some("dor")).unwrap(), X::DOR_DEFAULT);
        assert_eq!(
            rebuild_executor(Some("dor,depth=1,buffers=8")).unwrap(),
            X::Dor {
                buffers: 8,
                depth: 1
            }
        );
        for (bad, says) in [
            ("sor", "expected \"runs\" or"),
            ("runs,depth=2", "takes no parameters"),
            ("dor,depth", "expected KEY=N"),
            ("dor,width=2", "unknown parameter \"width\""),
            ("dor,depth=0", "depth: expected 1 to 64"),
            ("dor,buffers=5000", "buffers: expected 1 to 4096"),
        ] {
            let e = rebuild_executor(Some(bad)).unwrap_err().to_string();
            assert!(
                e.contains("--rebuild-executor") && e.contains(says),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn the_rebuild_run_size_is_checked_and_names_its_option() {
        assert_eq!(rebuild_run_bytes(None).unwrap(), 1 << 20);
        assert_eq!(rebuild_run_bytes(Some(64)).unwrap(), 64 << 10);
        assert_eq!(rebuild_run_bytes(Some(4)).unwrap(), 4 << 10);
        assert_eq!(rebuild_run_bytes(Some(1024)).unwrap(), 1 << 20);
        for bad in [0, 3, 1025] {
            let e = rebuild_run_bytes(Some(bad)).unwrap_err().to_string();
            assert!(
                e.contains("--rebuild-run-kib") && e.contains("4 to 1024"),
                "{e}"
            );
        }
    }

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
