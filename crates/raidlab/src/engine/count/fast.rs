//! Counting mode's fast path: a plain read cache (no array below it) over an oracleGeneral
//! trace, the setting of cache-simulator comparisons. Every request is a read of one key, so
//! the general loop's block splitting, write handling and miss-cost planning have nothing to
//! do; what is left is the lookup, which this loop runs
//!
//! - over keys decoded a batch at a time straight from the reader's chunk buffer
//!   ([`oracle::open_batched`], [`OracleReader::next_keys`]), with no virtual call per
//!   request;
//! - through the concrete policy type ([`read::build_with`]), so its calls inline;
//! - with the batch's index buckets touched before the batch is replayed
//!   ([`ReadPolicy::prefetch`]), so that their memory misses overlap.
//!
//! The metrics are those of the general loop in `count.rs`, counter for counter (the tests
//! below compare the two on every policy).

use std::io::Read;
use std::path::Path;
use std::time::Instant;

use super::PROGRESS_EVERY;
use crate::cache::read::{self, Access, ReadPolicy, UniformCost, Units, WithPolicy};
use crate::config::{Experiment, Unit};
use crate::error::{Error, Result};
use crate::metrics::CountMetrics;
use crate::workload::oracle::{self, OracleReader};
use crate::workload::{sniff_path, Format, SourceSpec};

/// Requests decoded, touched and replayed per batch: enough lookups in flight to cover the
/// memory latency, few enough that what the touches load stays in the L1 cache.
const BATCH: usize = 64;

/// The oracleGeneral trace `exp` reads, when the fast path can replay `exp`: counting mode
/// with no array (every miss costs one block of one device), an online policy and an
/// oracleGeneral trace (named, or sniffed as one) read whole, one device. `None` sends the
/// run down the general loop, which also reports any error in this configuration (a trace
/// that cannot be sniffed, say) exactly as it always has.
pub(super) fn oracle_trace(exp: &Experiment) -> Option<&Path> {
    if exp.array.is_some() || exp.cache.policy.is_offline() || exp.workload.device.is_some() {
        return None;
    }
    let SourceSpec::Trace { path, format } = &exp.workload.source else {
        return None;
    };
    let format = match format {
        Format::Auto => sniff_path(path).ok()?,
        f => *f,
    };
    (format == Format::OracleGeneral).then_some(path.as_path())
}

/// Replay `exp` (for which [`oracle_trace`] gave `path`) with a cache of `capacity` units:
/// the general loop's metrics, `m` holding the run's shape (capacity, pre-pass results).
pub(super) fn run(
    exp: &Experiment,
    path: &Path,
    capacity: u64,
    m: CountMetrics,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<CountMetrics> {
    let units = match exp.cache.unit {
        Unit::Block => Units::Blocks,
        Unit::Object => Units::Bytes,
    };
    let replay = Replay {
        exp,
        path,
        m,
        progress,
    };
    read::build_with(&exp.cache.policy, capacity, units, replay)?
}

/// The replay, waiting for its policy (see [`read::WithPolicy`]).
struct Replay<'a> {
    exp: &'a Experiment,
    path: &'a Path,
    m: CountMetrics,
    progress: &'a mut dyn FnMut(u64) -> bool,
}

impl WithPolicy for Replay<'_> {
    type Output = Result<CountMetrics>;

    fn with<P: ReadPolicy + Send + 'static>(self, mut policy: P) -> Result<CountMetrics> {
        let mut reader = oracle::open_batched(self.path)?;
        let (exp, m, progress) = (self.exp, self.m, self.progress);
        match exp.cache.unit {
            Unit::Block => replay::<P, false>(exp, &mut policy, &mut reader, m, progress),
            Unit::Object => replay::<P, true>(exp, &mut policy, &mut reader, m, progress),
        }
    }
}

/// The counters the loop keeps in registers; folded into the metrics at the end (and reset
/// where the warm-up ends).
#[derive(Default)]
struct Counters {
    requests: u64,
    hits: u64,
    misses: u64,
    evictions: u64,
    bytes: u64,
    miss_bytes: u64,
}

