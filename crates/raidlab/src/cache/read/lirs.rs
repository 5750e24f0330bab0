//! LIRS, Low Inter-reference Recency Set (Jiang and Zhang, SIGMETRICS 2002).
//!
//! Blocks are LIR (low inter-reference recency: kept) or HIR (high: candidates). The LIR
//! blocks fill `Llirs` of the capacity, resident HIR blocks the remaining `Lhirs` (1 %, at
//! least one unit). Two structures:
//! - the stack **S** holds LIR blocks, resident HIR blocks and *non-resident* HIR blocks (ghosts)
//!   in recency order; its bottom is always a LIR block ("pruning" drops HIR blocks from the
//!   bottom, forgetting non-resident ones);
//! - the queue **Q** holds the resident HIR blocks; its oldest block is the victim.
//!
//! On an access to block X:
//! - X LIR: move it to the top of S, then prune;
//! - X resident HIR in S: it becomes LIR at the top of S, the bottom LIR of S becomes a resident
//!   HIR at Q's newest end, prune. X not in S: move it to the top of S and to Q's newest end;
//! - X missed: evict Q's oldest block (it stays in S as a non-resident HIR if it is there).
//!   While the LIR blocks do not yet fill `Llirs`, X becomes LIR; otherwise, X found in S as a
//!   non-resident HIR becomes LIR at the top of S and the bottom LIR goes to Q as above, and
//!   any other X becomes a resident HIR at the top of S and Q's newest end.
//!
//! Non-resident entries are bounded as in libCacheSim: while S's entries sum to more than twice
//! the capacity, the oldest non-resident entry (the first to become non-resident) is dropped.
//! Sizes: `Llirs`, `Lhirs` and the stack bound are in capacity units; a status change that
//! leaves Q above `Lhirs` is settled by the next insert, which evicts from Q until the new
//! block fits, so the capacity is never exceeded and a hit never evicts.
//!
//! # libCacheSim
//!
//! This is the paper's algorithm. libCacheSim's `LIRS` (`cache/eviction/LIRS.c`) departs from
//! it in two places, so the miss counts may differ: they are identical in block mode on the
//! CloudPhysics trace and within 1 % in object mode (`xcheck.rs`, `docs/read-caches.md`):
//! - a hit on a resident HIR block that is not in S first demotes bottom LIR blocks while the
//!   LIR set is full, and that demotion evicts from Q *inside the hit* (possibly the block
//!   being hit, which then stays marked resident in S without being counted); in the paper the
//!   block just moves to the top of S and the end of Q, and no status changes. A `get` here
//!   never evicts: the caller learns of evictions only from `insert`.
//! - objects larger than `Lhirs` (1 % of the cache) are refused; here any entry that fits in
//!   the cache is cached, as [`ReadPolicy::insert`] promises.

use super::list::{Link, List, Nodes};
use super::slab::Slab;
use super::{Access, ReadPolicy};

const LIR: u8 = 0;
const HIR: u8 = 1;
const NONRES: u8 = 2;

/// Share of the capacity for resident HIR blocks (libCacheSim's and the paper's 1 %).
pub const HIR_SHARE: f64 = 0.01;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    /// Link in S.
    link: Link,
    /// Link in Q (resident HIR) or in the non-resident list (non-resident HIR).
    qlink: Link,
    size: u32,
    state: u8,
    in_s: bool,
}

impl_slot!(Entry);

/// The entries seen through their second link (Q and the non-resident list).
struct QLinks<'a>(&'a mut [Entry]);

impl Nodes for QLinks<'_> {
    #[inline]
    fn link(&self, id: u32) -> Link {
        self.0[id as usize].qlink
    }
    #[inline]
    fn link_mut(&mut self, id: u32) -> &mut Link {
        &mut self.0[id as usize].qlink
    }
}

/// LIRS over a fixed arena (resident entries plus up to twice the capacity of ghosts).
#[derive(Clone, Debug)]
pub struct Lirs {
    slab: Slab<Entry>,
    s: List,
    q: List,
    /// Non-resident HIR entries, in the order they became non-resident.
    nonres: List,
    lir_used: u64,
    hir_used: u64,
    /// Units of every entry in S, resident or not.
    s_units: u64,
    lir_cap: u64,
    resident: usize,
    capacity: u64,
}

impl Lirs {
    /// `capacity` units; room for `entries` entries (resident + non-resident).
    pub fn new(capacity: u64, entries: usize) -> Self {
        let hir_cap = ((capacity as f64 * HIR_SHARE) as u64).max(1);
        Lirs {
            slab: Slab::with_capacity(entries),
            s: List::new(),
            q: List::new(),
            nonres: List::new(),
            lir_used: 0,
            hir_used: 0,
            s_units: 0,
            lir_cap: capacity.saturating_sub(hir_cap),
            resident: 0,
            capacity,
        }
    }

