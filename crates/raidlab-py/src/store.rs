//! Bindings of the store (`raidlab array`, `raidlab serve`, `raidlab ctl`): conversions only.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use pyo3::prelude::*;
use raidlab_store::serve as store_serve;
use raidlab_store::{args, control, format};

use crate::to_py;

/// Create an array; returns JSON text describing what was made.
#[pyfunction]
#[pyo3(signature = (dir, level, disks, chunk, size, layout=None, spares=0, name=None, members=Vec::new(), force=false, bitmap_chunk=None))]
#[allow(clippy::too_many_arguments)]
pub fn array_create(
    py: Python<'_>,
    dir: &str,
    level: &str,
    disks: u32,
    chunk: &str,
    size: &str,
    layout: Option<&str>,
    spares: u32,
    name: Option<&str>,
    members: Vec<String>,
    force: bool,
    bitmap_chunk: Option<&str>,
) -> PyResult<String> {
    let out = py.allow_threads(|| {
        let spec = args::create_spec(
            dir,
            level,
            disks,
            chunk,
            size,
            layout,
            spares,
            name,
            &members,
            force,
            bitmap_chunk,
        )?;
        format::create(&spec).map(|c| args::created_json(&c).to_string())
    });
    out.map_err(|e| to_py(py, e))
}

/// Assemble an array directory read-only and describe it (JSON text).
#[pyfunction]
pub fn array_examine(py: Python<'_>, dir: &str) -> PyResult<String> {
    py.allow_threads(|| args::examine(Path::new(dir)).map(|v| v.to_string()))
        .map_err(|e| to_py(py, e))
}

