//! The key index of the entry arena (`slab.rs`): an open-addressing table of `u32` slot ids
//! whose keys are read from the entries they point to.
//!
//! A bucket packs the slot id (low `slot_bits` bits, `slot_bits = log2(buckets)`) with the
//! entry's displacement from its home bucket (high bits, saturating). Slot ids fit because the
//! arena never holds more entries than 3/4 of the buckets (1/2 but at the largest size), so the
//! all-ones slot id is never used and `u32::MAX` can mark an empty bucket. The displacement lets a lookup skip buckets
//! whose entry has a different home without reading that entry, and lets deletion shift
//! entries back without reading any key: both save a cache miss into the arena.
//!
//! Entries are kept in Robin Hood order: along a run of occupied buckets the entries' home
//! buckets never decrease (an insert that meets an entry nearer its home than the one it
//! carries swaps them and carries the other on). A lookup therefore stops at the first entry
//! whose home lies after its key's, so an absent key costs about as few probes as a present
//! one, and a deletion shifts the run back only up to the first entry at its home.
//!
//! With the displacement in the high bits, "stored displacement below `d`" is a plain
//! comparison of the bucket with `d << slot_bits`; the per-table constants are computed once.

use super::slab::Slot;

/// An empty bucket: every bit set (slot all-ones is never a live slot id).
pub(super) const EMPTY: u32 = u32::MAX;
/// 2^64 / golden ratio: consecutive keys land far apart.
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;
/// Largest table: keeps at least 1 bit of every bucket for the (saturating) displacement.
pub(crate) const MAX_BUCKETS_LOG2: u32 = 31;

#[derive(Clone, Debug)]
pub(super) struct Index {
    buckets: Vec<u32>,
    /// `buckets.len() - 1`.
    mask: usize,
    /// 64 - log2(buckets.len()): the hash's top bits pick the home bucket.
    shift: u32,
    slot_bits: u32,
    /// Low `slot_bits` bits set.
    slot_mask: u32,
    /// One displacement step, `1 << slot_bits`.
    step: u32,
    /// The largest (saturated) displacement field, `u32::MAX >> slot_bits`.
    max_disp: u32,
    len: usize,
    /// `len` past which an insert must grow the table first (load 1/2), `usize::MAX` for the
    /// largest table.
    grow_at: usize,
}

impl Index {
    /// A table that holds `n` keys at a load factor of at most 1/2 (3/4 at the largest size).
    /// A lower load would probe less but cost more than 16 bytes a key; at 1/2 a lookup
    /// mostly reads one bucket, and an insert or a removal moves few entries.
    pub(super) fn for_entries(n: usize) -> Index {
        let want = n.saturating_mul(2) + 1;
        let size = want
            .next_power_of_two()
            .clamp(8, 1usize << MAX_BUCKETS_LOG2);
        let bits = size.trailing_zeros();
        assert!((3..=MAX_BUCKETS_LOG2).contains(&bits));
        Index {
            buckets: vec![EMPTY; size],
            mask: size - 1,
            shift: 64 - bits,
            slot_bits: bits,
            slot_mask: (1u32 << bits) - 1,
            step: 1u32 << bits,
            max_disp: u32::MAX >> bits,
            len: 0,
            grow_at: if size < 1 << MAX_BUCKETS_LOG2 {
                size / 2
            } else {
                usize::MAX
            },
        }
    }

    /// Buckets in the table.
    #[inline(always)]
    pub(super) fn buckets(&self) -> &[u32] {
        &self.buckets
    }

