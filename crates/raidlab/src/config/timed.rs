//! The parts of a config that only timed mode reads: the `[run]` driver keys, `[controller]`,
//! `[disk]` (parsed in `disk.rs`) and `[[events]]`.

use std::path::Path;

use super::tree::{quoted, Table};
use crate::array::{Array, ArraySpec};
use crate::disk::{ms_to_ns, DiskSpec, QueueSpec};
use crate::error::{Error, Result};
use crate::workload::WorkloadSpec;

/// How requests are offered to the array.
#[derive(Debug, Clone, PartialEq)]
pub enum Driver {
    /// Arrivals at their own times (scaled), or a seeded Poisson process.
    Open { arrivals: Arrivals },
    /// `outstanding` requests always in flight; each completion issues the next request after
    /// `think_ns`.
    Closed { outstanding: u32, think_ns: u64 },
    /// Poisson arrivals at each target rate in turn: `warmup_ns` not measured, then
    /// `level_ns` measured, per level.
    Ramp {
        levels_iops: Vec<f64>,
        level_ns: u64,
        warmup_ns: u64,
    },
}

/// Arrival times of the open-loop driver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// The workload's timestamps times `time_scale` (0.5 replays twice as fast).
    Trace { time_scale: f64 },
    /// Exponential inter-arrival times at `iops`, seeded by `run.seed`; the workload's own
    /// timestamps are ignored.
    Poisson { iops: f64 },
}

/// Controller overheads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerSpec {
    /// Response time of a request served wholly from cache.
    pub hit_ns: u64,
    /// Added to a request that went to the disks, after its last disk operation.
    pub miss_ns: u64,
    /// Write-through writes hold their stripe rows until they complete; a second write to
    /// a held row waits (`engine/timed/rowlock.rs`).
    pub row_locks: bool,
}

/// A scheduled change to the array during a timed run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub at_ns: u64,
    pub action: Action,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// The disk fails: no more operations go to it and reads of its blocks reconstruct.
    Fail(u32),
    /// Start rebuilding the failed disk onto a hot spare (`spare`: its index among the
    /// spares; the lowest free one when `None`). Checked in `rebuild.rs`.
    Rebuild { disk: u32, spare: Option<u32> },
    /// A copy of the write cache's data fails (`fail_cache`). Checked in `cachefail.rs`.
    FailCache(crate::cache::backup::CacheFailure),
}

/// Everything timed mode needs beyond the counting-mode experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedSpec {
    pub driver: Driver,
    /// Period of the time series.
    pub interval_ns: u64,
    /// Stop issuing requests at this simulated time (the run then drains).
    pub duration_ns: Option<u64>,
    /// Upper bound on user requests in flight; reaching it means the offered load exceeds
    /// what the array serves (a ramp level is then marked saturated and the ramp stops; an
    /// open-loop run fails with an error naming `run.outstanding_max`).
    pub outstanding_max: u32,
    /// Open and closed loops: requests arriving before this time warm the caches and are
    /// counted in no metric but the time series and the rebuild's latencies (`warmup_s`; 0:
    /// none). The ramp warms each level instead.
    pub measure_from_ns: u64,
    pub controller: ControllerSpec,
    pub disk: DiskSpec,
    pub queue: QueueSpec,
    pub events: Vec<Event>,
}

/// Keys of `[run]` that only timed mode reads, with the driver each belongs to (`None`: every
/// driver).
const TIMED_RUN_KEYS: &[(&str, Option<&str>)] = &[
    ("driver", None),
    ("interval_s", None),
    ("duration_s", None),
    ("outstanding_max", None),
    ("time_scale", Some("open")),
    ("iops", Some("open")),
    ("outstanding", Some("closed")),
    ("think_ms", Some("closed")),
    ("levels_iops", Some("ramp")),
    ("level_s", Some("ramp")),
    ("warmup_s", None),
];

/// `[run]` keys of timed mode: the driver and the run's timing.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RunTimed {
    pub driver: Driver,
    pub interval_ns: u64,
    pub duration_ns: Option<u64>,
    pub outstanding_max: u32,
    pub measure_from_ns: u64,
}

/// `[run]` keys of every mode (the warm-up and the pre-pass only apply to counting mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RunCommon {
    pub seed: u64,
    pub warmup_requests: u64,
    pub footprint: bool,
}

