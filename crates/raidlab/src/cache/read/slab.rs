//! The entry arena shared by every policy: a `Vec` of fixed-size entries addressed by `u32`
//! slot ids, plus an open-addressing index from key to slot id.
//!
//! Why not `HashMap<u64, Entry>`: the index here stores only the 4-byte slot id per bucket
//! (the key lives in the entry it points to), so LRU in block mode costs 24 bytes of entry
//! plus at most ~11 bytes of index per cached block, and a hit touches one index bucket and
//! one entry. Linear probing with backward-shift deletion keeps probe chains short without
//! tombstones, and a Fibonacci (multiplicative) hash spreads the dense, sequential block
//! numbers of storage traces well.
//!
//! Freed slots are chained through their primary link's `next` field and reused first, so a
//! cache that is sized up front never allocates after construction; a cache whose entry count
//! is unknown (object mode) grows the arena and the index geometrically.

use super::list::{Link, Nodes, NIL};

/// What the arena needs from an entry: its key and its primary list link.
pub(crate) trait Slot: Copy {
    fn key(&self) -> u64;
    fn link(&self) -> &Link;
    fn link_mut(&mut self) -> &mut Link;
}

impl<E: Slot> Nodes for [E] {
    #[inline]
    fn link(&self, id: u32) -> Link {
        *self[id as usize].link()
    }
    #[inline]
    fn link_mut(&mut self, id: u32) -> &mut Link {
        self[id as usize].link_mut()
    }
}

const EMPTY: u32 = u32::MAX;
/// 2^64 / golden ratio: consecutive keys land far apart.
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;

/// Open-addressing table of slot ids; keys are read from the entries.
#[derive(Clone, Debug)]
struct Index {
    buckets: Vec<u32>,
    /// 64 - log2(buckets.len()).
    shift: u32,
    len: usize,
}

impl Index {
    /// A table that holds `n` keys at a load factor of at most 3/4.
    fn for_entries(n: usize) -> Index {
        let want = n.saturating_mul(4) / 3 + 1;
        let size = want.next_power_of_two().max(8);
        Index {
            buckets: vec![EMPTY; size],
            shift: 64 - size.trailing_zeros(),
            len: 0,
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(FIB) >> self.shift) as usize
    }

    #[inline]
    fn find<E: Slot>(&self, entries: &[E], key: u64) -> Option<u32> {
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let s = self.buckets[i];
            if s == EMPTY {
                return None;
            }
            if entries[s as usize].key() == key {
                return Some(s);
            }
            i = (i + 1) & mask;
        }
    }

    /// Add `id` under `key`, which must be absent. The caller keeps the load under 3/4.
    #[inline]
    fn insert(&mut self, key: u64, id: u32) {
        let mask = self.mask();
        let mut i = self.home(key);
        while self.buckets[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.buckets[i] = id;
        self.len += 1;
    }

    /// Remove `key` (present, mapped to `id`), shifting later members of its probe run back
    /// so that every key stays reachable from its home bucket without tombstones.
    #[inline]
    fn remove<E: Slot>(&mut self, entries: &[E], key: u64, id: u32) {
        let mask = self.mask();
        let mut hole = self.home(key);
        while self.buckets[hole] != id {
            debug_assert!(self.buckets[hole] != EMPTY, "removing an absent key");
            if self.buckets[hole] == EMPTY {
                return;
            }
            hole = (hole + 1) & mask;
        }
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let s = self.buckets[j];
            if s == EMPTY {
                break;
            }
            let home = self.home(entries[s as usize].key());
            // `s` may fill the hole if the hole lies on its probe path (home ..= j).
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.buckets[hole] = s;
                hole = j;
            }
        }
        self.buckets[hole] = EMPTY;
        self.len -= 1;
    }

    #[inline]
    fn needs_growth(&self) -> bool {
        (self.len + 1) * 4 > self.buckets.len() * 3
    }

    fn rebuild<E: Slot>(&mut self, entries: &[E], live: impl Iterator<Item = u32>) {
        let mut bigger = Index::for_entries(self.buckets.len());
        for id in live {
            bigger.insert(entries[id as usize].key(), id);
        }
        *self = bigger;
    }
}

/// Arena of entries with a key index and a free list.
#[derive(Clone, Debug)]
pub(crate) struct Slab<E> {
    entries: Vec<E>,
    index: Index,
    free: u32,
    live: usize,
}

impl<E: Slot> Slab<E> {
    /// An arena that holds `n` entries without allocating again.
    pub fn with_capacity(n: usize) -> Self {
        Slab {
            entries: Vec::with_capacity(n),
            index: Index::for_entries(n),
            free: NIL,
            live: 0,
        }
    }

