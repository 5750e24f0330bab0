//! Metrics of the write cache's backup (`[backup]`): RAPID's log writes, garbage collection,
//! writes that waited for a segment buffer, and a primary-cache recovery estimate.

use serde_json::{json, Map, Value};

use super::ratio;
use crate::cache::backup::BackupStats;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackupMetrics {
    pub kind: &'static str,
    /// `physical`, `logical`, or empty without a cache disk.
    pub cache_disk: &'static str,
    pub stats: BackupStats,
    /// Write requests that had to wait because the backup could not take a page (no segment
    /// buffer free), and the time some write waited for that reason.
    pub stalled_writes: u64,
    pub stall_ns: u64,
    /// Cache-disk transfers completed, and their total time from submission to completion.
    pub log_ios_done: u64,
    pub log_io_ns: u64,
    /// Pages the backup held at the end (before the final drain completes: 0 after it).
    pub held_end: u64,
    /// Failures of the caches (`fail_cache` events), when the run has any.
    pub failures: Option<super::cachefail::CacheFailMetrics>,
}

impl BackupMetrics {
    /// Add the `bk_*` keys to a flat record.
    pub fn put(&self, m: &mut Map<String, Value>) {
        let s = &self.stats;
        let pairs: [(&str, Value); 18] = [
            ("bk_kind", json!(self.kind)),
            ("bk_cache_disk", json!(self.cache_disk)),
            ("bk_page_writes", json!(s.page_writes)),
            ("bk_destaged", json!(s.destaged)),
            ("bk_invalidated", json!(s.invalidated)),
            ("bk_nvram_hits", json!(s.nvram_hits)),
            ("bk_evictions", json!(s.evictions)),
            ("bk_log_writes", json!(s.log_writes)),
            ("bk_log_pages", json!(s.log_pages)),
            ("bk_gc_runs", json!(s.gc_runs)),
            ("bk_gc_pages", json!(s.gc_pages)),
            ("bk_gc_segments_freed", json!(s.gc_segments_freed)),
            ("bk_disk_reads", json!(s.disk_reads)),
            ("bk_free_segments_min", json!(s.free_segments_min)),
            ("bk_held_max", json!(s.held_max)),
            ("bk_stalled_writes", json!(self.stalled_writes)),
            ("bk_stall_s", json!(self.stall_ns as f64 / 1e9)),
            (
                "bk_log_io_mean_ms",
                json!(ratio(self.log_io_ns, self.log_ios_done) / 1e6),
            ),
        ];
        for (k, v) in pairs {
            m.insert(k.into(), v);
        }
        if let Some(f) = &self.failures {
            f.put(m);
        }
    }
}
