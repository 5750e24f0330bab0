//! When the open-loop and ramp drivers issue their requests: trace timestamps (scaled) or a
//! seeded Poisson process, and the level windows of a ramp.

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::config::{Arrivals, Driver};
use crate::workload::synth::unit_f64;

/// One ramp level's time window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    pub start_ns: u64,
    /// End of the warm-up: requests arriving from here to `end_ns` are measured.
    pub measure_ns: u64,
    pub end_ns: u64,
}

/// Arrival times for the open-loop and ramp drivers.
#[derive(Debug)]
pub struct Schedule {
    kind: Kind,
    rng: ChaCha8Rng,
    /// The last arrival handed out; arrivals never go back in time.
    last_ns: u64,
}

#[derive(Debug)]
enum Kind {
    Trace {
        time_scale: f64,
    },
    Poisson {
        mean_gap_ns: f64,
    },
    Ramp {
        levels: Vec<(f64, Level)>,
        level: usize,
    },
}

impl Schedule {
    /// The schedule of `driver`, `None` for the closed loop (which has no arrival times).
    pub fn new(driver: &Driver, seed: u64) -> Option<Schedule> {
        let kind = match driver {
            Driver::Open {
                arrivals: Arrivals::Trace { time_scale },
            } => Kind::Trace {
                time_scale: *time_scale,
            },
            Driver::Open {
                arrivals: Arrivals::Poisson { iops },
            } => Kind::Poisson {
                mean_gap_ns: 1e9 / iops,
            },
            Driver::Closed { .. } => return None,
            Driver::Ramp {
                levels_iops,
                level_ns,
                warmup_ns,
            } => {
                let mut start_ns = 0u64;
                let levels = levels_iops
                    .iter()
                    .map(|&iops| {
                        let measure_ns = start_ns.saturating_add(*warmup_ns);
                        let end_ns = measure_ns.saturating_add(*level_ns);
                        let level = Level {
                            start_ns,
                            measure_ns,
                            end_ns,
                        };
                        start_ns = end_ns;
                        (iops, level)
                    })
                    .collect();
                Kind::Ramp { levels, level: 0 }
            }
        };
        Some(Schedule {
            kind,
            // A stream of its own (the seed's complement) so arrivals do not correlate with
            // a synthetic workload seeded with the same run seed.
            rng: ChaCha8Rng::seed_from_u64(!seed),
            last_ns: 0,
        })
    }

    /// The arrival time of the next request, whose own timestamp is `trace_ns`; `None` when
    /// the schedule is over (past the last ramp level).
    pub fn next(&mut self, trace_ns: u64) -> Option<u64> {
        let t = match &mut self.kind {
            Kind::Trace { time_scale } => {
                // A trace slightly out of time order is replayed in file order, never
                // backwards in time.
                let scaled = if *time_scale == 1.0 && trace_ns < 1 << f64::MANTISSA_DIGITS {
                    // Exact in f64, so scaling by 1 and rounding give it back unchanged.
                    trace_ns
                } else {
                    libm::round(trace_ns as f64 * *time_scale) as u64
                };
                scaled.max(self.last_ns)
            }
            Kind::Poisson { mean_gap_ns } => {
                let gap = -*mean_gap_ns * libm::log1p(-unit_f64(&mut self.rng));
                self.last_ns.saturating_add(libm::round(gap) as u64)
            }
            Kind::Ramp { levels, level } => loop {
                let (iops, lv) = levels.get(*level)?;
                let gap = -(1e9 / iops) * libm::log1p(-unit_f64(&mut self.rng));
                let from = self.last_ns.max(lv.start_ns);
                let t = from.saturating_add(libm::round(gap) as u64);
                if t < lv.end_ns {
                    break t;
                }
                // Exponential gaps are memoryless, so restarting the process at the next
                // level's start is exact.
                *level += 1;
                self.last_ns = lv.end_ns;
            },
        };
        self.last_ns = t;
        Some(t)
    }

