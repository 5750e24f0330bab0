//! Counting mode: replay the block stream through the read cache and the array's planner,
//! with no clock. This is what cache papers report (hit ratio, RGR) and it must run at
//! cache-simulator speed: the loop below allocates nothing per request.

use std::time::Instant;

use crate::array::{Array, ArraySpec, Plan};
use crate::cache::read::{self, Access, MissCost, UniformCost, Units};
use crate::config::{Capacity, Experiment, Unit, Writes};
use crate::error::{Error, Result};
use crate::metrics::CountMetrics;
use crate::workload::stats::BlockSet;
use crate::workload::{Op, WorkloadSpec};

mod fast;
#[cfg(test)]
mod fast_tests;

/// Requests between two progress callbacks; a power of two so the check is a mask.
pub const PROGRESS_EVERY: u64 = 1 << 20;

/// What a streaming pre-pass over the workload learns: its footprint (for
/// `capacity_fraction`) and the compulsory-miss floor of RGR (what every policy pays for the
/// first read of each block, however large the cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepass {
    /// Unique blocks touched (reads and writes).
    pub footprint_blocks: u64,
    /// Disk blocks read from surviving disks to serve the first lookup of every block.
    pub cold_miss_disk_blocks: u64,
}

/// One pass over `workload`: footprint and the cold-miss cost on `array` (a single healthy
/// device when `None`) of the first lookup of every block (reads, and writes too with
/// `writes = "access"`) among the requests after the first `warmup` (the footprint covers
/// them all).
pub fn prepass(
    workload: &WorkloadSpec,
    array: Option<&ArraySpec>,
    writes: Writes,
    warmup: u64,
) -> Result<Prepass> {
    prepass_with(workload, array, writes, warmup, false, &mut |_| true)
}

/// Requests the pre-pass reads between calls of its progress callback.
const PREPASS_TICK: u64 = 1 << 16;

/// [`prepass`], drawing the workload on a thread of its own when `workload_thread`, and
/// calling `tick(requests read so far)` every [`PREPASS_TICK`] requests; when `tick`
/// returns false the pre-pass stops with [`crate::Error::Cancelled`].
pub fn prepass_with(
    workload: &WorkloadSpec,
    array: Option<&ArraySpec>,
    writes: Writes,
    warmup: u64,
    workload_thread: bool,
    tick: &mut dyn FnMut(u64) -> bool,
) -> Result<Prepass> {
    let array = array.map(Array::new).transpose()?;
    let mut src = super::open_workload(workload, workload_thread, None)?;
    let addressing = src.addressing();
    let mut seen = BlockSet::default();
    let mut looked_up = BlockSet::default();
    let mut cold: u64 = 0;
    let mut read: u64 = 0;
    while let Some(req) = src.next_request()? {
        read += 1;
        if read.is_multiple_of(PREPASS_TICK) && !tick(read) {
            return Err(crate::Error::Cancelled);
        }
        let (first, count) = workload.span(&req, addressing);
        let lookup = req.op == Op::Read || writes == Writes::Access;
        let measured = read > warmup;
        for lba in first..first + count {
            seen.insert(lba);
            // A block first looked up during the warm-up is no compulsory miss of the
            // measured part.
            if lookup && looked_up.insert(lba) && measured {
                cold += match &array {
                    Some(a) => u64::from(a.cost_of(lba)),
                    None => 1,
                };
            }
        }
    }
    Ok(Prepass {
        footprint_blocks: seen.len() as u64,
        cold_miss_disk_blocks: cold,
    })
}

