//! The single-list cache that LRU and FIFO share: they differ only in whether a hit moves
//! its entry to the front, which is the const parameter `PROMOTE`.

use super::list::{Link, List};
use super::slab::{PlainEntry, Slab};
use super::{Access, ReadPolicy};

/// One list of resident entries over a fixed arena: inserts go to the front, the victim is
/// the back. With `PROMOTE` a hit moves its entry to the front (LRU); without, hits change
/// nothing (FIFO).
#[derive(Clone, Debug)]
pub struct Queue<const PROMOTE: bool> {
    slab: Slab<PlainEntry>,
    list: List,
    used: u64,
    capacity: u64,
}

impl<const PROMOTE: bool> Queue<PROMOTE> {
    /// `capacity` units; room for `entries` entries before the arena grows.
    pub fn new(capacity: u64, entries: usize) -> Self {
        Queue {
            slab: Slab::with_capacity(entries),
            list: List::new(),
            used: 0,
            capacity,
        }
    }

    fn unlink(&mut self, id: u32) {
        self.list.unlink(self.slab.nodes(), id);
    }
}

impl<const PROMOTE: bool> ReadPolicy for Queue<PROMOTE> {
    fn name(&self) -> &'static str {
        if PROMOTE {
            "lru"
        } else {
            "fifo"
        }
    }

    #[inline(always)]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        match self.slab.find(acc.key) {
            Some(id) => {
                if PROMOTE {
                    self.list.move_to_front(self.slab.nodes(), id);
                }
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
        // The common case (block mode: always): one victim makes exactly the room needed, and
        // its slot is handed to the new entry, as evicting and inserting would.
        if let Some(victim) = self.list.back() {
            let old = u64::from(self.slab.get(victim).size);
            if self.used + size > self.capacity && self.used - old + size <= self.capacity {
                evicted.push(self.slab.rekey(victim, acc.key));
                self.slab.get_mut(victim).size = acc.size;
                self.list.move_to_front(self.slab.nodes(), victim);
                self.used = self.used - old + size;
                // The next miss evicts the new back: start loading what that reads.
                if let Some(next) = self.list.back() {
                    self.slab.prefetch_removal(next);
                }
                return true;
            }
        }
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

    slab_policy_accessors!();

    fn evict_one(&mut self, evicted: &mut Vec<u64>) -> bool {
        let Some(victim) = self.list.pop_back(self.slab.nodes()) else {
            return false;
        };
        let e = self.slab.remove(victim);
        self.used -= u64::from(e.size);
        evicted.push(e.key);
        true
    }

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}
