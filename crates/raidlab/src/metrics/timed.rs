//! Metrics of a timed run: the counting-mode counters (same meaning), response-time
//! distributions per operation type, per-disk utilization and queue length, a time series
//! sampled every `run.interval_s`, and the points of a ramp.

use serde_json::{json, Map, Value};

use super::latency::Latency;
use super::CountMetrics;

/// Per-disk results over the whole run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiskMetrics {
    pub ops: u64,
    pub read_sectors: u64,
    pub write_sectors: u64,
    /// Busy time / simulated time.
    pub utilization: f64,
    /// Time-averaged operations present (queued + in the drive + in service).
    pub queue_mean: f64,
    pub queue_max: u64,
    /// Mean cylinders moved per operation.
    pub seek_cylinders_mean: f64,
    /// Mean operations waiting when one was chosen to start (`DeviceStats::choices`).
    pub choices_mean: f64,
    pub buffer_hits: u64,
}

/// One measured level of a ramp.
#[derive(Debug, Clone, PartialEq)]
pub struct RampPoint {
    pub target_iops: f64,
    /// Requests that arrived in the measured window, per second.
    pub offered_iops: f64,
    /// Requests completed in the measured window, per second.
    pub iops: f64,
    pub mean_ms: f64,
    pub p99_ms: f64,
    /// The level reached `run.outstanding_max` requests in flight; the ramp stops after it.
    pub saturated: bool,
}

/// Time series, one row per interval (column-wise).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// End of each interval, seconds.
    pub t_s: Vec<f64>,
    /// Requests completed in the interval, per second.
    pub iops: Vec<f64>,
    /// Mean response time of the requests completed in the interval (0 when none).
    pub mean_ms: Vec<f64>,
    /// User requests in flight at the end of the interval.
    pub outstanding: Vec<u64>,
    /// Busy fraction of each disk in the interval: `util[disk][row]`.
    pub util: Vec<Vec<f64>>,
    /// Mean operations present at each disk in the interval: `queue[disk][row]`.
    pub queue: Vec<Vec<f64>>,
    /// Fraction of the running (or last) rebuild's units rebuilt at the end of each
    /// interval; empty without `[rebuild]`.
    pub rebuild_progress: Vec<f64>,
    /// Rows dropped after [`SERIES_ROWS_MAX`].
    pub truncated: bool,
}

/// Bound on the rows of a time series (a long trace with a short interval stops recording
/// instead of exhausting memory; `truncated` says so).
pub const SERIES_ROWS_MAX: usize = 1 << 20;

impl Series {
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("t_s".into(), json!(self.t_s));
        m.insert("iops".into(), json!(self.iops));
        m.insert("mean_ms".into(), json!(self.mean_ms));
        m.insert("outstanding".into(), json!(self.outstanding));
        if !self.rebuild_progress.is_empty() {
            m.insert("rebuild_progress".into(), json!(self.rebuild_progress));
        }
        for (d, col) in self.util.iter().enumerate() {
            m.insert(format!("util_{d}"), json!(col));
        }
        for (d, col) in self.queue.iter().enumerate() {
            m.insert(format!("queue_{d}"), json!(col));
        }
        Value::Object(m)
    }
}

/// Results of a timed run.
#[derive(Debug, Clone, Default)]
pub struct TimedMetrics {
    /// Cache and disk-block counters, as in counting mode.
    pub count: CountMetrics,
    /// Simulated time from the first arrival to the last completion.
    pub sim_ns: u64,
    /// When measurement began (the end of `run.warmup_s`; 0 without one): `completed`,
    /// latencies and cache counters cover requests that arrived from then on.
    pub measure_from_ns: u64,
    pub completed: u64,
    pub latency: Latency,
    pub read_latency: Latency,
    pub write_latency: Latency,
    pub disks: Vec<DiskMetrics>,
    /// Largest number of user requests in flight at once.
    pub outstanding_peak: u64,
    /// Write-through writes that found a stripe row held by another write and waited, and
    /// their waits in all (`controller.row_locks`).
    pub row_lock_waits: u64,
    pub row_lock_wait_ns: u64,
    /// Events the engine processed.
    pub events: u64,
    /// `(time, disk)` of every failure applied.
    pub failures: Vec<(u64, u32)>,
    pub series: Series,
    pub ramp: Vec<RampPoint>,
    /// Rebuilds and the response times around them (with `[rebuild]`).
    pub rebuild: Option<super::RebuildMetrics>,
    /// The write-back cache's results, when the run has one.
    pub write_cache: Option<super::write::WriteCacheMetrics>,
}

