//! Response-time distributions: an HdrHistogram (3 significant digits, 1 ns to one day) plus
//! the exact count, sum and maximum, so the mean and max are exact and the percentiles are
//! within 0.1%.

use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

/// The largest latency the histogram resolves; larger values are recorded as this (and the
/// exact maximum is still kept).
const LATENCY_NS_MAX: u64 = 86_400_000_000_000;

/// One latency distribution.
#[derive(Debug, Clone)]
pub struct Latency {
    hist: Histogram<u64>,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            // Bounds are constants within the crate's documented range, so this cannot fail.
            hist: Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3)
                .expect("1 <= low, high >= 2 * low, sigfig 3 are valid bounds"),
            count: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }
}

impl Latency {
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Add every value `other` recorded, as if each had been recorded here too (the counts
    /// add, so every statistic equals that of one distribution fed both streams).
    pub fn merge(&mut self, other: &Latency) {
        self.hist
            .add(&other.hist)
            .expect("latency histograms share their bounds");
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact mean in nanoseconds (0 when empty).
    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }

    /// The value at quantile `q` in nanoseconds (0 when empty).
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.hist.value_at_quantile(q).min(self.max_ns)
        }
    }

    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// `{prefix}_count`, `{prefix}_mean_ms`, `_p50_ms`, `_p95_ms`, `_p99_ms`, `_max_ms` into `m`.
    pub fn put(&self, prefix: &str, m: &mut Map<String, Value>) {
        let ms = |ns: f64| json!(ns / 1e6);
        m.insert(format!("{prefix}_count"), json!(self.count));
        m.insert(format!("{prefix}_mean_ms"), ms(self.mean_ns()));
        for (name, q) in [("p50", 0.50), ("p95", 0.95), ("p99", 0.99)] {
            m.insert(
                format!("{prefix}_{name}_ms"),
                ms(self.quantile_ns(q) as f64),
            );
        }
        m.insert(format!("{prefix}_max_ms"), ms(self.max_ns as f64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_mean_and_close_percentiles() {
        let mut l = Latency::default();
        for ms in 1..=100u64 {
            l.record(ms * 1_000_000);
        }
        assert_eq!(l.count(), 100);
        assert_eq!(l.mean_ns(), 50.5e6);
        assert_eq!(l.max_ns(), 100_000_000);
        let p99 = l.quantile_ns(0.99) as f64;
        assert!((p99 - 99e6).abs() / 99e6 < 1e-3, "{p99}");
        let p50 = l.quantile_ns(0.5) as f64;
        assert!((p50 - 50e6).abs() / 50e6 < 1e-3, "{p50}");
        assert_eq!(Latency::default().quantile_ns(0.5), 0);
    }

    #[test]
    fn merge_equals_recording_both_streams() {
        let (mut all, mut a, mut b) = (Latency::default(), Latency::default(), Latency::default());
        for i in 0..5000u64 {
            let ns = (i * 7919 % 100_003) * 1_237 + i;
            all.record(ns);
            if i % 3 == 0 {
                a.record(ns);
            } else {
                b.record(ns);
            }
        }
        a.merge(&b);
        assert_eq!((a.count(), a.max_ns()), (all.count(), all.max_ns()));
        assert_eq!(a.mean_ns(), all.mean_ns());
        for q in [0.0, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
            assert_eq!(a.quantile_ns(q), all.quantile_ns(q), "q {q}");
        }
    }
}
