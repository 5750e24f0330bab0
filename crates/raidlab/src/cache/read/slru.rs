//! Segmented LRU (Karedla, Love and Wherry, IEEE Computer 1994), with `n` segments.
//!
//! The cache is split into `n` LRU segments of `floor(c / n)` units each, segment 0 the
//! probationary one and `n - 1` the most protected. A hit in segment `i < n - 1` moves the
//! entry to the head of segment `i + 1`; a hit in the top segment moves it to that
//! segment's head. A segment pushed over its share *cools*: its LRU entry drops to the head
//! of the segment below, which may cool in turn. The victim is the LRU entry of the lowest
//! non-empty segment. The paper's SLRU is `n = 2`; libCacheSim's `SLRU` (and the default
//! here) uses `n = 4`.
//!
//! # libCacheSim
//!
//! This follows libCacheSim's `SLRU` (`cache/eviction/SLRU.c`):
//! - segment shares are `floor(c / n)` units each, sizes counted in units (bytes);
//! - a new entry enters the *lowest segment with room for it* (so while the cache fills, new
//!   entries land in higher segments once the lower ones are full), or segment 0 when none
//!   has room once the cache has made room for it;
//! - the eviction before an insert runs until the entry fits in the whole cache.
//!
//! One deliberate difference: in libCacheSim, cooling that reaches segment 0 while it holds
//! more than its share *evicts* from it, during a hit. A [`ReadPolicy::get`] has no way to
//! report an eviction, so here cooling stops at segment 0, which may then hold more than its
//! share; the next insert evicts its LRU entries first, as libCacheSim's would. The capacity
//! is never exceeded either way. Segment 0 only holds more than its share when an entry was
//! inserted into it with no segment having room, which with unit sizes happens only when `n`
//! does not divide the capacity: block-mode caches whose size is a multiple of `n` behave
//! exactly like libCacheSim's, objects of varied sizes may differ a little (see `xcheck.rs`).
//! libCacheSim also refuses entries larger than one segment; here any entry that fits in the
//! cache is cached, as [`ReadPolicy::insert`] promises.

use super::list::{Link, List};
use super::slab::Slab;
use super::{Access, ReadPolicy};

/// Most segments a cache may have.
pub const MAX_SEGMENTS: u32 = 16;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    link: Link,
    size: u32,
    seg: u8,
}

impl_slot!(Entry);

/// SLRU over a fixed arena.
#[derive(Clone, Debug)]
pub struct Slru {
    slab: Slab<Entry>,
    /// Segment 0 (probationary) first.
    segs: Vec<List>,
    /// Units held by each segment.
    seg_used: Vec<u64>,
    /// Each segment's share, `floor(capacity / n)`.
    seg_cap: u64,
    used: u64,
    capacity: u64,
}

impl Slru {
    /// `capacity` units in `segments` (1..=[`MAX_SEGMENTS`]) segments; room for `entries`
    /// entries before the arena grows.
    pub fn new(capacity: u64, segments: u32, entries: usize) -> Self {
        let n = segments.clamp(1, MAX_SEGMENTS) as usize;
        Slru {
            slab: Slab::with_capacity(entries),
            segs: vec![List::new(); n],
            seg_used: vec![0; n],
            seg_cap: capacity / n as u64,
            used: 0,
            capacity,
        }
    }

    #[inline(always)]
    fn unlink(&mut self, id: u32) {
        let e = *self.slab.get(id);
        self.segs[e.seg as usize].unlink(self.slab.nodes(), id);
        self.seg_used[e.seg as usize] -= u64::from(e.size);
    }

    #[inline(always)]
    fn push_front(&mut self, id: u32, seg: usize) {
        let e = self.slab.get_mut(id);
        e.seg = seg as u8;
        let size = u64::from(e.size);
        self.segs[seg].push_front(self.slab.nodes(), id);
        self.seg_used[seg] += size;
    }

    /// Move segment `seg`'s LRU entry (`seg >= 1`, non-empty) to the head of `seg - 1`, and
    /// cool that one while it is over its share, down to segment 1. Terminates: each call
    /// moves one entry down, and the loop below only drains segment `seg - 1`.
    fn cool(&mut self, seg: usize) {
        debug_assert!(seg >= 1);
        let Some(id) = self.segs[seg].back() else {
            return;
        };
        self.unlink(id);
        self.push_front(id, seg - 1);
        if seg > 1 {
            while self.seg_used[seg - 1] > self.seg_cap {
                self.cool(seg - 1);
            }
        }
    }

    /// Unlink the LRU entry of the lowest non-empty segment and return it.
    #[inline(always)]
    fn unlink_victim(&mut self) -> Option<u32> {
        let seg = self.segs.iter().position(|l| !l.is_empty())?;
        let id = self.segs[seg].back()?;
        self.unlink(id);
        Some(id)
    }

    /// Evict the LRU entry of the lowest non-empty segment.
    fn pop_victim(&mut self) -> Option<u64> {
        let id = self.unlink_victim()?;
        let e = self.slab.remove(id);
        self.used -= u64::from(e.size);
        Some(e.key)
    }
}

