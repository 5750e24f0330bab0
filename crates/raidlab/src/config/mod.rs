//! The experiment description and its validation — the one place where configs are checked.
//!
//! A config is a tree (TOML file or the equivalent Python dict, which crosses as JSON) with the
//! tables `[workload]`, `[cache]`, `[array]`, `[run]`, an optional `name`, and two ways to
//! describe several runs in one file:
//! - `[[runs]]`: each table is deep-merged over the base config (one run each);
//! - `[sweep]`: dotted key paths mapped to lists of values; every combination is a run
//!   (first key outermost), applied after each `[[runs]]` override; `[[sweep.zip]]` groups
//!   vary several keys together (`sweep.rs`).
//!
//! `tags` (labels copied into results) and `report` (read by `raidlab reproduce`) are free-form
//! tables the core keeps but does not interpret.
//!
//! Every error names the key path (`runs[2].cache.policy`) and what was expected.

mod backup;
mod bursty;
mod cachefail;
mod disk;
mod host;
mod hotspots;
mod overlay;
mod rebuild;
mod reliability;
mod sweep;
mod tables;
mod timed;
mod tree;
mod unified;
mod write;

use std::path::Path;

use serde_json::Value;

use crate::array::ArraySpec;
use crate::cache::read::PolicySpec;
use crate::error::{Error, Result};
use crate::workload::WorkloadSpec;
pub use reliability::{reliability_from_toml, reliability_from_value};
use tables::{array_spec, cache_spec, workload_spec};
pub use timed::{Action, Arrivals, ControllerSpec, Driver, Event, TimedSpec};
use tree::{describe, Table};
pub use tree::{merge, parse_size};

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
    /// Counting mode: requests replayed first to warm the cache but counted in no metric.
    pub warmup_requests: u64,
    /// Counting mode: run the footprint pre-pass (footprint, compulsory-miss floor) even
    /// when the capacity is absolute.
    pub footprint: bool,
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
    /// The host file-system model of a two-level run (`[host]`), replaying
    /// `[workload.files]` above the read cache.
    pub host: Option<crate::host::HostSpec>,
    /// Hot spares and how a failed disk is rebuilt (timed mode, `[rebuild]`).
    pub rebuild: Option<crate::rebuild::RebuildSpec>,
    /// The write-back cache (`[write_cache]`, timed mode only).
    pub write_cache: Option<crate::cache::write::WriteSpec>,
    /// The write cache's backup (`[backup]`: none, dual NVRAM, RAPID-Cache).
    pub backup: Option<crate::cache::backup::BackupSpec>,
    /// The merged config tree this run was built from (its identity in result stores).
    pub tree: Value,
    /// `tree` with the defaults validation applied filled in, echoed in results.
    pub resolved: Value,
}

/// Upper bound on the runs one config may expand to; keeps a typo in a sweep from queueing
/// millions of runs.
pub const RUNS_MAX: usize = 100_000;

/// Parse and validate a TOML config. `file` names the source in errors; relative trace paths
/// resolve against `base_dir`.
pub fn from_toml(text: &str, file: &str, base_dir: Option<&Path>) -> Result<Vec<Experiment>> {
    from_value(&toml_value(text, file)?, base_dir)
}

/// TOML text as a config tree; syntax errors name `file` and the line.
pub fn toml_value(text: &str, file: &str) -> Result<Value> {
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
    serde_json::to_value(table).map_err(|e| Error::Syntax {
        file: file.to_string(),
        line: 1,
        msg: e.to_string(),
    })
}

/// Validate a config tree (the Python dict arrives here as JSON).
pub fn from_value(root: &Value, base_dir: Option<&Path>) -> Result<Vec<Experiment>> {
    from_value_with(root, base_dir, None)
}

