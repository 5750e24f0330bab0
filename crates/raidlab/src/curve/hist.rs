//! Stack-distance histograms binned by the curve's cache sizes, with each access's miss cost.
//!
//! An access at depth `d` hits every cache of at least `d` blocks, so it only needs to be
//! counted in the bin of the smallest size `>= d`; the hits of size `i` are then the sum of
//! bins `0..=i`. Keeping one bin per size (not one per distance) keeps the histogram in a few
//! cache lines whatever the footprint.
//!
//! Counts are `f64` so sampled histograms can be rescaled; every count of an exact curve is
//! an integer far below 2^53, so its sums are exact.

/// Per-size hit counts and hit costs of the measured accesses.
#[derive(Debug, Clone)]
pub(crate) struct Hist {
    /// Cache sizes in blocks, ascending.
    sizes: Vec<u64>,
    /// Each size in sampled depths: an access at sampled depth `d` hits size `i` when
    /// `d <= thresholds[i]`. The `d - 1` sampled blocks above the access stand for
    /// `(d - 1) / R` blocks, so its estimated depth is `1 + (d - 1) / R`, and it hits a cache
    /// of `s` blocks when `d <= 1 + (s - 1) R` (SHARDS's scaling of a distance that counts
    /// the blocks in between; rescaling the depth itself, `d / R`, would count the accessed
    /// block `1 / R` times). At `R = 1` the threshold is the size.
    thresholds: Vec<f64>,
    hits: Vec<f64>,
    hit_cost: Vec<f64>,
    /// Accesses and their summed miss cost (hits or not).
    pub(crate) accesses: f64,
    pub(crate) cost: f64,
}

impl Hist {
    pub(crate) fn new(sizes: &[u64], rate: f64) -> Hist {
        let mut h = Hist {
            sizes: sizes.to_vec(),
            thresholds: Vec::new(),
            hits: vec![0.0; sizes.len()],
            hit_cost: vec![0.0; sizes.len()],
            accesses: 0.0,
            cost: 0.0,
        };
        h.set_rate(rate);
        h
    }

    /// Distances from now on are sampled at `rate`.
    pub(crate) fn set_rate(&mut self, rate: f64) {
        self.thresholds.clear();
        self.thresholds
            .extend(self.sizes.iter().map(|&s| 1.0 + (s as f64 - 1.0) * rate));
    }

    /// One measured access at `depth` (`None`: cold) costing `cost` disk blocks on a miss.
    #[inline]
    pub(crate) fn record(&mut self, depth: Option<u64>, cost: u32) {
        let cost = f64::from(cost);
        self.accesses += 1.0;
        self.cost += cost;
        if let Some(d) = depth {
            let d = d as f64;
            let bin = self.thresholds.partition_point(|&t| t < d);
            if bin < self.hits.len() {
                self.hits[bin] += 1.0;
                self.hit_cost[bin] += cost;
            }
        }
    }

    /// Multiply every count by `factor` (fixed-size SHARDS lowering its rate).
    pub(crate) fn scale(&mut self, factor: f64) {
        for v in self.hits.iter_mut().chain(self.hit_cost.iter_mut()) {
            *v *= factor;
        }
        self.accesses *= factor;
        self.cost *= factor;
    }

    /// `(misses, miss cost)` of each size, in the histogram's units.
    pub(crate) fn misses(&self) -> Vec<(f64, f64)> {
        let mut hits = 0.0;
        let mut hit_cost = 0.0;
        self.hits
            .iter()
            .zip(&self.hit_cost)
            .map(|(h, c)| {
                hits += h;
                hit_cost += c;
                (self.accesses - hits, self.cost - hit_cost)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_and_prefix_sums() {
        let mut h = Hist::new(&[1, 2, 4], 1.0);
        // Depth 1 hits every size; 2 hits 2 and 4; 3 hits 4; 5 and cold hit none.
        for (d, c) in [
            (Some(1), 1),
            (Some(2), 3),
            (Some(3), 1),
            (Some(5), 3),
            (None, 3),
        ] {
            h.record(d, c);
        }
        assert_eq!(h.misses(), vec![(4.0, 10.0), (3.0, 7.0), (2.0, 6.0)]);
        h.scale(2.0);
        assert_eq!(h.misses()[2], (4.0, 12.0));
    }

    #[test]
    fn a_sampled_depth_is_rescaled() {
        // At rate 0.5 a sampled depth of 2 stands for 4: it hits size 4, not 2.
        let mut h = Hist::new(&[2, 4], 0.5);
        h.record(Some(2), 1);
        assert_eq!(h.misses(), vec![(1.0, 1.0), (0.0, 0.0)]);
    }

    #[test]
    fn a_sampled_depth_counts_the_blocks_between() {
        // At rate 0.01 a sampled depth of 2 is one sampled block between two accesses:
        // about 100 blocks, an estimated depth of 101. It hits 101 blocks, not 100.
        let mut h = Hist::new(&[100, 101], 0.01);
        h.record(Some(2), 3);
        assert_eq!(h.misses(), vec![(1.0, 3.0), (0.0, 0.0)]);
        // Depth 1 (the block again, nothing between) hits every size.
        h.record(Some(1), 3);
        assert_eq!(h.misses(), vec![(1.0, 3.0), (0.0, 0.0)]);
    }
}
