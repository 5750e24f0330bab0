//! Belady's OPT (MIN) and the cost-aware Belady heuristic, as read-cache policies that are
//! handed the future.
//!
//! Both are told, for every lookup `t` (the engine's [`Access::now`]), when the same block is
//! looked up next (`next[t]`, [`NEVER`] if not before the trace ends or a write invalidates it;
//! see `mod.rs`). Both cache every miss (demand paging, as libCacheSim's `Belady` and every
//! online policy here do) and evict only when the new block does not fit.
//!
//! - **OPT**: evict the resident block whose next use is farthest. This is libCacheSim's
//!   `Belady` (`cache/eviction/Belady.c`): the victim is chosen among the resident blocks
//!   before the new one is inserted, and blocks never used again go first. It minimises the
//!   number of misses of a demand-paged cache of unit-size blocks.
//! - **Cost-aware Belady** (`belady-cost`): evict the block with the largest
//!   `forward distance / miss cost` (`next - now` over `cost.cost_of(key)`), i.e. the smallest
//!   cost per request-time of keeping it: VDF's "smallest `p x MP`" with `p` read from the
//!   future as `1 / distance`. Blocks never used again go first whatever their cost. A
//!   heuristic: it is OPT when every cost is equal, and not optimal in general (the exact
//!   cost-aware optimum is `mincost.rs`'s flow).
//!
//! Blocks are kept in one max-heap by next use per distinct miss cost (a cost class, at most
//! [`MAX_CLASSES`]): within a class the farthest next use is also the largest ratio, so the
//! victim is one of the class tops, found in O(classes). OPT uses a single class. The
//! comparison is an exact integer cross-multiplication. Heaps are sized at build from the
//! capacity, so block mode allocates nothing per request.

use crate::cache::read::list::Link;
use crate::cache::read::slab::{impl_slot, slab_policy_accessors, Slab};
use crate::cache::read::{Access, ReadPolicy};

/// Next use of a block not looked up again.
pub const NEVER: u64 = u64::MAX;

/// Distinct miss costs kept apart. An array has at most three (1, and the price of a block of
/// a failed disk, with one or two failures); beyond this, costs share the last class, where
/// the order is by next use alone (the heuristic is then approximate within that class).
pub const MAX_CLASSES: usize = 16;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    link: Link,
    size: u32,
    class: u8,
    /// Position in its class's heap.
    pos: u32,
    next: u64,
}

impl_slot!(Entry);

/// One cost class: its cost and a max-heap of slot ids by `next`.
#[derive(Clone, Debug)]
struct Class {
    cost: u32,
    heap: Vec<u32>,
}

/// OPT or the cost-aware Belady heuristic over a given future.
#[derive(Clone, Debug)]
pub struct Belady {
    slab: Slab<Entry>,
    classes: Vec<Class>,
    next: Box<[u64]>,
    /// Cost-aware: rank by distance / cost; otherwise one class, by distance.
    weighted: bool,
    heap_room: usize,
    used: u64,
    capacity: u64,
}

impl Belady {
    /// OPT over `next` (indexed by [`Access::now`]) with `capacity` units and room for
    /// `entries` entries.
    pub fn opt(next: Box<[u64]>, capacity: u64, entries: usize) -> Self {
        Self::with_weighting(next, capacity, entries, false)
    }

    /// The cost-aware Belady heuristic over `next`.
    pub fn cost_aware(next: Box<[u64]>, capacity: u64, entries: usize) -> Self {
        Self::with_weighting(next, capacity, entries, true)
    }

    fn with_weighting(next: Box<[u64]>, capacity: u64, entries: usize, weighted: bool) -> Self {
        Belady {
            slab: Slab::with_capacity(entries),
            classes: Vec::with_capacity(MAX_CLASSES),
            next,
            weighted,
            heap_room: entries,
            used: 0,
            capacity,
        }
    }

    /// Next use after lookup `now`; a lookup past the precomputed future (a caller that
    /// replays more than it announced) is treated as never used again.
    #[inline]
    fn next_of(&self, now: u64) -> u64 {
        usize::try_from(now)
            .ok()
            .and_then(|i| self.next.get(i).copied())
            .unwrap_or(NEVER)
    }