    fn s_push_front(&mut self, id: u32) {
        let e = self.slab.get_mut(id);
        e.in_s = true;
        self.s_units += u64::from(e.size);
        self.s.push_front(self.slab.nodes(), id);
    }

    fn s_unlink(&mut self, id: u32) {
        let e = self.slab.get_mut(id);
        e.in_s = false;
        self.s_units -= u64::from(e.size);
        self.s.unlink(self.slab.nodes(), id);
    }

    fn q_push_front(&mut self, id: u32) {
        self.q.push_front(&mut QLinks(self.slab.nodes()), id);
    }

    fn q_unlink(&mut self, id: u32) {
        self.q.unlink(&mut QLinks(self.slab.nodes()), id);
    }

    /// Drop HIR entries from the bottom of S until a LIR entry is there; non-resident ones are
    /// forgotten, resident ones stay in Q.
    #[inline(always)]
    fn prune(&mut self) {
        while let Some(b) = self.s.back() {
            let state = self.slab.get(b).state;
            if state == LIR {
                break;
            }
            self.s_unlink(b);
            if state == NONRES {
                self.nonres.unlink(&mut QLinks(self.slab.nodes()), b);
                self.slab.remove(b);
            }
        }
    }

    /// The bottom LIR entry of S becomes a resident HIR at Q's newest end; prune. False when
    /// S holds no LIR entry.
    fn demote_bottom_lir(&mut self) -> bool {
        let Some(b) = self.s.back() else {
            return false;
        };
        debug_assert_eq!(
            self.slab.get(b).state,
            LIR,
            "S's bottom is LIR after pruning"
        );
        self.s_unlink(b);
        let e = self.slab.get_mut(b);
        e.state = HIR;
        let size = u64::from(e.size);
        self.lir_used -= size;
        self.hir_used += size;
        self.q_push_front(b);
        self.prune();
        true
    }

    /// Evict Q's oldest block (a LIR block first goes to Q when Q is empty). False when
    /// nothing is resident.
    #[inline(always)]
    fn evict_one_block(&mut self, evicted: &mut Vec<u64>) -> bool {
        if self.q.is_empty() && !self.demote_bottom_lir() {
            return false;
        }
        let Some(b) = self.q.back() else {
            return false;
        };
        self.q_unlink(b);
        let e = self.slab.get_mut(b);
        self.hir_used -= u64::from(e.size);
        self.resident -= 1;
        evicted.push(e.key);
        if e.in_s {
            e.state = NONRES;
            self.nonres.push_front(&mut QLinks(self.slab.nodes()), b);
            // Only when S holds no LIR block can it have been the bottom.
            self.prune();
        } else {
            self.slab.remove(b);
        }
        true
    }

    /// While the LIR blocks exceed `Llirs`, demote S's bottom LIR block.
    fn settle_lir(&mut self) {
        while self.lir_used > self.lir_cap {
            if !self.demote_bottom_lir() {
                break;
            }
        }
    }

    /// Bound the ghosts: while S sums to more than twice the capacity, forget the oldest
    /// non-resident entry.
    #[inline(always)]
    fn limit_stack(&mut self) {
        while self.s_units > 2 * self.capacity {
            let Some(b) = self.nonres.back() else {
                break;
            };
            self.nonres.unlink(&mut QLinks(self.slab.nodes()), b);
            self.s_unlink(b);
            self.slab.remove(b);
        }
    }

    #[inline(always)]
    fn unlink(&mut self, id: u32) {
        let e = *self.slab.get(id);
        match e.state {
            LIR => self.lir_used -= u64::from(e.size),
            _ => {
                self.q_unlink(id);
                self.hir_used -= u64::from(e.size);
            }
        }
        if e.in_s {
            self.s_unlink(id);
            // A removed LIR block may have been S's bottom.
            self.prune();
        }
    }
}

