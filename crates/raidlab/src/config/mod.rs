//! The experiment description and its validation — the one place where configs are checked.
//!
//! A config is a tree (TOML file or the equivalent Python dict, which crosses as JSON) with the
//! tables `[workload]`, `[cache]`, `[array]`, `[run]`, an optional `name`, and two ways to
//! describe several runs in one file:
//! - `[[runs]]`: each table is deep-merged over the base config (one run each);
//! - `[sweep]`: dotted key paths mapped to lists of values; every combination is a run
//!   (first key outermost), applied after each `[[runs]]` override.
//!
//! `tags` (labels copied into results) and `report` (read by `raidlab reproduce`) are free-form
//! tables the core keeps but does not interpret.
//!
//! Every error names the key path (`runs[2].cache.policy`) and what was expected.

mod disk;
mod timed;
mod tree;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::array::{ArraySpec, Layout, Level};
use crate::cache::read::PolicySpec;
use crate::error::{Error, Result};
use crate::workload::{Format, OpsFilter, SourceSpec, SynthSpec, WorkloadSpec};
pub use timed::{Action, Arrivals, ControllerSpec, Driver, Event, TimedSpec};
pub use tree::merge;
use tree::{describe, quoted, Table};

/// How the cache counts its contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Requests are split into `block_size` blocks; capacity in blocks.
    Block,
    /// libCacheSim-compatible: one object per request (key, byte size); capacity in bytes.
    Object,
}

/// Cache capacity as configured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Capacity {
    /// Blocks (block mode) or bytes (object mode).
    Units(u64),
    /// A fraction of the workload's footprint in blocks, resolved by a pre-pass.
    FootprintFraction(f64),
}

/// What a write does to the read cache in counting mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// Writes are counted and otherwise dropped.
    Ignore,
    /// A write removes the cached copy of each block and costs the planner's write I/O.
    Invalidate,
    /// A write is looked up and inserted exactly like a read (libCacheSim's semantics: every
    /// request is a cache access whatever its op).
    Access,
}

/// The `[cache]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheSpec {
    pub policy: PolicySpec,
    pub unit: Unit,
    pub capacity: Capacity,
    pub writes: Writes,
}

/// Simulation mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No clock: count hits, misses and disk I/O.
    Count,
    /// The discrete-event engine with disk models and queues.
    Timed,
}

/// The `[run]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    pub mode: Mode,
    /// Default seed of synthetic workloads that do not set their own.
    pub seed: u64,
}

/// One fully validated run.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    /// `name` of the run, or one made of its `[[runs]]`/`[sweep]` overrides.
    pub name: String,
    pub workload: WorkloadSpec,
    pub cache: CacheSpec,
    /// `None` when the config has no `[array]` (a single healthy device).
    pub array: Option<ArraySpec>,
    pub run: RunSpec,
    /// Timed mode's driver, disks and events (`Some` exactly when `run.mode = "timed"`).
    pub timed: Option<TimedSpec>,
    /// The merged config tree this run was built from, echoed in results.
    pub tree: Value,
}

/// Upper bound on the runs one config may expand to; keeps a typo in a sweep from queueing
/// millions of runs.
pub const RUNS_MAX: usize = 100_000;

/// Parse and validate a TOML config. `file` names the source in errors; relative trace paths
/// resolve against `base_dir`.
pub fn from_toml(text: &str, file: &str, base_dir: Option<&Path>) -> Result<Vec<Experiment>> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() as u64 + 1)
            .unwrap_or(1);
        Error::Syntax {
            file: file.to_string(),
            line,
            msg: e.message().to_string(),
        }
    })?;
    let value = serde_json::to_value(table).map_err(|e| Error::Syntax {
        file: file.to_string(),
        line: 1,
        msg: e.to_string(),
    })?;
    from_value(&value, base_dir)
}

