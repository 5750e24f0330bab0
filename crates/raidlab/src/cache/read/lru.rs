//! Least recently used.
//!
//! One list: a hit moves the entry to the front, an insert puts it at the front, the victim is
//! the back. Matches libCacheSim's `LRU` (a hit does not change the stored size; an object
//! larger than the cache is not inserted).

/// LRU: the shared single-list cache with promotion on hit.
pub type Lru = super::queue::Queue<true>;

#[cfg(test)]
mod tests {
    use super::super::testutil::{hits, run_evictions};
    use super::*;
    use crate::cache::read::ReadPolicy;

    #[test]
    fn worked_example() {
        // Capacity 3, unit sizes. Trace and state (front .. back) after each access:
        //   1 miss [1]; 2 miss [2 1]; 3 miss [3 2 1]; 1 hit [1 3 2];
        //   4 miss, evicts 2 (back) -> [4 1 3]; 2 miss, evicts 3 -> [2 4 1];
        //   1 hit [1 2 4]; 3 miss, evicts 4 -> [3 1 2].
        let mut p = Lru::new(3, 3);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 1, 4, 2, 1, 3]);
        assert_eq!(h, [false, false, false, true, false, false, true, false]);
        assert_eq!(ev, [2, 3, 4]);
    }

    #[test]
    fn sizes_evict_several_and_oversize_is_refused() {
        // Capacity 10: 1 (size 4), 2 (size 4), then 3 (size 7) must evict both; 9 (size 11)
        // can never fit and is refused.
        let mut p = Lru::new(10, 4);
        let h = hits(&mut p, &[(1, 4), (2, 4), (3, 7), (9, 11)]);
        assert_eq!(h, [false; 4]);
        assert!(p.contains(3) && !p.contains(1) && !p.contains(2) && !p.contains(9));
        assert_eq!(p.used(), 7);
    }
}
