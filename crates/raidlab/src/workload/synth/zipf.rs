//! Zipf(alpha) over `keys` keys: rank `k` (1-based) is drawn with probability proportional to
//! `k^-alpha`, then scattered over `[0, keys)` by a seeded [`Scatter`].
//!
//! Sampling is rejection-inversion (W. Hörmann and G. Derflinger, "Rejection-inversion to
//! generate variates from monotone discrete distributions", 1996): invert the integral of a
//! continuous hat function `h(x) = x^-alpha`, round to the nearest rank, and accept with a
//! cheap test that succeeds almost always. Constant time per sample, no tables, any `alpha
//! >= 0` (0 is uniform) and any number of keys up to `u64::MAX`.

use rand_chacha::ChaCha8Rng;

use super::{bad, rng, unit_f64, Scatter};
use crate::error::Result;
use crate::workload::{Addressing, Op, Request, RequestSource};

/// The rank sampler alone (useful to other generators and to tests).
#[derive(Debug, Clone, PartialEq)]
pub struct ZipfSampler {
    n: u64,
    alpha: f64,
    /// `H(1.5) - 1`: the integral's lower end, where rank 1's extra mass is added.
    h_x1: f64,
    /// `H(n + 0.5)`: the integral's upper end.
    h_n: f64,
    /// Squeeze constant: a rounded `x` within this distance of `k` is accepted at once.
    squeeze: f64,
}

impl ZipfSampler {
    /// A sampler of ranks `1..=n` with exponent `alpha`. Errors name the config key.
    pub fn new(n: u64, alpha: f64) -> Result<ZipfSampler> {
        if n == 0 {
            return Err(bad("keys", "expected at least 1 key, got 0"));
        }
        if !(alpha.is_finite() && alpha >= 0.0) {
            return Err(bad(
                "alpha",
                format!("expected a finite alpha >= 0, got {alpha}"),
            ));
        }
        let mut s = ZipfSampler {
            n,
            alpha,
            h_x1: 0.0,
            h_n: 0.0,
            squeeze: 0.0,
        };
        s.h_x1 = s.big_h(1.5) - 1.0;
        s.h_n = s.big_h(n as f64 + 0.5);
        s.squeeze = 2.0 - s.big_h_inv(s.big_h(2.5) - s.h(2.0));
        Ok(s)
    }

    /// The hat function `x^-alpha`.
    #[inline]
    fn h(&self, x: f64) -> f64 {
        libm::exp(-self.alpha * libm::log(x))
    }

    /// Its integral `(x^(1-alpha) - 1) / (1 - alpha)` (`ln x` at `alpha = 1`), written so it
    /// stays accurate as alpha approaches 1.
    #[inline]
    fn big_h(&self, x: f64) -> f64 {
        let log_x = libm::log(x);
        expm1_over_x((1.0 - self.alpha) * log_x) * log_x
    }

    /// The inverse of [`Self::big_h`].
    #[inline]
    fn big_h_inv(&self, y: f64) -> f64 {
        // Clamp keeps log1p's argument above -1 when rounding pushes y past the domain.
        let t = (y * (1.0 - self.alpha)).max(-1.0);
        libm::exp(log1p_over_x(t) * y)
    }

    /// One rank in `1..=n`.
    #[inline]
    pub fn sample(&self, rng: &mut ChaCha8Rng) -> u64 {
        loop {
            let u = self.h_n + unit_f64(rng) * (self.h_x1 - self.h_n);
            let x = self.big_h_inv(u);
            // `as` saturates (and maps NaN to 0), so the clamp below always yields a rank.
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            let kf = k as f64;
            if kf - x <= self.squeeze || u >= self.big_h(kf + 0.5) - self.h(kf) {
                debug_assert!((1..=self.n).contains(&k));
                return k;
            }
        }
    }

    /// Number of ranks.
    pub fn n(&self) -> u64 {
        self.n
    }
}

/// `expm1(x) / x`, continuous at 0.
#[inline]
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        libm::expm1(x) / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

/// `log1p(x) / x`, continuous at 0.
#[inline]
fn log1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        libm::log1p(x) / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// The Zipf generator: keyed reads, one block each (`len = 0`), no time.
pub struct Zipf {
    sampler: ZipfSampler,
    scatter: Scatter,
    rng: ChaCha8Rng,
    left: u64,
}

impl Zipf {
    pub fn new(keys: u64, alpha: f64, requests: u64, seed: u64) -> Result<Zipf> {
        Ok(Zipf {
            sampler: ZipfSampler::new(keys, alpha)?,
            scatter: Scatter::new(keys, seed),
            rng: rng(seed, 1),
            left: requests,
        })
    }
}

impl RequestSource for Zipf {
    #[inline]
    fn next_request(&mut self) -> Result<Option<Request>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let rank = self.sampler.sample(&mut self.rng);
        Ok(Some(Request {
            time_ns: 0,
            op: Op::Read,
            offset: self.scatter.apply(rank - 1),
            len: 0,
        }))
    }

    fn addressing(&self) -> Addressing {
        Addressing::Keys
    }

    fn label(&self) -> &str {
        "zipf"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exact Zipf probability of rank k over n ranks.
    fn pmf(n: u64, alpha: f64, k: u64) -> f64 {
        let norm: f64 = (1..=n).map(|i| (i as f64).powf(-alpha)).sum();
        (k as f64).powf(-alpha) / norm
    }

    #[test]
    fn top_ranks_match_theory() {
        for (n, alpha) in [(1000u64, 0.9), (50, 1.0), (10_000, 1.4), (20, 0.0)] {
            let s = ZipfSampler::new(n, alpha).unwrap();
            let mut r = rng(42, 1);
            let draws = 200_000u32;
            let mut counts = [0u32; 6];
            for _ in 0..draws {
                let k = s.sample(&mut r);
                assert!((1..=n).contains(&k));
                if let Some(c) = counts.get_mut(k as usize) {
                    *c += 1;
                }
            }
            for k in 1..=5u64 {
                let p = pmf(n, alpha, k);
                let got = f64::from(counts[k as usize]) / f64::from(draws);
                // Five standard deviations of a binomial proportion.
                let band = 5.0 * (p * (1.0 - p) / f64::from(draws)).sqrt();
                assert!(
                    (got - p).abs() <= band,
                    "n={n} a={alpha} k={k}: {got} vs {p}"
                );
            }
        }
    }

    #[test]
    fn bad_parameters_are_config_errors() {
        assert!(ZipfSampler::new(0, 1.0).is_err());
        let e = ZipfSampler::new(10, -1.0).unwrap_err();
        assert_eq!(e.kind(), "config");
        assert!(ZipfSampler::new(10, f64::NAN).is_err());
        // Extreme but valid parameters sample without trouble.
        let mut r = rng(1, 1);
        for (n, a) in [(u64::MAX, 0.5), (u64::MAX, 30.0), (1, 1.0), (2, 1e-12)] {
            let s = ZipfSampler::new(n, a).unwrap();
            for _ in 0..100 {
                assert!((1..=n).contains(&s.sample(&mut r)));
            }
        }
    }
}
