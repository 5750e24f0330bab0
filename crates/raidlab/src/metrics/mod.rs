//! Metrics of a run: plain counters plus the ratios derived from them.
//!
//! Everything here is deterministic for a given config and seed except `wall_ns`, the elapsed
//! host time, which is reported for speed and excluded from result comparisons.

pub mod backup;
pub mod cachefail;
pub mod latency;
pub mod rebuild;
pub mod timed;
pub mod write;

pub use latency::Latency;
pub use rebuild::{RebuildMetrics, RebuildRecord, WindowCounts};
pub use timed::{DiskMetrics, RampPoint, Series, TimedMetrics, SERIES_ROWS_MAX};

use serde_json::{json, Map, Value};

/// The results of one run, whichever mode it ran in.
#[derive(Debug, Clone)]
pub enum RunMetrics {
    Count(Box<CountMetrics>),
    Timed(Box<TimedMetrics>),
    /// A two-level (host + array) run.
    Hierarchy(Box<crate::engine::hierarchy::HierarchyMetrics>),
}

impl RunMetrics {
    /// The flat record of the run (timed runs add `series` and `ramp`).
    pub fn to_json(&self) -> Value {
        match self {
            RunMetrics::Count(m) => {
                let mut v = m.to_json();
                v.as_object_mut()
                    .expect("an object")
                    .insert("mode".into(), json!("count"));
                v
            }
            RunMetrics::Timed(m) => m.to_json(),
            RunMetrics::Hierarchy(m) => m.to_json(),
        }
    }

    /// The counting-mode counters (a timed run has them too).
    pub fn counts(&self) -> &CountMetrics {
        match self {
            RunMetrics::Count(m) => m,
            RunMetrics::Timed(m) => &m.count,
            RunMetrics::Hierarchy(m) => &m.count,
        }
    }
}

/// Counters of a counting-mode run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountMetrics {
    /// Requests that passed the `ops` filter (and `limit`).
    pub requests: u64,
    pub read_requests: u64,
    pub write_requests: u64,
    /// Block accesses (read and write) after splitting requests into cache blocks; objects in
    /// object mode.
    pub block_requests: u64,
    pub read_blocks: u64,
    pub write_blocks: u64,
    /// Block accesses looked up in the cache: read blocks, plus write blocks with
    /// `writes = "access"`; every request in object mode.
    pub lookups: u64,
    /// Lookups served by the cache.
    pub hits: u64,
    /// Lookups that went to the array.
    pub misses: u64,
    /// Blocks evicted from the cache.
    pub evictions: u64,
    /// Cached blocks dropped by writes (`writes = "invalidate"`).
    pub invalidations: u64,
    /// Blocks read from each disk (read misses and write plans).
    pub disk_reads: Vec<u64>,
    /// Blocks written to each disk (write plans).
    pub disk_writes: Vec<u64>,
    /// Blocks read from surviving disks to serve misses: the numerator of RGR (VDF eq. 1).
    pub miss_disk_blocks: u64,
    /// Disk blocks the first read of every block costs (the compulsory part of
    /// `miss_disk_blocks`), when a pre-pass computed it.
    pub cold_miss_disk_blocks: Option<u64>,
    /// Resolved cache capacity in units (blocks, or bytes in object mode).
    pub capacity: u64,
    /// Unique blocks of the workload, when a pre-pass computed it.
    pub footprint_blocks: Option<u64>,
    /// Heap bytes of the policy's metadata at the end of the run.
    pub metadata_bytes: u64,
    /// Elapsed host time of the replay (not of the footprint pre-pass).
    pub wall_ns: u64,
    /// Object mode: bytes of the objects looked up and of those missed (`None` in block
    /// mode, where every block has the same size and the byte ratio is the block ratio).
    pub object_bytes: Option<(u64, u64)>,
}

/// `num / den`, 0 when `den` is 0.
pub(crate) fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

impl CountMetrics {
    /// Share of read block accesses served by the cache.
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.hits, self.hits + self.misses)
    }

    /// Requests Generation Ratio (VDF eq. 1): blocks requested from surviving disks per block
    /// requested from the cache (per lookup).
    pub fn rgr(&self) -> f64 {
        ratio(self.miss_disk_blocks, self.lookups)
    }

    /// The compulsory-miss floor of RGR: what an infinite cache would still cost.
    pub fn rgr_floor(&self) -> Option<f64> {
        self.cold_miss_disk_blocks.map(|c| ratio(c, self.lookups))
    }

    /// Object mode: the share of looked-up bytes that missed (libCacheSim's byte miss ratio).
    pub fn byte_miss_ratio(&self) -> Option<f64> {
        self.object_bytes
            .map(|(looked, missed)| ratio(missed, looked))
    }

    /// A flat record: every counter plus the derived ratios, as JSON.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        let mut put = |k: &str, v: Value| {
            m.insert(k.to_string(), v);
        };
        put("requests", json!(self.requests));
        put("read_requests", json!(self.read_requests));
        put("write_requests", json!(self.write_requests));
        put("block_requests", json!(self.block_requests));
        put("read_blocks", json!(self.read_blocks));
        put("write_blocks", json!(self.write_blocks));
        put("lookups", json!(self.lookups));
        put("hits", json!(self.hits));
        put("misses", json!(self.misses));
        put("hit_ratio", json!(self.hit_ratio()));
        put("miss_ratio", json!(1.0 - self.hit_ratio()));
        if let Some((looked, missed)) = self.object_bytes {
            put("lookup_bytes", json!(looked));
            put("miss_bytes", json!(missed));
            put("byte_miss_ratio", json!(ratio(missed, looked)));
        }
        put("rgr", json!(self.rgr()));
        put("miss_disk_blocks", json!(self.miss_disk_blocks));
        put("rgr_floor", json!(self.rgr_floor()));
        put("evictions", json!(self.evictions));
        put("invalidations", json!(self.invalidations));
        put("disk_reads", json!(self.disk_reads));
        put("disk_writes", json!(self.disk_writes));
        put(
            "disk_reads_total",
            json!(self.disk_reads.iter().sum::<u64>()),
        );
        put(
            "disk_writes_total",
            json!(self.disk_writes.iter().sum::<u64>()),
        );
        put("capacity", json!(self.capacity));
        put("footprint_blocks", json!(self.footprint_blocks));
        put("metadata_bytes", json!(self.metadata_bytes));
        put("wall_s", json!(self.wall_ns as f64 / 1e9));
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ratios() {
        let m = CountMetrics {
            lookups: 10,
            hits: 6,
            misses: 4,
            miss_disk_blocks: 9, // 3 healthy misses + 1 failed-disk miss on a 7-disk RAID-5
            disk_reads: vec![1, 2, 6],
            ..Default::default()
        };
        assert_eq!(m.hit_ratio(), 0.6);
        assert_eq!(m.rgr(), 0.9);
        let j = m.to_json();
        assert_eq!(j["disk_reads_total"], 9);
        assert_eq!(CountMetrics::default().rgr(), 0.0);
    }
}