impl TimedMetrics {
    /// Completed requests per simulated second.
    pub fn iops(&self) -> f64 {
        let span = self.sim_ns.saturating_sub(self.measure_from_ns);
        if span == 0 {
            0.0
        } else {
            self.completed as f64 / (span as f64 / 1e9)
        }
    }

    /// A flat record (the counting-mode keys plus timing), with the time series under
    /// `series` and the ramp under `ramp`.
    pub fn to_json(&self) -> Value {
        let mut v = self.count.to_json();
        let m = v
            .as_object_mut()
            .expect("CountMetrics::to_json is an object");
        m.insert("mode".into(), json!("timed"));
        m.insert("sim_s".into(), json!(self.sim_ns as f64 / 1e9));
        m.insert(
            "measure_from_s".into(),
            json!(self.measure_from_ns as f64 / 1e9),
        );
        m.insert("completed".into(), json!(self.completed));
        m.insert("iops".into(), json!(self.iops()));
        self.latency.put("latency", m);
        self.read_latency.put("read_latency", m);
        self.write_latency.put("write_latency", m);
        m.insert("outstanding_peak".into(), json!(self.outstanding_peak));
        m.insert("row_lock_waits".into(), json!(self.row_lock_waits));
        m.insert(
            "row_lock_wait_ms".into(),
            json!(self.row_lock_wait_ns as f64 / 1e6),
        );
        m.insert("events".into(), json!(self.events));
        let wall_s = self.count.wall_ns as f64 / 1e9;
        let per_s = |n: u64| if wall_s > 0.0 { n as f64 / wall_s } else { 0.0 };
        m.insert(
            "requests_per_wall_s".into(),
            json!(per_s(self.count.requests)),
        );
        m.insert("events_per_wall_s".into(), json!(per_s(self.events)));
        let col = |f: &dyn Fn(&DiskMetrics) -> Value| -> Value {
            Value::Array(self.disks.iter().map(f).collect())
        };
        m.insert("disk_ops".into(), col(&|d| json!(d.ops)));
        m.insert("disk_util".into(), col(&|d| json!(d.utilization)));
        m.insert("disk_queue_mean".into(), col(&|d| json!(d.queue_mean)));
        m.insert("disk_queue_max".into(), col(&|d| json!(d.queue_max)));
        m.insert(
            "disk_seek_cylinders_mean".into(),
            col(&|d| json!(d.seek_cylinders_mean)),
        );
        m.insert("disk_choices_mean".into(), col(&|d| json!(d.choices_mean)));
        m.insert("disk_buffer_hits".into(), col(&|d| json!(d.buffer_hits)));
        let busiest = self
            .disks
            .iter()
            .map(|d| d.utilization)
            .fold(0.0f64, f64::max);
        m.insert("disk_util_max".into(), json!(busiest));
        m.insert(
            "failures".into(),
            Value::Array(
                self.failures
                    .iter()
                    .map(|&(t, d)| json!({"at_s": t as f64 / 1e9, "disk": d}))
                    .collect(),
            ),
        );
        if let Some(r) = &self.rebuild {
            r.put(m);
        }
        m.insert("series_truncated".into(), json!(self.series.truncated));
        let mut series = self.series.to_json();
        if let Some(wc) = &self.write_cache {
            wc.put(m);
            wc.put_series(&mut series);
        }
        m.insert("series".into(), series);
        m.insert(
            "ramp".into(),
            Value::Array(
                self.ramp
                    .iter()
                    .map(|p| {
                        json!({
                            "target_iops": p.target_iops,
                            "offered_iops": p.offered_iops,
                            "iops": p.iops,
                            "mean_ms": p.mean_ms,
                            "p99_ms": p.p99_ms,
                            "saturated": p.saturated,
                        })
                    })
                    .collect(),
            ),
        );
        v
    }
}