    /// Keys in the table.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub(super) fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(FIB) >> self.shift) as usize
    }

    #[inline(always)]
    pub(super) fn slot_of(&self, v: u32) -> u32 {
        v & self.slot_mask
    }

    #[inline(always)]
    fn encode(&self, disp: usize, slot: u32) -> u32 {
        debug_assert!(slot < self.slot_mask);
        ((disp.min(self.max_disp as usize) as u32) << self.slot_bits) | slot
    }

    /// Displacement of the entry in bucket `j` holding `v`; reads the key only when the stored
    /// value saturated.
    #[inline(always)]
    fn disp_at<E: Slot>(&self, entries: &[E], j: usize, v: u32) -> usize {
        let d = v >> self.slot_bits;
        if d < self.max_disp {
            d as usize
        } else {
            let key = entries[self.slot_of(v) as usize].key();
            j.wrapping_sub(self.home(key)) & self.mask
        }
    }

    /// The slot of `key`, if present.
    #[inline(always)]
    pub(super) fn find<E: Slot>(&self, entries: &[E], key: u64) -> Option<u32> {
        let mut i = self.home(key);
        // `d << slot_bits` for the probe distance `d`, saturating like a stored value.
        let mut want = 0u32;
        let top = self.max_disp << self.slot_bits;
        // Bounded: the table always has an empty bucket (load <= 3/4).
        for _ in 0..self.buckets.len() {
            let v = self.buckets[i];
            // An empty bucket, or an entry whose home lies after ours (`key` would sit before
            // it): absent. A saturated entry is never below `want`.
            if v == EMPTY || v < want {
                return None;
            }
            // Same displacement = same home bucket: only then can it be our key.
            if v ^ want <= self.slot_mask && entries[(v & self.slot_mask) as usize].key() == key {
                return Some(v & self.slot_mask);
            }
            i = (i + 1) & self.mask;
            if want != top {
                want += self.step;
            }
        }
        None
    }

    /// Whether the next insert must grow the table first.
    #[inline(always)]
    pub(super) fn needs_growth(&self) -> bool {
        self.len >= self.grow_at
    }

    /// Add `id` under `key`, which must be absent and whose entry is stored. The caller keeps
    /// the load in bounds ([`Index::needs_growth`]).
    #[inline(always)]
    pub(super) fn insert<E: Slot>(&mut self, entries: &[E], key: u64, id: u32) {
        assert!(self.len < self.buckets.len() - 1, "index full");
        let mut i = self.home(key);
        let mut slot = id;
        let mut d = 0usize;
        // Bounded: a bucket is empty; every probe moves one bucket on.
        for _ in 0..self.buckets.len() {
            let v = self.buckets[i];
            if v == EMPTY {
                self.buckets[i] = self.encode(d, slot);
                self.len += 1;
                return;
            }
            let held = self.disp_at(entries, i, v);
            if held < d {
                // The resident is nearer its home: it moves on, the carried entry stays.
                self.buckets[i] = self.encode(d, slot);
                slot = v & self.slot_mask;
                d = held;
            }
            i = (i + 1) & self.mask;
            d += 1;
        }
        unreachable!("an index below full load has an empty bucket");
    }

    /// Remove `key` (present, mapped to `id`), shifting the rest of its run back one bucket
    /// up to the first entry already at its home: every key stays reachable from its home
    /// bucket in Robin Hood order, without tombstones.
    #[inline(always)]
    pub(super) fn remove<E: Slot>(&mut self, entries: &[E], key: u64, id: u32) {
        let mut hole = self.home(key);
        let mut found = false;
        // Bounded by the table size; the key is present.
        for _ in 0..self.buckets.len() {
            let v = self.buckets[hole];
            assert!(v != EMPTY, "removing an absent key");
            if v & self.slot_mask == id {
                found = true;
                break;
            }
            hole = (hole + 1) & self.mask;
        }
        assert!(found, "removing an absent key");
        for _ in 0..self.buckets.len() {
            let j = (hole + 1) & self.mask;
            let v = self.buckets[j];
            // Empty, or at its home (displacement 0): the run's shifted part ends here.
            if v == EMPTY || v <= self.slot_mask {
                break;
            }
            self.buckets[hole] = if v >> self.slot_bits < self.max_disp {
                v - self.step
            } else {
                self.encode(self.disp_at(entries, j, v) - 1, v & self.slot_mask)
            };
            hole = j;
        }
        self.buckets[hole] = EMPTY;
        self.len -= 1;
    }

    /// A table twice this one's size holding the entries `live` names.
    pub(super) fn rebuilt<E: Slot>(&self, entries: &[E], live: impl Iterator<Item = u32>) -> Index {
        let mut bigger = Index::for_entries(self.buckets.len());
        for id in live {
            bigger.insert(entries, entries[id as usize].key(), id);
        }
        bigger
    }

    /// Heap bytes of the table.
    pub(super) fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<u32>()
    }
}
