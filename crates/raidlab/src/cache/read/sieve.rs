//! SIEVE (Zhang, Yang, Yue, Vigfusson and Rashmi, NSDI 2024), and VDF-SIEVE, its
//! victim-disk-aware variant.
//!
//! # SIEVE
//!
//! One FIFO queue of resident entries, new entries at the head, each with a `visited` bit set
//! by a hit. A *hand* walks from the tail towards the head looking for a victim: a visited
//! entry keeps its place, loses its bit and the hand moves on; the first unvisited entry is
//! evicted and the hand stops at its newer neighbour, where the next search resumes. When the
//! hand runs off the head it wraps to the tail. Unlike CLOCK, survivors are not moved to the
//! head, so new entries are examined (and, if unvisited, evicted) before old popular ones.
//!
//! This is exactly libCacheSim's `Sieve` (`cache/eviction/Sieve.c`): a hit sets the bit to 1
//! (not a counter), an insert clears it, a removal under the hand moves the hand to the
//! removed entry's newer neighbour, and an object larger than the cache is not inserted.
//!
//! # VDF-SIEVE
//!
//! SIEVE has no single eviction order in which to compare "`p x MP`" across disks (see
//! `vdf.rs`): the victim is wherever the hand stops. The hand's sweep is what estimates `p`:
//! an entry is evicted when it has stayed unvisited for one full sweep. VDF-SIEVE makes that
//! wait proportional to the miss penalty: when the hand reaches an unvisited entry whose
//! current miss cost (`cost.cost_of(key)`, read at that moment, never cached) is `MP`, the
//! entry survives `MP - 1` such passes before it is evicted, counted in `passes` and reset
//! by a hit. So a cold block of the failed disk of an n-disk RAID-5 is evicted only after
//! staying cold for `n - 1` sweeps: its estimated access probability is divided by the time
//! it has been cold, and its weight `p x MP` is compared with one sweep's threshold, which is
//! VDF's "largest `age / MP` goes first" rule in the units the hand measures age in. Survivors
//! keep their place, as in SIEVE. While `cost.degraded()` is false no entry gets an extra
//! pass and VDF-SIEVE is SIEVE exactly (checked by a property test).

use super::list::{Link, List, NIL};
use super::slab::Slab;
use super::{Access, MissCost, ReadPolicy};

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    /// `prev` = newer neighbour (towards the head), `next` = older (towards the tail).
    link: Link,
    size: u32,
    visited: bool,
    /// VDF-SIEVE: passes of the hand survived while unvisited since the last access.
    passes: u16,
}

impl_slot!(Entry);

/// SIEVE (or VDF-SIEVE) over a fixed arena.
#[derive(Clone, Debug)]
pub struct Sieve {
    slab: Slab<Entry>,
    queue: List,
    /// Where the next victim search starts; `NIL` = at the tail.
    hand: u32,
    /// VDF-SIEVE: unvisited entries get `cost - 1` extra passes.
    weighted: bool,
    used: u64,
    capacity: u64,
}

impl Sieve {
    /// SIEVE with `capacity` units; room for `entries` entries before the arena grows.
    pub fn new(capacity: u64, entries: usize) -> Self {
        Self::with_weighting(capacity, entries, false)
    }

    /// VDF-SIEVE: SIEVE whose cold entries wait `cost - 1` extra passes of the hand.
    pub fn vdf(capacity: u64, entries: usize) -> Self {
        Self::with_weighting(capacity, entries, true)
    }

    fn with_weighting(capacity: u64, entries: usize, weighted: bool) -> Self {
        Sieve {
            slab: Slab::with_capacity(entries),
            queue: List::new(),
            hand: NIL,
            weighted,
            used: 0,
            capacity,
        }
    }

    /// Detach `id` from the queue, moving the hand off it first.
    fn unlink(&mut self, id: u32) {
        if self.hand == id {
            self.hand = self.slab.get(id).link.prev;
        }
        self.queue.unlink(self.slab.nodes(), id);
    }