/// `[run]`: the seed, counting mode's warm-up and pre-pass, and, in timed mode, the driver
/// and timing (`None` in counting mode).
pub(super) fn run_table(t: Option<Table<'_>>) -> Result<(RunCommon, Option<RunTimed>)> {
    let Some(mut t) = t else {
        let common = RunCommon {
            seed: 1,
            warmup_requests: 0,
            footprint: false,
        };
        return Ok((common, None));
    };
    let timed = t.choice("mode", &["count", "timed"])? == Some("timed");
    let seed = t.uint_or("seed", 0, u64::MAX, 1)?;
    for key in ["warmup_requests", "footprint"] {
        if timed && t.has(key) {
            return Err(Error::config(
                t.key(key),
                "only applies to run.mode = \"count\" (timed mode measures after its own warm-up: run.warmup_s)",
            ));
        }
    }
    let warmup_requests = t.uint_or("warmup_requests", 0, u64::MAX, 0)?;
    let footprint = t.bool_or("footprint", false)?;
    let common = RunCommon {
        seed,
        warmup_requests,
        footprint,
    };
    let driver_name = t
        .choice("driver", &["open", "closed", "ramp"])?
        .unwrap_or("open");
    // A key of another mode or driver is a mistake worth naming, not a silent no-op.
    for &(key, owner) in TIMED_RUN_KEYS {
        if !t.has(key) {
            continue;
        }
        if !timed {
            return Err(Error::config(
                t.key(key),
                "only applies to run.mode = \"timed\"",
            ));
        }
        if let Some(owner) = owner.filter(|&o| o != driver_name) {
            return Err(Error::config(
                t.key(key),
                format!("only applies to driver = \"{owner}\""),
            ));
        }
    }
    let time_scale = t.float("time_scale", 1e-9, 1e9)?;
    let iops = t.float("iops", 1e-6, 1e9)?;
    let outstanding = t.uint("outstanding", 1, 1 << 20)?;
    let think_ms = t.float("think_ms", 0.0, 1e9)?;
    let levels = t.float_list("levels_iops", 1e-6, 1e9)?;
    let level_s = t.float("level_s", 1e-6, 1e9)?;
    let warmup_s = t.float("warmup_s", 0.0, 1e9)?;
    let interval_s = t.float("interval_s", 1e-6, 1e9)?;
    let duration_s = t.float("duration_s", 1e-9, 1e9)?;
    let outstanding_max = t.uint("outstanding_max", 1, u32::MAX as u64)?;
    let driver = match driver_name {
        "open" => Driver::Open {
            arrivals: match (time_scale, iops) {
                (Some(_), Some(_)) => return Err(Error::config(
                    t.key("iops"),
                    "give `time_scale` (trace timestamps) or `iops` (Poisson arrivals), not both",
                )),
                (_, Some(iops)) => Arrivals::Poisson { iops },
                (scale, None) => Arrivals::Trace {
                    time_scale: scale.unwrap_or(1.0),
                },
            },
        },
        "closed" => Driver::Closed {
            outstanding: outstanding.unwrap_or(16) as u32,
            think_ns: ms_to_ns(think_ms.unwrap_or(0.0)),
        },
        _ => Driver::Ramp {
            levels_iops: match levels {
                Some(l) if !l.is_empty() => l,
                _ => {
                    return Err(Error::config(
                        t.key("levels_iops"),
                        "missing; expected a non-empty list of target IOPS",
                    ))
                }
            },
            level_ns: ms_to_ns(level_s.unwrap_or(60.0) * 1e3),
            warmup_ns: ms_to_ns(warmup_s.unwrap_or(10.0) * 1e3),
        },
    };
    t.finish()?;
    let run = RunTimed {
        driver,
        interval_ns: ms_to_ns(interval_s.unwrap_or(1.0) * 1e3).max(1),
        duration_ns: duration_s.map(|s| ms_to_ns(s * 1e3).max(1)),
        outstanding_max: outstanding_max.map_or(1 << 20, |n| n as u32),
        measure_from_ns: match driver_name {
            "ramp" => 0,
            _ => ms_to_ns(warmup_s.unwrap_or(0.0) * 1e3),
        },
    };
    Ok((common, timed.then_some(run)))
}

