//! First in, first out.
//!
//! Hits change nothing; the victim is the oldest insert. Matches libCacheSim's `FIFO`.

use super::list::{Link, List};
use super::slab::{PlainEntry, Slab};
use super::{Access, ReadPolicy};

/// FIFO over a fixed arena.
#[derive(Clone, Debug)]
pub struct Fifo {
    slab: Slab<PlainEntry>,
    queue: List,
    used: u64,
    capacity: u64,
}

impl Fifo {
    /// `capacity` units; room for `entries` entries before the arena grows.
    pub fn new(capacity: u64, entries: usize) -> Self {
        Fifo {
            slab: Slab::with_capacity(entries),
            queue: List::new(),
            used: 0,
            capacity,
        }
    }
}

impl ReadPolicy for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }

    #[inline]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        self.slab.find(acc.key).is_some()
    }

    #[inline]
    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool {
        let size = u64::from(acc.size);
        if size > self.capacity {
            return false;
        }
        debug_assert!(!self.contains(acc.key), "insert of a resident key");
        while self.used + size > self.capacity {
            let Some(victim) = self.queue.pop_back(self.slab.nodes()) else {
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
        self.queue.push_front(self.slab.nodes(), id);
        self.used += size;
        true
    }

    fn remove(&mut self, key: u64) -> bool {
        match self.slab.find(key) {
            Some(id) => {
                self.queue.unlink(self.slab.nodes(), id);
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