/// Validate a config tree with `overrides` (a tree, as from `raidlab run --set`) applied to
/// every run last, after its `[[runs]]` and `[sweep]` values; `runs` and `sweep` in
/// `overrides` are merged into the config's own before it is expanded.
pub fn from_value_with(
    root: &Value,
    base_dir: Option<&Path>,
    overrides: Option<&Value>,
) -> Result<Vec<Experiment>> {
    let Value::Object(map) = root else {
        return Err(Error::config(
            "",
            format!("expected a table, got {}", describe(root)),
        ));
    };
    let mut base = Value::Object(map.clone());
    let mut last = overrides
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    if let (Value::Object(o), Some(b)) = (&mut last, base.as_object_mut()) {
        for key in ["runs", "sweep"] {
            if let Some(v) = o.remove(key) {
                match b.get_mut(key) {
                    Some(slot) => merge(slot, &v),
                    None => {
                        b.insert(key.to_string(), v);
                    }
                }
            }
        }
    }
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
    let grid = sweep::grid(sweep.as_ref())?;
    let combos = &grid.combos;
    if overrides.len().saturating_mul(combos.len()) > RUNS_MAX {
        return Err(Error::config(
            "sweep",
            format!("expands to more than {RUNS_MAX} runs"),
        ));
    }

    let mut out = Vec::with_capacity(overrides.len() * combos.len());
    for (prefix, over) in &overrides {
        for (label, combo) in combos {
            let mut tree = base.clone();
            merge(&mut tree, over);
            merge(&mut tree, combo);
            merge(&mut tree, &last);
            let key_prefix = if prefix.is_empty() {
                String::new()
            } else if label.is_empty() {
                prefix.clone()
            } else {
                format!("{prefix} with {label}")
            };
            let exp = experiment(&tree, base_dir, out.len(), over, label, &last)
                .map_err(|e| grid.blame(e).unwrap_or_else(|e| e.in_key(&key_prefix)))?;
            out.push(exp);
        }
    }
    Ok(out)
}

/// A value as written in run names (strings without quotes).
fn short(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The `key=value` tokens of a default run name (a value may hold spaces: a token ends
/// where ` key=` starts the next).
fn name_tokens(name: &str) -> Vec<String> {
    let bytes = name.as_bytes();
    let starts_token = |at: usize| {
        let rest = &name[at..];
        let key_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_.[]-".contains(c)))
            .unwrap_or(rest.len());
        key_len > 0 && rest[key_len..].starts_with('=')
    };
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b' ' && i + 1 < bytes.len() && starts_token(i + 1) {
            out.push(name[start..i].to_string());
            start = i + 1;
        }
    }
    if start < name.len() {
        out.push(name[start..].to_string());
    }
    out.retain(|t| !t.trim().is_empty());
    out
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
    last: &Value,
) -> Result<Experiment> {
    let mut root = Table::new("", tree)?;
    let defaults = root.defaults();
    let name = root.str("name")?.map(str::to_string);
    // Free-form tables carried into results untouched: `tags` label runs for reports,
    // `report` describes how `raidlab reproduce` presents them.
    root.table("tags")?;
    root.table("report")?;
    let (common, run_timed) = timed::run_table(root.table("run")?)?;
    let timed::RunCommon {
        seed,
        warmup_requests,
        footprint,
    } = common;
    let mode = if run_timed.is_some() {
        Mode::Timed
    } else {
        Mode::Count
    };
    let run = RunSpec {
        mode,
        seed,
        warmup_requests,
        footprint,
    };
    let workload = match root.table("workload")? {
        Some(t) => workload_spec(t, base_dir, run.seed)?,
        None => return Err(root.missing("workload", "missing; expected a table")),
    };
    let write_table = root.table("write_cache")?;
    let read_cache = root.has("cache");
    let cache = match root.table("cache")? {
        Some(t) => cache_spec(t, workload.block_size)?,
        // A write cache may run without a read cache (the STOW paper's setup).
        None if write_table.is_some() => write::no_read_cache(),
        None => return Err(root.missing("cache", "missing; expected a table")),
    };
    let array = root
        .table("array")?
        .map(|t| array_spec(t, workload.block_size))
        .transpose()?;
    let timed = timed::timed_spec(
        run_timed,
        root.table("controller")?,
        root.table("disk")?,
        root.tables("events")?,
        &workload,
        array.as_ref(),
        base_dir,
    )?;
    let host = root.table("host")?.map(host::host_spec).transpose()?;
    let rebuild = rebuild::rebuild_spec(root.table("rebuild")?, timed.as_ref(), array.as_ref())?;
    let write_cache =
        write::write_cache_spec(write_table, read_cache, &workload, array.as_ref(), mode)?;
    let (cache, write_cache) = unified::apply(cache, write_cache)?;
    let backup = backup::backup_spec(
        root.table("backup")?,
        write_cache.as_ref(),
        workload.block_size,
        array.as_ref(),
    )?;
    cachefail::check_events(
        timed.as_ref(),
        write_cache.as_ref(),
        backup.as_ref(),
        array.is_some(),
    )?;
    root.finish()?;
    host::check(
        host.as_ref(),
        &workload,
        &cache,
        array.as_ref(),
        timed.is_some(),
    )?;
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
        parts.retain(|p| !p.ends_with("=null")); // a removed key names nothing
        if !sweep_label.is_empty() {
            parts.push(sweep_label.to_string());
        }
        // Overrides given last (`raidlab run --set`) replace what the name says of their
        // keys, and are named themselves; a removed key (null) is only dropped.
        let mut set = Vec::new();
        leaves("", last, &mut set);
        if !set.is_empty() {
            let mut kept = name_tokens(&parts.join(" "));
            kept.retain(|t| {
                let key = t.split('=').next().unwrap_or("");
                !set.iter().any(|s| s.split('=').next() == Some(key))
            });
            kept.extend(set.into_iter().filter(|s| !s.ends_with("=null")));
            parts = kept;
        }
        if parts.is_empty() {
            format!("run{index}")
        } else {
            parts.join(" ")
        }
    });
    let mut resolved = tree.clone();
    for (path, value) in defaults.borrow().iter() {
        insert_absent(&mut resolved, path, value);
    }
    let mode_name = if mode == Mode::Timed {
        "timed"
    } else {
        "count"
    };
    insert_absent(&mut resolved, "run.mode", &Value::from(mode_name));
    insert_absent(&mut resolved, "run.seed", &Value::from(seed));
    if mode == Mode::Count {
        insert_absent(
            &mut resolved,
            "run.warmup_requests",
            &Value::from(warmup_requests),
        );
        insert_absent(&mut resolved, "run.footprint", &Value::from(footprint));
    }
    Ok(Experiment {
        name,
        workload,
        cache,
        array,
        run,
        timed,
        host,
        rebuild,
        write_cache,
        backup,
        tree: tree.clone(),
        resolved,
    })
}

