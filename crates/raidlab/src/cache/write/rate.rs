//! Destage rates: how many destages may be in flight, given the cache's occupancy.
//!
//! - **Linear threshold** (WOW, STOW): none below the low threshold `L`, the maximum at or
//!   above the high threshold `H`, and in between a number growing linearly with occupancy:
//!   `max(1, ceil(max x (occupied - L) / (H - L)))`, so destaging starts at `L` itself.
//! - **Fixed threshold**: none below the threshold, the maximum at or above it.
//! - **As fast as possible**: the maximum whenever anything is dirty.
//!
//! Thresholds are pages (the config gives percentages of the capacity). Sans-IO: a pure
//! function of occupancy.

/// The rate as configured: thresholds in percent of the capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateSpec {
    Linear {
        high_pct: f64,
        low_pct: f64,
    },
    Fixed {
        threshold_pct: f64,
    },
    Asap,
    /// RAPID-Cache's water marks with idle destaging (`water.rs`).
    Rapid {
        high_pct: f64,
        low_pct: f64,
        idle: bool,
    },
}

impl RateSpec {
    pub const NAMES: &'static [&'static str] = &["linear", "fixed", "asap", "rapid"];
}

/// A destage rate over a cache of known capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    Linear {
        low: u64,
        high: u64,
        max: u32,
    },
    Fixed {
        threshold: u64,
        max: u32,
    },
    Asap {
        max: u32,
    },
    /// Water marks: the stateless part (at or above `high`); the cache keeps the hysteresis
    /// and idle state in a [`super::water::Water`].
    Rapid {
        low: u64,
        high: u64,
        max: u32,
    },
}

/// `pct` percent of `capacity` pages, rounded down.
fn pages(pct: f64, capacity: u64) -> u64 {
    ((pct / 100.0) * capacity as f64).floor() as u64
}

impl Rate {
    /// The rate of `spec` for `capacity` pages with at most `max` destages in flight
    /// (`max >= 1`; validated by the config).
    pub fn new(spec: RateSpec, capacity: u64, max: u32) -> Rate {
        debug_assert!(max >= 1);
        match spec {
            RateSpec::Linear { high_pct, low_pct } => {
                let low = pages(low_pct, capacity);
                // At least one page between the thresholds, so the slope is defined.
                let high = pages(high_pct, capacity).max(low + 1);
                Rate::Linear { low, high, max }
            }
            RateSpec::Fixed { threshold_pct } => Rate::Fixed {
                threshold: pages(threshold_pct, capacity),
                max,
            },
            RateSpec::Asap => Rate::Asap { max },
            RateSpec::Rapid {
                high_pct, low_pct, ..
            } => {
                let low = pages(low_pct, capacity);
                let high = pages(high_pct, capacity).max(low + 1);
                Rate::Rapid { low, high, max }
            }
        }
    }

    /// Destages allowed in flight at `occupied` pages.
    #[inline]
    pub fn allowed(&self, occupied: u64) -> u32 {
        match *self {
            Rate::Linear { low, high, max } => {
                if occupied < low {
                    0
                } else if occupied >= high {
                    max
                } else {
                    let num = u64::from(max) * (occupied - low);
                    num.div_ceil(high - low).max(1) as u32
                }
            }
            Rate::Fixed { threshold, max } => {
                if occupied >= threshold {
                    max
                } else {
                    0
                }
            }
            Rate::Asap { max } => {
                if occupied > 0 {
                    max
                } else {
                    0
                }
            }
            Rate::Rapid { high, max, .. } => {
                if occupied >= high {
                    max
                } else {
                    0
                }
            }
        }
    }

    pub fn max(&self) -> u32 {
        match *self {
            Rate::Linear { max, .. }
            | Rate::Fixed { max, .. }
            | Rate::Asap { max }
            | Rate::Rapid { max, .. } => max,
        }
    }

    /// Occupancy at which destaging starts (STOW initialises DesiredSeqQSize there); `None`
    /// when it starts with the first dirty page.
    pub fn low(&self) -> Option<u64> {
        match *self {
            Rate::Linear { low, .. } | Rate::Rapid { low, .. } => Some(low),
            Rate::Fixed { threshold, .. } => Some(threshold),
            Rate::Asap { .. } => None,
        }
    }

    /// The occupancy band the rate regulates in (STOW bounds its hysteresis by 1/8 of it):
    /// `H - L` for the linear rate, capacity minus the threshold for the fixed one, the
    /// whole capacity otherwise.
    pub fn band(&self, capacity: u64) -> u64 {
        match *self {
            Rate::Linear { low, high, .. } | Rate::Rapid { low, high, .. } => high - low,
            Rate::Fixed { threshold, .. } => capacity.saturating_sub(threshold),
            Rate::Asap { .. } => capacity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_threshold_worked_example() {
        // 1000 pages, 90/80: L = 800, H = 900, 20 in flight at most.
        let r = Rate::new(
            RateSpec::Linear {
                high_pct: 90.0,
                low_pct: 80.0,
            },
            1000,
            20,
        );
        assert_eq!(
            r,
            Rate::Linear {
                low: 800,
                high: 900,
                max: 20
            }
        );
        let got: Vec<u32> = [0, 799, 800, 801, 805, 850, 899, 900, 1000]
            .iter()
            .map(|&o| r.allowed(o))
            .collect();
        // 801: ceil(20 x 1 / 100) = 1; 805: 1; 850: 10; 899: ceil(19.8) = 20.
        assert_eq!(got, vec![0, 0, 1, 1, 1, 10, 20, 20, 20]);
        assert_eq!(r.band(1000), 100);
        assert_eq!(r.low(), Some(800));
    }

    #[test]
    fn fixed_and_asap() {
        let f = Rate::new(
            RateSpec::Fixed {
                threshold_pct: 60.0,
            },
            1000,
            8,
        );
        assert_eq!((f.allowed(599), f.allowed(600)), (0, 8));
        assert_eq!(f.band(1000), 400);
        let a = Rate::new(RateSpec::Asap, 1000, 3);
        assert_eq!((a.allowed(0), a.allowed(1)), (0, 3));
        assert_eq!(a.low(), None);
    }

    #[test]
    fn allowed_is_monotone_and_bounded() {
        let r = Rate::new(
            RateSpec::Linear {
                high_pct: 70.0,
                low_pct: 40.0,
            },
            32768,
            20,
        );
        let mut last = 0;
        for o in 0..=32768 {
            let a = r.allowed(o);
            assert!(a >= last && a <= 20);
            last = a;
        }
        assert_eq!(last, 20);
    }
}
