//! Cache curves in one pass: misses, miss ratio and cost-weighted RGR for every cache size.
//!
//! A point of the curve counts what a counting-mode run (`engine/count.rs`) at that size
//! counts: the same lookups (reads, plus writes with `writes = "access"`), the same
//! invalidations, the same warm-up, and each miss charged the array's cost of its block
//! (`MissCost::cost_of`: 1 on a healthy disk, `n - 1` on the failed disk of an n-disk RAID-5).
//! RGR is those disk blocks per lookup, counting mode's definition.
//!
//! Methods (see docs/curves.md):
//! - LRU, exact: Mattson stack distances (`stack.rs`), every size at once.
//! - LRU, sampled: SHARDS at a fixed rate or a fixed sample size (`shards.rs`).
//! - Any other policy: one instance per size in one pass (`minisim.rs`); exact unsampled,
//!   miniature simulations with a sampling rate.
//!
//! The array's mode is fixed for the whole replay, as in counting mode: a config whose
//! events fail or rebuild a disk mid-run is refused with an error naming the event. Object
//! mode (`cache.unit = "object"`) is refused too: curves are in blocks.

mod hist;
mod minisim;
mod records;
mod shards;
mod stack;
mod stream;

#[cfg(test)]
mod tests;

use std::time::Instant;

use serde_json::{json, Value};

use crate::array::Array;
use crate::cache::read::{MissCost, PolicySpec, UniformCost};
use crate::config::{parse_size, Action, Experiment, Unit, Writes};
use crate::engine::count;
use crate::error::{Error, Result};

/// How the stream is sampled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// Every block.
    Exact,
    /// SHARDS fixed rate `R` in (0, 1] (mini-simulations for policies other than LRU).
    Rate(f64),
    /// SHARDS fixed size: at most this many distinct blocks (LRU only).
    Size(u64),
}

/// What curve to compute of an experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct CurveSpec {
    /// Cache sizes in blocks; `None`: [`default_sizes`] of the footprint (a pre-pass).
    pub sizes: Option<Vec<u64>>,
    pub sampling: Sampling,
}

/// One cache size of a curve.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Cache size in blocks.
    pub size: u64,
    /// Lookups that missed (an estimate, rounded, when sampled).
    pub misses: u64,
    pub miss_ratio: f64,
    /// Disk blocks read from surviving disks to serve the misses (RGR's numerator).
    pub miss_disk_blocks: u64,
    pub rgr: f64,
}

/// A curve and how it was made.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// `"stack"`, `"shards"`, `"shards-fixed-size"`, `"simulation"` or `"mini-simulation"`.
    pub method: &'static str,
    pub policy: &'static str,
    pub block_size: u32,
    /// Requests and lookups measured (after the warm-up).
    pub requests: u64,
    pub lookups: u64,
    /// Measured lookups of sampled blocks.
    pub sampled_lookups: u64,
    /// The sampling rate (the final one with a fixed sample size; 1 when exact).
    pub rate: f64,
    pub points: Vec<Point>,
    /// Heap bytes of the curve's state at the end (stack, sample, instances).
    pub state_bytes: u64,
    /// Host time of the pass (and of the footprint pre-pass, if any).
    pub wall_ns: u64,
}

/// Most sizes one curve takes: each costs a bin (stack) or a policy instance.
pub const SIZES_MAX: usize = 4096;

/// Sizes of the default grid: the footprint times 2^(-i/2) for i in 0..=16 (1/256 of the
/// footprint up to all of it), at least one block, ascending, without repeats.
pub fn default_sizes(footprint_blocks: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..=16)
        .map(|i| ((footprint_blocks as f64) * 0.5f64.powf(f64::from(i) / 2.0)).round() as u64)
        .map(|s| s.max(1))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Cache sizes as written on a command line: a whole number is blocks, a size with a unit