    /// Newer neighbour of `id`, wrapping from the head to the tail.
    #[inline]
    fn step(&self, id: u32) -> u32 {
        match self.slab.get(id).link.prev {
            NIL => self.queue.back().unwrap_or(NIL),
            p => p,
        }
    }

    /// Move the hand to the victim, clearing visited bits (and, weighted and degraded,
    /// spending extra passes) on the way, and return it, still queued; the hand stops at its
    /// newer neighbour. Terminates: every step past an entry clears its bit or raises its
    /// `passes` towards the bounded `cost - 1`, and an entry with neither left is the victim.
    #[inline(always)]
    fn find_victim(&mut self, cost: Option<&dyn MissCost>) -> Option<u32> {
        let cost = cost.filter(|c| self.weighted && c.degraded());
        let mut id = if self.hand == NIL {
            self.queue.back()?
        } else {
            self.hand
        };
        loop {
            let e = self.slab.get_mut(id);
            if e.visited {
                e.visited = false;
            } else {
                match cost {
                    Some(c) if u32::from(e.passes) + 1 < c.cost_of(e.key) => {
                        e.passes = e.passes.saturating_add(1);
                    }
                    _ => break,
                }
            }
            id = self.step(id);
        }
        self.hand = self.slab.get(id).link.prev;
        Some(id)
    }

    /// [`Sieve::find_victim`], then remove it and return its key.
    fn pop_victim(&mut self, cost: Option<&dyn MissCost>) -> Option<u64> {
        let id = self.find_victim(cost)?;
        self.queue.unlink(self.slab.nodes(), id);
        let e = self.slab.remove(id);
        self.used -= u64::from(e.size);
        Some(e.key)
    }
}

