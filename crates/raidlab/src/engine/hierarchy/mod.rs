//! Two-level runs: a file-level workload through the host's file system (`crate::host`) and
//! its buffer cache, then the array's cache (`array.rs`) — the hierarchy the X-RAY and DEMOTE
//! papers study.
//!
//! The replay is closed loop with one host thread: each file operation starts when the
//! previous one ended plus the workload's think time (or at its logged time, if later), and
//! takes the sum of its block accesses' latencies (FS hit, array hit or disk; the paper's
//! 20 us / 200 us / 10 ms by default). Measurements start when the warm-up ends; the FS cache
//! resizes of `host.resize` count application block reads from then. Every
//! `host.sample_interval_s` of simulated time the run samples the FS cache's actual contents
//! and, under X-RAY, its prediction (size error, false positives, false negatives).

mod array;
pub mod metrics;

use std::time::Instant;

use crate::cache::read::demote::Demote;
use crate::cache::read::xray::Xray;
use crate::cache::read::{self, PolicySpec};
use crate::config::{Capacity, Experiment};
use crate::error::{Error, Result};
use crate::host::{Host, HostSpec, Layout};
use crate::metrics::ratio;
use crate::workload::files::{self, FilesSpec};
use crate::workload::SourceSpec;
use array::{ArraySide, Level2};
pub use metrics::{HierarchyMetrics, Series, Tracking, SERIES_ROWS_MAX};

/// File operations between two progress callbacks.
const PROGRESS_OPS: u64 = 1 << 12;

/// Run a two-level experiment (`exp.host` is set).
pub fn run(exp: &Experiment, progress: &mut dyn FnMut(u64) -> bool) -> Result<HierarchyMetrics> {
    let (Some(spec), SourceSpec::Files(fspec)) = (&exp.host, &exp.workload.source) else {
        return Err(Error::config(
            "host",
            "a two-level run needs [host] and [workload.files]",
        ));
    };
    let Capacity::Units(capacity) = exp.cache.capacity else {
        return Err(Error::config(
            "cache.capacity_fraction",
            "[host] runs take capacity_blocks",
        ));
    };
    run_parts(
        spec,
        fspec,
        &exp.cache.policy,
        capacity,
        exp.workload.block_size,
        progress,
    )
}

