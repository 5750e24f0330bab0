//! Frequency buckets for LFU-style ordering in O(1) per access.
//!
//! Entries of equal reference count share a bucket; buckets form a list in increasing count
//! order, so the least frequently used entry is in the first bucket. Inside a bucket entries
//! are a [`List`] with the newest arrival at the front; the victim is the back of the first
//! bucket.
//!
//! Tie-break among equal counts: the entry that reached its current count *earliest* goes
//! first. An entry reaches a count exactly when it is accessed (insert = count 1, every hit
//! = +1), so this is "oldest last access first" — the same order libCacheSim's LFU uses, and
//! the timestamp tie-break of VDF-LFU.
//!
//! Several independent orderings ("groups", e.g. one per disk for VDF-LFU) can share one bucket
//! arena. Buckets are allocated from a free list and the arena only grows when more distinct
//! counts are alive at once than ever before, which is rare and amortised.

use super::list::{List, NIL};
use super::slab::Slot;

/// An entry that lives in a frequency bucket.
pub(crate) trait Bucketed: Slot {
    fn bucket(&self) -> u32;
    fn set_bucket(&mut self, b: u32);
}

/// `impl Bucketed` for an entry struct with a `bucket: u32` field.
macro_rules! impl_bucketed {
    ($entry:ty) => {
        impl $crate::cache::read::freq::Bucketed for $entry {
            #[inline]
            fn bucket(&self) -> u32 {
                self.bucket
            }
            #[inline]
            fn set_bucket(&mut self, b: u32) {
                self.bucket = b;
            }
        }
    };
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    count: u64,
    members: List,
    /// Neighbouring buckets of the same group, in count order.
    lower: u32,
    higher: u32,
}

/// Count-ordered buckets for one or more groups of entries.
#[derive(Clone, Debug)]
pub(crate) struct FreqLists {
    buckets: Vec<Bucket>,
    free: u32,
    /// Lowest-count bucket of each group.
    first: Vec<u32>,
}

impl FreqLists {
    /// `groups` independent orderings; room for `buckets` live buckets before growing.
    pub fn new(groups: usize, buckets: usize) -> Self {
        FreqLists {
            buckets: Vec::with_capacity(buckets),
            free: NIL,
            first: vec![NIL; groups.max(1)],
        }
    }

    /// Make sure groups `0..groups` exist (new groups start empty).
    pub fn ensure_groups(&mut self, groups: usize) {
        if self.first.len() < groups {
            self.first.resize(groups, NIL);
        }
    }

    /// Reference count of the entry in bucket `b`.
    #[inline]
    pub fn count(&self, b: u32) -> u64 {
        self.buckets[b as usize].count
    }

    /// Oldest entry of the lowest count in group `g`.
    #[inline]
    pub fn victim(&self, g: usize) -> Option<u32> {
        let b = self.first[g];
        if b == NIL {
            return None;
        }
        self.buckets[b as usize].members.back()
    }

    /// Add detached entry `id` to group `g` with count `count` (>= 1). O(1) when `count` is 1
    /// (every plain insert); a restored count walks the bucket list (MQ-like uses only).
    #[inline]
    pub fn insert<E: Bucketed>(&mut self, nodes: &mut [E], g: usize, id: u32, count: u64) {
        let mut below = NIL;
        let mut b = self.first[g];
        while b != NIL && self.buckets[b as usize].count < count {
            below = b;
            b = self.buckets[b as usize].higher;
        }
        let target = if b != NIL && self.buckets[b as usize].count == count {
            b
        } else {
            self.new_bucket_after(g, below, count)
        };
        self.buckets[target as usize].members.push_front(nodes, id);
        nodes[id as usize].set_bucket(target);
    }

    /// Count one more reference of entry `id` (in group `g`): move it to the next bucket.
    #[inline]
    pub fn touch<E: Bucketed>(&mut self, nodes: &mut [E], g: usize, id: u32) {
        let b = nodes[id as usize].bucket();
        let next_count = self.buckets[b as usize].count + 1;
        let higher = self.buckets[b as usize].higher;
        let target = if higher != NIL && self.buckets[higher as usize].count == next_count {
            higher
        } else if self.buckets[b as usize].members.len() == 1 {
            // The entry is alone at its count and no bucket holds the next one: its bucket
            // takes the next count in place, which is where moving it to a new bucket and
            // dropping the empty one would leave it.
            self.buckets[b as usize].count = next_count;
            return;
        } else {
            self.new_bucket_after(g, b, next_count)
        };
        self.buckets[b as usize].members.unlink(nodes, id);
        self.buckets[target as usize].members.push_front(nodes, id);
        nodes[id as usize].set_bucket(target);
        if self.buckets[b as usize].members.is_empty() {
            self.drop_bucket(g, b);
        }
    }

    /// Give entry `id` (in group `g`) count `count` again, as [`FreqLists::remove`] then
    /// [`FreqLists::insert`] would, for a slot handed from an evicted entry to a new one. When
    /// `id` already has that count it moves to the front of its own bucket, which is where
    /// removing it (dropping its bucket if it was alone) and inserting it leave it.
    #[inline(always)]
    pub fn reinsert<E: Bucketed>(&mut self, nodes: &mut [E], g: usize, id: u32, count: u64) {
        let b = nodes[id as usize].bucket();
        if self.buckets[b as usize].count == count {
            self.buckets[b as usize].members.move_to_front(nodes, id);
        } else {
            self.remove(nodes, g, id);
            self.insert(nodes, g, id, count);
        }
    }

    /// Take entry `id` out of group `g`.
    #[inline]
    pub fn remove<E: Bucketed>(&mut self, nodes: &mut [E], g: usize, id: u32) {
        let b = nodes[id as usize].bucket();
        self.buckets[b as usize].members.unlink(nodes, id);
        nodes[id as usize].set_bucket(NIL);
        if self.buckets[b as usize].members.is_empty() {
            self.drop_bucket(g, b);
        }
    }

    /// Create an empty bucket right above `below` (NIL: at the bottom) of group `g`.
    fn new_bucket_after(&mut self, g: usize, below: u32, count: u64) -> u32 {
        let higher = if below == NIL {
            self.first[g]
        } else {
            self.buckets[below as usize].higher
        };
        let bucket = Bucket {
            count,
            members: List::new(),
            lower: below,
            higher,
        };
        let id = if self.free != NIL {
            let id = self.free;
            self.free = self.buckets[id as usize].higher;
            self.buckets[id as usize] = bucket;
            id
        } else {
            self.buckets.push(bucket);
            (self.buckets.len() - 1) as u32
        };
        if below == NIL {
            self.first[g] = id;
        } else {
            self.buckets[below as usize].higher = id;
        }
        if higher != NIL {
            self.buckets[higher as usize].lower = id;
        }
        id
    }

    fn drop_bucket(&mut self, g: usize, b: u32) {
        let Bucket { lower, higher, .. } = self.buckets[b as usize];
        if lower == NIL {
            self.first[g] = higher;
        } else {
            self.buckets[lower as usize].higher = higher;
        }
        if higher != NIL {
            self.buckets[higher as usize].lower = lower;
        }
        self.buckets[b as usize].higher = self.free;
        self.free = b;
    }

    pub fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>() + self.first.capacity() * 4
    }
}