/// Validate a config tree (the Python dict arrives here as JSON).
pub fn from_value(root: &Value, base_dir: Option<&Path>) -> Result<Vec<Experiment>> {
    let Value::Object(map) = root else {
        return Err(Error::config(
            "",
            format!("expected a table, got {}", describe(root)),
        ));
    };
    let mut base = Value::Object(map.clone());
    let obj = base.as_object_mut().expect("checked above");
    let runs = obj.remove("runs");
    let sweep = obj.remove("sweep");

    let overrides: Vec<(String, Value)> = match &runs {
        None => vec![(String::new(), Value::Object(Default::default()))],
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Object(_) => Ok((format!("runs[{i}]"), v.clone())),
                other => Err(Error::config(
                    format!("runs[{i}]"),
                    format!("expected a table, got {}", describe(other)),
                )),
            })
            .collect::<Result<_>>()?,
        Some(other) => {
            return Err(Error::config(
                "runs",
                format!(
                    "expected a non-empty array of tables, got {}",
                    describe(other)
                ),
            ))
        }
    };
    let combos = sweep_combinations(sweep.as_ref())?;
    if overrides.len().saturating_mul(combos.len()) > RUNS_MAX {
        return Err(Error::config(
            "sweep",
            format!("expands to more than {RUNS_MAX} runs"),
        ));
    }

    let mut out = Vec::with_capacity(overrides.len() * combos.len());
    for (prefix, over) in &overrides {
        for (label, combo) in &combos {
            let mut tree = base.clone();
            merge(&mut tree, over);
            merge(&mut tree, combo);
            let key_prefix = if prefix.is_empty() {
                String::new()
            } else if label.is_empty() {
                prefix.clone()
            } else {
                format!("{prefix} with {label}")
            };
            let exp = experiment(&tree, base_dir, out.len(), over, label)
                .map_err(|e| e.in_key(&key_prefix))?;
            out.push(exp);
        }
    }
    Ok(out)
}

/// Expand `[sweep]` into (label, override tree) pairs; one empty pair without a sweep.
fn sweep_combinations(sweep: Option<&Value>) -> Result<Vec<(String, Value)>> {
    let mut combos = vec![(String::new(), Value::Object(Default::default()))];
    let Some(sweep) = sweep else {
        return Ok(combos);
    };
    let Value::Object(map) = sweep else {
        return Err(Error::config(
            "sweep",
            format!(
                "expected a table of key paths to lists, got {}",
                describe(sweep)
            ),
        ));
    };
    for (path, values) in map {
        let Value::Array(values) = values else {
            return Err(Error::config(
                format!("sweep.{path}"),
                format!("expected a list of values, got {}", describe(values)),
            ));
        };
        if values.is_empty() || path.split('.').any(str::is_empty) {
            return Err(Error::config(
                format!("sweep.{path}"),
                "expected a dotted key path (`cache.policy`) and a non-empty list",
            ));
        }
        let mut next = Vec::with_capacity(combos.len() * values.len());
        for (label, tree) in &combos {
            for v in values {
                let mut t = tree.clone();
                merge(&mut t, &nested(path, v.clone()));
                let item = format!("{path}={}", short(v));
                let label = if label.is_empty() {
                    item
                } else {
                    format!("{label} {item}")
                };
                next.push((label, t));
            }
            if next.len() > RUNS_MAX {
                return Err(Error::config(
                    "sweep",
                    format!("expands to more than {RUNS_MAX} runs"),
                ));
            }
        }
        combos = next;
    }
    Ok(combos)
}

/// `{"a": {"b": v}}` from `"a.b"`.
fn nested(path: &str, v: Value) -> Value {
    path.rsplit('.').fold(v, |acc, k| {
        let mut m = serde_json::Map::new();
        m.insert(k.to_string(), acc);
        Value::Object(m)
    })
}

fn short(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Leaf `key=value` pairs of an override, for default run names.
fn leaves(prefix: &str, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, sub) in m {
                if prefix.is_empty() && k == "name" {
                    continue;
                }
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&p, sub, out);
            }
        }
        other => out.push(format!("{prefix}={}", short(other))),
    }
}