/// The run itself, from its validated parts.
pub fn run_parts(
    spec: &HostSpec,
    fspec: &FilesSpec,
    policy: &PolicySpec,
    capacity: u64,
    block_size: u32,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<HierarchyMetrics> {
    let started = Instant::now();
    let mut source = files::open(fspec, block_size)?;
    let layout = Layout::new(
        source.file_blocks(),
        spec.inodes_per_block,
        spec.space_blocks,
    )?;
    let space = layout.space_blocks;
    // The host first: it checks the sizes before anything is allocated per block.
    let mut host = Host::new(spec, layout, matches!(policy, PolicySpec::Demote))?;
    let level = match *policy {
        PolicySpec::Xray {
            threshold,
            refresh_ns,
            placement,
        } => Level2::Xray(
            Box::new(Xray::new(capacity, space, threshold, refresh_ns)),
            placement,
        ),
        PolicySpec::Demote => {
            Level2::Demote(Demote::new(capacity, capacity.min(space) as usize + 1))
        }
        ref other => Level2::Plain(read::build(other, capacity)?),
    };
    let mut dev = ArraySide::new(level, spec.latency);
    let mut m = HierarchyMetrics {
        tracking: matches!(dev.level, Level2::Xray(..)).then(Tracking::default),
        ..Default::default()
    };
    let think = source.think_ns();
    let mut measuring = false;
    let mut measure_start_ns = 0u64;
    let mut next_sample_ns = u64::MAX;
    let mut resize_at = 0usize;
    let mut ops = 0u64;
    let mut first = true;
    while let Some(op) = source.next_op()? {
        ops += 1;
        if ops.is_multiple_of(PROGRESS_OPS) && !progress(PROGRESS_OPS) {
            return Err(Error::Cancelled);
        }
        if !op.warmup && !measuring {
            measuring = true;
            measure_start_ns = host.now_ns();
            m.warmup_ns = measure_start_ns;
            host.stats = Default::default();
            dev.c = Default::default();
            next_sample_ns = measure_start_ns + spec.sample_interval_ns;
        }
        let mut start = host.now_ns() + if first { 0 } else { think };
        if let Some(a) = op.arrival_ns {
            start = start.max(measure_start_ns.saturating_add(a));
        }
        first = false;
        while next_sample_ns <= start {
            host.advance_to(next_sample_ns, &mut dev);
            sample(&host, &dev, &mut m, next_sample_ns);
            next_sample_ns += spec.sample_interval_ns;
        }
        host.advance_to(start, &mut dev);
        while measuring
            && resize_at < spec.resize.len()
            && host.stats.block_reads >= spec.resize[resize_at].after_block_reads
        {
            host.resize(spec.resize[resize_at].blocks, &mut dev);
            resize_at += 1;
        }
        if op.write {
            host.write_file(op.file, op.blocks, &mut dev);
        } else {
            host.read_file(op.file, op.blocks, &mut dev);
        }
    }
    progress(ops % PROGRESS_OPS);
    m.sim_ns = host.now_ns();
    m.host = host.stats;
    let c = dev.c;
    m.placement_reads = c.placement_reads;
    m.demote_transfers = c.demote_transfers;
    m.skipped = source.skipped();
    let h = &m.host;
    m.count = crate::metrics::CountMetrics {
        requests: h.file_reads + h.file_writes,
        read_requests: h.file_reads,
        write_requests: h.file_writes,
        block_requests: h.block_reads + h.block_writes,
        read_blocks: h.block_reads,
        write_blocks: h.block_writes,
        lookups: c.reads,
        hits: c.hits,
        misses: c.reads - c.hits,
        evictions: c.evictions,
        miss_disk_blocks: c.reads - c.hits,
        disk_reads: vec![c.disk_reads + c.placement_reads],
        disk_writes: vec![c.disk_writes],
        capacity,
        metadata_bytes: match &dev.level {
            Level2::Xray(x, _) => x.metadata_bytes() as u64,
            Level2::Plain(p) => p.metadata_bytes() as u64,
            Level2::Demote(d) => read::ReadPolicy::metadata_bytes(d) as u64,
        },
        wall_ns: started.elapsed().as_nanos() as u64,
        ..Default::default()
    };
    Ok(m)
}

/// One sample at time `t_ns`: the FS cache's actual contents and, under X-RAY, how well the
/// inclusive region matches them.
fn sample(host: &Host, dev: &ArraySide, m: &mut HierarchyMetrics, t_ns: u64) {
    let actual = host.cached_data_blocks();
    let s = &mut m.series;
    let record = s.t_s.len() < SERIES_ROWS_MAX;
    s.truncated |= !record;
    if record {
        s.t_s.push(t_ns as f64 / 1e9);
        s.block_reads.push(host.stats.block_reads);
        s.fs_cache_blocks.push(host.cache().capacity());
        s.actual_blocks.push(actual);
        let c = dev.c;
        s.hit_ratio.push(ratio(c.hits, c.reads));
    }
    let (Level2::Xray(x, _), Some(t)) = (&dev.level, m.tracking.as_mut()) else {
        return;
    };
    let layout = host.layout();
    let cache = host.cache();
    let true_pos = (layout.inode_blocks..layout.space_blocks)
        .filter(|&b| cache.contains(b) && x.presumes_cached(b))
        .count() as u64;
    let predicted = x.predicted_size();
    let fp = ratio(predicted - true_pos, predicted);
    let fneg = ratio(actual - true_pos, actual);
    let err = ratio(predicted.abs_diff(actual), actual);
    t.samples += 1;
    t.size_error_sum += err;
    t.false_positive_sum += fp;
    t.false_negative_sum += fneg;
    t.predicted_sum += predicted as f64;
    t.actual_sum += actual as f64;
    if record {
        s.predicted_blocks.push(predicted);
        s.false_positives.push(fp);
        s.false_negatives.push(fneg);
    }
}

#[cfg(test)]
mod tests;
