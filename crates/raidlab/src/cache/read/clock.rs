//! CLOCK (second chance, FIFO with reinsertion).
//!
//! Entries sit in a FIFO queue with a small saturating reference counter. A new entry starts at
//! 0; a hit adds 1 up to [`MAX_COUNT`]. To evict, the back entry is examined: a non-zero
//! counter is decremented and the entry goes back to the front; a zero counter makes it the
//! victim. With `MAX_COUNT = 1` this is the classic one-bit CLOCK, and it is exactly
//! libCacheSim's `Clock` with its default `n-bit-counter=1`.
//!
//! # VDF-CLOCK
//!
//! CLOCK has no single eviction order in which VDF's "`p x MP`" could be compared across
//! disks (see `vdf.rs`): the victim is whatever unreferenced entry the hand reaches first,
//! and referenced entries are re-queued as they are passed. The hand's rotation is CLOCK's
//! estimate of `p`: an entry is evicted once it has gone one full rotation without a
//! reference. VDF-CLOCK stretches that wait by the miss penalty: when the hand reaches an
//! unreferenced entry whose current miss cost (`cost.cost_of(key)`, read at that moment,
//! never cached) is `MP`, the entry is re-queued like a referenced one, up to `MP - 1` times
//! (counted in `passes`, reset by a hit), before it can be the victim. A cold block of the
//! failed disk of an n-disk RAID-5 thus stays `n - 1` rotations: the block whose time cold
//! divided by `MP` is largest goes first, VDF-LRU's rule measured in rotations. This is the
//! "cheaper variant" sketched in `vdf.rs`; the per-disk-clocks variant sketched there would
//! need a second list per entry and clears bits on every disk's clock at each eviction. While
//! `cost.degraded()` is false no entry gets an extra pass and VDF-CLOCK is CLOCK exactly
//! (checked by a property test).

use super::list::{Link, List};
use super::slab::Slab;
use super::{Access, MissCost, ReadPolicy};

/// Saturation value of the reference counter (one bit).
pub const MAX_COUNT: u8 = 1;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    link: Link,
    size: u32,
    count: u8,
    /// VDF-CLOCK: rotations survived unreferenced since the last access.
    passes: u16,
}

impl_slot!(Entry);

/// CLOCK (or VDF-CLOCK) over a fixed arena.
#[derive(Clone, Debug)]
pub struct Clock {
    slab: Slab<Entry>,
    queue: List,
    /// VDF-CLOCK: unreferenced entries get `cost - 1` extra rotations.
    weighted: bool,
    used: u64,
    capacity: u64,
}

impl Clock {
    /// `capacity` units; room for `entries` entries before the arena grows.
    pub fn new(capacity: u64, entries: usize) -> Self {
        Self::with_weighting(capacity, entries, false)
    }

    /// VDF-CLOCK: CLOCK whose unreferenced entries wait `cost - 1` extra rotations.
    pub fn vdf(capacity: u64, entries: usize) -> Self {
        Self::with_weighting(capacity, entries, true)
    }

    fn with_weighting(capacity: u64, entries: usize, weighted: bool) -> Self {
        Clock {
            slab: Slab::with_capacity(entries),
            queue: List::new(),
            weighted,
            used: 0,
            capacity,
        }
    }

    fn unlink(&mut self, id: u32) {
        self.queue.unlink(self.slab.nodes(), id);
    }

    /// Rotate the hand until an unreferenced entry (with no extra rotation left, weighted and
    /// degraded) is at the back, and return it (still queued). Terminates: each pass over an
    /// entry lowers its counter or raises its `passes` towards the bounded `cost - 1`.
    #[inline(always)]
    fn find_victim(&mut self, cost: Option<&dyn MissCost>) -> Option<u32> {
        let cost = cost.filter(|c| self.weighted && c.degraded());
        loop {
            let back = self.queue.back()?;
            let e = self.slab.get_mut(back);
            if e.count > 0 {
                e.count -= 1;
            } else {
                match cost {
                    Some(c) if u32::from(e.passes) + 1 < c.cost_of(e.key) => {
                        e.passes = e.passes.saturating_add(1);
                    }
                    _ => return Some(back),
                }
            }
            self.queue.move_to_front(self.slab.nodes(), back);
        }
    }

    /// [`Clock::find_victim`], then remove it.
    fn pop_victim(&mut self, cost: Option<&dyn MissCost>) -> Option<u64> {
        let victim = self.find_victim(cost)?;
        self.queue.unlink(self.slab.nodes(), victim);
        let e = self.slab.remove(victim);
        self.used -= u64::from(e.size);
        Some(e.key)
    }
}

