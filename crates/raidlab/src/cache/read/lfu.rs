//! Least frequently used, O(1) per access with [`FreqLists`].
//!
//! An entry's count starts at 1 when inserted and grows by one per hit; it is forgotten on
//! eviction (no history). Victim: lowest count; among equal counts, the entry that reached the
//! count earliest, i.e. the one whose last access is oldest. This is exactly libCacheSim's
//! `LFU` (C version; its C++ `LFUCpp` breaks ties differently).

use super::freq::FreqLists;
use super::list::{Link, NIL};
use super::slab::Slab;
use super::{Access, ReadPolicy};

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    link: Link,
    size: u32,
    bucket: u32,
}

impl_slot!(Entry);

impl_bucketed!(Entry);

/// LFU over a fixed arena.
#[derive(Clone, Debug)]
pub struct Lfu {
    slab: Slab<Entry>,
    freq: FreqLists,
    used: u64,
    capacity: u64,
}

impl Lfu {
    /// `capacity` units; room for `entries` entries before the arena grows.
    pub fn new(capacity: u64, entries: usize) -> Self {
        Lfu {
            slab: Slab::with_capacity(entries),
            freq: FreqLists::new(1, entries.clamp(16, 4096)),
            used: 0,
            capacity,
        }
    }

    fn unlink(&mut self, id: u32) {
        self.freq.remove(self.slab.nodes(), 0, id);
    }

    /// Reference count of resident `key` (tests).
    #[cfg(test)]
    fn count(&self, key: u64) -> Option<u64> {
        let id = self.slab.find(key)?;
        Some(self.freq.count(self.slab.get(id).bucket))
    }
}

impl ReadPolicy for Lfu {
    fn name(&self) -> &'static str {
        "lfu"
    }

    #[inline(always)]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        match self.slab.find(acc.key) {
            Some(id) => {
                self.freq.touch(self.slab.nodes(), 0, id);
                true
            }
            None => false,
        }
    }

    #[inline(always)]
    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool {
        let size = u64::from(acc.size);
        if size > self.capacity {
            return false;
        }
        debug_assert!(!self.contains(acc.key), "insert of a resident key");
        let entry = Entry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
            bucket: NIL,
        };
        while self.used + size > self.capacity {
            let Some(victim) = self.freq.victim(0) else {
                break;
            };
            let freed = u64::from(self.slab.get(victim).size);
            if self.used - freed + size <= self.capacity {
                // The last victim's slot and place go to the new entry, as removing and
                // inserting would (block mode: every eviction).
                evicted.push(self.slab.rekey(victim, acc.key));
                self.slab.get_mut(victim).size = acc.size;
                self.freq.reinsert(self.slab.nodes(), 0, victim, 1);
                self.used = self.used - freed + size;
                return true;
            }
            self.unlink(victim);
            self.used -= freed;
            evicted.push(self.slab.remove(victim).key);
        }
        let id = self.slab.insert(entry);
        self.freq.insert(self.slab.nodes(), 0, id, 1);
        self.used += size;
        true
    }

    slab_policy_accessors!();

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes() + self.freq.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::run_evictions;
    use super::*;

    #[test]
    fn worked_example() {
        // Capacity 3. Counts after each access:
        //   1 2 3 miss: 1:1 2:1 3:1.  1 hit: 1:2.  2 hit: 2:2.
        //   4 miss: lowest count is 1, only key 3 -> evict 3. 4:1.
        //   3 miss: lowest count 1, only key 4 -> evict 4. 3:1.
        //   2 hit: 2:3.  1 hit: 1:3.
        //   5 miss: evict 3 (count 1).
        //   4 miss: evict 5 (count 1).
        //   6 miss: evict 4.
        let mut p = Lfu::new(3, 3);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 1, 2, 4, 3, 2, 1, 5, 4, 6]);
        assert_eq!(
            h,
            [false, false, false, true, true, false, false, true, true, false, false, false]
        );
        assert_eq!(ev, [3, 4, 3, 5, 4]);
        assert_eq!(p.count(1), Some(3));
        assert_eq!(p.count(2), Some(3));
        assert_eq!(p.count(6), Some(1));
    }

    #[test]
    fn tie_break_is_oldest_arrival_at_the_count() {
        // Capacity 2: 1 miss, 2 miss, 2 hit (2:2), 1 hit (1:2): equal counts, 2 got there
        // first, so 3 evicts 2.
        let mut p = Lfu::new(2, 2);
        let (_, ev) = run_evictions(&mut p, &[1, 2, 2, 1, 3]);
        assert_eq!(ev, [2]);
    }
}
