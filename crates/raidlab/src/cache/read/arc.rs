//! ARC, Adaptive Replacement Cache (Megiddo and Modha, FAST 2003).
//!
//! Two resident LRU lists, T1 (seen once recently) and T2 (seen at least twice), each backed
//! by a ghost list of recently evicted keys, B1 and B2. A miss that finds its key in B1 grows
//! the target size `p` of T1, one found in B2 shrinks it; REPLACE then evicts from T1 or T2
//! depending on `p`.
//!
//! Sizes: all four lists are measured in capacity units (bytes in object mode), and `p` is a
//! float, because that is what libCacheSim's `ARC` does and we match its miss counts exactly.
//! Its variable-size details, reproduced here:
//! - a ghost hit adjusts `p` by `max(|B2| / |B1|, 1)` (or the reverse) *before* the ghost is
//!   dropped, and happens in `get`, so it also happens when the object is then not inserted;
//! - "case IV" (a miss in all four lists) drops the LRU ghost of B1 and REPLACEs when
//!   `|T1| + |B1| + size > c` and B1 is not empty; when B1 is empty it evicts T1's LRU
//!   without keeping a ghost; otherwise it drops B2's LRU ghost once the four lists reach
//!   `2c` (if B2 has one) and REPLACEs;
//! - REPLACE evicts from T1 when T1 is non-empty and `|T1| > p` (or `|T1| == p` and the
//!   current request hit B2), or when T2 is empty; otherwise from T2.
//! - an insert after a ghost hit goes to T2's MRU end, any other insert to T1's.
//!
//! The eviction loop runs REPLACE until the new entry fits, so several entries may go.
//!
//! Units of `p`: the step `max(|B2| / |B1|, 1)` is a ratio, not scaled by the object's size,
//! so `p` moves by at least one *unit* per ghost hit: one block in block mode (the paper's
//! ARC), one byte in object mode (libCacheSim's). With 4 KiB objects libCacheSim's `p` thus
//! moves 4096 times slower than block mode's, and while it is below one object REPLACE
//! evicts from T1 whenever T1 holds anything. Block mode over N blocks
//! and object mode over N objects of 4096 bytes are therefore *different* caches for ARC
//! (unlike LRU, LFU, CLOCK or 2Q, whose decisions do not depend on the unit); compare with
//! libCacheSim in object mode (`capacity_bytes`).
//!
//! # VDF-ARC
//!
//! ARC has no single eviction order: which list loses an entry (T1 or T2) is REPLACE's
//! decision, driven by `p`, and that decision is what makes ARC adaptive. VDF-ARC leaves it
//! alone and weighs cost only *within* the chosen list, the way VDF-CLOCK does within its
//! ring: the chosen list's LRU entry, if its current miss cost (`cost.cost_of(key)`, read at
//! that moment, never cached) is `MP` and it has made fewer than `MP - 1` extra trips, is
//! moved to the list's MRU end with one more trip counted (not a hit: no promotion to T2, no
//! change to `p`), and the next LRU entry is examined. A trip through an LRU list is the unit
//! in which the list measures age, so an entry of the failed disk of an n-disk RAID-5 leaves
//! only after staying unreferenced for `n - 1` traversals: VDF's "largest `age / MP` first"
//! rule in the list's own units. A hit resets the trips. The victim then enters B1 or B2
//! exactly as in ARC, so the ghost lists still record what the cache chose to forget.
//!
//! Why not a bounded window at the LRU end compared by `age / MP`: once a few expensive
//! entries sit in the window it holds only them and the weighting stops acting, while trips
//! keep acting whatever the mix. The search is bounded: each re-queue raises one entry's
//! trips towards its bounded `MP - 1`, and an entry with none left is the victim. While
//! `cost.degraded()` is false no entry makes a trip and VDF-ARC is ARC exactly (property
//! test). It takes no part in the unit-of-`p` discussion above: trips do not move `p`.

use super::list::{Link, List};
use super::slab::Slab;
use super::{Access, MissCost, ReadPolicy};

const T1: u8 = 0;
const T2: u8 = 1;
const B1: u8 = 2;
const B2: u8 = 3;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    link: Link,
    size: u32,
    list: u8,
    /// VDF-ARC: extra trips through its list made unreferenced since the last access.
    trips: u16,
}