/// Set the dotted `path` of `tree` to `value` unless it is present (creating tables on the
/// way).
fn insert_absent(tree: &mut Value, path: &str, value: &Value) {
    let mut node = tree;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        let Value::Object(map) = node else { return };
        if parts.peek().is_none() {
            map.entry(part.to_string()).or_insert_with(|| value.clone());
            return;
        }
        node = map
            .entry(part.to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
}

/// Bytes in `gib` GiB (a generator's `space_gib`), rounded down.
pub(crate) fn gib_bytes(gib: f64) -> u64 {
    (gib * (1u64 << 30) as f64) as u64
}

#[cfg(test)]
mod tests;

/// Test helpers shared by the generators' tests and their config sections' tests.
#[cfg(test)]
pub(crate) mod synth_test {
    use crate::error::{Error, Result};
    use crate::workload::{SourceSpec, SynthSpec};

    /// The `[workload.synthetic]` of a config with `kind` and the `extra` keys (a small LRU
    /// cache around it), parsed from a file named `file`.
    pub(crate) fn synthetic(kind: &str, extra: &str, file: &str) -> Result<SynthSpec> {
        let text = format!(
            "[cache]\npolicy = \"lru\"\ncapacity_blocks = 10\n[workload.synthetic]\n\
             kind = \"{kind}\"\n{extra}"
        );
        let exps = super::from_toml(&text, file, None)?;
        match &exps[0].workload.source {
            SourceSpec::Synthetic(s) => Ok(s.clone()),
            other => panic!("{other:?}"),
        }
    }

    /// The config key a failed parse (or a generator's check) names.
    pub(crate) fn error_key<T: std::fmt::Debug>(r: Result<T>) -> String {
        match r.unwrap_err() {
            Error::Config { key, .. } => key,
            other => panic!("{other}"),
        }
    }
}
