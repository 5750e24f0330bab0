//! Least recently used.
//!
//! One list: a hit moves the entry to the front, an insert puts it at the front, the victim is
//! the back. Matches libCacheSim's `LRU` (a hit does not change the stored size; an object
//! larger than the cache is not inserted).

use super::list::List;
use super::slab::{PlainEntry, Slab};
use super::{Access, ReadPolicy};
use crate::cache::read::list::Link;

/// LRU over a fixed arena.
#[derive(Clone, Debug)]
pub struct Lru {
    slab: Slab<PlainEntry>,
    list: List,
    used: u64,
    capacity: u64,
}

impl Lru {
    /// `capacity` units; room for `entries` entries before the arena grows.
    pub fn new(capacity: u64, entries: usize) -> Self {
        Lru {
            slab: Slab::with_capacity(entries),
            list: List::new(),
            used: 0,
            capacity,
        }
    }
}

impl ReadPolicy for Lru {
    fn name(&self) -> &'static str {
        "lru"
    }

    #[inline]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        match self.slab.find(acc.key) {
            Some(id) => {
                self.list.move_to_front(self.slab.nodes(), id);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool {
        let size = u64::from(acc.size);
        if size > self.capacity {
            return false;
        }
        debug_assert!(!self.contains(acc.key), "insert of a resident key");
        while self.used + size > self.capacity {
            let Some(victim) = self.list.pop_back(self.slab.nodes()) else {
                break;
            };
            let e = self.slab.remove(victim);
            self.used -= u64::from(e.size);
            evicted.push(e.key);
        }
        let id = self.slab.insert(PlainEntry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
        });
        self.list.push_front(self.slab.nodes(), id);
        self.used += size;
        debug_assert!(self.used <= self.capacity);
        true
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.slab.find(key) {
            Some(id) => {
                self.list.unlink(self.slab.nodes(), id);
                let e = self.slab.remove(id);
                self.used -= u64::from(e.size);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn contains(&self, key: u64) -> bool {
        self.slab.find(key).is_some()
    }

    fn len(&self) -> usize {
        self.slab.len()
    }

    fn used(&self) -> u64 {
        self.used
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hits, run_evictions};
    use super::*;

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
