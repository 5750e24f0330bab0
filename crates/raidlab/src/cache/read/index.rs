//! The key index of the entry arena (`slab.rs`): a chained hash table of `u32` slot ids whose
//! keys are read from the entries they point to.
//!
//! A bucket holds the first slot id of its chain (`NIL` when empty); the chain continues
//! through `next`, a `u32` per slot kept beside the arena (not in the entries, so every
//! policy's entry keeps its layout). The table has at least as many buckets as keys (load at
//! most 1), so chains are short: a lookup mostly reads one bucket and one entry, an insert
//! writes two words and a removal walks a chain of one or two.
//!
//! Why chaining rather than open addressing: in a cache simulation nearly every miss removes
//! one key and inserts another, and both are O(1) writes here, where an open-addressing table
//! probes for a free bucket and shifts a run back on removal. Measured on a counting-mode
//! replay (LRU, 1% of a Zipf footprint), the chained table costs about a sixth fewer
//! instructions per request than Robin Hood linear probing at load 1/2, in less memory.

use super::list::NIL;
use super::slab::Slot;

/// 2^64 / golden ratio: consecutive keys land far apart.
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;
/// Largest table.
pub(crate) const MAX_BUCKETS_LOG2: u32 = 31;

#[derive(Clone, Debug)]
pub(super) struct Index {
    /// First slot of each bucket's chain, `NIL` for none.
    heads: Vec<u32>,
    /// Next slot in the chain of slot `i`, `NIL` at the end (meaningless for a free slot).
    next: Vec<u32>,
    /// `heads.len() - 1`.
    mask: usize,
    /// 64 - log2(heads.len()): the hash's top bits pick the bucket.
    shift: u32,
    len: usize,
}

impl Index {
    /// A table for `n` keys (slots `0..n`) at a load of at most 1, which holds them without
    /// allocating again.
    pub(super) fn for_entries(n: usize) -> Index {
        let size = n.next_power_of_two().clamp(8, 1usize << MAX_BUCKETS_LOG2);
        let bits = size.trailing_zeros();
        assert!((3..=MAX_BUCKETS_LOG2).contains(&bits));
        Index {
            heads: vec![NIL; size],
            next: Vec::with_capacity(n),
            mask: size - 1,
            shift: 64 - bits,
            len: 0,
        }
    }

    /// The buckets: each one's first slot, `NIL` when empty (tests check the table's size).
    #[cfg(test)]
    pub(super) fn buckets(&self) -> &[u32] {
        &self.heads
    }

    /// Keys in the table.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub(super) fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(FIB) >> self.shift) as usize
    }

    /// The slot of `key`, if present.
    #[inline(always)]
    pub(super) fn find<E: Slot>(&self, entries: &[E], key: u64) -> Option<u32> {
        let mut id = self.heads[self.home(key)];
        // Bounded: a chain holds at most every key once.
        for _ in 0..self.len + 1 {
            if id == NIL {
                return None;
            }
            if entries[id as usize].key() == key {
                return Some(id);
            }
            id = self.next[id as usize];
        }
        unreachable!("a chain longer than the table");
    }

    /// Start loading the home bucket of `key` into the CPU cache (see `prefetch.rs`).
    #[inline(always)]
    pub(super) fn prefetch_bucket(&self, key: u64) {
        super::prefetch::prefetch(&self.heads[self.home(key)]);
    }

    /// The first slot of `key`'s chain, `NIL` when empty.
    #[inline(always)]
    pub(super) fn head(&self, key: u64) -> u32 {
        self.heads[self.home(key)]
    }

    /// Start loading slot `id`'s chain link (read when `id` is removed).
    #[inline(always)]
    pub(super) fn prefetch_next(&self, id: u32) {
        if let Some(n) = self.next.get(id as usize) {
            super::prefetch::prefetch(n);
        }
    }

    /// Whether the next insert must grow the table first (its load would pass 1).
    #[inline(always)]
    pub(super) fn needs_growth(&self) -> bool {
        self.len >= self.heads.len() && self.heads.len() < 1 << MAX_BUCKETS_LOG2
    }

    /// Add slot `id` under `key`, which must be absent. The caller keeps the load in bounds
    /// ([`Index::needs_growth`]).
    #[inline(always)]
    pub(super) fn insert(&mut self, key: u64, id: u32) {
        debug_assert!(id != NIL);
        let i = id as usize;
        if i >= self.next.len() {
            // A slot the arena has just added (slots are handed out in order).
            assert_eq!(i, self.next.len(), "slot ids grow one at a time");
            self.next.push(NIL);
        }
        let h = self.home(key);
        self.next[i] = self.heads[h];
        self.heads[h] = id;
        self.len += 1;
    }

    /// Remove slot `id`, present under `key`.
    #[inline(always)]
    pub(super) fn remove(&mut self, key: u64, id: u32) {
        let h = self.home(key);
        let after = self.next[id as usize];
        let mut at = self.heads[h];
        if at == id {
            self.heads[h] = after;
        } else {
            // Bounded: a chain holds at most every key once, `id` among them.
            for _ in 0..self.len {
                assert!(at != NIL, "removing an absent key");
                let n = self.next[at as usize];
                if n == id {
                    self.next[at as usize] = after;
                    break;
                }
                at = n;
            }
        }
        self.len -= 1;
    }

    /// Double the buckets, re-chaining every key.
    pub(super) fn grow<E: Slot>(&mut self, entries: &[E]) {
        let size = (self.heads.len() * 2).min(1 << MAX_BUCKETS_LOG2);
        let old = std::mem::replace(&mut self.heads, vec![NIL; size]);
        self.mask = size - 1;
        self.shift = 64 - size.trailing_zeros();
        let len = self.len;
        self.len = 0;
        for head in old {
            let mut id = head;
            // Bounded by the keys in the table.
            for _ in 0..len + 1 {
                if id == NIL {
                    break;
                }
                let following = self.next[id as usize];
                self.insert(entries[id as usize].key(), id);
                id = following;
            }
        }
        assert_eq!(self.len, len, "every key re-chained");
    }

    /// Heap bytes of the table (buckets and chain links).
    pub(super) fn heap_bytes(&self) -> usize {
        (self.heads.capacity() + self.next.capacity()) * std::mem::size_of::<u32>()
    }
}