impl ReadPolicy for Slru {
    fn name(&self) -> &'static str {
        "slru"
    }

    #[inline(always)]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        let Some(id) = self.slab.find(acc.key) else {
            return false;
        };
        let seg = self.slab.get(id).seg as usize;
        let top = self.segs.len() - 1;
        if seg == top {
            self.segs[top].move_to_front(self.slab.nodes(), id);
        } else {
            self.unlink(id);
            self.push_front(id, seg + 1);
            while self.seg_used[seg + 1] > self.seg_cap {
                self.cool(seg + 1);
            }
        }
        true
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
            seg: 0,
        };
        // The last victim's slot goes to the new entry, as removing and inserting would
        // (block mode: every eviction).
        let mut reuse = None;
        while self.used + size > self.capacity {
            let Some(victim) = self.unlink_victim() else {
                break;
            };
            self.used -= u64::from(self.slab.get(victim).size);
            if self.used + size <= self.capacity {
                reuse = Some(victim);
                break;
            }
            evicted.push(self.slab.remove(victim).key);
        }
        let seg = self
            .seg_used
            .iter()
            .position(|&u| u + size <= self.seg_cap)
            .unwrap_or(0);
        let id = match reuse {
            Some(victim) => {
                evicted.push(self.slab.replace(victim, entry).key);
                victim
            }
            None => self.slab.insert(entry),
        };
        self.push_front(id, seg);
        self.used += size;
        debug_assert!(self.used <= self.capacity);
        true
    }

    slab_policy_accessors!();

    fn evict_one(&mut self, evicted: &mut Vec<u64>) -> bool {
        match self.pop_victim() {
            Some(k) => {
                evicted.push(k);
                true
            }
            None => false,
        }
    }

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes() + self.segs.capacity() * std::mem::size_of::<List>() * 2
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::run_evictions;
    use super::*;

    #[test]
    fn worked_example() {
        // Capacity 4, two segments of 2 (S0 probationary, S1 protected), head .. tail.
        // (libCacheSim's SLRU with n-seg=2 and every obj_size 1 gives the same hits.)
        //  1 2 miss: S0 has room          S0=[2 1]
        //  3 4 miss: S0 full, S1 has room: the lowest segment with room
        //                                 S0=[2 1]  S1=[4 3]
        //  1 hit: to S1's head; S1 = 3 > 2 cools: its LRU 3 drops to S0's head
        //                                 S0=[3 2]  S1=[1 4]
        //  5 miss: full; victim = S0's LRU 2; 5 enters S0    S0=[5 3]  S1=[1 4]
        //  4 hit: top segment, to its head                   S1=[4 1]
        //  3 hit: to S1; S1 cools 1 into S0                  S0=[1 5]  S1=[3 4]
        //  6 miss: victim 5 (S0's LRU)                       S0=[6 1]
        //  7 miss: victim 1                                  S0=[7 6]
        //  2 miss: victim 6                                  S0=[2 7]
        let mut p = Slru::new(4, 2, 8);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 4, 1, 5, 4, 3, 6, 7, 2]);
        assert_eq!(
            h,
            [false, false, false, false, true, false, true, true, false, false, false]
        );
        assert_eq!(ev, [2, 5, 1, 6]);
        assert!(p.contains(3) && p.contains(4) && p.contains(7) && p.contains(2));
    }

    #[test]
    fn cooling_cascades_through_segments() {
        // Capacity 3, three segments of 1. 1 2 3 fill S0, S1, S2 (lowest segment with room).
        //  1 hit: S0 -> S1 (S1 = 2 > 1): S1 cools 2 into S0.   S0=[2] S1=[1] S2=[3]
        //  1 hit: S1 -> S2 (S2 = 2 > 1): S2 cools 3 into S1 (S1 = 1, no more cooling).
        //                                                       S0=[2] S1=[3] S2=[1]
        //  4 miss: victim 2.  3 hit: -> S2, cools 1 into S1.   S0=[4] S1=[1] S2=[3]
        //  5 miss: victim 4.
        let mut p = Slru::new(3, 3, 8);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 1, 1, 4, 3, 5]);
        assert_eq!(h, [false, false, false, true, true, false, true, false]);
        assert_eq!(ev, [2, 4]);
        assert_eq!(p.seg_used, [1, 1, 1]);
    }

    #[test]
    fn segment_zero_may_hold_more_than_its_share_but_the_cache_never_overflows() {
        // Capacity 5, two segments of 2 (1 unit belongs to no segment). 1..4 fill S0 and S1;
        // 5 fits in the cache but in no segment: it enters S0.   S0=[5 2 1]  S1=[4 3]
        //  1 hit: -> S1 (3 > 2), which cools 3 into S0: S0=[3 5 2] holds 3 > 2. libCacheSim
        //     would now evict S0's LRU (2) inside the hit; here it stays until the next insert.
        //  2 hit (a miss in libCacheSim): -> S1, which cools 4 into S0: S0=[4 3 5] S1=[2 1]
        //  6 miss: the cache is full: victim 5, S0's LRU; 6 enters S0 (no segment has room).
        let mut p = Slru::new(5, 2, 8);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 4, 5, 1, 2, 6]);
        assert_eq!(h, [false, false, false, false, false, true, true, false]);
        assert_eq!(ev, [5]);
        assert!(p.used() <= 5);
    }
}