fn experiment(
    tree: &Value,
    base_dir: Option<&Path>,
    index: usize,
    over: &Value,
    sweep_label: &str,
) -> Result<Experiment> {
    let mut root = Table::new("", tree)?;
    let name = root.str("name")?.map(str::to_string);
    // Free-form tables carried into results untouched: `tags` label runs for reports,
    // `report` describes how `raidlab reproduce` presents them.
    root.table("tags")?;
    root.table("report")?;
    let (mode, seed, driver, timing) = timed::run_table(root.table("run")?)?;
    let run = RunSpec { mode, seed };
    let workload = match root.table("workload")? {
        Some(t) => workload_spec(t, base_dir, run.seed)?,
        None => return Err(Error::config("workload", "missing; expected a table")),
    };
    let cache = match root.table("cache")? {
        Some(t) => cache_spec(t)?,
        None => return Err(Error::config("cache", "missing; expected a table")),
    };
    let array = root
        .table("array")?
        .map(|t| array_spec(t, workload.block_size))
        .transpose()?;
    let controller = root.table("controller")?;
    let disk = root.table("disk")?;
    let events = root.tables("events")?;
    let timed = match driver {
        Some(driver) => {
            let (disk, queue) = disk::disk_spec(disk, base_dir)?;
            Some(TimedSpec {
                driver,
                interval_ns: timing.interval_ns,
                duration_ns: timing.duration_ns,
                outstanding_max: timing.outstanding_max,
                controller: timed::controller_table(controller)?,
                disk,
                queue,
                events: timed::events_list(events, array.as_ref())?,
            })
        }
        None => {
            for (present, key) in [
                (controller.is_some(), "controller"),
                (disk.is_some(), "disk"),
                (events.is_some(), "events"),
            ] {
                if present {
                    return Err(Error::config(key, "only applies to run.mode = \"timed\""));
                }
            }
            None
        }
    };
    root.finish()?;
    if let Some(TimedSpec {
        driver: Driver::Open {
            arrivals: Arrivals::Trace { .. },
        },
        ..
    }) = &timed
    {
        if workload.source.lacks_timestamps() {
            return Err(Error::config(
                "run.driver",
                "the workload has no arrival times, so an open loop at trace times would issue \
                 every request at once; set run.iops (Poisson arrivals) or use driver = \"closed\"",
            ));
        }
    }
    if timed.is_some() && cache.unit == Unit::Object {
        return Err(Error::config(
            "cache.unit",
            "timed mode needs unit = \"block\" (objects have no place on disks)",
        ));
    }
    if cache.unit == Unit::Object && array.is_some() {
        return Err(Error::config(
            "array",
            "not used with cache.unit = \"object\" (objects have no place on disks); remove it or use unit = \"block\"",
        ));
    }
    if cache.unit == Unit::Object && matches!(cache.capacity, Capacity::FootprintFraction(_)) {
        return Err(Error::config(
            "cache.capacity_fraction",
            "only with unit = \"block\"; use capacity_bytes in object mode",
        ));
    }
    if let Some(a) = &array {
        crate::array::Array::new(a)?;
    }
    let name = name.unwrap_or_else(|| {
        let mut parts = Vec::new();
        leaves("", over, &mut parts);
        if !sweep_label.is_empty() {
            parts.push(sweep_label.to_string());
        }
        if parts.is_empty() {
            format!("run{index}")
        } else {
            parts.join(" ")
        }
    });
    Ok(Experiment {
        name,
        workload,
        cache,
        array,
        run,
        timed,
        tree: tree.clone(),
    })
}

