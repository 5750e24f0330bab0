//! Curves of policies without the stack property (FIFO, LFU, CLOCK, 2Q, ARC, MQ, VDF, ...):
//! one policy instance per cache size, all fed in one pass over the stream.
//!
//! Unsampled, each instance is exactly the counting run at its size (same calls, same
//! logical clock), so the curve is exact at `sizes.len()` times the cost of one run.
//! Sampled, they are miniature simulations (Waldspurger, Park, Garthwaite and Ahmad, ATC'17):
//! each instance has `size * R` blocks and sees only the blocks whose spatial hash passes the
//! SHARDS threshold, so its miss ratio estimates the full cache's. Parameters counted in
//! requests (MQ's lifetime) are scaled by `R` too, since the mini-sim's clock counts sampled
//! lookups.

use super::shards::{limit_of, spatial_hash};
use super::stream::Sink;
use crate::cache::read::{self, Access, MissCost, PolicySpec, ReadPolicy};
use crate::error::Result;

/// One policy per size.
pub(crate) struct MiniSims<'a> {
    sims: Vec<Box<dyn ReadPolicy + Send>>,
    /// Sampled measured misses and their disk blocks, per size.
    pub(crate) misses: Vec<u64>,
    pub(crate) miss_cost: Vec<u64>,
    cost: &'a dyn MissCost,
    seed: u64,
    limit: u64,
    sampling: bool,
    now: u64,
    evicted: Vec<u64>,
    /// Measured lookups that were sampled.
    pub(crate) sampled: u64,
}

impl<'a> MiniSims<'a> {
    /// Instances of `spec` for `sizes` blocks, scaled to `rate` (`None`: full size, every
    /// block).
    pub(crate) fn new(
        spec: &PolicySpec,
        sizes: &[u64],
        cost: &'a dyn MissCost,
        seed: u64,
        rate: Option<f64>,
    ) -> Result<MiniSims<'a>> {
        let r = rate.unwrap_or(1.0);
        let spec = scaled(spec, r);
        let sims = sizes
            .iter()
            .map(|&s| read::build(&spec, ((s as f64 * r).round() as u64).max(1)))
            .collect::<Result<Vec<_>>>()?;
        Ok(MiniSims {
            sims,
            misses: vec![0; sizes.len()],
            miss_cost: vec![0; sizes.len()],
            cost,
            seed,
            limit: rate.map_or(u64::MAX, limit_of),
            sampling: rate.is_some(),
            now: 0,
            evicted: Vec::with_capacity(64),
            sampled: 0,
        })
    }

    /// Heap bytes of every instance's metadata.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.sims.iter().map(|s| s.metadata_bytes()).sum()
    }

    #[inline(always)]
    fn sampled_key(&self, key: u64) -> bool {
        !self.sampling || spatial_hash(key, self.seed) <= self.limit
    }
}

/// `spec` with its request-counted parameters scaled by `rate`.
fn scaled(spec: &PolicySpec, rate: f64) -> PolicySpec {
    match spec {
        PolicySpec::Mq {
            queues,
            lifetime,
            history_factor,
        } if rate < 1.0 => PolicySpec::Mq {
            queues: *queues,
            lifetime: ((*lifetime as f64 * rate).round() as u64).max(1),
            history_factor: *history_factor,
        },
        other => other.clone(),
    }
}

impl MiniSims<'_> {
    /// A lookup of a sampled `key` (every key, unsampled) by every instance. Kept out of
    /// line so the walk's loop holds only the hash and the compare.
    #[inline(never)]
    fn access(&mut self, key: u64, measured: bool) {
        let acc = Access {
            key,
            size: 1,
            now: self.now,
            cost: self.cost,
        };
        self.now += 1;
        let cost = if measured {
            self.sampled += 1;
            u64::from(self.cost.cost_of(key))
        } else {
            0
        };
        for (i, sim) in self.sims.iter_mut().enumerate() {
            if sim.get(&acc) {
                continue;
            }
            if measured {
                self.misses[i] += 1;
                self.miss_cost[i] += cost;
            }
            self.evicted.clear();
            sim.insert(&acc, &mut self.evicted);
        }
    }
}

impl Sink for MiniSims<'_> {
    #[inline(always)]
    fn lookup(&mut self, key: u64, measured: bool) -> Result<()> {
        if self.sampled_key(key) {
            self.access(key, measured);
        }
        Ok(())
    }

    #[inline]
    fn invalidate(&mut self, key: u64) {
        if self.sampled_key(key) {
            for sim in &mut self.sims {
                sim.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::read::UniformCost;

    /// FIFO of 2 and 3 blocks on a b c a d a b, by hand.
    #[test]
    fn fifo_worked_example() {
        let cost = UniformCost;
        let mut m = MiniSims::new(&PolicySpec::Fifo, &[2, 3], &cost, 0, None).unwrap();
        for k in [1, 2, 3, 1, 4, 1, 2] {
            m.lookup(k, true).unwrap();
        }
        // Size 2: a b | c evicts a | a misses, evicts b | d evicts c | a hits | b misses: 6.
        // Size 3: a b c | a hits | d evicts a | a misses, evicts b | b misses: 6.
        assert_eq!(m.misses, vec![6, 6]);
        assert_eq!(m.sampled, 7);
    }

    #[test]
    fn mq_lifetime_scales_with_the_rate() {
        let mq = PolicySpec::from_name("mq").unwrap();
        let PolicySpec::Mq { lifetime, .. } = scaled(&mq, 0.01) else {
            panic!("mq stays mq")
        };
        assert_eq!(lifetime, 100);
        assert_eq!(scaled(&mq, 1.0), mq);
    }
}
