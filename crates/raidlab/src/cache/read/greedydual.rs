//! GreedyDual (Young, Algorithmica 1994; as GreedyDual-Size by Cao and Irani, USITS 1997,
//! with every size 1): a cost-aware LRU whose costs come from the array's miss-cost oracle.
//!
//! Every resident block carries a value `H`. An inflation value `L` starts at 0. On an
//! insert or a hit, `H = L + cost`, where `cost = cost.cost_of(key)` is the number of disk
//! blocks a miss on it would read *now* (1 on a healthy disk, `n - 1` on the failed disk of
//! an n-disk RAID-5). The victim is the block with the smallest `H`, and `L` becomes the
//! victim's `H`. So a block costing `k` outlives a cheap block by `k - 1` evictions' worth of
//! `L` growth, and a block that is never hit again is eventually overtaken by `L`.
//!
//! Ties: among blocks of equal `H` the least recently accessed goes first. With every cost
//! equal (a healthy array, [`UniformCost`](super::UniformCost)), `H` grows with the time of
//! the last access and GreedyDual is LRU exactly (checked by a property test).
//!
//! Sizes: the `H` formula does not divide the cost by the size (that would be
//! GreedyDual-Size proper, which the block-mode controller never needs); in object mode sizes
//! only count against the capacity.
//!
//! # Structure
//!
//! Blocks are kept in one LRU list per distinct cost value `c`, in the order their `H` was
//! last set. Since `L` never decreases, `H = L + c` never decreases from a list's back to its
//! front, so each list's back holds its smallest `H` (and, among equals, its oldest access).
//! The victim is the smallest `(H, last access)` among the backs: a scan over the distinct
//! cost values, two or three in a degraded RAID-5. A list is added the first time a cost
//! value is seen (never per request in steady state).

use super::list::{Link, List};
use super::slab::Slab;
use super::{Access, ReadPolicy};

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    link: Link,
    size: u32,
    /// Index into `classes` of the list holding the entry.
    class: u32,
    /// `L + cost` when last set.
    h: u64,
    /// Time of the last access.
    ts: u64,
}

impl_slot!(Entry);

/// GreedyDual over a fixed arena.
#[derive(Clone, Debug)]
pub struct GreedyDual {
    slab: Slab<Entry>,
    /// `(cost, list of blocks whose H was last set with that cost)`.
    classes: Vec<(u32, List)>,
    /// The inflation value `L`.
    inflation: u64,
    used: u64,
    capacity: u64,
}

impl GreedyDual {
    /// `capacity` units; room for `entries` entries before the arena grows.
    pub fn new(capacity: u64, entries: usize) -> Self {
        GreedyDual {
            slab: Slab::with_capacity(entries),
            classes: Vec::with_capacity(4),
            inflation: 0,
            used: 0,
            capacity,
        }
    }

    /// The inflation value `L` (tests, diagnostics).
    pub fn inflation(&self) -> u64 {
        self.inflation
    }

    /// Index of the list for `cost`, added the first time it is seen.
    fn class_of(&mut self, cost: u32) -> u32 {
        match self.classes.iter().position(|&(c, _)| c == cost) {
            Some(i) => i as u32,
            None => {
                self.classes.push((cost, List::new()));
                (self.classes.len() - 1) as u32
            }
        }
    }

    fn unlink(&mut self, id: u32) {
        let class = self.slab.get(id).class as usize;
        self.classes[class].1.unlink(self.slab.nodes(), id);
    }

    /// Set `id`'s `H` to `L + cost` and put it at the front of its cost's list.
    fn place(&mut self, id: u32, cost: u32, now: u64) {
        let class = self.class_of(cost);
        let h = self.inflation + u64::from(cost);
        let e = self.slab.get_mut(id);
        e.class = class;
        e.h = h;
        e.ts = now;
        self.classes[class as usize]
            .1
            .push_front(self.slab.nodes(), id);
    }

    /// Evict the block with the smallest `(H, last access)`; `L` becomes its `H`.
    fn pop_victim(&mut self) -> Option<u64> {
        let mut best: Option<(u64, u64, u32)> = None;
        for (_, list) in &self.classes {
            let Some(id) = list.back() else { continue };
            let e = self.slab.get(id);
            if best.is_none_or(|(h, ts, _)| (e.h, e.ts) < (h, ts)) {
                best = Some((e.h, e.ts, id));
            }
        }
        let (h, _, id) = best?;
        debug_assert!(h >= self.inflation, "L never decreases");
        self.inflation = h;
        self.unlink(id);
        let e = self.slab.remove(id);
        self.used -= u64::from(e.size);
        Some(e.key)
    }
}