/// Serve an array until SIGINT or SIGTERM; `ready(line)` is called once connections are
/// accepted. Returns a JSON summary.
#[pyfunction]
#[pyo3(signature = (dir, listen, cache=None, cache_mib=None, rebuild_order="sequential", rebuild_min_kib_s=None, rebuild_max_kib_s=None, rebuild_run_kib=None, rebuild_executor=None, workers=None, ready=None, write_cache_mib=None, destage="stow", thresholds="80/20", max_destages=16, backup="mirror", backup_path=None, log_mode="physical", log_size=None, segment="128KiB", log_nvram=None, log_nvram_slots=None, backup_discard=false, min_block=1, handshake_timeout=10.0, idle_timeout=30.0, max_connections=128, payload_mib=128, conn_payload_mib=32, zero_piece_mib=4, poll_us=50, insecure=false, force=false, read_only=false, tls="off", tls_certificates=None, tls_psk=None, tls_verify_peer=false, log_format="text", log_level="info", event_program=None, event_timeout=30.0, timing=None, member_timeout=5.0, missing_grace=30.0))]
#[allow(clippy::too_many_arguments)]
pub fn serve(
    py: Python<'_>,
    dir: &str,
    listen: &str,
    cache: Option<&str>,
    cache_mib: Option<u64>,
    rebuild_order: &str,
    rebuild_min_kib_s: Option<u64>,
    rebuild_max_kib_s: Option<u64>,
    rebuild_run_kib: Option<u64>,
    rebuild_executor: Option<&str>,
    workers: Option<usize>,
    ready: Option<PyObject>,
    write_cache_mib: Option<u64>,
    destage: &str,
    thresholds: &str,
    max_destages: u32,
    backup: &str,
    backup_path: Option<&str>,
    log_mode: &str,
    log_size: Option<&str>,
    segment: &str,
    log_nvram: Option<&str>,
    log_nvram_slots: Option<u32>,
    backup_discard: bool,
    min_block: u32,
    handshake_timeout: f64,
    idle_timeout: f64,
    max_connections: usize,
    payload_mib: u64,
    conn_payload_mib: u64,
    zero_piece_mib: u64,
    poll_us: u64,
    insecure: bool,
    force: bool,
    read_only: bool,
    tls: &str,
    tls_certificates: Option<&str>,
    tls_psk: Option<&str>,
    tls_verify_peer: bool,
    log_format: &str,
    log_level: &str,
    event_program: Option<&str>,
    event_timeout: f64,
    timing: Option<&str>,
    member_timeout: f64,
    missing_grace: f64,
) -> PyResult<String> {
    let mut opts = store_serve::ServeOptions::parse(
        listen,
        cache,
        cache_mib,
        rebuild_order,
        rebuild_min_kib_s,
        rebuild_max_kib_s,
    )
    .map_err(|e| to_py(py, e))?;
    opts.rebuild_run_bytes =
        store_serve::rebuild_run_bytes(rebuild_run_kib).map_err(|e| to_py(py, e))?;
    opts.rebuild_executor =
        store_serve::rebuild_executor(rebuild_executor).map_err(|e| to_py(py, e))?;
    opts.workers = workers;
    opts.backup_discard = backup_discard;
    opts.insecure = insecure;
    opts.tls = store_serve::TlsOptions::parse(tls, tls_certificates, tls_psk, tls_verify_peer)
        .map_err(|e| to_py(py, e))?;
    opts.limits = store_serve::nbd_limits(
        min_block,
        handshake_timeout,
        idle_timeout,
        max_connections,
        payload_mib,
        conn_payload_mib,
        zero_piece_mib,
    )
    .map_err(|e| to_py(py, e))?;
    opts.limits.poll = store_serve::poll_budget(poll_us).map_err(|e| to_py(py, e))?;
    opts.force = force;
    opts.read_only = read_only;
    opts.member_timeout = store_serve::seconds("--member-timeout", member_timeout, 0.05, 3600.0)
        .map_err(|e| to_py(py, e))?;
    opts.missing_grace = store_serve::seconds("--missing-grace", missing_grace, 0.0, 86400.0)
        .map_err(|e| to_py(py, e))?;
    opts.timing = raidlab_store::member::timed::TimingOptions::parse(timing.unwrap_or(""))
        .map_err(|e| to_py(py, e))?;
    opts.log =
        raidlab_store::log::Config::parse(log_format, log_level).map_err(|e| to_py(py, e))?;
    opts.event_program = event_program
        .map(|p| raidlab_store::events::Program::parse(p, event_timeout))
        .transpose()
        .map_err(|e| to_py(py, e))?;
    if let Some(mib) = write_cache_mib {
        opts.wb = Some(
            raidlab_store::wb::setup::WbOptions::parse(
                mib,
                destage,
                thresholds,
                backup,
                backup_path,
                log_mode,
                log_size,
                segment,
            )
            .and_then(|o| o.with_max_destages(max_destages))
            .and_then(|o| o.with_nvram(log_nvram, log_nvram_slots))
            .map_err(|e| to_py(py, e))?,
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let out = py.allow_threads(|| {
        let _signals = store_serve::SignalGuard::install(&stop)?;
        let mut on_ready = |line: &str| {
            if let Some(cb) = &ready {
                Python::with_gil(|py| {
                    if let Err(e) = cb.call1(py, (line,)) {
                        e.print(py);
                    }
                });
            }
        };
        store_serve::serve(Path::new(dir), &opts, stop.clone(), &mut on_ready)
    });
    let s = out.map_err(|e| to_py(py, e))?;
    Ok(serde_json::json!({
        "state": s.state,
        "clean": s.clean,
        "connections": s.nbd.connections,
        "refused": s.nbd.refused,
        "evicted": s.nbd.evicted,
        "timed_out": s.nbd.timed_out,
        "requests": s.nbd.requests,
        "errors": s.nbd.errors,
        "bytes_read": s.nbd.bytes_read,
        "bytes_written": s.nbd.bytes_written,
    })
    .to_string())
}

/// Send one control request (JSON text) to the server of `dir`; returns its JSON reply.
#[pyfunction]
pub fn ctl_request(py: Python<'_>, dir: &str, request: &str) -> PyResult<String> {
    py.allow_threads(|| {
        let req: serde_json::Value = serde_json::from_str(request)
            .map_err(|e| raidlab::Error::config("request", e.to_string()))?;
        control::request(Path::new(dir), &req).map(|v| v.to_string())
    })
    .map_err(|e| to_py(py, e))
}

/// Replay the workload of a config's first run against an NBD URI; returns JSON text.
/// `schedule`: at the timed run's own arrival times (open loop or ramp), `qd` connections,
/// one line per request to `log`.
#[pyfunction]
#[pyo3(signature = (uri, text, file=None, base_dir=None, qd=1, time_scale=None, requests_max=None, schedule=false, log=None))]
#[allow(clippy::too_many_arguments)]
pub fn replay(
    py: Python<'_>,
    uri: &str,
    text: &str,
    file: Option<&str>,
    base_dir: Option<std::path::PathBuf>,
    qd: u32,
    time_scale: Option<f64>,
    requests_max: Option<u64>,
    schedule: bool,
    log: Option<std::path::PathBuf>,
) -> PyResult<String> {
    let exps = crate::parse(py, text, file, base_dir, None)?;
    let Some(exp) = exps.first() else {
        return Err(to_py(
            py,
            raidlab::Error::config("runs", "the config has no run"),
        ));
    };
    if schedule {
        let opts = raidlab_store::replay_sched::ScheduleOptions {
            workers: qd,
            requests_max,
            log,
        };
        return py
            .allow_threads(|| {
                raidlab_store::replay_sched::replay_scheduled(uri, exp, &opts)
                    .map(|v| v.to_string())
            })
            .map_err(|e| to_py(py, e));
    }
    let opts = raidlab_store::replay::ReplayOptions {
        qd,
        time_scale,
        requests_max,
    };
    py.allow_threads(|| raidlab_store::replay::replay(uri, exp, &opts).map(|v| v.to_string()))
        .map_err(|e| to_py(py, e))
}
