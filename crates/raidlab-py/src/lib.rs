//! `raidlab._core`: the PyO3 layer. It converts types and errors and nothing else; all logic
//! is in the `raidlab` crate or in the Python package.
//!
//! Configs and results cross the boundary as JSON text, so the binding needs no knowledge of
//! their shape (the core validates; Python reads the JSON).

use std::path::PathBuf;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;
use raidlab::engine::{self, BatchProgress};
use raidlab::Error;

mod curve;
mod store;

create_exception!(
    _core,
    RaidlabError,
    PyException,
    "Base of every raidlab error."
);
create_exception!(
    _core,
    ConfigError,
    RaidlabError,
    "A config key or value is unusable."
);
create_exception!(
    _core,
    TraceError,
    RaidlabError,
    "A trace record is malformed."
);
create_exception!(
    _core,
    FormatError,
    TraceError,
    "A trace's format is unknown."
);
create_exception!(
    _core,
    StoreError,
    RaidlabError,
    "A store member, superblock or array directory is unusable."
);
create_exception!(
    _core,
    RaidlabIOError,
    RaidlabError,
    "A file could not be read."
);

/// The one place core errors become Python exceptions, with the same message and the
/// location as attributes (`file`, `line`, `key`).
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let msg = e.to_string();
    let err = match &e {
        Error::Config { .. } | Error::Syntax { .. } => ConfigError::new_err(msg),
        Error::Trace { .. } => TraceError::new_err(msg),
        Error::Format { .. } => FormatError::new_err(msg),
        Error::Io { .. } => RaidlabIOError::new_err(msg),
        Error::Store { .. } => StoreError::new_err(msg),
        Error::Cancelled => return PyKeyboardInterrupt::new_err(msg),
    };
    let value = err.value(py);
    // Setting an attribute on a fresh exception instance cannot fail; results are ignored.
    let _ = match e {
        Error::Config { key, .. } => value.setattr("key", key),
        Error::Syntax { file, line, .. } | Error::Trace { file, line, .. } => value
            .setattr("file", file)
            .and_then(|_| value.setattr("line", line)),
        Error::Format { file, .. } => value.setattr("file", file),
        Error::Io { path, .. } | Error::Store { path, .. } => value.setattr("file", path),
        Error::Cancelled => Ok(()),
    };
    err
}

pub(crate) fn parse(
    py: Python<'_>,
    text: &str,
    file: Option<&str>,
    base_dir: Option<PathBuf>,
    overrides: Option<&str>,
) -> PyResult<Vec<raidlab::config::Experiment>> {
    let dir = base_dir.as_deref();
    let out = (|| {
        let tree = match file {
            Some(f) => raidlab::config::toml_value(text, f)?,
            None => dict_tree(text)?,
        };
        let over = overrides.map(dict_tree).transpose()?;
        raidlab::config::from_value_with(&tree, dir, over.as_ref())
    })();
    out.map_err(|e| to_py(py, e))
}

/// The JSON text of a Python dict as a config tree; errors name `<dict>` and the line.
fn dict_tree(text: &str) -> raidlab::Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| Error::Syntax {
        file: "<dict>".into(),
        line: e.line() as u64,
        msg: e.to_string(),
    })
}

/// Validate a config (TOML text with `file` set, else JSON text of a dict) with `overrides`
/// (JSON text of a tree, applied to every run last) and return each run as `(name,
/// merged_config_json)`, or with `resolved` as `(name, resolved_config_json)` (defaults
/// filled in).
#[pyfunction]
#[pyo3(signature = (text, file=None, base_dir=None, overrides=None, resolved=false))]
fn load_config(
    py: Python<'_>,
    text: &str,
    file: Option<&str>,
    base_dir: Option<PathBuf>,
    overrides: Option<&str>,
    resolved: bool,
) -> PyResult<Vec<(String, String)>> {
    Ok(parse(py, text, file, base_dir, overrides)?
        .into_iter()
        .map(|e| {
            let tree = if resolved { e.resolved } else { e.tree };
            (e.name, tree.to_string())
        })
        .collect())
}

/// Run every run of a config on `threads` threads. Returns `(name, metrics_json or None,
/// resolved_config_json, error or None)` per run, in order: a run that failed has its error
/// (a `RaidlabError`) instead of metrics, and the others still ran. `progress(runs_done,
/// runs_total, requests, prepass_requests)` is called now and then; if it raises, the batch
/// stops and the exception propagates. `workload_thread`: whether each run draws its
/// workload on a thread of its own (`None`: when the machine has a core to spare for it).
#[allow(clippy::type_complexity)]
#[pyfunction]
#[pyo3(signature = (text, file=None, base_dir=None, threads=1, progress=None, overrides=None, workload_thread=None))]
#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    text: &str,
    file: Option<&str>,
    base_dir: Option<PathBuf>,
    threads: usize,
    progress: Option<PyObject>,
    overrides: Option<&str>,
    workload_thread: Option<bool>,
) -> PyResult<Vec<(String, Option<String>, String, Option<PyObject>)>> {
    let exps = parse(py, text, file, base_dir, overrides)?;
    let raised: std::sync::Mutex<Option<PyErr>> = std::sync::Mutex::new(None);
    let callback = |p: BatchProgress| -> bool {
        let Some(cb) = &progress else { return true };
        Python::with_gil(|py| {
            let r = cb
                .call1(
                    py,
                    (p.runs_done, p.runs_total, p.requests, p.prepass_requests),
                )
                .and_then(|_| py.check_signals());
            match r {
                Ok(()) => true,
                Err(e) => {
                    *raised.lock().expect("not poisoned") = Some(e);
                    false
                }
            }
        })
    };
    let results = py.allow_threads(|| match workload_thread {
        Some(own) => engine::run_batch_with(&exps, threads, own, &callback),
        None => engine::run_batch(&exps, threads, &callback),
    });
    if let Some(e) = raised.into_inner().expect("not poisoned") {
        return Err(e);
    }
    let mut out = Vec::with_capacity(exps.len());
    for (exp, res) in exps.into_iter().zip(results) {
        let (metrics, err) = match res {
            Ok(m) => (Some(m.to_json().to_string()), None),
            Err(raidlab::Error::Cancelled) => {
                return Err(PyKeyboardInterrupt::new_err("cancelled"))
            }
            Err(e) => (None, Some(to_py(py, e).into_value(py).into_any())),
        };
        out.push((exp.name, metrics, exp.resolved.to_string(), err));
    }
    Ok(out)
}