fn workload_spec(mut t: Table<'_>, base_dir: Option<&Path>, seed: u64) -> Result<WorkloadSpec> {
    let block_size = t.uint("block_size", 512, 1 << 30)?.unwrap_or(4096);
    if !block_size.is_power_of_two() {
        return Err(Error::config(
            t.key("block_size"),
            format!("expected a power of two >= 512, got {block_size}"),
        ));
    }
    let ops = match t.choice("ops", &["reads", "all"])? {
        None | Some("reads") => OpsFilter::Reads,
        Some(_) => OpsFilter::All,
    };
    let limit = t.uint("limit", 1, u64::MAX)?;
    let device = t.uint("device", 0, u64::MAX)?;
    let split = t.bool("split")?.unwrap_or(true);
    let trace = t.str("trace")?;
    let format_key = t.key("format");
    let format = t.str("format")?;
    let synth = t.table("synthetic")?;
    let source = match (trace, synth) {
        (Some(path), None) => {
            let format = match format {
                None => Format::Auto,
                Some(name) => Format::from_name(name).ok_or_else(|| {
                    Error::config(
                        format_key,
                        format!("expected one of {}, got {name:?}", quoted(Format::NAMES)),
                    )
                })?,
            };
            let path = PathBuf::from(path);
            let path = match base_dir {
                Some(dir) if path.is_relative() => dir.join(path),
                _ => path,
            };
            SourceSpec::Trace { path, format }
        }
        (None, Some(s)) => {
            if format.is_some() {
                return Err(Error::config(format_key, "only applies to `trace`"));
            }
            SourceSpec::Synthetic(synth_spec(s, seed)?)
        }
        (Some(_), Some(_)) => {
            return Err(Error::config(
                t.key("synthetic"),
                "give either `trace` or `[workload.synthetic]`, not both",
            ))
        }
        (None, None) => {
            return Err(Error::config(
                t.key("trace"),
                "missing; expected a trace path or a [workload.synthetic] table",
            ))
        }
    };
    t.finish()?;
    Ok(WorkloadSpec {
        source,
        ops,
        limit,
        block_size: block_size as u32,
        device,
        split,
    })
}

fn synth_spec(mut t: Table<'_>, run_seed: u64) -> Result<SynthSpec> {
    const REQUESTS_MAX: u64 = 1 << 40;
    let kind_key = t.key("kind");
    let kind = t.choice("kind", &["zipf", "uniform", "websearch"])?;
    let seed = t.uint("seed", 0, u64::MAX)?.unwrap_or(run_seed);
    let spec = match kind {
        Some("zipf") => SynthSpec::Zipf {
            keys: t.uint("keys", 1, 1 << 40)?.unwrap_or(1_000_000),
            alpha: t.float("alpha", 0.0, 10.0)?.unwrap_or(0.9),
            requests: t.uint("requests", 1, REQUESTS_MAX)?.unwrap_or(10_000_000),
            seed,
        },
        Some("uniform") => SynthSpec::Uniform {
            keys: t.uint("keys", 1, 1 << 40)?.unwrap_or(1_000_000),
            requests: t.uint("requests", 1, REQUESTS_MAX)?.unwrap_or(10_000_000),
            seed,
        },
        Some("websearch") => {
            // 60 GB: the span of SPC-1-web as the VDF paper gives it.
            let space_gib = t.float("space_gib", 0.001, 1e6)?.unwrap_or(60.0);
            let mean_ms = t.float("mean_interarrival_ms", 1e-6, 1e9)?.unwrap_or(3.7);
            SynthSpec::WebSearch {
                space_bytes: (space_gib * (1u64 << 30) as f64) as u64,
                requests: t.uint("requests", 1, REQUESTS_MAX)?.unwrap_or(1_000_000),
                mean_interarrival_ns: (mean_ms * 1e6).round().max(1.0) as u64,
                seed,
            }
        }
        _ => {
            return Err(Error::config(
                kind_key,
                "missing; expected one of \"zipf\", \"uniform\", \"websearch\"",
            ))
        }
    };
    t.finish()?;
    Ok(spec)
}