impl ReadPolicy for Sieve {
    fn name(&self) -> &'static str {
        if self.weighted {
            "vdf-sieve"
        } else {
            "sieve"
        }
    }

    #[inline(always)]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        match self.slab.find(acc.key) {
            Some(id) => {
                let e = self.slab.get_mut(id);
                e.visited = true;
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
                // The last victim's slot goes to the new entry at the head, as removing and
                // inserting would (block mode: every eviction).
                evicted.push(self.slab.rekey(victim, acc.key));
                let e = self.slab.get_mut(victim);
                (e.size, e.visited, e.passes) = (acc.size, false, 0);
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
            visited: false,
            passes: 0,
        });
        self.queue.push_front(self.slab.nodes(), id);
        self.used += size;
        debug_assert!(self.used <= self.capacity);
        true
    }

    slab_policy_accessors!();

    /// SIEVE only: VDF-SIEVE needs the miss cost, which `evict_one` is not given.
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
        // Capacity 3; queue shown head .. tail, `*` = visited, `^` = the hand.
        //  1 2 3 miss            [3 2 1]
        //  1 hit, 2 hit          [3 2* 1*]
        //  4 miss: hand from the tail: 1* -> 1, 2* -> 2, 3 unvisited: evict 3; the hand
        //          stops at 3's newer neighbour: none (3 was the head), so NIL
        //                        [4 2 1]
        //  2 hit                 [4 2* 1]
        //  5 miss: hand from the tail: 1 unvisited: evict 1, hand -> 2
        //                        [5 4 2*^]
        //  1 miss: 2* -> 2, hand -> 4; 4 unvisited: evict 4, hand -> 5
        //                        [1 5^ 2]
        //  2 hit                 [1 5^ 2*]
        //  6 miss: 5 unvisited: evict 5 (not 2, the tail: the hand does not restart)
        //                        [6 1 2*]
        let mut p = Sieve::new(3, 3);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 1, 2, 4, 2, 5, 1, 2, 6]);
        assert_eq!(
            h,
            [false, false, false, true, true, false, true, false, false, true, false]
        );
        assert_eq!(ev, [3, 1, 4, 5]);
        assert!(p.contains(6) && p.contains(1) && p.contains(2));
    }

    #[test]
    fn removing_the_block_under_the_hand_moves_the_hand() {
        // As above up to [5 4 2*^] (the hand on 2). Removing 2 moves the hand to 4; the next
        // miss evicts 4 at once (the tail, 2, is gone) -> [6 5].
        let mut p = Sieve::new(3, 3);
        run_evictions(&mut p, &[1, 2, 3, 1, 2, 4, 2, 5]);
        assert!(p.remove(2));
        let mut ev = Vec::new();
        let acc = Access {
            key: 6,
            size: 1,
            now: 100,
            cost: &super::super::UniformCost,
        };
        assert!(!p.get(&acc));
        p.insert(&acc, &mut ev);
        // Not full yet (2 were resident): no eviction. One more forces one: the hand is on 4.
        assert!(ev.is_empty());
        let acc = Access {
            key: 7,
            now: 101,
            ..acc
        };
        p.get(&acc);
        p.insert(&acc, &mut ev);
        assert_eq!(ev, [4]);
    }

    #[test]
    fn vdf_sieve_gives_the_failed_disks_blocks_extra_passes() {
        // 4-disk RAID-5, disk 0 failed (MP = 3), key k on disk k % 4; capacity 3.
        //  0 1 2 miss                           [2 1 0]
        //  5 miss: hand from the tail: 0 unvisited, MP 3: pass 1 of 2; 1 unvisited, MP 1:
        //          evict 1, hand -> 2           [5 2^ 0(1)]
        //  6 miss: 2 unvisited, MP 1: evict 2, hand -> 5
        //                                       [6 5^ 0(1)]
        //  7 miss: 5 MP 1: evict 5, hand -> 6  [7 6^ 0(1)]
        //  9 miss: 6: evict, hand -> 7          [9 7^ 0(1)]
        //  0 hit: passes reset, visited         [9 7^ 0*]
        //  10 miss: 7: evict                    [10 9^ 0*]
        //  11 miss: 9: evict, hand -> 10        [11 10^ 0*]
        //  13 miss: 10: evict, hand -> 11 ...   block 0 (the expensive one) stays throughout.
        // Plain SIEVE evicts 0 at the first miss.
        let cost = Raid5 {
            disks: 4,
            failed: Some(0),
        };
        let keys = [0, 1, 2, 5, 6, 7, 9, 0, 10, 11, 13];
        let run = |p: &mut Sieve| {
            let mut ev = Vec::new();
            let h: Vec<bool> = keys
                .iter()
                .enumerate()
                .map(|(i, &k)| step(p, k, 1, i as u64, &cost, &mut ev))
                .collect();
            (h, ev)
        };
        let (h, ev) = run(&mut Sieve::vdf(3, 3));
        assert_eq!(h.iter().filter(|&&x| x).count(), 1);
        assert!(h[7], "0 is still resident at its second request");
        assert_eq!(ev, [1, 2, 5, 6, 7, 9, 10]);
        let (h, ev) = run(&mut Sieve::new(3, 3));
        assert!(!h[7]);
        assert_eq!(ev[0], 0);
    }

    #[test]
    fn vdf_sieve_spends_passes_then_evicts() {
        // 3-disk RAID-5, disk 0 failed (MP = 2), capacity 2: blocks 0 and 3 both on disk 0.
        //  0 3 miss           [3 0]
        //  6 miss: 0 pass 1 of 1, 3 pass 1 of 1, wrap to the tail: 0 has no pass left:
        //          evict 0, hand -> 3           [6 3(1)^]
        //  9 miss: 3 has no pass left: evict 3  [9 6]
        let cost = Raid5 {
            disks: 3,
            failed: Some(0),
        };
        let mut p = Sieve::vdf(2, 2);
        let mut ev = Vec::new();
        for (i, k) in [0u64, 3, 6, 9].into_iter().enumerate() {
            step(&mut p, k, 1, i as u64, &cost, &mut ev);
        }
        assert_eq!(ev, [0, 3]);
    }
}