    fn class_of(&mut self, cost: u32) -> u8 {
        let cost = if self.weighted { cost } else { 1 };
        if let Some(i) = self.classes.iter().position(|c| c.cost == cost) {
            return i as u8;
        }
        if self.classes.len() == MAX_CLASSES {
            return (MAX_CLASSES - 1) as u8;
        }
        self.classes.push(Class {
            cost,
            heap: Vec::with_capacity(self.heap_room),
        });
        (self.classes.len() - 1) as u8
    }

    #[inline]
    fn prio(&self, id: u32) -> u64 {
        self.slab.get(id).next
    }

    fn set(&mut self, class: usize, pos: usize, id: u32) {
        self.classes[class].heap[pos] = id;
        self.slab.get_mut(id).pos = pos as u32;
    }

    fn sift_up(&mut self, class: usize, mut pos: usize) {
        let id = self.classes[class].heap[pos];
        let p = self.prio(id);
        while pos > 0 {
            let parent = (pos - 1) / 2;
            let pid = self.classes[class].heap[parent];
            if self.prio(pid) >= p {
                break;
            }
            self.set(class, pos, pid);
            pos = parent;
        }
        self.set(class, pos, id);
    }

    fn sift_down(&mut self, class: usize, mut pos: usize) {
        let len = self.classes[class].heap.len();
        let id = self.classes[class].heap[pos];
        let p = self.prio(id);
        loop {
            let l = 2 * pos + 1;
            if l >= len {
                break;
            }
            let r = l + 1;
            let heap = &self.classes[class].heap;
            let c = if r < len && self.prio(heap[r]) > self.prio(heap[l]) {
                r
            } else {
                l
            };
            let cid = heap[c];
            if self.prio(cid) <= p {
                break;
            }
            self.set(class, pos, cid);
            pos = c;
        }
        self.set(class, pos, id);
    }

    /// Take `id` out of its class heap (the slot stays live).
    fn unlink(&mut self, id: u32) {
        let e = *self.slab.get(id);
        let (class, pos) = (e.class as usize, e.pos as usize);
        let last = self.classes[class].heap.pop().expect("entry in its heap");
        if last != id {
            self.set(class, pos, last);
            self.sift_down(class, pos);
            let pos = self.slab.get(last).pos as usize;
            self.sift_up(class, pos);
        }
    }

    /// Give resident `id` next use `next` and (re)place it in its heap.
    fn place(&mut self, id: u32, class: u8, next: u64) {
        let e = self.slab.get_mut(id);
        e.class = class;
        e.next = next;
        let heap = &mut self.classes[class as usize].heap;
        heap.push(id);
        let pos = heap.len() - 1;
        self.sift_up(class as usize, pos);
    }

    /// The class whose top goes first: the largest `(next - now) / cost`, never-used blocks
    /// first, ties to the lower class.
    fn victim_class(&self, now: u64) -> Option<usize> {
        let mut best: Option<(usize, u64, u32)> = None;
        for (i, c) in self.classes.iter().enumerate() {
            let Some(&top) = c.heap.first() else {
                continue;
            };
            let next = self.slab.get(top).next;
            let dist = next.saturating_sub(now);
            let better = match best {
                None => true,
                Some((_, bd, bc)) => {
                    if next == NEVER || bd == NEVER {
                        next == NEVER && bd != NEVER
                    } else {
                        u128::from(dist) * u128::from(bc) > u128::from(bd) * u128::from(c.cost)
                    }
                }
            };
            if better {
                best = Some((i, if next == NEVER { NEVER } else { dist }, c.cost));
            }
        }
        best.map(|b| b.0)
    }

    fn pop_victim(&mut self, now: u64) -> Option<u64> {
        let class = self.victim_class(now)?;
        let id = self.classes[class].heap[0];
        self.unlink(id);
        let e = self.slab.remove(id);
        self.used -= u64::from(e.size);
        Some(e.key)
    }
}

