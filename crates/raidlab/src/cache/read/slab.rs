//! The entry arena shared by every policy: a `Vec` of fixed-size entries addressed by `u32`
//! slot ids, plus a chained hash index from key to slot id (`index.rs`).
//!
//! Why not `HashMap<u64, Entry>`: the index here stores only 4-byte slot ids (the key lives in
//! the entry a bucket points to), so LRU in block mode costs 24 bytes of entry plus 8-12 bytes
//! of index per cached block, and a hit mostly touches one index bucket and one entry. A
//! Fibonacci (multiplicative) hash spreads the dense, sequential block numbers of storage
//! traces well.
//!
//! Freed slots are chained through their primary link's `next` field and reused first, so a
//! cache that is sized up front never allocates after construction; a cache whose entry count
//! is unknown (object mode) grows the arena and the index geometrically.

use super::index::Index;
use super::list::{Link, Nodes, NIL};

/// What the arena needs from an entry: its key and its primary list link.
pub(crate) trait Slot: Copy {
    fn key(&self) -> u64;
    fn set_key(&mut self, key: u64);
    fn link(&self) -> &Link;
    fn link_mut(&mut self) -> &mut Link;
}

/// `impl Slot` for an entry struct with `key: u64` and `link: Link` fields: every policy's
/// entry stores them the same way, so the accessors are written once here.
macro_rules! impl_slot {
    ($entry:ty) => {
        impl $crate::cache::read::slab::Slot for $entry {
            #[inline]
            fn key(&self) -> u64 {
                self.key
            }
            #[inline]
            fn set_key(&mut self, key: u64) {
                self.key = key;
            }
            #[inline]
            fn link(&self) -> &$crate::cache::read::list::Link {
                &self.link
            }
            #[inline]
            fn link_mut(&mut self) -> &mut $crate::cache::read::list::Link {
                &mut self.link
            }
        }
    };
}
pub(crate) use impl_slot;

/// The `ReadPolicy` accessors that every policy keeping its entries in one `slab` with
/// `used` and `capacity` counters spells the same way: `remove`, `contains`, `len`, `used`,
/// `capacity`, and the prefetches of `slab_prefetch`. The policy provides `unlink(id)`, which
/// detaches an entry from its lists.
/// Expands inside the `impl ReadPolicy` block.
macro_rules! slab_policy_accessors {
    () => {
        fn remove(&mut self, key: u64) -> bool {
            let Some(id) = self.slab.find(key) else {
                return false;
            };
            self.unlink(id);
            let e = self.slab.remove(id);
            self.used -= u64::from(e.size);
            true
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

        $crate::cache::read::slab::slab_prefetch!();
    };
}
pub(crate) use slab_policy_accessors;

/// The `ReadPolicy` accessors of a policy that keeps ghost (non-resident) entries in its
/// `slab` next to the resident ones (ARC, 2Q, MQ): `remove` and `contains` see only entries
/// `e` for which `$resident` holds, `len` is the `resident` counter. The policy provides
/// `unlink(id)`, which detaches a resident entry from its list and its unit count. Expands
/// inside the `impl ReadPolicy` block.
macro_rules! ghost_policy_accessors {
    (|$e:ident| $resident:expr) => {
        fn remove(&mut self, key: u64) -> bool {
            match self.slab.find(key) {
                Some(id) if {
                    let $e = self.slab.get(id);
                    $resident
                } =>
                {
                    self.unlink(id);
                    self.slab.remove(id);
                    self.resident -= 1;
                    true
                }
                _ => false,
            }
        }

        #[inline]
        fn contains(&self, key: u64) -> bool {
            self.slab.find(key).is_some_and(|id| {
                let $e = self.slab.get(id);
                $resident
            })
        }

        fn len(&self) -> usize {
            self.resident
        }

        fn capacity(&self) -> u64 {
            self.capacity
        }

        slab_prefetch!();
    };
}

/// The `ReadPolicy::prefetch` and `prefetch_entries` of a policy whose lookups go through its
/// `slab`. Expands inside the `impl ReadPolicy` block.
macro_rules! slab_prefetch {
    () => {
        #[inline]
        fn prefetch(&self, first: u64, count: u64) {
            // Bounded by the caller's `count`.
            for key in first..first.saturating_add(count) {
                self.slab.prefetch_bucket(key);
            }
        }

        #[inline]
        fn prefetch_entries(&self, first: u64, count: u64) {
            for key in first..first.saturating_add(count) {
                self.slab.prefetch_entry(key);
            }
        }
    };
}
pub(crate) use slab_prefetch;

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

pub(crate) use super::index::MAX_BUCKETS_LOG2;

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
    #[inline(always)]
    pub fn find(&self, key: u64) -> Option<u32> {
        self.index.find(&self.entries, key)
    }

    /// Start loading the index bucket a lookup of `key` reads first (`ReadPolicy::prefetch`).
    #[inline(always)]
    pub fn prefetch_bucket(&self, key: u64) {
        self.index.prefetch_bucket(key);
    }

    /// Read `key`'s index bucket and start loading the entry it points to
    /// (`ReadPolicy::prefetch_entries`).
    #[inline(always)]
    pub fn prefetch_entry(&self, key: u64) {
        let id = self.index.head(key);
        if let Some(e) = self.entries.get(id as usize) {
            super::prefetch::prefetch(e);
        }
    }

    /// Start loading what removing live slot `id` from the index and from its list reads:
    /// its chain link, its key's bucket and the entry before it in its list (the next back of
    /// the list when `id` is a victim). The entry itself is read here (its key and link), so
    /// it should already be in the CPU cache.
    #[inline(always)]
    pub fn prefetch_removal(&self, id: u32) {
        let e = &self.entries[id as usize];
        self.index.prefetch_bucket(e.key());
        self.index.prefetch_next(id);
        if let Some(p) = self.entries.get(e.link().prev as usize) {
            super::prefetch::prefetch(p);
        }
    }

    /// Store `e` (whose key must be absent) and return its slot id; its link is detached.
    #[inline(always)]
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
        debug_assert_eq!(self.index.len(), self.live);
        id
    }

    /// Drop slot `id` (which must be live and already unlinked from every list) and return
    /// its entry.
    #[inline(always)]
    pub fn remove(&mut self, id: u32) -> E {
        let e = self.entries[id as usize];
        self.index.remove(e.key(), id);
        self.entries[id as usize].link_mut().next = self.free;
        self.free = id;
        self.live -= 1;
        e
    }

    /// Give live slot `id` (already unlinked from every list) to `e`, whose key must be
    /// absent, and return the entry it held: [`Slab::remove`] then [`Slab::insert`], which
    /// would reuse the slot, in one step (no free list, no growth check). `e`'s link is
    /// detached.
    #[inline(always)]
    pub fn replace(&mut self, id: u32, mut e: E) -> E {
        debug_assert!(self.find(e.key()).is_none(), "duplicate key");
        let old = self.entries[id as usize];
        self.index.remove(old.key(), id);
        *e.link_mut() = Link::DETACHED;
        self.entries[id as usize] = e;
        self.index.insert(e.key(), id);
        debug_assert_eq!(self.index.len(), self.live);
        old
    }

    /// Give live slot `id` the key `key` (which must be absent) and return its old key,
    /// keeping the rest of the entry (its links included): for a slot handed from an evicted
    /// entry to a new one in one step, the caller then setting the other fields and the list
    /// position, where removing and inserting (which would reuse the slot) would leave them.
    #[inline(always)]
    pub fn rekey(&mut self, id: u32, key: u64) -> u64 {
        debug_assert!(self.find(key).is_none(), "duplicate key");
        let old = self.entries[id as usize].key();
        self.index.remove(old, id);
        self.entries[id as usize].set_key(key);
        self.index.insert(key, id);
        old
    }

    #[cold]
    fn grow_index(&mut self) {
        self.index.grow(&self.entries);
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
        self.entries.capacity() * std::mem::size_of::<E>() + self.index.heap_bytes()
    }
}