fn cache_spec(mut t: Table<'_>) -> Result<CacheSpec> {
    let policy_key = t.key("policy");
    let name = t
        .str("policy")?
        .ok_or_else(|| Error::config(&policy_key, "missing; expected a policy name"))?;
    let mut policy = PolicySpec::from_name(name).ok_or_else(|| {
        Error::config(
            &policy_key,
            format!(
                "expected one of {}, got {name:?}",
                quoted(PolicySpec::NAMES)
            ),
        )
    })?;
    if let Some(mut mq) = t.table("mq")? {
        let PolicySpec::Mq {
            queues,
            lifetime,
            history_factor,
        } = &mut policy
        else {
            return Err(Error::config(mq.key(""), "only applies to policy = \"mq\""));
        };
        *queues = mq.uint("queues", 1, 32)?.unwrap_or(*queues as u64) as u32;
        *lifetime = mq.uint("lifetime", 1, u64::MAX)?.unwrap_or(*lifetime);
        *history_factor = mq
            .uint("history_factor", 0, 64)?
            .unwrap_or(*history_factor as u64) as u32;
        mq.finish()?;
    }
    if let Some(mut q) = t.table("twoq")? {
        let PolicySpec::TwoQ { kin, kout } = &mut policy else {
            return Err(Error::config(q.key(""), "only applies to policy = \"2q\""));
        };
        *kin = q.float("kin", 0.01, 0.99)?.unwrap_or(*kin);
        *kout = q.float("kout", 0.0, 16.0)?.unwrap_or(*kout);
        q.finish()?;
    }
    let unit = match t.choice("unit", &["block", "object"])? {
        None | Some("block") => Unit::Block,
        Some(_) => Unit::Object,
    };
    let blocks = t.uint("capacity_blocks", 1, 1 << 40)?;
    let bytes = t.uint("capacity_bytes", 1, 1 << 60)?;
    let fraction = t.float("capacity_fraction", 1e-9, 1.0)?;
    let capacity = match (unit, blocks, bytes, fraction) {
        (Unit::Block, Some(b), None, None) => Capacity::Units(b),
        (Unit::Block, None, None, Some(f)) => Capacity::FootprintFraction(f),
        (Unit::Object, None, Some(b), None) => Capacity::Units(b),
        (Unit::Block, ..) => return Err(Error::config(
            t.key("capacity_blocks"),
            "expected exactly one of capacity_blocks or capacity_fraction with unit = \"block\"",
        )),
        (Unit::Object, ..) => {
            return Err(Error::config(
                t.key("capacity_bytes"),
                "expected capacity_bytes (and no other capacity) with unit = \"object\"",
            ))
        }
    };
    let writes = match t.choice("writes", &["ignore", "invalidate", "access"])? {
        None | Some("ignore") => Writes::Ignore,
        Some("invalidate") => Writes::Invalidate,
        Some(_) => Writes::Access,
    };
    t.finish()?;
    Ok(CacheSpec {
        policy,
        unit,
        capacity,
        writes,
    })
}

fn array_spec(mut t: Table<'_>, block_size: u32) -> Result<ArraySpec> {
    let level_key = t.key("level");
    let level = match t.str("level")? {
        None => Level::Raid5,
        Some(name) => Level::from_name(name).ok_or_else(|| {
            Error::config(
                &level_key,
                format!("expected one of {}, got {name:?}", quoted(Level::NAMES)),
            )
        })?,
    };
    let layout_key = t.key("layout");
    let layout = match t.str("layout")? {
        None => Layout::LeftSymmetric,
        Some(name) => Layout::from_name(name).ok_or_else(|| {
            Error::config(
                &layout_key,
                format!("expected one of {}, got {name:?}", quoted(Layout::NAMES)),
            )
        })?,
    };
    let disks_key = t.key("disks");
    let disks = t
        .uint("disks", 1, 1024)?
        .ok_or_else(|| Error::config(disks_key, "missing; expected the number of disks"))?;
    let stripe_unit_bytes = t.uint("stripe_unit", 1, 1 << 34)?.unwrap_or(65536);
    let failed = t
        .uint_list("failed", u32::MAX as u64)?
        .unwrap_or_default()
        .into_iter()
        .map(|d| d as u32)
        .collect();
    t.finish()?;
    Ok(ArraySpec {
        level,
        disks: disks as u32,
        stripe_unit_bytes,
        layout,
        failed,
        block_size,
    })
}

#[cfg(test)]
mod tests;