impl_slot!(Entry);

/// Which ghost list the current request hit in `get`, kept for the `insert` that follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GhostHit {
    key: u64,
    now: u64,
    in_b2: bool,
}

/// ARC over a fixed arena (resident entries plus up to `c` units of ghosts).
#[derive(Clone, Debug)]
pub struct Arc {
    slab: Slab<Entry>,
    lists: [List; 4],
    /// Units in each list, indexed like `lists`.
    sizes: [u64; 4],
    /// Target size of T1, in units.
    p: f64,
    ghost_hit: Option<GhostHit>,
    /// A slot an eviction inside `insert` emptied (unlinked, still indexed under its old key)
    /// for the insert to reuse, as the arena's free list would hand it back; any earlier one
    /// is freed for real first.
    spare: Option<u32>,
    resident: usize,
    capacity: u64,
    /// VDF-ARC: the victim's list gives its expensive LRU entries `cost - 1` extra trips.
    weighted: bool,
}

impl Arc {
    /// `capacity` units; room for `entries` entries (resident + ghost) before growing.
    pub fn new(capacity: u64, entries: usize) -> Self {
        Self::with_weighting(capacity, entries, false)
    }

    /// VDF-ARC: ARC whose unreferenced expensive entries make `cost - 1` extra trips through
    /// the list REPLACE chose before they leave it.
    pub fn vdf(capacity: u64, entries: usize) -> Self {
        Self::with_weighting(capacity, entries, true)
    }

    fn with_weighting(capacity: u64, entries: usize, weighted: bool) -> Self {
        Arc {
            slab: Slab::with_capacity(entries),
            lists: [List::new(); 4],
            sizes: [0; 4],
            p: 0.0,
            ghost_hit: None,
            spare: None,
            resident: 0,
            capacity,
            weighted,
        }
    }

    /// Target size of T1 (tests, diagnostics).
    pub fn target_t1(&self) -> f64 {
        self.p
    }

    #[inline(always)]
    fn unlink(&mut self, id: u32) {
        let e = *self.slab.get(id);
        self.lists[e.list as usize].unlink(self.slab.nodes(), id);
        self.sizes[e.list as usize] -= u64::from(e.size);
    }

    #[inline(always)]
    fn push_front(&mut self, id: u32, list: u8) {
        let e = self.slab.get_mut(id);
        e.list = list;
        let size = u64::from(e.size);
        self.lists[list as usize].push_front(self.slab.nodes(), id);
        self.sizes[list as usize] += size;
    }

    /// Drop the LRU ghost of `list` (B1 or B2) entirely.
    #[inline(always)]
    fn drop_ghost(&mut self, list: u8) {
        if let Some(id) = self.lists[list as usize].back() {
            self.unlink(id);
            self.free_slot(id);
        }
    }

    /// Free unlinked slot `id`: kept as [`Arc::spare`] for the insert under way.
    #[inline(always)]
    fn free_slot(&mut self, id: u32) {
        if let Some(earlier) = self.spare.replace(id) {
            self.slab.remove(earlier);
        }
    }

    /// The entry resident list `list` gives up: its LRU entry, or (VDF-ARC, degraded) the
    /// first from the LRU end with no extra trip left, after re-queueing those with one.
    /// Terminates: each re-queue raises one entry's trips towards its bounded `cost - 1`.
    #[inline(always)]
    fn victim(&mut self, list: u8, cost: &dyn MissCost) -> Option<u32> {
        let weighted = self.weighted && cost.degraded();
        loop {
            let id = self.lists[list as usize].back()?;
            if !weighted {
                return Some(id);
            }
            let e = self.slab.get_mut(id);
            if u32::from(e.trips) + 1 >= cost.cost_of(e.key) {
                return Some(id);
            }
            e.trips = e.trips.saturating_add(1);
            self.lists[list as usize].move_to_front(self.slab.nodes(), id);
        }
    }

