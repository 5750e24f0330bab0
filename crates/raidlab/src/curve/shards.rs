//! LRU curves from stack distances: exact (every block), or SHARDS (Waldspurger, Park,
//! Garthwaite and Ahmad, FAST'15), which keeps only the blocks whose spatial hash falls
//! under a threshold and rescales their distances by the sampling rate.
//!
//! - Fixed rate: `hash(key) <= T` with `R = (T + 1) / 2^64`. The expected sample is `R * N`
//!   lookups; the standard adjustment puts the difference between that and the actual sample
//!   into the first histogram bucket (as hits), which makes the miss ratio
//!   `sampled misses / (R * N)`.
//! - Fixed size: at most `S_max` distinct keys. Sampling starts at rate 1; when a new key
//!   would pass `S_max`, the keys with the largest hashes leave the stack, the threshold drops
//!   to just below the largest hash evicted, and the histogram so far is rescaled by
//!   `R_new / R_old` so old and new samples weigh the same.
//!
//! Either way each sampled miss is charged the array's cost of its own block, so the
//! cost-weighted curve is sampled exactly like the plain one.

use std::collections::BinaryHeap;

use super::hist::Hist;
use super::stack::Stack;
use super::stream::Sink;
use crate::cache::read::MissCost;
use crate::error::Result;

/// 2^64 as a float: rates are thresholds over the hash space.
const HASH_SPACE: f64 = 18_446_744_073_709_551_616.0;

/// The spatial hash of a block: splitmix64's finaliser of the key mixed with the run's seed
/// (a full-avalanche 64-bit mix, so neighbouring blocks are sampled independently).
#[inline]
pub(crate) fn spatial_hash(key: u64, seed: u64) -> u64 {
    let mut z = (key ^ seed.rotate_left(32)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The largest hash kept at sampling rate `rate` in (0, 1].
pub(crate) fn limit_of(rate: f64) -> u64 {
    if rate >= 1.0 {
        u64::MAX
    } else {
        // `as` saturates; a rate this small keeps at least hash 0.
        ((rate * HASH_SPACE) as u64).saturating_sub(1)
    }
}

/// The sampling rate of hash limit `limit`.
pub(crate) fn rate_of(limit: u64) -> f64 {
    (limit as f64 + 1.0) / HASH_SPACE
}

/// An LRU curve built from one pass of stack distances.
pub(crate) struct StackCurve<'a> {
    stack: Stack,
    pub(crate) hist: Hist,
    cost: &'a dyn MissCost,
    seed: u64,
    /// Largest sampled hash; `u64::MAX` with `sampling` off is every block.
    limit: u64,
    sampling: bool,
    /// Fixed size: the bound and the sampled keys by hash (largest first).
    fixed: Option<(usize, BinaryHeap<(u64, u64)>)>,
    /// Measured lookups that were sampled.
    pub(crate) sampled: u64,
}

impl<'a> StackCurve<'a> {
    /// Every block (`rate` 1, no size bound), SHARDS at a fixed `rate`, or SHARDS with at
    /// most `max_keys` keys.
    pub(crate) fn new(
        sizes: &[u64],
        cost: &'a dyn MissCost,
        seed: u64,
        rate: Option<f64>,
        max_keys: Option<usize>,
    ) -> StackCurve<'a> {
        let limit = rate.map_or(u64::MAX, limit_of);
        StackCurve {
            stack: Stack::new(),
            hist: Hist::new(sizes, rate_of(limit)),
            cost,
            seed,
            limit,
            sampling: rate.is_some() || max_keys.is_some(),
            fixed: max_keys.map(|m| (m, BinaryHeap::with_capacity(m + 1))),
            sampled: 0,
        }
    }

    /// The sampling rate now (fixed size: the final one).
    pub(crate) fn rate(&self) -> f64 {
        rate_of(self.limit)
    }

    /// Heap bytes of the stack and the sample bound.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.stack.heap_bytes() + self.fixed.as_ref().map_or(0, |(_, h)| h.capacity() * 16)
    }

    /// `key` (hash `h`) was new to the sample: bound the sample, lowering the threshold.
    #[cold]
    fn admit(&mut self, h: u64, key: u64) {
        let Some((max, heap)) = self.fixed.as_mut() else {
            return;
        };
        heap.push((h, key));
        if heap.len() <= *max {
            return;
        }
        let old = rate_of(self.limit);
        // Invariant: the heap is over its bound, so it is not empty.
        let (top, _) = *heap.peek().expect("over the bound");
        self.limit = top.saturating_sub(1);
        while let Some(&(h, k)) = heap.peek() {
            if h <= self.limit {
                break;
            }
            heap.pop();
            self.stack.remove(k);
        }
        let new = rate_of(self.limit);
        self.hist.scale(new / old);
        self.hist.set_rate(new);
    }

    /// A lookup of `key` (hash `h`) that passed the sample (or every lookup, unsampled).
    /// Kept out of line so the walk's loop holds only the hash and the compare.
    #[inline(never)]
    fn access(&mut self, key: u64, h: u64, measured: bool) -> Result<()> {
        let depth = self.stack.access(key)?;
        if measured {
            self.sampled += 1;
            self.hist.record(depth, self.cost.cost_of(key));
        }
        if depth.is_none() && self.fixed.is_some() {
            self.admit(h, key);
        }
        Ok(())
    }
}

impl Sink for StackCurve<'_> {
    #[inline(always)]
    fn lookup(&mut self, key: u64, measured: bool) -> Result<()> {
        let mut h = 0;
        if self.sampling {
            h = spatial_hash(key, self.seed);
            if h > self.limit {
                return Ok(());
            }
        }
        self.access(key, h, measured)
    }

    fn touch(&self, keys: &[u64]) {
        // Unsampled only: a sampled walk looks up few of the keys, and hashing each twice
        // would cost more than the misses saved.
        if !self.sampling {
            self.stack.touch(keys);
        }
    }

    #[inline]
    fn invalidate(&mut self, key: u64) {
        if !self.sampling || spatial_hash(key, self.seed) <= self.limit {
            self.stack.invalidate(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::read::UniformCost;

    #[test]
    fn rates_and_limits_round_trip() {
        assert_eq!(limit_of(1.0), u64::MAX);
        assert_eq!(rate_of(u64::MAX), 1.0);
        assert_eq!(rate_of(limit_of(0.5)), 0.5);
        assert_eq!(rate_of(limit_of(0.25)), 0.25);
    }

    #[test]
    fn the_hash_samples_about_its_rate() {
        let limit = limit_of(0.01);
        let n = (0..1_000_000u64)
            .filter(|&k| spatial_hash(k, 7) <= limit)
            .count();
        // Binomial(1e6, 0.01): sd ~ 99.5; 5 sd.
        assert!((9_500..=10_500).contains(&n), "{n}");
    }

    #[test]
    fn fixed_size_keeps_the_bound_and_lowers_the_rate() {
        let cost = UniformCost;
        let mut c = StackCurve::new(&[10, 100], &cost, 1, None, Some(50));
        for k in 0..10_000u64 {
            c.lookup(k % 1000, true).unwrap();
        }
        assert!(c.stack.len() <= 50);
        // 1,000 keys into 50: the rate ends near 0.05.
        assert!((0.02..0.1).contains(&c.rate()), "{}", c.rate());
    }
}
