//! The parts of a config that only timed mode reads: the `[run]` driver keys, `[controller]`,
//! `[disk]` (parsed in `disk.rs`) and `[[events]]`.

use super::tree::{quoted, Table};
use super::Mode;
use crate::array::{Array, ArraySpec};
use crate::disk::{ms_to_ns, DiskSpec, QueueSpec};
use crate::error::{Error, Result};

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
    pub controller: ControllerSpec,
    pub disk: DiskSpec,
    pub queue: QueueSpec,
    pub events: Vec<Event>,
}

/// `[run]`: the mode, the seed and (timed mode) the driver.
pub(super) fn run_table(t: Option<Table<'_>>) -> Result<(Mode, u64, Option<Driver>, Timing)> {
    let mut timing = Timing::default();
    let Some(mut t) = t else {
        return Ok((Mode::Count, 1, None, timing));
    };
    let mode = match t.choice("mode", &["count", "timed"])? {
        None | Some("count") => Mode::Count,
        Some(_) => Mode::Timed,
    };
    let seed = t.uint("seed", 0, u64::MAX)?.unwrap_or(1);
    let driver_key = t.key("driver");
    let driver_name = t.choice("driver", &["open", "closed", "ramp"])?;
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
    let keys_of = |names: &[&str]| names.iter().map(|k| t.key(k)).collect::<Vec<_>>();
    let only = |present: bool, key: &str, what: &str| -> Result<()> {
        if present {
            Err(Error::config(key, format!("only applies to {what}")))
        } else {
            Ok(())
        }
    };
    let k = keys_of(&[
        "time_scale",
        "iops",
        "outstanding",
        "think_ms",
        "levels_iops",
        "level_s",
        "warmup_s",
    ]);
    if mode == Mode::Count {
        let timed = [
            (driver_name.is_some(), &driver_key),
            (time_scale.is_some(), &k[0]),
            (iops.is_some(), &k[1]),
            (outstanding.is_some(), &k[2]),
            (think_ms.is_some(), &k[3]),
            (levels.is_some(), &k[4]),
            (level_s.is_some(), &k[5]),
            (warmup_s.is_some(), &k[6]),
            (interval_s.is_some(), &t.key("interval_s")),
            (duration_s.is_some(), &t.key("duration_s")),
            (outstanding_max.is_some(), &t.key("outstanding_max")),
        ];
        for (present, key) in timed {
            only(present, key, "run.mode = \"timed\"")?;
        }
        t.finish()?;
        return Ok((mode, seed, None, timing));
    }
    let driver = match driver_name.unwrap_or("open") {
        "open" => {
            only(outstanding.is_some(), &k[2], "driver = \"closed\"")?;
            only(think_ms.is_some(), &k[3], "driver = \"closed\"")?;
            only(levels.is_some(), &k[4], "driver = \"ramp\"")?;
            only(level_s.is_some(), &k[5], "driver = \"ramp\"")?;
            only(warmup_s.is_some(), &k[6], "driver = \"ramp\"")?;
            let arrivals = match (time_scale, iops) {
                (Some(_), Some(_)) => return Err(Error::config(
                    &k[1],
                    "give `time_scale` (trace timestamps) or `iops` (Poisson arrivals), not both",
                )),
                (_, Some(iops)) => Arrivals::Poisson { iops },
                (scale, None) => Arrivals::Trace {
                    time_scale: scale.unwrap_or(1.0),
                },
            };
            Driver::Open { arrivals }
        }
        "closed" => {
            for (present, key) in [(time_scale.is_some(), &k[0]), (iops.is_some(), &k[1])] {
                only(present, key, "driver = \"open\"")?;
            }
            for (present, key) in [
                (levels.is_some(), &k[4]),
                (level_s.is_some(), &k[5]),
                (warmup_s.is_some(), &k[6]),
            ] {
                only(present, key, "driver = \"ramp\"")?;
            }
            Driver::Closed {
                outstanding: outstanding.unwrap_or(16) as u32,
                think_ns: ms_to_ns(think_ms.unwrap_or(0.0)),
            }
        }
        _ => {
            for (present, key) in [(time_scale.is_some(), &k[0]), (iops.is_some(), &k[1])] {
                only(present, key, "driver = \"open\"")?;
            }
            only(outstanding.is_some(), &k[2], "driver = \"closed\"")?;
            only(think_ms.is_some(), &k[3], "driver = \"closed\"")?;
            let levels_iops = match levels {
                Some(l) if !l.is_empty() => l,
                _ => {
                    return Err(Error::config(
                        &k[4],
                        "missing; expected a non-empty list of target IOPS",
                    ))
                }
            };
            Driver::Ramp {
                levels_iops,
                level_ns: ms_to_ns(level_s.unwrap_or(60.0) * 1e3),
                warmup_ns: ms_to_ns(warmup_s.unwrap_or(10.0) * 1e3),
            }
        }
    };
    timing.interval_ns = ms_to_ns(interval_s.unwrap_or(1.0) * 1e3).max(1);
    timing.duration_ns = duration_s.map(|s| ms_to_ns(s * 1e3).max(1));
    timing.outstanding_max = outstanding_max.map_or(1 << 20, |n| n as u32);
    t.finish()?;
    Ok((mode, seed, Some(driver), timing))
}

/// `[run]` keys of timed mode that are not the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Timing {
    pub interval_ns: u64,
    pub duration_ns: Option<u64>,
    pub outstanding_max: u32,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            interval_ns: 1_000_000_000,
            duration_ns: None,
            outstanding_max: 1 << 20,
        }
    }
}

/// `[controller]`.
pub(super) fn controller_table(t: Option<Table<'_>>) -> Result<ControllerSpec> {
    let mut spec = ControllerSpec {
        hit_ns: 200_000,
        miss_ns: 0,
    };
    if let Some(mut t) = t {
        if let Some(us) = t.float("hit_us", 0.0, 1e9)? {
            spec.hit_ns = ms_to_ns(us / 1e3);
        }
        if let Some(us) = t.float("miss_us", 0.0, 1e9)? {
            spec.miss_ns = ms_to_ns(us / 1e3);
        }
        t.finish()?;
    }
    Ok(spec)
}

/// `[[events]]`, checked against the array: times must not decrease, and every failure must
/// name a disk the array has and can lose at that point.
pub(super) fn events_list(
    list: Option<Vec<Table<'_>>>,
    array: Option<&ArraySpec>,
) -> Result<Vec<Event>> {
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
        let fail_key = t.key("fail");
        let disk = t.uint("fail", 0, u32::MAX as u64)?.ok_or_else(|| {
            Error::config(
                &fail_key,
                format!("missing; expected one of {}", quoted(&["fail"])),
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
