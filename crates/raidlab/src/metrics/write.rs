//! Metrics of the write-back cache in a timed run: hit ratios, destage work, time spent full,
//! occupancy statistics and per-interval series (aligned with the run's time series).

use serde_json::{json, Map, Value};

use super::ratio;
use crate::cache::write::plan::RowKinds;
use crate::cache::write::{OrderState, WriteStats};

/// Per-interval columns, one row per `run.interval_s` (the same rows as [`super::Series`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteSeries {
    /// Time-averaged occupancy in the interval, as a fraction of the capacity.
    pub occupancy: Vec<f64>,
    /// Fraction of the interval during which a write waited for space (the cache was full).
    pub full: Vec<f64>,
    /// Pages whose destage completed in the interval, per second.
    pub destage_pages_per_s: Vec<f64>,
    /// Destages in flight at the end of the interval.
    pub inflight: Vec<u32>,
    /// STOW: pages in SeqQ and DesiredSeqQSize at the end of the interval, as fractions of
    /// the capacity (0 for the other orders).
    pub seq_queue: Vec<f64>,
    pub desired_seq: Vec<f64>,
}

/// Results of the write cache over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteCacheMetrics {
    pub order: &'static str,
    pub capacity_pages: u64,
    pub group_pages: u64,
    pub stats: WriteStats,
    pub rows: RowKinds,
    /// Disk operations and blocks issued by destages.
    pub destage_read_ops: u64,
    pub destage_write_ops: u64,
    pub destage_read_blocks: u64,
    pub destage_write_blocks: u64,
    /// Simulated time during which at least one write waited for space.
    pub full_ns: u64,
    /// Write requests that waited for space, and their total wait.
    pub waited_writes: u64,
    pub wait_ns: u64,
    /// Time integrals of occupancy (pages x ns) and its square, over `span_ns`.
    pub occupancy_area: f64,
    pub occupancy_sq_area: f64,
    pub span_ns: u64,
    /// Time spent destaging what was left after the last user request completed.
    pub drain_ns: u64,
    /// Pages still dirty at the end (0 unless `drain = false`).
    pub left_pages: u64,
    pub order_state: OrderState,
    pub series: WriteSeries,
    /// The backup's metrics (`[backup]`), if one is configured.
    pub backup: Option<super::backup::BackupMetrics>,
    /// A unified read/write cache's counters (`write_cache.unified`).
    pub unified: Option<crate::cache::write::unified::UnifiedStats>,
}

impl WriteCacheMetrics {
    /// Time-averaged occupancy as a fraction of the capacity.
    pub fn occupancy_mean(&self) -> f64 {
        if self.span_ns == 0 {
            return 0.0;
        }
        self.occupancy_area / self.span_ns as f64 / self.capacity_pages as f64
    }

    /// Time-weighted standard deviation of the occupancy, as a fraction of the capacity.
    pub fn occupancy_std(&self) -> f64 {
        if self.span_ns == 0 {
            return 0.0;
        }
        let t = self.span_ns as f64;
        let c = self.capacity_pages as f64;
        let mean = self.occupancy_area / t;
        let var = (self.occupancy_sq_area / t - mean * mean).max(0.0);
        var.sqrt() / c
    }

    /// Add the `wc_*` keys to a flat record.
    pub fn put(&self, m: &mut Map<String, Value>) {
        let s = &self.stats;
        let disk_ops = self.destage_read_ops + self.destage_write_ops;
        let pairs: [(&str, Value); 30] = [
            ("wc_order", json!(self.order)),
            ("wc_capacity_pages", json!(self.capacity_pages)),
            ("wc_group_pages", json!(self.group_pages)),
            ("wc_page_writes", json!(s.page_writes)),
            ("wc_overwrite_hits", json!(s.overwrite_hits)),
            ("wc_stripe_hits", json!(s.stripe_hits)),
            (
                "wc_overwrite_hit_ratio",
                json!(ratio(s.overwrite_hits, s.page_writes)),
            ),
            (
                "wc_stripe_hit_ratio",
                json!(ratio(s.stripe_hits, s.page_writes)),
            ),
            ("wc_seq_pages", json!(s.seq_pages)),
            ("wc_read_lookups", json!(s.read_lookups)),
            ("wc_read_hits", json!(s.read_hits)),
            (
                "wc_read_hit_ratio",
                json!(ratio(s.read_hits, s.read_lookups)),
            ),
            ("wc_destages", json!(s.destages)),
            ("wc_destaged_pages", json!(s.destaged_pages)),
            ("wc_full_group_destages", json!(s.full_destages)),
            ("wc_full_stripe_rows", json!(self.rows.full)),
            ("wc_rmw_rows", json!(self.rows.rmw)),
            ("wc_rcw_rows", json!(self.rows.rcw)),
            ("wc_destage_disk_ops", json!(disk_ops)),
            (
                "wc_disk_ops_per_destaged_page",
                json!(ratio(disk_ops, s.destaged_pages)),
            ),
            ("wc_full_fraction", json!(ratio(self.full_ns, self.span_ns))),
            ("wc_waited_writes", json!(self.waited_writes)),
            (
                "wc_wait_mean_ms",
                json!(ratio(self.wait_ns, self.waited_writes) / 1e6),
            ),
            ("wc_occupancy_mean", json!(self.occupancy_mean())),
            ("wc_occupancy_std", json!(self.occupancy_std())),
            (
                "wc_occupancy_max",
                json!(ratio(s.occupied_max, self.capacity_pages)),
            ),
            ("wc_drain_s", json!(self.drain_ns as f64 / 1e9)),
            ("wc_left_pages", json!(self.left_pages)),
            ("wc_seq_queue_pages", json!(self.order_state.seq_pages)),
            (
                "wc_desired_seq_pages",
                json!(self.order_state.desired_seq_pages),
            ),
        ];
        for (k, v) in pairs {
            m.insert(k.into(), v);
        }
        if let Some(b) = &self.backup {
            b.put(m);
        }
        if let Some(u) = &self.unified {
            m.insert("wc_unified_pages".into(), json!(u.total_pages));
            m.insert("wc_unified_evictions".into(), json!(u.evicted_for_writes));
            m.insert("wc_unified_kept_clean".into(), json!(u.kept_clean));
        }
    }

    /// Add the `wc_*` columns to the series object.
    pub fn put_series(&self, series: &mut Value) {
        let Some(m) = series.as_object_mut() else {
            return;
        };
        m.insert("wc_occupancy".into(), json!(self.series.occupancy));
        m.insert("wc_full".into(), json!(self.series.full));
        m.insert(
            "wc_destage_pages_per_s".into(),
            json!(self.series.destage_pages_per_s),
        );
        m.insert("wc_inflight".into(), json!(self.series.inflight));
        m.insert("wc_seq_queue".into(), json!(self.series.seq_queue));
        m.insert("wc_desired_seq".into(), json!(self.series.desired_seq));
    }
}
