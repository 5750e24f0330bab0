//! First in, first out.
//!
//! Hits change nothing; the victim is the oldest insert. Matches libCacheSim's `FIFO`.

/// FIFO: the shared single-list cache without promotion on hit.
pub type Fifo = super::queue::Queue<false>;

#[cfg(test)]
mod tests {
    use super::super::testutil::run_evictions;
    use super::*;

    #[test]
    fn worked_example() {
        // Capacity 3. 1 2 3 miss [3 2 1]; 1 hit (no reorder); 4 miss evicts 1 -> [4 3 2];
        // 1 miss evicts 2 -> [1 4 3]; 3 hit; 5 miss evicts 3.
        let mut p = Fifo::new(3, 3);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 1, 4, 1, 3, 5]);
        assert_eq!(h, [false, false, false, true, false, false, true, false]);
        assert_eq!(ev, [1, 2, 3]);
    }
}