/// Resolve the configured capacity to units, running the pre-pass if a fraction of the
/// footprint is asked for and none is given (a sweep passes one computed once per workload).
pub fn resolve_capacity(exp: &Experiment, pre: Option<Prepass>) -> Result<(u64, Option<Prepass>)> {
    match exp.cache.capacity {
        Capacity::Units(n) if pre.is_none() && exp.run.footprint => {
            let pre = prepass(
                &exp.workload,
                exp.array.as_ref(),
                exp.cache.writes,
                exp.run.warmup_requests,
            )?;
            Ok((n, Some(pre)))
        }
        Capacity::Units(n) => Ok((n, pre)),
        Capacity::FootprintFraction(f) => {
            let pre = match pre {
                Some(p) => p,
                None => prepass(
                    &exp.workload,
                    exp.array.as_ref(),
                    exp.cache.writes,
                    exp.run.warmup_requests,
                )?,
            };
            let n = ((pre.footprint_blocks as f64) * f).round().max(1.0) as u64;
            Ok((n, Some(pre)))
        }
    }
}

/// Run one experiment in counting mode. `progress(requests_since_last_call)` is called every
/// [`PROGRESS_EVERY`] requests; returning `false` cancels the run.
pub fn run(
    exp: &Experiment,
    pre: Option<Prepass>,
    workload_thread: bool,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<CountMetrics> {
    let (capacity, pre) = resolve_capacity(exp, pre)?;
    match fast::oracle_trace(exp) {
        Some(path) => {
            let m = CountMetrics {
                disk_reads: vec![0; 1],
                disk_writes: vec![0; 1],
                capacity,
                footprint_blocks: pre.map(|p| p.footprint_blocks),
                cold_miss_disk_blocks: pre.map(|p| p.cold_miss_disk_blocks),
                ..Default::default()
            };
            fast::run(exp, path, capacity, m, progress)
        }
        None => general(exp, capacity, pre, workload_thread, progress),
    }
}

/// The general loop: any workload, array and policy (see [`fast`] for the one it
/// shortens).
fn general(
    exp: &Experiment,
    capacity: u64,
    pre: Option<Prepass>,
    workload_thread: bool,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<CountMetrics> {
    let units = match exp.cache.unit {
        Unit::Block => Units::Blocks,
        Unit::Object => Units::Bytes,
    };
    let array = exp.array.as_ref().map(Array::new).transpose()?;
    let cost: &dyn MissCost = match &array {
        Some(a) => a,
        None => &UniformCost,
    };
    let mut policy = if exp.cache.policy.is_offline() {
        super::offline::build(exp, &exp.cache.policy, capacity, units, cost)?
    } else {
        read::build_in(&exp.cache.policy, capacity, units)?
    };
    let disks = cost.disks() as usize;
    let mut m = CountMetrics {
        disk_reads: vec![0; disks],
        disk_writes: vec![0; disks],
        capacity,
        footprint_blocks: pre.map(|p| p.footprint_blocks),
        cold_miss_disk_blocks: pre.map(|p| p.cold_miss_disk_blocks),
        ..Default::default()
    };
    let mut src = super::open_workload(&exp.workload, workload_thread, None)?;
    let addressing = src.addressing();
    let object_mode = exp.cache.unit == Unit::Object;
    let invalidate = exp.cache.writes == Writes::Invalidate;
    let write_lookups = exp.cache.writes == Writes::Access;
    let mut plan = Plan::default();
    let mut evicted: Vec<u64> = Vec::with_capacity(64);
    let mut now: u64 = 0;
    let started = Instant::now();
    // Warm-up: the first requests fill the cache; every metric starts after them (the
    // pre-pass counted compulsory misses after the warm-up only, so its floor is kept).
    let warmup = exp.run.warmup_requests;
    let mut warming = warmup > 0;

    while let Some(req) = src.next_request()? {
        if warming && m.requests == warmup {
            warming = false;
            progress(m.requests & (PROGRESS_EVERY - 1));
            m = m.measured_from_here();
        }
        m.requests += 1;
        if m.requests & (PROGRESS_EVERY - 1) == 0 && !progress(PROGRESS_EVERY) {
            return Err(Error::Cancelled);
        }
        let is_read = req.op == Op::Read;
        if is_read {
            m.read_requests += 1;
        } else {
            m.write_requests += 1;
        }
        if object_mode {
            // One object per request; libCacheSim counts writes as accesses too, so both ops
            // look the cache up (the `ops` filter decides which reach here).
            let size = u32::try_from(req.len.max(1)).unwrap_or(u32::MAX);
            let acc = Access {
                key: req.offset,
                size,
                now,
                cost,
            };
            now += 1;
            m.block_requests += 1;
            m.lookups += 1;
            let bytes = m.object_bytes.get_or_insert((0, 0));
            bytes.0 += u64::from(size);
            if is_read {
                m.read_blocks += 1;
            } else {
                m.write_blocks += 1;
            }
            if policy.get(&acc) {
                m.hits += 1;
            } else {
                m.misses += 1;
                m.miss_disk_blocks += 1;
                m.disk_reads[0] += 1;
                if let Some(bytes) = m.object_bytes.as_mut() {
                    bytes.1 += u64::from(size);
                }
                evicted.clear();
                policy.insert(&acc, &mut evicted);
                m.evictions += evicted.len() as u64;
            }
            continue;
        }
        let (first, count) = exp.workload.span(&req, addressing);
        m.block_requests += count;
        if !is_read {
            m.write_blocks += count;
        } else {
            m.read_blocks += count;
        }
        if !is_read && !write_lookups {
            if invalidate {
                for lba in first..first + count {
                    m.invalidations += u64::from(policy.remove(lba));
                }
                if let Some(a) = &array {
                    a.plan_write(first, count, &mut plan);
                    tally(&plan, &mut m);
                } else {
                    m.disk_writes[0] += count;
                }
            }
            continue;
        }
        m.lookups += count;
        for lba in first..first + count {
            let acc = Access {
                key: lba,
                size: 1,
                now,
                cost,
            };
            now += 1;
            if policy.get(&acc) {
                m.hits += 1;
                continue;
            }
            m.misses += 1;
            match &array {
                Some(a) => {
                    a.plan_read(lba, &mut plan);
                    m.miss_disk_blocks += tally(&plan, &mut m);
                }
                None => {
                    m.disk_reads[0] += 1;
                    m.miss_disk_blocks += 1;
                }
            }
            evicted.clear();
            policy.insert(&acc, &mut evicted);
            m.evictions += evicted.len() as u64;
        }
        debug_assert!(policy.used() <= policy.capacity());
    }
    progress(m.requests & (PROGRESS_EVERY - 1));
    if warming {
        // The stream ended inside the warm-up: nothing was measured.
        m = m.measured_from_here();
    }
    m.wall_ns = started.elapsed().as_nanos() as u64;
    m.metadata_bytes = policy.metadata_bytes() as u64;
    debug_assert_eq!(m.hits + m.misses, m.lookups);
    Ok(m)
}

impl CountMetrics {
    /// The counters of a run whose measurement starts now (after a warm-up): every count
    /// zero, the run's shape (capacity, disks, footprint) and the pre-pass's floor (counted
    /// after the warm-up) kept.
    pub(crate) fn measured_from_here(&self) -> CountMetrics {
        CountMetrics {
            disk_reads: vec![0; self.disk_reads.len()],
            disk_writes: vec![0; self.disk_writes.len()],
            capacity: self.capacity,
            footprint_blocks: self.footprint_blocks,
            cold_miss_disk_blocks: self.cold_miss_disk_blocks,
            ..Default::default()
        }
    }
}

/// Add a plan's per-disk blocks to the counters; returns the blocks it reads.
#[inline]
pub(super) fn tally(plan: &Plan, m: &mut CountMetrics) -> u64 {
    let mut read_blocks = 0;
    for op in &plan.ops {
        let n = u64::from(op.count);
        match op.op {
            Op::Read => {
                m.disk_reads[op.disk as usize] += n;
                read_blocks += n;
            }
            Op::Write => m.disk_writes[op.disk as usize] += n,
        }
    }
    read_blocks
}