/// Bytes in a size written with a unit (`"128MiB"`, `"1.5GB"`, `"4096"`), by the rules every
/// config key uses; `ValueError` with the expected forms otherwise.
#[pyfunction]
fn parse_size(text: &str) -> PyResult<f64> {
    raidlab::config::parse_size(text).map_err(pyo3::exceptions::PyValueError::new_err)
}

/// Summarise a trace file (its first `limit` requests, of one `device`); returns JSON text
/// with the format read under `"format"`.
#[pyfunction]
#[pyo3(signature = (path, format="auto", block_size=4096, limit=None, device=None))]
fn trace_stats(
    py: Python<'_>,
    path: PathBuf,
    format: &str,
    block_size: u32,
    limit: Option<u64>,
    device: Option<u64>,
) -> PyResult<String> {
    let (fmt, stats) = py
        .allow_threads(|| {
            raidlab::workload::stats::file_stats_of(&path, format, block_size, limit, device)
        })
        .map_err(|e| to_py(py, e))?;
    let mut v = stats.to_json();
    v["format"] = fmt.name().into();
    Ok(v.to_string())
}

/// Read the oracleGeneral trace at `path` as counting mode's fast path reads it and do
/// nothing else; returns `(records, key checksum)` (the bare read rate of
/// `benches/bench_count.py`).
#[pyfunction]
fn read_oracle(py: Python<'_>, path: PathBuf) -> PyResult<(u64, u64)> {
    py.allow_threads(|| raidlab::workload::oracle::read_all(&path))
        .map_err(|e| to_py(py, e))
}

/// Cores this process may use (CPU affinity and any CPU quota), as the core counts them.
#[pyfunction]
fn cores() -> usize {
    engine::cores()
}

/// Whether `runs` runs at once leave a core for each one's workload thread (and
/// `RAIDLAB_WORKLOAD_THREAD` is not `0`).
#[pyfunction]
fn spare_cores(runs: usize) -> bool {
    engine::spare_cores(runs)
}

/// The write-cache reliability and cost comparison for a `[reliability]` config (TOML text
/// with `file` set, else JSON text of a dict), with `overrides` (JSON text of a tree) merged
/// over it; returns JSON text `{"inputs", "rows"}`.
#[pyfunction]
#[pyo3(signature = (text, file=None, overrides=None))]
fn reliability(
    py: Python<'_>,
    text: &str,
    file: Option<&str>,
    overrides: Option<&str>,
) -> PyResult<String> {
    let out = (|| {
        let mut tree = match file {
            Some(f) => raidlab::config::toml_value(text, f)?,
            None => dict_tree(text)?,
        };
        if let Some(o) = overrides {
            raidlab::config::merge(&mut tree, &dict_tree(o)?);
        }
        let inputs = raidlab::config::reliability_from_value(&tree)?;
        let rows = raidlab::reliability::compare(&inputs)?;
        Ok(raidlab::reliability::compare::to_json(&inputs, &rows).to_string())
    })();
    out.map_err(|e| to_py(py, e))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", raidlab::VERSION)?;
    // Whether `serve --tls-psk` works in this build (the `tls-psk` feature, OpenSSL).
    m.add("TLS_PSK", raidlab_store::nbd::tls::PSK_BUILT)?;
    m.add("RaidlabError", py.get_type::<RaidlabError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add("FormatError", py.get_type::<FormatError>())?;
    m.add("RaidlabIOError", py.get_type::<RaidlabIOError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    m.add_function(wrap_pyfunction!(load_config, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(trace_stats, m)?)?;
    m.add_function(wrap_pyfunction!(read_oracle, m)?)?;
    m.add_function(wrap_pyfunction!(cores, m)?)?;
    m.add_function(wrap_pyfunction!(spare_cores, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(reliability, m)?)?;
    m.add_function(wrap_pyfunction!(curve::curve, m)?)?;
    m.add_function(wrap_pyfunction!(store::array_create, m)?)?;
    m.add_function(wrap_pyfunction!(store::array_examine, m)?)?;
    m.add_function(wrap_pyfunction!(store::serve, m)?)?;
    m.add_function(wrap_pyfunction!(store::ctl_request, m)?)?;
    m.add_function(wrap_pyfunction!(store::replay, m)?)?;
    Ok(())
}