    /// For a ramp, `Some(next arrival)` (`Some(None)` past the last level); `None` for the
    /// other drivers (which need the request's own time: use [`Schedule::next`]).
    pub fn next_ramp(&mut self) -> Option<Option<u64>> {
        match self.kind {
            Kind::Ramp { .. } => Some(self.next(0)),
            _ => None,
        }
    }

    /// The target IOPS of the ramp level the last arrival fell in (0 for other drivers).
    pub fn level_iops(&self) -> f64 {
        match &self.kind {
            Kind::Ramp { levels, level } => levels.get(*level).map_or(0.0, |l| l.0),
            _ => 0.0,
        }
    }

    /// The ramp's levels with their target IOPS (empty for other drivers).
    pub fn levels(&self) -> Vec<(f64, Level)> {
        match &self.kind {
            Kind::Ramp { levels, .. } => levels.clone(),
            _ => Vec::new(),
        }
    }

    /// Stop the ramp after the level running at `now_ns` (it saturated).
    pub fn stop_after(&mut self, now_ns: u64) {
        if let Kind::Ramp { levels, .. } = &mut self.kind {
            levels.retain(|(_, lv)| lv.start_ns <= now_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_rate_and_determinism() {
        let driver = Driver::Open {
            arrivals: Arrivals::Poisson { iops: 1000.0 },
        };
        let mut a = Schedule::new(&driver, 7).unwrap();
        let mut b = Schedule::new(&driver, 7).unwrap();
        let mut last = 0;
        for _ in 0..100_000 {
            last = a.next(0).unwrap();
            assert_eq!(Some(last), b.next(0));
        }
        // 100k arrivals at 1000/s take about 100 s (sd of the sum ~ 0.3 s).
        let secs = last as f64 / 1e9;
        assert!((secs - 100.0).abs() < 1.5, "{secs}");
    }

    #[test]
    fn trace_times_scale_and_never_go_back() {
        let driver = Driver::Open {
            arrivals: Arrivals::Trace { time_scale: 0.5 },
        };
        let mut s = Schedule::new(&driver, 1).unwrap();
        assert_eq!(s.next_ramp(), None);
        assert_eq!(s.level_iops(), 0.0);
        assert_eq!(s.next(1000), Some(500));
        assert_eq!(s.next(600), Some(500));
        assert_eq!(s.next(3001), Some(1501)); // 1500.5 rounds half away from zero
                                              // At scale 1 the trace's own times, also past where f64 is exact.
        let driver = Driver::Open {
            arrivals: Arrivals::Trace { time_scale: 1.0 },
        };
        let mut s = Schedule::new(&driver, 1).unwrap();
        for t in [0, 7, (1 << 53) - 1, 1 << 53, (1 << 53) + 1, (1 << 60) + 3] {
            let want = (libm::round(t as f64 * 1.0) as u64).max(s.last_ns);
            assert_eq!(s.next(t), Some(want));
        }
    }

    #[test]
    fn ramp_levels_and_end() {
        let driver = Driver::Ramp {
            levels_iops: vec![100.0, 1000.0],
            level_ns: 1_000_000_000,
            warmup_ns: 500_000_000,
        };
        let mut s = Schedule::new(&driver, 1).unwrap();
        let lv = s.levels();
        assert_eq!(lv[1].1.start_ns, 1_500_000_000);
        assert_eq!(lv[1].1.measure_ns, 2_000_000_000);
        assert_eq!(lv[1].1.end_ns, 3_000_000_000);
        let mut n = [0u32; 2];
        while let Some(Some(t)) = s.next_ramp() {
            n[usize::from(t >= 1_500_000_000)] += 1;
            // The level the arrival fell in, for the workload's load.
            let want = if t >= 1_500_000_000 { 1000.0 } else { 100.0 };
            assert_eq!(s.level_iops(), want);
        }
        assert_eq!(s.next_ramp(), Some(None));
        // ~150 and ~1500 arrivals.
        assert!((100..200).contains(&n[0]), "{n:?}");
        assert!((1350..1650).contains(&n[1]), "{n:?}");
    }
}