/// The entry of policies that need nothing beyond recency order (LRU, FIFO).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlainEntry {
    pub key: u64,
    pub link: Link,
    pub size: u32,
}

impl_slot!(PlainEntry);

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug)]
    struct E {
        key: u64,
        link: Link,
    }
    impl_slot!(E);
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
    fn colliding_keys_survive_any_removal_order() {
        // Keys sharing one home bucket form a single probe run with displacements 0, 1, 2...;
        // removing from the middle must shift the rest back with corrected displacements.
        let probe = Index::for_entries(6);
        let home0: Vec<u64> = (0u64..)
            .filter(|&k| probe.home(k) == probe.home(0))
            .take(6)
            .collect();
        for order in [
            [0usize, 1, 2, 3, 4, 5],
            [2, 0, 5, 1, 4, 3],
            [5, 4, 3, 2, 1, 0],
        ] {
            let mut s: Slab<E> = Slab::with_capacity(6);
            let ids: Vec<u32> = home0.iter().map(|&k| s.insert(e(k))).collect();
            for (n, &i) in order.iter().enumerate() {
                s.remove(ids[i]);
                for (j, &k) in home0.iter().enumerate() {
                    let gone = order[..=n].contains(&j);
                    assert_eq!(
                        s.find(k).is_none(),
                        gone,
                        "order {order:?} step {n} key {k}"
                    );
                }
            }
        }
    }

    /// Random inserts, lookups and removals against a `HashMap`, in a table kept at its load
    /// limit (1) so that chains are long and removals from their middle happen all the time.
    #[test]
    fn random_operations_match_a_map() {
        let mut s: Slab<E> = Slab::with_capacity(96);
        let buckets = s.index.buckets().len();
        let mut model: std::collections::HashMap<u64, u32> = Default::default();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Few distinct keys, many of them sharing home buckets.
            let key = (x >> 8) % 400;
            match s.find(key) {
                Some(id) => {
                    assert_eq!(model.get(&key), Some(&id), "step {step}");
                    if !x.is_multiple_of(3) {
                        s.remove(id);
                        model.remove(&key);
                    }
                }
                None => {
                    assert!(!model.contains_key(&key), "step {step}");
                    if model.len() < buckets {
                        model.insert(key, s.insert(e(key)));
                    }
                }
            }
            assert_eq!(s.len(), model.len());
        }
        assert_eq!(s.index.buckets().len(), buckets, "never grew");
        for (&key, &id) in &model {
            assert_eq!(s.find(key), Some(id));
        }
    }

    #[test]
    fn sized_arena_never_reallocates() {
        let mut s: Slab<E> = Slab::with_capacity(100);
        let (cap, buckets) = (s.entries.capacity(), s.index.buckets().len());
        for round in 0..50u64 {
            let ids: Vec<u32> = (0..100).map(|k| s.insert(e(round * 1000 + k))).collect();
            for id in ids {
                s.remove(id);
            }
        }
        assert_eq!(s.entries.capacity(), cap);
        assert_eq!(s.index.buckets().len(), buckets);
    }
}