impl ReadPolicy for Belady {
    fn name(&self) -> &'static str {
        if self.weighted {
            "belady-cost"
        } else {
            "opt"
        }
    }

    fn get(&mut self, acc: &Access<'_>) -> bool {
        let Some(id) = self.slab.find(acc.key) else {
            return false;
        };
        let class = self.slab.get(id).class;
        let next = self.next_of(acc.now);
        self.unlink(id);
        self.place(id, class, next);
        true
    }

    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool {
        let size = u64::from(acc.size);
        if size > self.capacity {
            return false;
        }
        debug_assert!(!self.contains(acc.key), "insert of a resident key");
        while self.used + size > self.capacity {
            match self.pop_victim(acc.now) {
                Some(k) => evicted.push(k),
                None => break,
            }
        }
        let class = self.class_of(acc.cost.cost_of(acc.key));
        let id = self.slab.insert(Entry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
            class,
            pos: 0,
            next: NEVER,
        });
        let next = self.next_of(acc.now);
        self.place(id, class, next);
        self.used += size;
        true
    }

    slab_policy_accessors!();

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes()
            + self
                .classes
                .iter()
                .map(|c| c.heap.capacity() * 4)
                .sum::<usize>()
            + self.next.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::super::next_uses;
    use super::*;
    use crate::cache::read::testutil::{raid6, run_costed};
    use crate::cache::read::vdf::tests::Raid5;
    use crate::cache::read::UniformCost;

    fn future(keys: &[u64]) -> Box<[u64]> {
        next_uses(keys.iter().map(|&k| super::super::Event::Lookup(k)))
    }

    #[test]
    fn opt_worked_example() {
        // Capacity 3; next uses shown after ':' (t = position, `-` = never).
        //  t0 1:3  t1 2:6  t2 3:7  miss, miss, miss      {1 2 3}
        //  t3 1 hit (1:-)
        //  t4 4 miss (4:-): the farthest next use is 1's (never): evict 1   {2 3 4}
        //  t5 5 miss (5:-): 4 and 5... 4 never used again: evict 4          {2 3 5}
        //  t6 2 hit, t7 3 hit
        let keys = [1, 2, 3, 1, 4, 5, 2, 3];
        let mut p = Belady::opt(future(&keys), 3, 4);
        let (h, ev) = run_costed(&mut p, &keys, &UniformCost);
        assert_eq!(h, [false, false, false, true, false, false, true, true]);
        assert_eq!(ev, [1, 4]);
    }

    #[test]
    fn cost_aware_belady_on_a_degraded_raid5() {
        // 4-disk RAID-5, disk 0 failed: 0 costs 3, 1 and 2 cost 1. Capacity 2.
        //  t0 0 (next 4), t1 1 (next 3) miss           {0 1}
        //  t2 2 miss (never again): 0 at distance 2 / cost 3, 1 at 1 / 1: evict 1 {0 2}
        //  t3 1 miss: 2 is never used again: evict 2    {0 1}
        //  t4 0 hit. Missed cost 3 + 1 + 1 + 1 = 6.
        // OPT evicts 0 at t2 (farthest), hits 1 at t3 and misses 0 at t4: one miss fewer,
        // missed cost 3 + 1 + 1 + 3 = 8.
        let keys = [0, 1, 2, 1, 0];
        let cost = Raid5 {
            disks: 4,
            failed: Some(0),
        };
        let (h, ev) = run_costed(&mut Belady::cost_aware(future(&keys), 2, 4), &keys, &cost);
        assert_eq!(h, [false, false, false, false, true]);
        assert_eq!(ev, [1, 2]);
        let (h, ev) = run_costed(&mut Belady::opt(future(&keys), 2, 4), &keys, &cost);
        assert_eq!(h, [false, false, false, true, false]);
        assert_eq!((ev[0], ev.len()), (0, 2));
    }

    #[test]
    fn cost_aware_belady_on_raid6_with_two_failed_disks() {
        // 6-disk RAID-6, disks 0 and 1 failed: 0 costs 4, 1 and 2 cost 1. Capacity 2.
        //  t0 0 (next 5), t1 1 (next 3) miss           {0 1}
        //  t2 2 (next 4): 0 at 3 / 4, 1 at 1 / 1: evict 1   {0 2}
        //  t3 1 (never): 0 at 2 / 4, 2 at 1 / 1: evict 2    {0 1}
        //  t4 2 (never): 1 is never used again: evict 1     {0 2}
        //  t5 0 hit. Missed cost 4 + 4 x 1 = 8; OPT's (evict 0 at t2) 4 + 1 + 1 + 4 = 10.
        let keys = [0, 1, 2, 1, 2, 0];
        let cost = raid6(&[0, 1]);
        let (h, ev) = run_costed(&mut Belady::cost_aware(future(&keys), 2, 4), &keys, &cost);
        assert_eq!(h, [false, false, false, false, false, true]);
        assert_eq!(ev, [1, 2, 1]);
        let (h, ev) = run_costed(&mut Belady::opt(future(&keys), 2, 4), &keys, &cost);
        assert_eq!(h, [false, false, false, true, true, false]);
        assert_eq!((ev[0], ev.len()), (0, 2));
    }
}