    /// Slot of `key`, if present.
    #[inline]
    pub fn find(&self, key: u64) -> Option<u32> {
        self.index.find(&self.entries, key)
    }

    /// Store `e` (whose key must be absent) and return its slot id; its link is detached.
    #[inline]
    pub fn insert(&mut self, mut e: E) -> u32 {
        debug_assert!(self.find(e.key()).is_none(), "duplicate key");
        if self.index.needs_growth() {
            self.grow_index();
        }
        *e.link_mut() = Link::DETACHED;
        let id = if self.free != NIL {
            let id = self.free;
            self.free = self.entries[id as usize].link().next;
            self.entries[id as usize] = e;
            id
        } else {
            // Slot ids must stay below NIL; an arena of 4 G entries is far beyond any config
            // `build` accepts, so reaching it is a broken invariant, not an input error.
            debug_assert!(self.entries.len() < NIL as usize);
            self.entries.push(e);
            (self.entries.len() - 1) as u32
        };
        self.index.insert(e.key(), id);
        self.live += 1;
        id
    }

    /// Drop slot `id` (which must be live and already unlinked from every list) and return
    /// its entry.
    #[inline]
    pub fn remove(&mut self, id: u32) -> E {
        let e = self.entries[id as usize];
        self.index.remove(&self.entries, e.key(), id);
        self.entries[id as usize].link_mut().next = self.free;
        self.free = id;
        self.live -= 1;
        e
    }

    #[cold]
    fn grow_index(&mut self) {
        // Live slots are exactly those reachable from the old index.
        let live: Vec<u32> = self
            .index
            .buckets
            .iter()
            .copied()
            .filter(|&s| s != EMPTY)
            .collect();
        self.index.rebuild(&self.entries, live.into_iter());
    }

    #[inline]
    pub fn get(&self, id: u32) -> &E {
        &self.entries[id as usize]
    }

    #[inline]
    pub fn get_mut(&mut self, id: u32) -> &mut E {
        &mut self.entries[id as usize]
    }

    /// The entries as list storage.
    #[inline]
    pub fn nodes(&mut self) -> &mut [E] {
        &mut self.entries
    }

    /// Live entries (resident and ghost).
    #[inline]
    pub fn len(&self) -> usize {
        self.live
    }

    /// Heap bytes of the arena and the index.
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<E>() + self.index.buckets.capacity() * 4
    }
}

/// The entry of policies that need nothing beyond recency order (LRU, FIFO).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlainEntry {
    pub key: u64,
    pub link: Link,
    pub size: u32,
}

impl Slot for PlainEntry {
    #[inline]
    fn key(&self) -> u64 {
        self.key
    }
    #[inline]
    fn link(&self) -> &Link {
        &self.link
    }
    #[inline]
    fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug)]
    struct E {
        key: u64,
        link: Link,
    }
    impl Slot for E {
        fn key(&self) -> u64 {
            self.key
        }
        fn link(&self) -> &Link {
            &self.link
        }
        fn link_mut(&mut self) -> &mut Link {
            &mut self.link
        }
    }
    fn e(key: u64) -> E {
        E {
            key,
            link: Link::DETACHED,
        }
    }

    #[test]
    fn insert_find_remove_reuse_and_grow() {
        let mut s: Slab<E> = Slab::with_capacity(4);
        let mut ids = Vec::new();
        // Far more than the initial size: forces index growth and arena growth.
        for k in 0..1000u64 {
            ids.push(s.insert(e(k * 7919)));
        }
        for k in 0..1000u64 {
            assert_eq!(s.find(k * 7919), Some(ids[k as usize]));
        }
        assert_eq!(s.find(3), None);
        // Remove every other key; the rest must stay reachable (backward shift).
        for k in (0..1000u64).step_by(2) {
            s.remove(ids[k as usize]);
        }
        for k in 0..1000u64 {
            assert_eq!(s.find(k * 7919).is_some(), k % 2 == 1, "key {k}");
        }
        assert_eq!(s.len(), 500);
        // Freed slots are reused before the arena grows.
        let before = s.entries.len();
        for k in 0..500u64 {
            s.insert(e(1_000_000 + k));
        }
        assert_eq!(s.entries.len(), before);
        assert_eq!(s.len(), 1000);
    }

    #[test]
    fn sized_arena_never_reallocates() {
        let mut s: Slab<E> = Slab::with_capacity(100);
        let (cap, buckets) = (s.entries.capacity(), s.index.buckets.len());
        for round in 0..50u64 {
            let ids: Vec<u32> = (0..100).map(|k| s.insert(e(round * 1000 + k))).collect();
            for id in ids {
                s.remove(id);
            }
        }
        assert_eq!(s.entries.capacity(), cap);
        assert_eq!(s.index.buckets.len(), buckets);
    }
}
