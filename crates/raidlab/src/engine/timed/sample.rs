//! Time series and ramp accounting of a timed run: closes an interval every
//! `run.interval_s` of simulated time, and attributes completions to ramp levels.

use super::arrivals::Level;
use crate::disk::{Device, DeviceStats};
use crate::metrics::{Latency, RampPoint, Series, SERIES_ROWS_MAX};

/// Per-level accumulators of a ramp.
#[derive(Debug, Default)]
struct LevelStats {
    /// Requests that arrived in the measured window.
    arrived: u64,
    /// Requests completed (whenever they arrived) inside the measured window.
    completed_in_window: u64,
    /// Response times of the requests that arrived in the window.
    latency: Latency,
    saturated: bool,
}

#[derive(Debug)]
pub struct Sampler {
    interval_ns: u64,
    next_ns: u64,
    /// Start of the open interval.
    from_ns: u64,
    completed: u64,
    latency_sum_ns: u128,
    last: Vec<DeviceStats>,
    levels: Vec<(f64, Level)>,
    level_stats: Vec<LevelStats>,
    /// Rebuild progress (0..1) reported in each row; `None` without `[rebuild]`.
    pub rebuild_progress: Option<f64>,
}

impl Sampler {
    pub fn new(interval_ns: u64, disks: usize) -> Sampler {
        debug_assert!(interval_ns > 0);
        Sampler {
            interval_ns,
            next_ns: interval_ns,
            from_ns: 0,
            completed: 0,
            latency_sum_ns: 0,
            last: vec![DeviceStats::default(); disks],
            levels: Vec::new(),
            level_stats: Vec::new(),
            rebuild_progress: None,
        }
    }

    pub fn set_levels(&mut self, levels: Vec<(f64, Level)>) {
        self.level_stats = levels.iter().map(|_| LevelStats::default()).collect();
        self.levels = levels;
    }

    /// The ramp level whose measured window contains `now`, if any.
    fn measured_level(&self, now: u64) -> Option<usize> {
        self.levels
            .iter()
            .position(|(_, lv)| lv.measure_ns <= now && now < lv.end_ns)
    }

    /// The ramp level whose measured window contains `now`, if any; counts the arrival.
    pub fn level_of(&mut self, now: u64) -> Option<u32> {
        let i = self.measured_level(now)?;
        self.level_stats[i].arrived += 1;
        Some(i as u32)
    }

    /// Whether ramp level `i` exists and is over at `now`.
    pub fn level_over(&self, i: usize, now: u64) -> bool {
        self.levels.get(i).is_some_and(|(_, lv)| now >= lv.end_ns)
    }

    /// Whether ramp level `i` (over) served less than 95% of what arrived in its measured
    /// window: the ramp then stops, since higher levels would only grow the queue.
    pub fn fell_behind(&self, i: usize) -> bool {
        self.level_stats.get(i).is_some_and(|st| {
            st.saturated || (st.completed_in_window as f64) < 0.95 * st.arrived as f64
        })
    }

    /// Mark the level running at `now` saturated.
    pub fn saturate(&mut self, now: u64) {
        if let Some(i) = self
            .levels
            .iter()
            .position(|(_, lv)| lv.start_ns <= now && now < lv.end_ns)
        {
            self.level_stats[i].saturated = true;
        }
    }

    /// A request completed at `now` after `latency_ns`; `level` is where it arrived.
    pub fn completed(&mut self, now: u64, latency_ns: u64, level: Option<u32>) {
        self.completed += 1;
        self.latency_sum_ns += u128::from(latency_ns);
        if let Some(l) = level {
            self.level_stats[l as usize].latency.record(latency_ns);
        }
        if let Some(i) = self.measured_level(now) {
            self.level_stats[i].completed_in_window += 1;
        }
    }

    /// Close every interval that ends at or before `t`.
    pub fn advance(&mut self, t: u64, devices: &mut [Device], outstanding: u64, out: &mut Series) {
        while self.next_ns <= t {
            let end = self.next_ns;
            self.row(end, devices, outstanding, out);
            self.next_ns = end.saturating_add(self.interval_ns);
        }
    }

    /// Close the last, partial interval at the end of the run.
    pub fn finish(&mut self, end: u64, devices: &mut [Device], outstanding: u64, out: &mut Series) {
        self.advance(end, devices, outstanding, out);
        if end > self.from_ns {
            self.row(end, devices, outstanding, out);
        }
    }

    fn row(&mut self, end: u64, devices: &mut [Device], outstanding: u64, out: &mut Series) {
        let span_ns = (end - self.from_ns).max(1) as f64;
        if out.t_s.len() >= SERIES_ROWS_MAX {
            out.truncated = true;
        } else {
            if out.util.is_empty() {
                out.util = vec![Vec::new(); devices.len()];
                out.queue = vec![Vec::new(); devices.len()];
            }
            out.t_s.push(end as f64 / 1e9);
            out.iops.push(self.completed as f64 / (span_ns / 1e9));
            out.mean_ms.push(if self.completed == 0 {
                0.0
            } else {
                self.latency_sum_ns as f64 / self.completed as f64 / 1e6
            });
            out.outstanding.push(outstanding);
            if let Some(p) = self.rebuild_progress {
                out.rebuild_progress.push(p);
            }
        }
        for (d, dev) in devices.iter_mut().enumerate() {
            let st = dev.stats(end);
            let last = &self.last[d];
            if !out.truncated {
                out.util[d].push((st.busy_ns - last.busy_ns) as f64 / span_ns);
                out.queue[d].push((st.queue_area - last.queue_area) as f64 / span_ns);
            }
            self.last[d] = st;
        }
        self.from_ns = end;
        self.completed = 0;
        self.latency_sum_ns = 0;
    }

    /// One point per ramp level that ran. A level is saturated when it hit the in-flight
    /// bound or served less than 95% of what was offered in its window.
    pub fn ramp_points(&self) -> Vec<crate::metrics::RampPoint> {
        let mut points = Vec::new();
        for ((target, lv), st) in self.levels.iter().zip(&self.level_stats) {
            let secs = (lv.end_ns - lv.measure_ns).max(1) as f64 / 1e9;
            let offered = st.arrived as f64 / secs;
            let iops = st.completed_in_window as f64 / secs;
            let saturated = self.fell_behind(points.len());
            points.push(RampPoint {
                target_iops: *target,
                offered_iops: offered,
                iops,
                mean_ms: st.latency.mean_ns() / 1e6,
                p99_ms: st.latency.quantile_ns(0.99) as f64 / 1e6,
                saturated,
            });
            if saturated {
                break;
            }
        }
        points
    }
}
