//! Uniform keys over `[0, keys)`: keyed reads, one block each (`len = 0`), no time.

use rand_chacha::ChaCha8Rng;

use super::{bad, below, rng};
use crate::error::Result;
use crate::workload::{Addressing, Op, Request, RequestSource};

/// The uniform generator.
pub struct Uniform {
    keys: u64,
    rng: ChaCha8Rng,
    left: u64,
}

impl Uniform {
    pub fn new(keys: u64, requests: u64, seed: u64) -> Result<Uniform> {
        if keys == 0 {
            return Err(bad("keys", "expected at least 1 key, got 0"));
        }
        Ok(Uniform {
            keys,
            rng: rng(seed, 2),
            left: requests,
        })
    }
}

impl RequestSource for Uniform {
    #[inline]
    fn next_request(&mut self) -> Result<Option<Request>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        Ok(Some(Request {
            time_ns: 0,
            op: Op::Read,
            offset: below(&mut self.rng, self.keys),
            len: 0,
        }))
    }

    fn addressing(&self) -> Addressing {
        Addressing::Keys
    }

    fn label(&self) -> &str {
        "uniform"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_the_key_space_evenly() {
        let mut g = Uniform::new(10, 100_000, 3).unwrap();
        let mut counts = [0u32; 10];
        while let Some(r) = g.next_request().unwrap() {
            counts[r.offset as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
        assert!(Uniform::new(0, 1, 1).is_err());
    }
}