/// The loop: `reader`'s requests through `policy`, counted as `count::run` counts them;
/// `OBJECT` is object mode (`cache.unit = "object"`), compiled apart from block mode.
fn replay<P: ReadPolicy + ?Sized, const OBJECT: bool>(
    exp: &Experiment,
    policy: &mut P,
    reader: &mut OracleReader<Box<dyn Read + Send>>,
    mut m: CountMetrics,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<CountMetrics> {
    debug_assert_eq!(OBJECT, exp.cache.unit == Unit::Object);
    let cost = &UniformCost;
    let warmup = exp.run.warmup_requests;
    let mut warming = warmup > 0;
    // Requests still to read (`limit`; the `ops` filter keeps every request of a trace that
    // has only reads).
    let mut left = exp.workload.limit.unwrap_or(u64::MAX);
    let mut keys = [0u64; BATCH];
    let mut sizes = [0u32; BATCH];
    // Victims of a whole batch (counted and cleared once a batch): at most one an insert in
    // block mode, so the capacity is never passed there.
    let mut evicted: Vec<u64> = Vec::with_capacity(4 * BATCH);
    let mut c = Counters::default();
    let mut now: u64 = 0;
    let started = Instant::now();

    // Bounded by the trace: every pass reads at least one record or ends the loop.
    while left > 0 {
        let want = usize::try_from(left).map_or(BATCH, |l| l.min(BATCH));
        let n = reader.next_keys(&mut keys[..want], &mut sizes[..want])?;
        if n == 0 {
            break;
        }
        assert!(n <= want);
        left -= n as u64;
        let (keys, sizes) = (&keys[..n], &sizes[..n]);
        // A pass of prefetches, then the replay in order, which finds the index buckets it
        // reads first already in the CPU cache. Prefetches change nothing.
        // (Prefetching the entries the buckets point to as well cost more than it saved.)
        for &k in keys {
            policy.prefetch(k, 1);
        }

        for (&key, &size) in keys.iter().zip(sizes) {
            if warming && c.requests == warmup {
                warming = false;
                progress(c.requests & (PROGRESS_EVERY - 1));
                m = m.measured_from_here();
                c = Counters::default();
                // Victims of the warm-up are not counted.
                evicted.clear();
            }
            c.requests += 1;
            if c.requests & (PROGRESS_EVERY - 1) == 0 && !progress(PROGRESS_EVERY) {
                return Err(Error::Cancelled);
            }
            // One block per key in block mode; one object of the record's size (at least 1
            // byte) in object mode.
            let size = if OBJECT { size.max(1) } else { 1 };
            let acc = Access {
                key,
                size,
                now,
                cost,
            };
            now += 1;
            if OBJECT {
                c.bytes += u64::from(size);
            }
            if policy.get(&acc) {
                c.hits += 1;
                continue;
            }
            c.misses += 1;
            if OBJECT {
                c.miss_bytes += u64::from(size);
            }
            policy.insert(&acc, &mut evicted);
        }
        c.evictions += evicted.len() as u64;
        evicted.clear();
        debug_assert!(policy.used() <= policy.capacity());
    }
    progress(c.requests & (PROGRESS_EVERY - 1));
    if warming {
        // The stream ended inside the warm-up: nothing was measured.
        m = m.measured_from_here();
        c = Counters::default();
    }
    debug_assert_eq!(c.hits + c.misses, c.requests);
    // Every request is a read of one block (object) that is looked up; every miss reads it
    // from the one device.
    m.requests = c.requests;
    m.read_requests = c.requests;
    m.block_requests = c.requests;
    m.read_blocks = c.requests;
    m.lookups = c.requests;
    m.hits = c.hits;
    m.misses = c.misses;
    m.evictions = c.evictions;
    m.miss_disk_blocks = c.misses;
    m.disk_reads[0] = c.misses;
    if OBJECT && c.requests > 0 {
        m.object_bytes = Some((c.bytes, c.miss_bytes));
    }
    m.wall_ns = started.elapsed().as_nanos() as u64;
    m.metadata_bytes = policy.metadata_bytes() as u64;
    Ok(m)
}
