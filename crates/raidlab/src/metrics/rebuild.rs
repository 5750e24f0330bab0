//! Metrics of the rebuilds of a timed run: when each started and ended, the I/O it did, user
//! response times before, during and after, and the MTTDL the measured window implies.

use serde_json::{json, Map, Value};

use super::latency::Latency;
use crate::array::Level;
use crate::reliability::mttdl_hours;

/// One rebuild.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RebuildRecord {
    pub disk: u32,
    /// Index among the hot spares.
    pub spare: u32,
    pub units: u64,
    pub unit_bytes: u64,
    /// When the disk failed (before the run for `array.failed`: 0).
    pub failed_ns: u64,
    pub start_ns: u64,
    /// `None` when the run ended first.
    pub end_ns: Option<u64>,
    /// Units rebuilt (by the executor or piggybacked).
    pub rebuilt: u64,
    pub reads: u64,
    pub writes: u64,
    pub piggybacked: u64,
    /// User reads served by the replacement (redirection).
    pub redirected_reads: u64,
    /// PRO: scheduling decisions, those that went to a hot zone, zones created.
    pub decisions: u64,
    pub hot_decisions: u64,
    pub zones_created: u64,
    /// The cache and the disks over the rebuild window alone (start to end).
    pub window: WindowCounts,
}

/// Counters over one rebuild's window: the cache's lookups, hits and the disk blocks its
/// misses read, and each device's busy time. Snapshots at the start, differences at the end.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowCounts {
    pub lookups: u64,
    pub hits: u64,
    pub miss_disk_blocks: u64,
    /// Busy time of each device (members, then spares).
    pub busy_ns: Vec<u64>,
}

impl WindowCounts {
    /// `end - start`, counter by counter (`start` taken at the rebuild's start).
    pub fn since(end: &WindowCounts, start: &WindowCounts) -> WindowCounts {
        WindowCounts {
            lookups: end.lookups - start.lookups,
            hits: end.hits - start.hits,
            miss_disk_blocks: end.miss_disk_blocks - start.miss_disk_blocks,
            busy_ns: end
                .busy_ns
                .iter()
                .zip(&start.busy_ns)
                .map(|(e, s)| e - s)
                .collect(),
        }
    }
}

impl RebuildRecord {
    /// The window's hit ratio, RGR and per-device utilisation (`span_ns`: its length).
    fn window_json(&self, span_ns: u64) -> Value {
        let w = &self.window;
        let per = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        json!({
            "lookups": w.lookups,
            "hit_ratio": per(w.hits, w.lookups),
            "rgr": per(w.miss_disk_blocks, w.lookups),
            "utilization": w.busy_ns.iter().map(|&b| per(b, span_ns.max(1))).collect::<Vec<_>>(),
        })
    }

    fn json(&self) -> Value {
        let s = |ns: u64| ns as f64 / 1e9;
        json!({
            "disk": self.disk,
            "spare": self.spare,
            "units": self.units,
            "rebuilt": self.rebuilt,
            "done": self.end_ns.is_some(),
            "failed_s": s(self.failed_ns),
            "start_s": s(self.start_ns),
            "end_s": self.end_ns.map(s),
            "duration_s": self.end_ns.map(|e| s(e - self.start_ns)),
            "window_s": self.end_ns.map(|e| s(e - self.failed_ns)),
            "reads": self.reads,
            "writes": self.writes,
            "piggybacked": self.piggybacked,
            "redirected_reads": self.redirected_reads,
            "pro_decisions": self.decisions,
            "pro_hot_decisions": self.hot_decisions,
            "pro_zones_created": self.zones_created,
            "window": self.end_ns.map(|e| self.window_json(e - self.start_ns)),
        })
    }
}

/// The rebuilds of a run and the user response times around them.
#[derive(Debug, Clone, Default)]
pub struct RebuildMetrics {
    pub level: Option<Level>,
    pub disks: u32,
    pub mttf_hours: f64,
    pub records: Vec<RebuildRecord>,
    /// Requests that arrived before the first rebuild started.
    pub before: Latency,
    /// Requests that arrived while a rebuild ran.
    pub during: Latency,
    /// Requests that arrived after the last rebuild ended.
    pub after: Latency,
}

impl RebuildMetrics {
    /// `window_hit_ratio`, `window_rgr`, `window_util_mean` and `window_util_max` (over the
    /// members other than the rebuilt one) of a finished rebuild; nothing for an unfinished one.
    fn put_window(&self, r: &RebuildRecord, m: &mut Map<String, Value>) {
        let Some(end) = r.end_ns else {
            return;
        };
        let span = (end - r.start_ns).max(1) as f64;
        let w = &r.window;
        let per = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let util: Vec<f64> = w
            .busy_ns
            .iter()
            .take(self.disks as usize)
            .enumerate()
            .filter(|&(d, _)| d != r.disk as usize)
            .map(|(_, &b)| b as f64 / span)
            .collect();
        let mean = if util.is_empty() {
            0.0
        } else {
            util.iter().sum::<f64>() / util.len() as f64
        };
        m.insert("window_hit_ratio".into(), json!(per(w.hits, w.lookups)));
        m.insert(
            "window_rgr".into(),
            json!(per(w.miss_disk_blocks, w.lookups)),
        );
        m.insert("window_util_mean".into(), json!(mean));
        m.insert(
            "window_util_max".into(),
            json!(util.iter().copied().fold(0.0, f64::max)),
        );
    }

    /// Flat `rebuild_*` keys of the first rebuild, `before/during/after_latency_*`, the MTTDL
    /// estimate, and every rebuild under `rebuilds`.
    pub fn put(&self, m: &mut Map<String, Value>) {
        self.before.put("before_latency", m);
        self.during.put("during_latency", m);
        self.after.put("after_latency", m);
        m.insert(
            "rebuilds".into(),
            Value::Array(self.records.iter().map(RebuildRecord::json).collect()),
        );
        let Some(first) = self.records.first() else {
            m.insert("rebuild_done".into(), json!(false));
            return;
        };
        if let Value::Object(rec) = first.json() {
            for (k, v) in rec {
                let key = match k.as_str() {
                    "done" => "rebuild_done".to_string(),
                    "duration_s" => "rebuild_s".to_string(),
                    // The window's numbers as flat keys (the mean utilisation of the members
                    // that survive, the busiest member), the per-device list under `rebuilds`.
                    "window" => {
                        self.put_window(first, m);
                        continue;
                    }
                    other => format!("rebuild_{other}"),
                };
                m.insert(key, v);
            }
        }
        let (mib_s, mttdl) = match first.end_ns {
            Some(end) => {
                let secs = (end - first.start_ns).max(1) as f64 / 1e9;
                let mib = (first.units * first.unit_bytes) as f64 / 1048576.0;
                let window_h = (end - first.failed_ns) as f64 / 3.6e12;
                let mttdl = self
                    .level
                    .map(|l| mttdl_hours(l, self.disks, self.mttf_hours, window_h));
                (Some(mib / secs), mttdl)
            }
            None => (None, None),
        };
        m.insert("rebuild_mib_s".into(), json!(mib_s));
        m.insert("mttdl_hours".into(), json!(mttdl));
    }
}
