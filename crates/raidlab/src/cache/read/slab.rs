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
/// `capacity`. The policy provides `unlink(id)`, which detaches an entry from its lists.
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
    };
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
/// Largest table: keeps at least 1 bit of every bucket for the (saturating) displacement.
pub(crate) const MAX_BUCKETS_LOG2: u32 = 31;

/// Open-addressing table of slot ids; keys are read from the entries.
///
/// A bucket packs the slot id (low `slot_bits` bits, `slot_bits = log2(buckets)`) with the
/// entry's displacement from its home bucket (high bits, saturating). Slot ids fit because the
/// arena never holds more entries than 3/4 of the buckets. The displacement lets a lookup skip
/// buckets whose entry has a different home without reading that entry, and lets deletion
/// shift entries back without reading any key: both save a cache miss into the arena.
#[derive(Clone, Debug)]
struct Index {
    buckets: Vec<u32>,
    /// 64 - log2(buckets.len()).
    shift: u32,
    slot_bits: u32,
    len: usize,
}

impl Index {
    /// A table that holds `n` keys at a load factor of at most 3/4.
    fn for_entries(n: usize) -> Index {
        let want = n.saturating_mul(4) / 3 + 1;
        let size = want
            .next_power_of_two()
            .clamp(8, 1usize << MAX_BUCKETS_LOG2);
        let bits = size.trailing_zeros();
        Index {
            buckets: vec![EMPTY; size],
            shift: 64 - bits,
            slot_bits: bits,
            len: 0,
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    #[inline]
    fn max_disp(&self) -> usize {
        (u32::MAX >> self.slot_bits) as usize
    }

    #[inline]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(FIB) >> self.shift) as usize
    }

    #[inline]
    fn slot_of(&self, v: u32) -> u32 {
        v & ((1u32 << self.slot_bits) - 1)
    }

    #[inline]
    fn encode(&self, disp: usize, slot: u32) -> u32 {
        ((disp.min(self.max_disp()) as u32) << self.slot_bits) | slot
    }

    /// Displacement of the entry in bucket `j` holding `v`; reads the key only when the stored
    /// value saturated.
    #[inline]
    fn disp_at<E: Slot>(&self, entries: &[E], j: usize, v: u32) -> usize {
        let d = (v >> self.slot_bits) as usize;
        if d < self.max_disp() {
            d
        } else {
            let key = entries[self.slot_of(v) as usize].key();
            j.wrapping_sub(self.home(key)) & self.mask()
        }
    }

    #[inline]
    fn find<E: Slot>(&self, entries: &[E], key: u64) -> Option<u32> {
        let mask = self.mask();
        let max = self.max_disp();
        let mut i = self.home(key);
        let mut d = 0usize;
        loop {
            let v = self.buckets[i];
            if v == EMPTY {
                return None;
            }
            // Same stored displacement = same home bucket: only then can it be our key.
            if (v >> self.slot_bits) as usize == d.min(max) {
                let s = self.slot_of(v);
                if entries[s as usize].key() == key {
                    return Some(s);
                }
            }
            i = (i + 1) & mask;
            d += 1;
        }
    }

    /// Add `id` under `key`, which must be absent. The caller keeps the load under 3/4.
    #[inline]
    fn insert(&mut self, key: u64, id: u32) {
        let mask = self.mask();
        let mut i = self.home(key);
        let mut d = 0usize;
        while self.buckets[i] != EMPTY {
            i = (i + 1) & mask;
            d += 1;
        }
        self.buckets[i] = self.encode(d, id);
        self.len += 1;
    }

    /// Remove `key` (present, mapped to `id`), shifting later members of its probe run back
    /// so that every key stays reachable from its home bucket without tombstones.
    #[inline]
    fn remove<E: Slot>(&mut self, entries: &[E], key: u64, id: u32) {
        let mask = self.mask();
        let mut hole = self.home(key);
        loop {
            let v = self.buckets[hole];
            if v == EMPTY {
                debug_assert!(false, "removing an absent key");
                return;
            }
            if self.slot_of(v) == id {
                break;
            }
            hole = (hole + 1) & mask;
        }
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let v = self.buckets[j];
            if v == EMPTY {
                break;
            }
            let disp = self.disp_at(entries, j, v);
            let gap = j.wrapping_sub(hole) & mask;
            // The entry may fill the hole if the hole lies on its probe path (home ..= j).
            if disp >= gap {
                self.buckets[hole] = self.encode(disp - gap, self.slot_of(v));
                hole = j;
            }
        }
        self.buckets[hole] = EMPTY;
        self.len -= 1;
    }

    #[inline]
    fn needs_growth(&self) -> bool {
        (self.len + 1) * 4 > self.buckets.len() * 3 && self.buckets.len() < 1 << MAX_BUCKETS_LOG2
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
        let index = &self.index;
        let live: Vec<u32> = index
            .buckets
            .iter()
            .filter(|&&v| v != EMPTY)
            .map(|&v| index.slot_of(v))
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
