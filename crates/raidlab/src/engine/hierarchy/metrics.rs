//! Results of a two-level run: the array cache's counters (as in counting mode, so
//! `hit_ratio` is the array cache's), the host's, read latency, and X-RAY's tracking accuracy
//! with its time series.

use serde_json::{json, Map, Value};

use crate::host::HostStats;
use crate::metrics::{ratio, CountMetrics};

/// Bound on the rows of the time series.
pub const SERIES_ROWS_MAX: usize = 1 << 20;

/// X-RAY's tracking accuracy, averaged over the samples of the measured phase (the paper's
/// metrics: size error relative to the actual size, false positives over the predicted size,
/// false negatives over the actual size).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tracking {
    pub samples: u64,
    pub size_error_sum: f64,
    pub false_positive_sum: f64,
    pub false_negative_sum: f64,
    pub predicted_sum: f64,
    pub actual_sum: f64,
}

impl Tracking {
    fn mean(&self, sum: f64) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            sum / self.samples as f64
        }
    }
}

/// One row per sample of the measured phase.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// Simulated time, seconds from the start of the run.
    pub t_s: Vec<f64>,
    /// Application block reads since warm-up.
    pub block_reads: Vec<u64>,
    /// Configured FS cache size.
    pub fs_cache_blocks: Vec<u64>,
    /// Data blocks in the FS cache.
    pub actual_blocks: Vec<u64>,
    /// X-RAY's predicted size (X-RAY runs only).
    pub predicted_blocks: Vec<u64>,
    pub false_positives: Vec<f64>,
    pub false_negatives: Vec<f64>,
    /// Array hit ratio since warm-up.
    pub hit_ratio: Vec<f64>,
    pub truncated: bool,
}

/// Everything a two-level run reports.
#[derive(Debug, Clone, Default)]
pub struct HierarchyMetrics {
    /// The array cache: lookups are block reads reaching the array, hits its hits; requests
    /// are file operations, read/write blocks the application's.
    pub count: CountMetrics,
    pub host: HostStats,
    pub placement_reads: u64,
    /// DEMOTE: demoted blocks the array lacked (sent over the interconnect).
    pub demote_transfers: u64,
    pub sim_ns: u64,
    pub warmup_ns: u64,
    pub tracking: Option<Tracking>,
    /// Web logs: malformed lines skipped, requests moving no data, first malformed line.
    pub skipped: (u64, u64, Option<u64>),
    pub series: Series,
}

impl HierarchyMetrics {
    /// Mean latency of an application block read, microseconds.
    pub fn read_latency_us_mean(&self) -> f64 {
        ratio(self.host.read_ns, self.host.block_reads) / 1e3
    }

    /// The flat record, with the time series under `series`.
    pub fn to_json(&self) -> Value {
        let mut v = self.count.to_json();
        let m: &mut Map<String, Value> = v.as_object_mut().expect("an object");
        let h = &self.host;
        let mut put = |k: &str, val: Value| {
            m.insert(k.to_string(), val);
        };
        put("mode", json!("hierarchy"));
        put("read_latency_us_mean", json!(self.read_latency_us_mean()));
        put("fs_hit_ratio", json!(ratio(h.fs_hits, h.block_reads)));
        put("file_reads", json!(h.file_reads));
        put("file_writes", json!(h.file_writes));
        put("app_block_reads", json!(h.block_reads));
        put("fs_hits", json!(h.fs_hits));
        put("inode_block_reads", json!(h.inode_block_reads));
        put("inode_block_writes", json!(h.inode_block_writes));
        put("data_block_writes", json!(h.data_block_writes));
        put("demotes", json!(h.demotes));
        put("demote_transfers", json!(self.demote_transfers));
        put("placement_reads", json!(self.placement_reads));
        put("sim_s", json!(self.sim_ns as f64 / 1e9));
        put("warmup_s", json!(self.warmup_ns as f64 / 1e9));
        if let Some(t) = &self.tracking {
            put("xray_samples", json!(t.samples));
            put("xray_size_error", json!(t.mean(t.size_error_sum)));
            put("xray_false_positives", json!(t.mean(t.false_positive_sum)));
            put("xray_false_negatives", json!(t.mean(t.false_negative_sum)));
            put("xray_predicted_mean", json!(t.mean(t.predicted_sum)));
            put("xray_actual_mean", json!(t.mean(t.actual_sum)));
        }
        let (malformed, no_data, first) = self.skipped;
        put("weblog_malformed_lines", json!(malformed));
        put("weblog_no_data_requests", json!(no_data));
        put("weblog_first_malformed_line", json!(first));
        put("series_truncated", json!(self.series.truncated));
        let s = &self.series;
        let mut cols = Map::new();
        cols.insert("t_s".into(), json!(s.t_s));
        cols.insert("block_reads".into(), json!(s.block_reads));
        cols.insert("fs_cache_blocks".into(), json!(s.fs_cache_blocks));
        cols.insert("actual_blocks".into(), json!(s.actual_blocks));
        cols.insert("hit_ratio".into(), json!(s.hit_ratio));
        if self.tracking.is_some() {
            cols.insert("predicted_blocks".into(), json!(s.predicted_blocks));
            cols.insert("false_positives".into(), json!(s.false_positives));
            cols.insert("false_negatives".into(), json!(s.false_negatives));
        }
        m.insert("series".into(), Value::Object(cols));
        v
    }
}
