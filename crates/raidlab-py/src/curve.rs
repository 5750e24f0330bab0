//! `raidlab._core.curve`: cache curves of a config's runs, as JSON text.

use std::path::PathBuf;

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use raidlab::curve::{parse_sizes, run, CurveSpec, Sampling};

use crate::{parse, to_py};

/// The curve of every run of a config (TOML text with `file` set, else JSON text of a dict)
/// with `overrides` applied: JSON text of `[{"name", "config", "curve"}, ...]`. `sizes` are
/// cache sizes as typed (`"64MiB"`, or blocks); `None` is the default grid over the
/// footprint. At most one of `sample_rate` and `sample_size`.
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (text, file=None, base_dir=None, overrides=None, sizes=None, sample_rate=None, sample_size=None))]
pub(crate) fn curve(
    py: Python<'_>,
    text: &str,
    file: Option<&str>,
    base_dir: Option<PathBuf>,
    overrides: Option<&str>,
    sizes: Option<Vec<String>>,
    sample_rate: Option<f64>,
    sample_size: Option<u64>,
) -> PyResult<String> {
    let exps = parse(py, text, file, base_dir, overrides)?;
    let sampling = match (sample_rate, sample_size) {
        (None, None) => Sampling::Exact,
        (Some(r), None) => Sampling::Rate(r),
        (None, Some(n)) => Sampling::Size(n),
        (Some(_), Some(_)) => {
            let e = raidlab::Error::config(
                "sample_rate",
                "give a sample rate or a sample size, not both",
            );
            return Err(to_py(py, e));
        }
    };
    let mut out = Vec::with_capacity(exps.len());
    for exp in &exps {
        let sizes = sizes
            .as_deref()
            .map(|s| parse_sizes(s, exp.workload.block_size))
            .transpose()
            .map_err(|e| to_py(py, e))?;
        let spec = CurveSpec { sizes, sampling };
        let mut interrupted = None;
        let result = py.allow_threads(|| {
            run(exp, &spec, &mut |_| {
                Python::with_gil(|py| match py.check_signals() {
                    Ok(()) => true,
                    Err(e) => {
                        interrupted = Some(e);
                        false
                    }
                })
            })
        });
        if let Some(e) = interrupted {
            return Err(e);
        }
        let c = match result {
            Ok(c) => c,
            Err(raidlab::Error::Cancelled) => {
                return Err(PyKeyboardInterrupt::new_err("cancelled"))
            }
            Err(e) => return Err(to_py(py, e)),
        };
        out.push(serde_json::json!({
            "name": exp.name,
            "config": exp.resolved,
            "curve": c.to_json(),
        }));
    }
    Ok(serde_json::Value::Array(out).to_string())
}