    /// Move the victim of resident list `from` to the MRU end of ghost list `to`.
    #[inline(always)]
    fn demote(&mut self, from: u8, to: u8, cost: &dyn MissCost, evicted: &mut Vec<u64>) {
        if let Some(id) = self.victim(from, cost) {
            self.unlink(id);
            self.push_front(id, to);
            self.resident -= 1;
            evicted.push(self.slab.get(id).key);
        }
    }

    /// REPLACE of the paper, in libCacheSim's variable-size form.
    #[inline(always)]
    fn replace(&mut self, hit_b2: bool, cost: &dyn MissCost, evicted: &mut Vec<u64>) {
        let t1 = self.sizes[T1 as usize];
        let t1f = t1 as f64;
        let from_t1 =
            (t1 > 0 && (t1f > self.p || (t1f == self.p && hit_b2))) || self.sizes[T2 as usize] == 0;
        if from_t1 {
            self.demote(T1, B1, cost, evicted);
        } else {
            self.demote(T2, B2, cost, evicted);
        }
    }

    /// Make room on a miss that was in no list ("case IV").
    #[inline(always)]
    fn evict_cold_miss(&mut self, size: u64, cost: &dyn MissCost, evicted: &mut Vec<u64>) {
        let [t1, t2, b1, b2] = self.sizes;
        if t1 + b1 + size > self.capacity {
            if b1 > 0 {
                self.drop_ghost(B1);
                self.replace(false, cost, evicted);
            } else if let Some(id) = self.victim(T1, cost) {
                // T1 alone fills the cache: evict its LRU without remembering it.
                self.unlink(id);
                self.resident -= 1;
                evicted.push(self.slab.get(id).key);
                self.free_slot(id);
            } else {
                self.replace(false, cost, evicted);
            }
        } else {
            if t1 + t2 + b1 + b2 >= 2 * self.capacity && b2 > 0 {
                self.drop_ghost(B2);
            }
            self.replace(false, cost, evicted);
        }
    }

    #[inline]
    fn used_units(&self) -> u64 {
        self.sizes[T1 as usize] + self.sizes[T2 as usize]
    }
}

