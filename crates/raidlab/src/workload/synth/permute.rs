//! A cheap seeded bijection of `[0, n)`, used to scatter popularity ranks over the key or
//! extent space so that hot items do not all sit at the start of the disk (where they would
//! land on the first stripes and distort RAID results).
//!
//! The permutation works on the smallest power-of-two domain `2^b >= n`: three rounds of
//! "multiply by an odd seeded constant mod 2^b, add a seeded constant, xor the high half into
//! the low half", each a bijection of `[0, 2^b)`. Values that land at or above `n` are fed
//! through again (cycle walking), which keeps the map a bijection of `[0, n)`; since
//! `2^b < 2n`, fewer than two rounds are needed on average.

use rand_chacha::rand_core::RngCore;

/// A seeded permutation of `[0, n)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scatter {
    n: u64,
    mask: u64,
    shift: u32,
    mul: [u64; 3],
    add: [u64; 3],
}

impl Scatter {
    /// A permutation of `[0, n)` drawn from `seed`. `n = 0` gives an empty domain.
    pub fn new(n: u64, seed: u64) -> Scatter {
        let bits = match n {
            0 | 1 => 1,
            _ => 64 - (n - 1).leading_zeros(),
        };
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let mut rng = super::rng(seed, 0x5ca7);
        let mut mul = [0u64; 3];
        let mut add = [0u64; 3];
        for (m, a) in mul.iter_mut().zip(add.iter_mut()) {
            *m = (rng.next_u64() | 1) & mask;
            *a = rng.next_u64() & mask;
        }
        Scatter {
            n,
            mask,
            shift: bits.div_ceil(2),
            mul,
            add,
        }
    }

    #[inline]
    fn round(&self, mut x: u64) -> u64 {
        for (m, a) in self.mul.iter().zip(self.add.iter()) {
            x = x.wrapping_mul(*m).wrapping_add(*a) & self.mask;
            x ^= x >> self.shift;
        }
        x
    }

    /// The image of `i` (which must be below `n`).
    #[inline]
    pub fn apply(&self, i: u64) -> u64 {
        debug_assert!(i < self.n);
        let mut x = self.round(i);
        while x >= self.n {
            x = self.round(x);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_a_bijection() {
        for n in [1u64, 2, 3, 7, 64, 100, 1000, 4097] {
            let p = Scatter::new(n, n * 31);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let j = p.apply(i);
                assert!(j < n);
                assert!(!seen[j as usize], "n={n}: {j} hit twice");
                seen[j as usize] = true;
            }
        }
    }

    #[test]
    fn scatters_the_first_ranks() {
        let p = Scatter::new(1 << 20, 7);
        let first: Vec<u64> = (0..8).map(|i| p.apply(i)).collect();
        // The first ranks are spread over the space, not packed at its start.
        assert!(
            first.iter().filter(|&&x| x < 1 << 16).count() <= 2,
            "{first:?}"
        );
        assert_ne!(Scatter::new(1 << 20, 8).apply(0), first[0]);
    }
}
