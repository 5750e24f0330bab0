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
}

impl RebuildRecord {
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