impl ReadPolicy for Arc {
    fn name(&self) -> &'static str {
        if self.weighted {
            "vdf-arc"
        } else {
            "arc"
        }
    }

    #[inline(always)]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        self.ghost_hit = None;
        let Some(id) = self.slab.find(acc.key) else {
            return false;
        };
        let e = self.slab.get_mut(id);
        e.trips = 0;
        let list = e.list;
        match list {
            T1 => {
                self.unlink(id);
                self.push_front(id, T2);
                true
            }
            T2 => {
                self.lists[T2 as usize].move_to_front(self.slab.nodes(), id);
                true
            }
            ghost => {
                let (b1, b2) = (
                    self.sizes[B1 as usize] as f64,
                    self.sizes[B2 as usize] as f64,
                );
                let in_b2 = ghost == B2;
                if in_b2 {
                    let delta = (b1 / b2).max(1.0);
                    self.p = (self.p - delta).max(0.0);
                } else {
                    let delta = (b2 / b1).max(1.0);
                    self.p = (self.p + delta).min(self.capacity as f64);
                }
                self.unlink(id);
                self.slab.remove(id);
                self.ghost_hit = Some(GhostHit {
                    key: acc.key,
                    now: acc.now,
                    in_b2,
                });
                false
            }
        }
    }

    #[inline(always)]
    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool {
        let ghost = self
            .ghost_hit
            .take()
            .filter(|g| g.key == acc.key && g.now == acc.now);
        let size = u64::from(acc.size);
        if size > self.capacity {
            return false;
        }
        debug_assert!(!self.contains(acc.key), "insert of a resident key");
        debug_assert!(self.spare.is_none());
        while self.used_units() + size > self.capacity {
            let before = self.resident;
            match ghost {
                Some(g) => self.replace(g.in_b2, acc.cost, evicted),
                None => self.evict_cold_miss(size, acc.cost, evicted),
            }
            if self.resident == before && self.resident == 0 {
                break;
            }
        }
        let entry = Entry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
            list: T1,
            trips: 0,
        };
        let id = match self.spare.take() {
            Some(id) => {
                self.slab.rekey(id, acc.key);
                *self.slab.get_mut(id) = entry;
                id
            }
            None => self.slab.insert(entry),
        };
        self.push_front(id, if ghost.is_some() { T2 } else { T1 });
        self.resident += 1;
        debug_assert!(self.used_units() <= self.capacity);
        true
    }

    ghost_policy_accessors!(|e| e.list <= T2);

    fn used(&self) -> u64 {
        self.used_units()
    }

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{raid6, run_costed, run_evictions, step};
    use super::super::vdf::tests::Raid5;
    use super::super::UniformCost;
    use super::*;

    #[test]
    fn worked_example() {
        // c = 2, unit sizes; lists shown MRU first, p starts at 0.
        //  1 miss (case IV, room)      T1=[1]
        //  2 miss                      T1=[2 1]
        //  1 hit -> T2                 T1=[2] T2=[1]
        //  3 miss: |T1|+|B1|+1 = 2 <= c, lists total 2 < 2c, REPLACE: |T1|=1 > p=0
        //          -> 2 to B1          T1=[3] T2=[1] B1=[2]      (evicts 2)
        //  2 miss, ghost hit in B1: p = min(0 + max(|B2|/|B1|, 1), c) = 1; B1=[]
        //          REPLACE: |T1|=1 == p but the hit was in B1 -> from T2: 1 to B2
        //          insert into T2          T1=[3] T2=[2] B2=[1]  (evicts 1)
        //  4 miss: |T1|+|B1|+1 = 2 <= c; total 3 < 4; REPLACE: |T1|=1 == p=1, not a B2 hit
        //          -> from T2: 2 to B2     T1=[4 3] B2=[2 1]     (evicts 2)
        //  1 miss, ghost hit in B2: p = max(1 - max(|B1|/|B2|, 1), 0) = 0; B2=[2]
        //          REPLACE: |T1|=2 > 0 -> 3 to B1; insert into T2
        //                                  T1=[4] T2=[1] B1=[3] B2=[2]  (evicts 3)
        let mut p = Arc::new(2, 4);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 1, 3, 2, 4, 1]);
        assert_eq!(h, [false, false, true, false, false, false, false]);
        assert_eq!(ev, [2, 1, 2, 3]);
        assert_eq!(p.target_t1(), 0.0);
        assert!(p.contains(4) && p.contains(1) && !p.contains(3) && !p.contains(2));
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn object_mode_p_moves_in_bytes_like_libcachesim() {
        // The worked example above with 4096-byte objects and c = 8192 bytes (two objects),
        // plus a final request for 2. libCacheSim 0.3.5 (`ARC(8192)`, every obj_size 4096)
        // gives this hit sequence; block mode with c = 2 misses the last request.
        //  1, 2 miss; 1 hit -> T2          T1=[2] T2=[1]
        //  3 miss: |T1|+|B1|+4096 = 8192 <= c, total 8192 < 2c; REPLACE: |T1| = 4096 > p = 0
        //          -> 2 to B1              T1=[3] T2=[1] B1=[2]      (evicts 2)
        //  2 miss, ghost hit in B1: p = min(0 + max(|B2|/|B1|, 1), c) = 1 *byte*; B1=[]
        //          REPLACE: |T1| = 4096 > p = 1 -> 3 to B1 (block mode: |T1| = 1 == p, not
        //          a B2 hit -> from T2, 1 to B2); insert 2 into T2
        //                                  T2=[2 1] B1=[3]           (evicts 3)
        //  4 miss: |T1|+|B1|+4096 = 8192 <= c, total 12288 < 2c; REPLACE: T1 empty
        //          -> from T2: 1 to B2     T1=[4] T2=[2] B1=[3] B2=[1]  (evicts 1)
        //  1 miss, ghost hit in B2: p = max(1 - max(|B1|/|B2|, 1), 0) = 0; B2=[]
        //          REPLACE: |T1| = 4096 > 0 -> 4 to B1; insert 1 into T2
        //                                  T2=[1 2] B1=[4 3]         (evicts 4)
        //  2 hit in T2 (block mode: 2 is in B2 by now, a miss)
        const KIB4: u32 = 4096;
        let keys = [1, 2, 1, 3, 2, 4, 1, 2];
        let mut p = Arc::new(2 * u64::from(KIB4), 4);
        let mut ev = Vec::new();
        let mut h = Vec::new();
        for (i, &k) in keys.iter().enumerate() {
            h.push(step(&mut p, k, KIB4, i as u64, &UniformCost, &mut ev));
            if i == 4 {
                assert_eq!(p.target_t1(), 1.0, "one byte, not one object");
            }
        }
        assert_eq!(h, [false, false, true, false, false, false, false, true]);
        assert_eq!(ev, [2, 3, 1, 4]);
        assert_eq!(p.target_t1(), 0.0);
        assert!(p.contains(1) && p.contains(2) && !p.contains(3) && !p.contains(4));
        assert_eq!(p.used(), 2 * u64::from(KIB4));

        // The same requests in block mode (c = 2 blocks) differ at the last one.
        let mut b = Arc::new(2, 4);
        let (hb, _) = run_evictions(&mut b, &keys);
        assert_eq!(hb, [false, false, true, false, false, false, false, false]);
    }

    #[test]
    fn vdf_arc_on_a_degraded_raid5() {
        // 3-disk RAID-5, disk 0 failed: keys 0 and 3 cost 2, the others 1. c = 2; `(t)` =
        // extra trips made.
        //  0 1 miss                       T1=[1 0]
        //  2 miss, case IV with B1 empty: T1's victim. LRU 0 costs 2, no trip yet: to the
        //    MRU end with one trip; LRU 1 costs 1: evicted (no ghost)   T1=[2 0(1)]
        //  0 hit -> T2                    T1=[2] T2=[0]
        //  3 miss: |T1|+|B1|+1 = 2 <= c, REPLACE: |T1| = 1 > p = 0 -> T1's victim 2 to B1
        //                                 T1=[3] T2=[0] B1=[2]
        //  2 miss, ghost hit in B1: p = 1; REPLACE: |T1| == p, not a B2 hit -> T2: its LRU 0
        //    makes its one trip (alone in T2, it is its own LRU again), then goes to B2
        // Plain ARC evicts 0 at the first miss and misses it at the fourth request.
        let cost = Raid5 {
            disks: 3,
            failed: Some(0),
        };
        let keys = [0, 1, 2, 0, 3, 2];
        let (h, ev) = run_costed(&mut Arc::vdf(2, 4), &keys, &cost);
        assert_eq!(h, [false, false, false, true, false, false]);
        assert_eq!(ev, [1, 2, 0]);
        let (h, ev) = run_costed(&mut Arc::new(2, 4), &keys, &cost);
        assert_eq!(h, [false; 6]);
        assert_eq!(ev, [0, 1, 2, 0]);
    }

    #[test]
    fn vdf_arc_on_raid6_with_two_failed_disks() {
        // 6-disk RAID-6, disks 0 and 1 failed: 0 costs 4; 1 2 3 6 7 8 cost 1 (testutil). c = 3.
        //  0 1 2 miss                     T1=[2 1 0]
        //  3 miss, case IV with B1 empty: LRU 0 (cost 4) makes trip 1 of 3; LRU 1 goes
        //                                 T1=[3 0(1) 2]
        //  6 miss: LRU 2 goes             T1=[6 3 0(1)]
        //  0 hit -> T2                    T1=[6 3] T2=[0]
        //  7 miss: |T1|+|B1|+1 = 3 <= c, REPLACE: |T1| = 2 > p = 0 -> 3 to B1
        //  8 miss: |T1|+|B1|+1 = 4 > c, B1 not empty: drop ghost 3, REPLACE -> 6 to B1
        // Plain ARC evicts 0, 1, 2 in turn and misses 0 at its second request.
        let cost = raid6(&[0, 1]);
        let keys = [0, 1, 2, 3, 6, 0, 7, 8];
        let (h, ev) = run_costed(&mut Arc::vdf(3, 6), &keys, &cost);
        assert_eq!(h, [false, false, false, false, false, true, false, false]);
        assert_eq!(ev, [1, 2, 3, 6]);
        let (h, ev) = run_costed(&mut Arc::new(3, 6), &keys, &cost);
        assert_eq!(h, [false; 8]);
        assert_eq!(ev, [0, 1, 2, 3, 6]);
    }
}