impl ReadPolicy for Lirs {
    fn name(&self) -> &'static str {
        "lirs"
    }

    #[inline(always)]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        let Some(id) = self.slab.find(acc.key) else {
            return false;
        };
        let e = *self.slab.get(id);
        match e.state {
            LIR => {
                self.s.move_to_front(self.slab.nodes(), id);
                self.prune();
            }
            HIR if e.in_s => {
                self.s.move_to_front(self.slab.nodes(), id);
                self.q_unlink(id);
                let size = u64::from(e.size);
                self.hir_used -= size;
                self.lir_used += size;
                self.slab.get_mut(id).state = LIR;
                self.settle_lir();
                self.prune();
            }
            HIR => {
                self.s_push_front(id);
                self.q_unlink(id);
                self.q_push_front(id);
                self.prune();
                self.limit_stack();
            }
            _ => return false,
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
        while self.lir_used + self.hir_used + size > self.capacity {
            if !self.evict_one_block(evicted) {
                break;
            }
        }
        // A ghost (looked up after evicting: pruning may have forgotten it) is replaced by
        // the new entry at the top of S; only its LIR-worthiness is kept.
        let ghost = match self.slab.find(acc.key) {
            Some(g) => {
                self.nonres.unlink(&mut QLinks(self.slab.nodes()), g);
                self.s_unlink(g);
                self.slab.remove(g);
                true
            }
            None => false,
        };
        let lir = ghost || self.lir_used + size <= self.lir_cap;
        let id = self.slab.insert(Entry {
            key: acc.key,
            link: Link::DETACHED,
            qlink: Link::DETACHED,
            size: acc.size,
            state: if lir { LIR } else { HIR },
            in_s: false,
        });
        self.s_push_front(id);
        self.resident += 1;
        if lir {
            self.lir_used += size;
            self.settle_lir();
            self.prune();
        } else {
            self.hir_used += size;
            self.q_push_front(id);
            // S holding no LIR block (a cache whose Llirs is 0) must stay empty.
            self.prune();
        }
        self.limit_stack();
        debug_assert!(self.lir_used + self.hir_used <= self.capacity);
        true
    }

    ghost_policy_accessors!(|e| e.state != NONRES);

    fn used(&self) -> u64 {
        self.lir_used + self.hir_used
    }

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::run_evictions;
    use super::*;

    #[test]
    fn worked_example() {
        // Capacity 3: Lhirs = 1, Llirs = 2. S top .. bottom (L, H resident, N non-resident).
        //  1 2 miss: the LIR set is not full: both LIR          S=[2L 1L]
        //  3 miss: LIR set full: resident HIR                    S=[3H 2L 1L]  Q=[3]
        //  1 hit (LIR, at the bottom): to the top; prune (2 is LIR)
        //                                                        S=[1L 3H 2L]  Q=[3]
        //  4 miss: full: evict Q's oldest, 3 (stays in S, N). 4: resident HIR
        //                                                        S=[4H 1L 3N 2L]  Q=[4]
        //  2 hit (LIR, bottom): to the top; prune drops 3N       S=[2L 4H 1L]
        //  3 miss (forgotten): evict 4 (N in S); 3 resident HIR  S=[3H 2L 4N 1L]  Q=[3]
        //  4 miss, a ghost in S: evict 3 (N); 4 becomes LIR at the top; the LIR blocks now
        //     exceed Llirs: the bottom LIR, 1, becomes resident HIR in Q
        //                                                        S=[4L 3N 2L]  Q=[1]
        //  1 hit (resident HIR not in S): to the top of S and Q's newest end
        //                                                        S=[1H 4L 3N 2L]  Q=[1]
        //  3 miss, a ghost: evict 1 (N); 3 LIR; bottom LIR 2 to Q
        //                                                        S=[3L 1N 4L]  Q=[2]
        let mut p = Lirs::new(3, 9);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 1, 4, 2, 3, 4, 1, 3]);
        assert_eq!(
            h,
            [false, false, false, true, false, true, false, false, true, false]
        );
        assert_eq!(ev, [3, 4, 3, 1]);
        assert!(p.contains(2) && p.contains(3) && p.contains(4) && !p.contains(1));
        assert_eq!((p.lir_used, p.hir_used), (2, 1));
    }

    #[test]
    fn a_resident_hir_hit_in_s_swaps_status_with_the_bottom_lir() {
        // As above up to S=[4H 1L 3N 2L] Q=[4].
        //  4 hit (resident HIR in S): 4 LIR at the top; bottom LIR 2 to Q; prune drops 3N
        //                                                        S=[4L 1L]  Q=[2]
        //  3 miss (forgotten): evict 2 (not in S: gone); 3 resident HIR  S=[3H 4L 1L]
        //  2 miss, no ghost (2 left S when demoted): evict 3 (N in S); 2 resident HIR
        //                                                        S=[2H 3N 4L 1L]  Q=[2]
        let mut p = Lirs::new(3, 9);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 1, 4, 4, 3, 2]);
        assert_eq!(h, [false, false, false, true, false, true, false, false]);
        assert_eq!(ev, [3, 2, 3]);
        assert_eq!(p.slab.len(), 4, "1 4 LIR, 3 a ghost, 2 resident HIR");
        assert_eq!((p.lir_used, p.hir_used, p.s_units), (2, 1, 4));
    }

    #[test]
    fn ghosts_are_bounded_by_twice_the_capacity() {
        // Capacity 3: one long scan of new blocks leaves at most 2 x 3 units in S.
        let mut p = Lirs::new(3, 9);
        let keys: Vec<u64> = (0..100).collect();
        run_evictions(&mut p, &keys);
        assert!(p.s_units <= 6);
        assert!(p.slab.len() <= 9);
    }
}