/// (`64MiB`, `1GiB`) is bytes rounded down to whole `block_size` blocks. Sorted, repeats
/// dropped; each must be 1 to 2^40 blocks. Errors name `sizes` and the item.
pub fn parse_sizes(items: &[String], block_size: u32) -> Result<Vec<u64>> {
    if items.is_empty() {
        return Err(Error::config("sizes", "expected at least one cache size"));
    }
    if items.len() > SIZES_MAX {
        return Err(Error::config(
            "sizes",
            format!("at most {SIZES_MAX} sizes, got {}", items.len()),
        ));
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let t = item.trim();
        let blocks = if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
            t.parse::<f64>().unwrap_or(f64::INFINITY)
        } else {
            let bytes = parse_size(t).map_err(|m| Error::config("sizes", m))?;
            (bytes / f64::from(block_size)).floor()
        };
        if !(1.0..=(1u64 << 40) as f64).contains(&blocks) {
            return Err(Error::config(
                "sizes",
                format!(
                    "expected 1 to 2^40 blocks of {block_size} bytes, got {item:?} ({blocks} blocks)"
                ),
            ));
        }
        out.push(blocks as u64);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Refuse what a curve cannot compute, naming the key.
fn check(exp: &Experiment, spec: &CurveSpec) -> Result<()> {
    if exp.host.is_some() {
        return Err(Error::config(
            "host",
            "curves replay the block stream in counting mode; a two-level [host] run has none",
        ));
    }
    if exp.write_cache.is_some() {
        return Err(Error::config(
            "write_cache",
            "curves are of the read cache in counting mode; remove [write_cache]",
        ));
    }
    if exp.cache.unit == Unit::Object {
        return Err(Error::config(
            "cache.unit",
            "curves are in blocks; use unit = \"block\" (object mode's byte sizes are not supported)",
        ));
    }
    if let Some(t) = &exp.timed {
        if let Some(i) = t
            .events
            .iter()
            .position(|e| matches!(e.action, Action::Fail(_) | Action::Rebuild { .. }))
        {
            return Err(Error::config(
                format!("events[{i}]"),
                "a curve charges misses in one array mode for the whole replay; a disk failing \
                 or rebuilding mid-run changes it. List failed disks in array.failed instead",
            ));
        }
    }
    match spec.sampling {
        Sampling::Exact => {}
        Sampling::Rate(r) => {
            if !(r.is_finite() && r > 0.0 && r <= 1.0) {
                return Err(Error::config(
                    "sample_rate",
                    format!("expected a rate in (0, 1], got {r}"),
                ));
            }
        }
        Sampling::Size(n) => {
            if n == 0 || n > 1 << 31 {
                return Err(Error::config(
                    "sample_size",
                    format!("expected 1 to 2^31 blocks, got {n}"),
                ));
            }
            if exp.cache.policy != PolicySpec::Lru {
                return Err(Error::config(
                    "sample_size",
                    "a fixed sample size is SHARDS's, for policy = \"lru\"; other policies take \
                     a sample rate (miniature simulations)",
                ));
            }
            if exp.cache.writes == Writes::Invalidate {
                return Err(Error::config(
                    "sample_size",
                    "not with writes = \"invalidate\": invalidated blocks leave holes a fixed-size \
                     sample cannot bound; use a sample rate",
                ));
            }
        }
    }
    if let Some(sizes) = &spec.sizes {
        if sizes.is_empty() || sizes.len() > SIZES_MAX || sizes.contains(&0) {
            return Err(Error::config(
                "sizes",
                format!("expected 1 to {SIZES_MAX} sizes of at least one block"),
            ));
        }
    }
    Ok(())
}

/// Compute the curve of `exp`. `progress(requests since the last call)` is called every
/// [`count::PROGRESS_EVERY`] requests; returning false cancels with [`Error::Cancelled`].
pub fn run(
    exp: &Experiment,
    spec: &CurveSpec,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<Curve> {
    check(exp, spec)?;
    let started = Instant::now();
    let mut sizes = match &spec.sizes {
        Some(s) => s.clone(),
        None => {
            let pre = count::prepass_with(
                &exp.workload,
                exp.array.as_ref(),
                exp.cache.writes,
                exp.run.warmup_requests,
                crate::engine::spare_cores(1),
                &mut |_| true,
            )?;
            default_sizes(pre.footprint_blocks)
        }
    };
    sizes.sort_unstable();
    sizes.dedup();
    let array = exp.array.as_ref().map(Array::new).transpose()?;
    let cost: &dyn MissCost = match &array {
        Some(a) => a,
        None => &UniformCost,
    };
    let seed = exp.run.seed;
    let lru = exp.cache.policy == PolicySpec::Lru;
    let (method, walked, sampled, rate, per_size, state_bytes) = if lru {
        let (rate, max_keys, method) = match spec.sampling {
            Sampling::Exact => (None, None, "stack"),
            Sampling::Rate(r) => (Some(r), None, "shards"),
            Sampling::Size(n) => (None, Some(n as usize), "shards-fixed-size"),
        };
        let mut c = shards::StackCurve::new(&sizes, cost, seed, rate, max_keys);
        let walked = stream::walk(exp, &mut c, progress)?;
        let per_size = c.hist.misses();
        // The SHARDS adjustment: misses over the expected sample, R * N, not over the
        // sample drawn (N when exact). With a fixed size every lookup counted at its rate
        // then and was rescaled to the final rate since, so the expected sample is again
        // the final R times N.
        let den = c.rate() * walked.lookups as f64;
        let state = c.heap_bytes();
        (
            method,
            walked,
            c.sampled,
            c.rate(),
            ratios(&per_size, den),
            state,
        )
    } else {
        let rate = match spec.sampling {
            Sampling::Rate(r) => Some(r),
            _ => None,
        };
        let mut m = minisim::MiniSims::new(&exp.cache.policy, &sizes, cost, seed, rate)?;
        let walked = stream::walk(exp, &mut m, progress)?;
        let per_size: Vec<(f64, f64)> = m
            .misses
            .iter()
            .zip(&m.miss_cost)
            .map(|(&a, &b)| (a as f64, b as f64))
            .collect();
        let method = if rate.is_some() {
            "mini-simulation"
        } else {
            "simulation"
        };
        let r = rate.map_or(1.0, |r| shards::rate_of(shards::limit_of(r)));
        let state = m.heap_bytes();
        // The SHARDS count adjustment here too: blocks left out of the sample (hot ones
        // above all) count as hits, so misses are over the expected sample R * N.
        let den = r * walked.lookups as f64;
        (method, walked, m.sampled, r, ratios(&per_size, den), state)
    };
    let lookups = walked.lookups;
    let points = sizes
        .iter()
        .zip(per_size)
        .map(|(&size, (miss_ratio, rgr))| Point {
            size,
            misses: (miss_ratio * lookups as f64).round() as u64,
            miss_ratio,
            miss_disk_blocks: (rgr * lookups as f64).round() as u64,
            rgr,
        })
        .collect();
    Ok(Curve {
        method,
        policy: policy_name(&exp.cache.policy),
        block_size: exp.workload.block_size,
        requests: walked.requests,
        lookups,
        sampled_lookups: sampled,
        rate,
        points,
        state_bytes: state_bytes as u64,
        wall_ns: started.elapsed().as_nanos() as u64,
    })
}

/// `(miss ratio, RGR)` of each size from `(misses, miss cost)` over `den` lookups.
fn ratios(per_size: &[(f64, f64)], den: f64) -> Vec<(f64, f64)> {
    per_size
        .iter()
        .map(|&(m, c)| {
            if den > 0.0 {
                ((m / den).clamp(0.0, 1.0), (c / den).max(0.0))
            } else {
                (0.0, 0.0)
            }
        })
        .collect()
}

/// The config name of a policy.
fn policy_name(spec: &PolicySpec) -> &'static str {
    // Invariant: every spec the config layer builds has a name the factory accepts.
    PolicySpec::NAMES
        .iter()
        .copied()
        .find(|n| {
            PolicySpec::from_name(n)
                .is_some_and(|s| std::mem::discriminant(&s) == std::mem::discriminant(spec))
        })
        .unwrap_or("unknown")
}

impl Curve {
    /// The curve as JSON: its description and one object per size.
    pub fn to_json(&self) -> Value {
        let bs = u64::from(self.block_size);
        let points: Vec<Value> = self
            .points
            .iter()
            .map(|p| {
                json!({
                    "size_blocks": p.size,
                    "size_bytes": p.size * bs,
                    "misses": p.misses,
                    "miss_ratio": p.miss_ratio,
                    "miss_disk_blocks": p.miss_disk_blocks,
                    "rgr": p.rgr,
                })
            })
            .collect();
        json!({
            "method": self.method,
            "policy": self.policy,
            "block_size": self.block_size,
            "requests": self.requests,
            "lookups": self.lookups,
            "sampled_lookups": self.sampled_lookups,
            "rate": self.rate,
            "state_bytes": self.state_bytes,
            "wall_s": self.wall_ns as f64 / 1e9,
            "points": points,
        })
    }
}