impl ReadPolicy for Clock {
    fn name(&self) -> &'static str {
        if self.weighted {
            "vdf-clock"
        } else {
            "clock"
        }
    }

    #[inline(always)]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        match self.slab.find(acc.key) {
            Some(id) => {
                let e = self.slab.get_mut(id);
                e.count = (e.count + 1).min(MAX_COUNT);
                e.passes = 0;
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
        while self.used + size > self.capacity {
            let Some(victim) = self.find_victim(Some(acc.cost)) else {
                break;
            };
            self.used -= u64::from(self.slab.get(victim).size);
            if self.used + size <= self.capacity {
                // The last victim's slot goes to the new entry at the front, as removing and
                // inserting would (block mode: every eviction).
                evicted.push(self.slab.rekey(victim, acc.key));
                let e = self.slab.get_mut(victim);
                (e.size, e.count, e.passes) = (acc.size, 0, 0);
                self.queue.move_to_front(self.slab.nodes(), victim);
                self.used += size;
                return true;
            }
            self.queue.unlink(self.slab.nodes(), victim);
            evicted.push(self.slab.remove(victim).key);
        }
        let id = self.slab.insert(Entry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
            count: 0,
            passes: 0,
        });
        self.queue.push_front(self.slab.nodes(), id);
        self.used += size;
        true
    }

    slab_policy_accessors!();

    /// CLOCK only: VDF-CLOCK needs the miss cost, which `evict_one` is not given.
    fn evict_one(&mut self, evicted: &mut Vec<u64>) -> bool {
        if self.weighted {
            return false;
        }
        match self.pop_victim(None) {
            Some(k) => {
                evicted.push(k);
                true
            }
            None => false,
        }
    }

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{run_evictions, step};
    use super::super::vdf::tests::Raid5;
    use super::*;

    #[test]
    fn worked_example() {
        // Capacity 3; queue shown front .. back with counters.
        // 1 2 3 miss: [3:0 2:0 1:0]. 1 hit: 1:1. 2 hit: 2:1.
        // 4 miss: back 1:1 -> 1:0 to front [1:0 3:0 2:1]; back 2:1 -> 2:0 to front
        //   [2:0 1:0 3:0]; back 3:0 is the victim -> [4:0 2:0 1:0].
        // 5 miss: victim 1 -> [5 4 2]. 2 hit (2:1). 6 miss: 2:1 -> front, victim 4.
        let mut p = Clock::new(3, 3);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 1, 2, 4, 5, 2, 6]);
        assert_eq!(
            h,
            [false, false, false, true, true, false, false, true, false]
        );
        assert_eq!(ev, [3, 1, 4]);
    }

    #[test]
    fn vdf_clock_keeps_the_failed_disks_block() {
        // 3-disk RAID-5, disk 0 failed (MP = 2), key k on disk k % 3; capacity 3; queue
        // front .. back with counters, `(p)` = extra rotations spent.
        //  0 1 2 miss                 [2:0 1:0 0:0]
        //  4 miss: back 0:0, MP 2: one extra rotation -> [0(1) 2 1]; back 1, MP 1: victim
        //                             [4 0(1) 2]
        //  5 miss: back 2, MP 1: victim            [5 4 0(1)]
        //  0 hit: 0:1, passes reset                [5 4 0:1]
        //  7 miss: back 0:1 -> 0:0 to the front [0 5 4]; back 4: victim
        //                             [7 0 5]
        //  8 miss: back 5: victim     [8 7 0]
        //  10 miss: back 0:0, MP 2, passes 0: extra rotation [0(1) 8 7]; 7 victim
        // Plain CLOCK evicts 0 at the first miss, and again at 10's.
        let cost = Raid5 {
            disks: 3,
            failed: Some(0),
        };
        let keys = [0, 1, 2, 4, 5, 0, 7, 8, 10];
        let run = |p: &mut Clock| {
            let mut ev = Vec::new();
            let h: Vec<bool> = keys
                .iter()
                .enumerate()
                .map(|(i, &k)| step(p, k, 1, i as u64, &cost, &mut ev))
                .collect();
            (h, ev)
        };
        let (h, ev) = run(&mut Clock::vdf(3, 3));
        assert_eq!(
            h,
            [false, false, false, false, false, true, false, false, false]
        );
        assert_eq!(ev, [1, 2, 4, 5, 7]);
        let (h, ev) = run(&mut Clock::new(3, 3));
        assert!(!h[5]);
        assert_eq!(ev, [0, 1, 2, 4, 5, 0]);
    }
}
