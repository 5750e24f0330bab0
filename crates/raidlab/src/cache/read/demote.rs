//! DEMOTE (Wong and Wilkes, "My cache or yours?", USENIX 2002): the invasive, exclusive
//! upper bound X-RAY is compared with.
//!
//! The host tells the array which clean blocks its cache evicts (and sends any the array
//! lacks); the array inserts a demoted block at its MRU end. A block the host reads from the
//! array now lives at the host, so the array moves it to its LRU end (it is read-miss data
//! too: inserted at the LRU end). Together the two caches then hold (nearly) disjoint blocks
//! in one global LRU order.
//!
//! Representation: the LRU-end blocks (read by the host) are kept in their own list and are
//! always evicted before any demoted block, oldest first; among themselves their order hardly
//! matters, since the host holds them all. Demoted blocks form an ordinary LRU list.
//!
//! As a plain [`ReadPolicy`] (no host demoting anything) it caches every read block at the
//! LRU end only. Under a host (`crate::host`, which demotes through [`Demote::demote`]) the
//! two-level engine does not insert read misses at all: the block goes to the host, and
//! keeping it would cost a demoted block whenever the cache is full.

use super::list::{Link, List};
use super::slab::Slab;
use super::{Access, ReadPolicy};

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    link: Link,
    size: u32,
    /// In the LRU-end list (read by the host) rather than the demoted LRU list.
    read: bool,
}

impl_slot!(Entry);

/// DEMOTE over a fixed arena.
#[derive(Clone, Debug)]
pub struct Demote {
    slab: Slab<Entry>,
    /// Demoted blocks, front = MRU.
    demoted: List,
    /// Blocks the host read from the array, evicted first.
    read: List,
    used: u64,
    capacity: u64,
}

impl Demote {
    /// `capacity` units; room for `entries` entries before the arena grows.
    pub fn new(capacity: u64, entries: usize) -> Self {
        Demote {
            slab: Slab::with_capacity(entries),
            demoted: List::new(),
            read: List::new(),
            used: 0,
            capacity,
        }
    }

    /// Detach `id` from whichever list holds it.
    fn unlink(&mut self, id: u32) {
        if self.slab.get(id).read {
            self.read.unlink(self.slab.nodes(), id);
        } else {
            self.demoted.unlink(self.slab.nodes(), id);
        }
    }

    fn make_room(&mut self, size: u64, evicted: &mut Vec<u64>) {
        while self.used + size > self.capacity {
            let victim = match self.read.pop_back(self.slab.nodes()) {
                Some(id) => id,
                None => match self.demoted.pop_back(self.slab.nodes()) {
                    Some(id) => id,
                    None => break,
                },
            };
            let e = self.slab.remove(victim);
            self.used -= u64::from(e.size);
            evicted.push(e.key);
        }
    }

    /// The host evicted clean block `key` and demotes it: it goes to the MRU end. Returns
    /// whether the array lacked it (so the host had to send the data).
    pub fn demote(&mut self, key: u64, evicted: &mut Vec<u64>) -> bool {
        if let Some(id) = self.slab.find(key) {
            if self.slab.get(id).read {
                self.read.unlink(self.slab.nodes(), id);
                self.demoted.push_front(self.slab.nodes(), id);
                self.slab.get_mut(id).read = false;
            } else {
                self.demoted.move_to_front(self.slab.nodes(), id);
            }
            return false;
        }
        self.make_room(1, evicted);
        let id = self.slab.insert(Entry {
            key,
            link: Link::DETACHED,
            size: 1,
            read: false,
        });
        self.demoted.push_front(self.slab.nodes(), id);
        self.used += 1;
        true
    }
}

impl ReadPolicy for Demote {
    fn name(&self) -> &'static str {
        "demote"
    }

    #[inline]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        let Some(id) = self.slab.find(acc.key) else {
            return false;
        };
        // The host now caches it: to the LRU end.
        if self.slab.get(id).read {
            self.read.move_to_front(self.slab.nodes(), id);
        } else {
            self.demoted.unlink(self.slab.nodes(), id);
            self.read.push_front(self.slab.nodes(), id);
            self.slab.get_mut(id).read = true;
        }
        true
    }

    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool {
        let size = u64::from(acc.size);
        if size > self.capacity {
            return false;
        }
        debug_assert!(!self.contains(acc.key), "insert of a resident key");
        self.make_room(size, evicted);
        let id = self.slab.insert(Entry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
            read: true,
        });
        self.read.push_front(self.slab.nodes(), id);
        self.used += size;
        debug_assert!(self.used <= self.capacity);
        true
    }

    slab_policy_accessors!();

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::run_evictions;
    use super::*;

    #[test]
    fn demoted_blocks_are_mru_and_read_blocks_go_first() {
        // Capacity 3. Demote 1, 2, 3: demoted list (MRU first) [3 2 1].
        // Read 2 (hit): it moves to the LRU-end list. Demote 4: evicts 2 (read blocks go
        // first), demoted [4 3 1]. Demote 1 again: already there, to MRU [1 4 3], no transfer.
        // Demote 5: evicts 3, the LRU demoted block.
        let mut p = Demote::new(3, 8);
        let mut ev = Vec::new();
        for k in [1, 2, 3] {
            assert!(p.demote(k, &mut ev));
        }
        let acc_hit = |p: &mut Demote, k| {
            p.get(&Access {
                key: k,
                size: 1,
                now: 0,
                cost: &super::super::UniformCost,
            })
        };
        assert!(acc_hit(&mut p, 2));
        assert!(p.demote(4, &mut ev));
        assert_eq!(ev, [2]);
        assert!(!p.demote(1, &mut ev));
        assert!(p.demote(5, &mut ev));
        assert_eq!(ev, [2, 3]);
        assert!(p.contains(1) && p.contains(4) && p.contains(5));
    }

    #[test]
    fn read_misses_are_cached_at_the_lru_end() {
        // Without demotions every read block is the next victim: capacity 2 keeps the last
        // two read blocks, so 1 2 3 evicts 1, then 2 hits.
        let mut p = Demote::new(2, 4);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 2]);
        assert_eq!(h, [false, false, false, true]);
        assert_eq!(ev, [1]);
    }
}