/// The timed-mode part of a run from its `[run]` keys and the `[controller]`, `[disk]` and
/// `[[events]]` tables; `None` in counting mode, where those tables are errors.
pub(super) fn timed_spec(
    run: Option<RunTimed>,
    controller: Option<Table<'_>>,
    disk: Option<Table<'_>>,
    events: Option<Vec<Table<'_>>>,
    workload: &WorkloadSpec,
    array: Option<&ArraySpec>,
    base_dir: Option<&Path>,
) -> Result<Option<TimedSpec>> {
    let Some(run) = run else {
        for (present, key) in [
            (controller.is_some(), "controller"),
            (disk.is_some(), "disk"),
            (events.is_some(), "events"),
        ] {
            if present {
                return Err(Error::config(key, "only applies to run.mode = \"timed\""));
            }
        }
        return Ok(None);
    };
    let trace_times = matches!(
        run.driver,
        Driver::Open {
            arrivals: Arrivals::Trace { .. }
        }
    );
    if trace_times && workload.source.lacks_timestamps() {
        return Err(Error::config(
            "run.driver",
            "the workload has no arrival times, so an open loop at trace times would issue \
             every request at once; set run.iops (Poisson arrivals) or use driver = \"closed\"",
        ));
    }
    let (disk, queue) = super::disk::disk_spec(disk, base_dir)?;
    let events = events_list(events, array)?;
    // The rebuild window's counters are differences of the run's counters, which the end of
    // the warm-up resets: a rebuild must start after it.
    if let Some(e) = events
        .iter()
        .find(|e| matches!(e.action, Action::Rebuild { .. }) && e.at_ns < run.measure_from_ns)
    {
        return Err(Error::config(
            "run.warmup_s",
            format!(
                "the warm-up ends after the rebuild event at {} s; start the rebuild after it",
                e.at_ns as f64 / 1e9
            ),
        ));
    }
    Ok(Some(TimedSpec {
        driver: run.driver,
        interval_ns: run.interval_ns,
        duration_ns: run.duration_ns,
        outstanding_max: run.outstanding_max,
        measure_from_ns: run.measure_from_ns,
        controller: controller_table(controller)?,
        disk,
        queue,
        events,
    }))
}

/// `[controller]`.
fn controller_table(t: Option<Table<'_>>) -> Result<ControllerSpec> {
    let mut spec = ControllerSpec {
        hit_ns: 200_000,
        miss_ns: 0,
        row_locks: true,
    };
    if let Some(mut t) = t {
        if let Some(us) = t.float("hit_us", 0.0, 1e9)? {
            spec.hit_ns = ms_to_ns(us / 1e3);
        }
        if let Some(us) = t.float("miss_us", 0.0, 1e9)? {
            spec.miss_ns = ms_to_ns(us / 1e3);
        }
        spec.row_locks = t.bool_or("row_locks", spec.row_locks)?;
        t.finish()?;
    }
    Ok(spec)
}

/// `[[events]]`, checked against the array: times must not decrease, and every failure must
/// name a disk the array has and can lose at that point.
fn events_list(list: Option<Vec<Table<'_>>>, array: Option<&ArraySpec>) -> Result<Vec<Event>> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let mut probe = array.map(Array::new).transpose()?;
    let mut out: Vec<Event> = Vec::with_capacity(list.len());
    for mut t in list {
        let at_key = t.key("at_s");
        let at_s = t
            .float("at_s", 0.0, 1e9)?
            .ok_or_else(|| Error::config(&at_key, "missing; expected the time in seconds"))?;
        let at_ns = ms_to_ns(at_s * 1e3);
        if let Some(prev) = out.last() {
            if at_ns < prev.at_ns {
                return Err(Error::config(
                    at_key,
                    format!(
                        "events must be in time order; {at_s} s comes after {} s",
                        prev.at_ns as f64 / 1e9
                    ),
                ));
            }
        }
        if t.has("fail_cache") {
            let action = super::cachefail::event_action(&mut t)?;
            t.finish()?;
            out.push(Event { at_ns, action });
            continue;
        }
        if t.has("rebuild") {
            let action = super::rebuild::event_action(&mut t)?;
            t.finish()?;
            out.push(Event { at_ns, action });
            continue;
        }
        let fail_key = t.key("fail");
        let disk = t.uint("fail", 0, u32::MAX as u64)?.ok_or_else(|| {
            Error::config(
                &fail_key,
                format!(
                    "missing; expected one of {}",
                    quoted(&["fail", "rebuild", "fail_cache"])
                ),
            )
        })? as u32;
        let array = probe
            .as_mut()
            .ok_or_else(|| Error::config(&fail_key, "a failure event needs an [array]"))?;
        array.fail(disk).map_err(|e| match e {
            Error::Config { msg, .. } => Error::config(&fail_key, msg),
            other => other,
        })?;
        t.finish()?;
        out.push(Event {
            at_ns,
            action: Action::Fail(disk),
        });
    }
    Ok(out)
}