impl ReadPolicy for GreedyDual {
    fn name(&self) -> &'static str {
        "greedydual"
    }

    #[inline]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        let Some(id) = self.slab.find(acc.key) else {
            return false;
        };
        self.unlink(id);
        self.place(id, acc.cost.cost_of(acc.key), acc.now);
        true
    }

    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool {
        let size = u64::from(acc.size);
        if size > self.capacity {
            return false;
        }
        debug_assert!(!self.contains(acc.key), "insert of a resident key");
        while self.used + size > self.capacity {
            match self.pop_victim() {
                Some(k) => evicted.push(k),
                None => break,
            }
        }
        let id = self.slab.insert(Entry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
            class: 0,
            h: 0,
            ts: 0,
        });
        self.place(id, acc.cost.cost_of(acc.key), acc.now);
        self.used += size;
        debug_assert!(self.used <= self.capacity);
        true
    }

    slab_policy_accessors!();

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes() + self.classes.capacity() * std::mem::size_of::<(u32, List)>()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::step;
    use super::super::vdf::tests::Raid5;
    use super::*;

    use super::super::testutil::run_costed as run;

    #[test]
    fn raid5_with_a_failed_disk() {
        // 4-disk RAID-5, disk 0 failed: a block of disk 0 costs n - 1 = 3, the others 1;
        // key k on disk k % 4. Capacity 3. H after each step, L in brackets.
        //  t0 0 miss: H0 = 0 + 3 = 3            [L 0]
        //  t1 1 miss: H1 = 1;  t2 2 miss: H2 = 1
        //  t3 5 miss: min H = 1: 1 and 2 tie, 1 is older -> evict 1, L = 1; H5 = 1 + 1 = 2
        //  t4 6 miss: min is H2 = 1 -> evict 2, L = 1; H6 = 2
        //  t5 7 miss: 5 and 6 tie at 2, 5 older -> evict 5, L = 2; H7 = 3
        //  t6 9 miss: min is H6 = 2 -> evict 6, L = 2; H9 = 3
        //  t7 10 miss: 0, 7, 9 all at H = 3: 0 is the oldest -> evict 0, L = 3; H10 = 4
        // Block 0 survived four evictions of cheap blocks; plain LRU evicts it first.
        let cost = Raid5 {
            disks: 4,
            failed: Some(0),
        };
        let keys = [0, 1, 2, 5, 6, 7, 9, 10];
        let mut p = GreedyDual::new(3, 3);
        let (h, ev) = run(&mut p, &keys, &cost);
        assert_eq!(h, [false; 8]);
        assert_eq!(ev, [1, 2, 5, 6, 0]);
        assert_eq!(p.inflation(), 3);
    }

    #[test]
    fn a_hit_restores_h_from_the_current_l() {
        // Same array and capacity. 0 (H 3), 1 (H 1), 2 (H 1).
        //  t3 5 miss: evict 1, L = 1, H5 = 2.   t4 0 hit: H0 = L + 3 = 4.
        //  t5 6 miss: evict 2 (H 1), L = 1, H6 = 2.  t6 7 miss: evict 5 (H 2), L = 2, H7 = 3
        //  t7 9 miss: evict 6 (H 2), L = 2, H9 = 3.  t8 10 miss: evict 7 (H 3, older than 9)
        //  t9 11 miss: evict 9 (H 3), L = 3.  t10 13 miss: 0 (H 4) vs 10 (H 4, younger)
        //  -> evict 0, L = 4.
        let cost = Raid5 {
            disks: 4,
            failed: Some(0),
        };
        let keys = [0, 1, 2, 5, 0, 6, 7, 9, 10, 11, 13];
        let mut p = GreedyDual::new(3, 3);
        let (h, ev) = run(&mut p, &keys, &cost);
        assert_eq!(h.iter().filter(|&&x| x).count(), 1);
        assert!(h[4]);
        assert_eq!(ev, [1, 2, 5, 6, 7, 9, 0]);
        assert_eq!(p.inflation(), 4);
    }

    #[test]
    fn uniform_cost_is_lru() {
        // Healthy array: every cost 1. The LRU worked example (lru.rs) gives the same.
        let cost = Raid5 {
            disks: 4,
            failed: None,
        };
        let mut p = GreedyDual::new(3, 3);
        let (h, ev) = run(&mut p, &[1, 2, 3, 1, 4, 2, 1, 3], &cost);
        assert_eq!(h, [false, false, false, true, false, false, true, false]);
        assert_eq!(ev, [2, 3, 4]);
    }

    #[test]
    fn with_the_arrays_own_oracle() {
        use crate::array::{Array, ArraySpec, Layout, Level};
        use crate::cache::read::MissCost;
        // A 5-disk left-symmetric RAID-5 with one-block stripe units and disk 0 failed:
        //   row 0: 0 1 2 3 P    row 1: 5 6 7 P 4    row 2: 10 11 P 8 9
        // Block 0 is on the failed disk and costs n - 1 = 4 (the other four blocks of row 0);
        // 1 2 3 4 6 7 8 9 11 cost 1. Capacity 3.
        //  t0 0 (H 4); t1 1 (H 1); t2 2 (H 1)
        //  t3 3: evict 1 (H 1, older than 2), L 1, H3 = 2.   t4 4: evict 2, L 1, H4 = 2
        //  t5 6: evict 3 (H 2), L 2, H6 = 3.                 t6 7: evict 4, L 2, H7 = 3
        //  t7 8: evict 6 (H 3; 0 has H 4), L 3, H8 = 4.      t8 9: evict 7, L 3, H9 = 4
        //  t9 11: 0, 8 and 9 all at H 4: 0 is the oldest -> evict 0, L 4.
        // Six cheap blocks go before the expensive one; LRU would evict 0 at t3.
        let arr = Array::new(&ArraySpec {
            level: Level::Raid5,
            disks: 5,
            stripe_unit_bytes: 4096,
            layout: Layout::LeftSymmetric,
            failed: vec![0],
            block_size: 4096,
        })
        .expect("valid array");
        let disks: Vec<u32> = (0..12).map(|k| arr.disk_of(k)).collect();
        assert_eq!(disks, [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]);
        assert_eq!(arr.cost_of(0), 4);
        for k in [1, 2, 3, 4, 6, 7, 8, 9, 11] {
            assert_eq!(arr.cost_of(k), 1, "block {k}");
        }
        let mut p = GreedyDual::new(3, 3);
        let mut ev = Vec::new();
        for (t, k) in [0u64, 1, 2, 3, 4, 6, 7, 8, 9, 11].into_iter().enumerate() {
            assert!(!step(&mut p, k, 1, t as u64, &arr, &mut ev));
        }
        assert_eq!(ev, [1, 2, 3, 4, 6, 7, 0]);
        assert_eq!(p.inflation(), 4);
    }
}
