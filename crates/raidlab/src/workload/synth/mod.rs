//! Seeded synthetic generators. Every generator is a pure function of its spec: the same seed
//! gives the same requests bit for bit on every platform, because randomness comes from
//! ChaCha8 and the only transcendental functions used come from `libm` (a portable Rust
//! implementation, not the platform's C library).

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Keep, RequestSource, SynthSpec};
use crate::error::{Error, Result};

pub mod bursty;
pub mod hotspots;
pub mod locality;
pub mod permute;
pub mod spc1;
pub mod uniform;
pub mod websearch;
pub mod zipf;

pub use bursty::{Bursty, BurstySpec, Distance};
pub use hotspots::{Hotspots, HotspotsSpec};
pub use permute::Scatter;
pub use spc1::Spc1;
pub use uniform::Uniform;
pub use websearch::WebSearch;
pub use zipf::{Zipf, ZipfSampler};

/// Build the generator `spec` describes, with the `ops` filter and limit applied.
pub(crate) fn open(spec: &SynthSpec, keep: Keep) -> Result<Box<dyn RequestSource>> {
    Ok(match *spec {
        SynthSpec::Zipf {
            keys,
            alpha,
            requests,
            seed,
        } => keep.apply(Zipf::new(keys, alpha, requests, seed)?),
        SynthSpec::Uniform {
            keys,
            requests,
            seed,
        } => keep.apply(Uniform::new(keys, requests, seed)?),
        SynthSpec::WebSearch {
            space_bytes,
            requests,
            mean_interarrival_ns,
            seed,
            cluster_bytes,
        } => keep.apply(
            WebSearch::new(space_bytes, requests, mean_interarrival_ns, seed)?
                .with_cluster(cluster_bytes)?,
        ),
        SynthSpec::Bursty(ref b) => keep.apply(Bursty::new(b.clone())?),
        SynthSpec::Hotspots(ref h) => keep.apply(Hotspots::new(h.clone())?),
        SynthSpec::Spc1 {
            space_bytes,
            partial,
            iops,
            bsu_iops,
            requests,
            seed,
        } => keep.apply(Spc1::new(
            space_bytes,
            partial,
            iops,
            bsu_iops,
            requests,
            seed,
        )?),
    })
}

/// The generator's random stream. Separate seeds for separate purposes are derived from
/// the user's seed by ChaCha's stream selector, so adding a draw of one kind never shifts
/// another.
pub(crate) fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// A uniform double in [0, 1) with 53 random bits.
#[inline]
pub(crate) fn unit_f64(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// An exponential draw of mean `mean` (any unit).
#[inline]
pub(crate) fn exp_draw(rng: &mut ChaCha8Rng, mean: f64) -> f64 {
    -mean * libm::log1p(-unit_f64(rng))
}

/// Arrival times of a Poisson process: the first request at 0, then exponential gaps with
/// mean `mean_ns`, rounded to whole nanoseconds.
#[derive(Debug, Clone)]
pub(crate) struct PoissonClock {
    mean_ns: f64,
    time_ns: u64,
    first: bool,
}

impl PoissonClock {
    pub(crate) fn new(mean_ns: f64) -> PoissonClock {
        PoissonClock {
            mean_ns,
            time_ns: 0,
            first: true,
        }
    }

    /// The next arrival time (one draw from `rng` after the first).
    #[inline]
    pub(crate) fn next(&mut self, rng: &mut ChaCha8Rng) -> u64 {
        if self.first {
            self.first = false;
        } else {
            let gap = exp_draw(rng, self.mean_ns);
            self.time_ns = self.time_ns.saturating_add(libm::round(gap) as u64);
        }
        self.time_ns
    }
}

/// A uniform integer in [0, n), unbiased (Lemire's multiply-and-reject). `n > 0`.
#[inline]
pub(crate) fn below(rng: &mut ChaCha8Rng, n: u64) -> u64 {
    debug_assert!(n > 0);
    // 2^64 mod n; 0 for a power of two (WebSearch's slots per chunk), without the division.
    let threshold = if n.is_power_of_two() {
        0
    } else {
        n.wrapping_neg() % n
    };
    loop {
        let m = u128::from(rng.next_u64()) * u128::from(n);
        if (m as u64) >= threshold {
            return (m >> 64) as u64;
        }
    }
}

/// A config error for the synthetic generator's `key`.
pub(crate) fn bad(key: &str, msg: impl Into<String>) -> Error {
    Error::config(format!("workload.synthetic.{key}"), msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_is_in_range_and_covers_it() {
        let mut r = rng(1, 0);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            seen[below(&mut r, 7) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
        // Powers of two skip the threshold's division; the draws are those of the general rule.
        for n in [1u64, 2, 4, 1 << 40] {
            let (mut a, mut b) = (rng(9, n), rng(9, n));
            for _ in 0..100 {
                let general = loop {
                    let m = u128::from(b.next_u64()) * u128::from(n);
                    if (m as u64) >= n.wrapping_neg() % n {
                        break (m >> 64) as u64;
                    }
                };
                assert_eq!(below(&mut a, n), general);
            }
        }
        let u = unit_f64(&mut r);
        assert!((0.0..1.0).contains(&u));
    }
}
