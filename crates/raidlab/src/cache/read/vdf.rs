//! VDF, Victim Disk First (Algorithms 1 and 2 of the VDF paper): LRU and LFU made aware of
//! the price of a miss in a degraded RAID.
//!
//! # The rule
//!
//! A miss on a block costs `MP` disk reads: 1 on a healthy disk, `n - 1` on the failed disk of
//! an n-disk RAID-5 (read every survivor of the stripe and XOR). The expected disk work a
//! cached block saves is `p x MP`, where `p` is its access probability as the base policy
//! estimates it. VDF evicts the block with the *smallest* `p x MP`, so blocks of the failed
//! disk stay longer in proportion to their penalty.
//!
//! - VDF-LRU estimates `p` as `1 / (GTS - TS)`, the reciprocal of the time since the block's
//!   last access (`GTS` = the current request's timestamp, `TS` = the block's). Smallest
//!   `p x MP` = largest `(GTS - TS) / MP`. (The paper's printed Algorithm 1 garbles the weight
//!   line; this is the intent stated in its section 3.3, with the penalty dividing the age.)
//! - VDF-LFU uses the reference count `F` for `p`: smallest `F x MP`, ties broken by the older
//!   timestamp (the larger `GTS - TS`).
//!
//! Comparisons are exact integer cross-multiplications (`age_a x MP_b` vs `age_b x MP_a`), so
//! no float rounding can reorder candidates. Remaining ties (equal weights) go to the older
//! timestamp; timestamps are unique because [`Access::now`] strictly increases.
//!
//! # Stacks
//!
//! Every block sits in the local stack `LS_d` of its disk (`d = cost.disk_of(key)`, cached in
//! the entry at insert). `LS_d` is kept in the base policy's order: recency for VDF-LRU, and
//! `(F, TS)` frequency buckets for VDF-LFU. Only the bottom of a stack can be a victim,
//! because within one disk `MP` is common to all blocks and the base order already ranks
//! their `p`.
//!
//! The global stack `GS` of the paper orders *all* blocks by the same key (TS, or (F, TS)).
//! Its bottom is therefore always one of the local bottoms — the one with the smallest key —
//! so we do not store it separately: while `cost.degraded()` is false the victim is the local
//! bottom with the smallest key, which is exactly the bottom of `GS` and exactly the block
//! plain LRU / LFU would evict (checked by a property test). This saves a second set of links
//! per entry; the price is an O(disks) scan per eviction, a handful of comparisons for the
//! array widths the papers study. Once degraded, the same scan compares `p x MP` instead.
//!
//! # Extending the idea to other policies
//!
//! Any policy that can name a *candidate per disk* and give it a probability-like score can be
//! made victim-disk-aware the same way: keep its structure per disk (or tag entries with their
//! disk), and when it is about to evict, pull the candidate each disk would offer and weigh it
//! by its disk's penalty.
//! - CLOCK: keep one clock per disk. Advance each hand until it finds an unreferenced block
//!   (clearing bits as usual); those are the candidates, scored by their age in the clock
//!   (time since insertion or last second chance) divided by `MP`. Referenced blocks never
//!   become candidates, so the cost weighting only chooses among blocks CLOCK already deems
//!   cold. A cheaper variant gives failed-disk blocks `MP - 1` extra passes of the hand (a
//!   counter instead of a bit), which approximates the division without a scan.
//! - ARC: REPLACE decides *which list* (T1 or T2) gives up a block by comparing `|T1|` with
//!   the target `p`; leave that adaptation untouched, and only choose *which block* inside
//!   the chosen list with per-disk LRU stacks and the VDF-LRU weight. The ghost lists stay
//!   cost-blind: they measure whether recency or frequency is winning, which the penalty
//!   does not change. Counting failed-disk ghost hits `MP` times when adapting `p` is an
//!   optional refinement.
//! - 2Q: A1in is a FIFO filter for one-time blocks and Am an LRU; apply the VDF-LRU weight
//!   to the bottoms of per-disk Am stacks, and to per-disk A1in FIFOs (age since insertion /
//!   `MP`), keeping the `kin` threshold that decides which queue yields.
//! - MQ: the queue level is already `log2` of the count, an LFU-like score. Evict from the
//!   lowest non-empty *weighted* level: a block of the failed disk at level `k` competes as if
//!   at level `k + log2(MP)`, i.e. choose among the per-disk LRU bottoms of the lowest levels
//!   the one with the smallest `2^level x MP`, ties by age. Expiry and Qout are unchanged.
//!
//! In each case the policy must reduce to itself exactly while `cost.degraded()` is false,
//! which the per-disk decomposition guarantees as long as the cross-disk choice in the healthy
//! state uses the base policy's own order.

use super::freq::FreqLists;
use super::list::{Link, List, NIL};
use super::slab::Slab;
use super::{Access, MissCost, ReadPolicy};

/// The base policy VDF is applied to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    Lru,
    Lfu,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    /// Link in the local stack of `disk` (LRU) or in its frequency bucket (LFU).
    link: Link,
    size: u32,
    disk: u32,
    /// Timestamp of the last access (`TS`).
    ts: u64,
    /// Frequency bucket (VDF-LFU only).
    bucket: u32,
}

impl_slot!(Entry);

impl_bucketed!(Entry);

/// VDF-LRU or VDF-LFU over a fixed arena.
#[derive(Clone, Debug)]
pub struct Vdf {
    base: Base,
    slab: Slab<Entry>,
    /// VDF-LRU: one recency stack per disk, grown when a new disk id appears.
    stacks: Vec<List>,
    /// VDF-LFU: one group of frequency buckets per disk.
    freq: FreqLists,
    used: u64,
    capacity: u64,
}

impl Vdf {
    /// `capacity` units; room for `entries` entries before the arena grows.
    pub fn new(base: Base, capacity: u64, entries: usize) -> Self {
        let groups = 1;
        Vdf {
            base,
            slab: Slab::with_capacity(entries),
            stacks: vec![List::new(); groups],
            freq: FreqLists::new(
                groups,
                if base == Base::Lfu {
                    entries.clamp(16, 4096)
                } else {
                    0
                },
            ),
            used: 0,
            capacity,
        }
    }

    /// Make room for disk ids below `disks` (once per new disk, never per access).
    fn ensure_disks(&mut self, disks: usize) {
        if self.stacks.len() < disks {
            self.stacks.resize(disks, List::new());
            self.freq.ensure_groups(disks);
        }
    }

    /// The block to evict: the bottom of one local stack, chosen by the base order while the
    /// array is healthy and by `p x MP` once it is degraded.
    fn victim(&self, now: u64, cost: &dyn MissCost) -> Option<u32> {
        let degraded = cost.degraded();
        let mut best: Option<(u32, u128, u64)> = None; // (slot, score numerator..., ts)
        let mut best_mp = 1u128;
        for d in 0..self.stacks.len() {
            let candidate = match self.base {
                Base::Lru => self.stacks[d].back(),
                Base::Lfu => self.freq.victim(d),
            };
            let Some(id) = candidate else { continue };
            let e = self.slab.get(id);
            // The candidate's own cost, as the planner would charge it: while a disk is
            // rebuilt, its rebuilt rows cost 1 again although the disk is still failed.
            let mp = if degraded {
                u128::from(cost.cost_of(e.key))
            } else {
                1
            };
            // Score to *maximise* for LRU (age / MP) and to *minimise* for LFU (F x MP);
            // compared by cross-multiplication with the current best.
            let (num, better) = match self.base {
                Base::Lru => {
                    let age = u128::from(now.saturating_sub(e.ts));
                    let better = match best {
                        None => true,
                        Some((_, best_age, best_ts)) => {
                            let (l, r) = (age * best_mp, best_age * mp);
                            l > r || (l == r && e.ts < best_ts)
                        }
                    };
                    (age, better)
                }
                Base::Lfu => {
                    let f = u128::from(self.freq.count(e.bucket));
                    let better = match best {
                        None => true,
                        Some((_, best_f, best_ts)) => {
                            let (l, r) = (f * mp, best_f * best_mp);
                            l < r || (l == r && e.ts < best_ts)
                        }
                    };
                    (f, better)
                }
            };
            if better {
                best = Some((id, num, e.ts));
                best_mp = mp;
            }
        }
        best.map(|(id, _, _)| id)
    }

    fn unlink(&mut self, id: u32) {
        let d = self.slab.get(id).disk as usize;
        match self.base {
            Base::Lru => self.stacks[d].unlink(self.slab.nodes(), id),
            Base::Lfu => self.freq.remove(self.slab.nodes(), d, id),
        }
    }
}

impl ReadPolicy for Vdf {
    fn name(&self) -> &'static str {
        match self.base {
            Base::Lru => "vdf-lru",
            Base::Lfu => "vdf-lfu",
        }
    }

    #[inline]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        let Some(id) = self.slab.find(acc.key) else {
            return false;
        };
        let e = self.slab.get_mut(id);
        e.ts = acc.now;
        let d = e.disk as usize;
        match self.base {
            Base::Lru => self.stacks[d].move_to_front(self.slab.nodes(), id),
            Base::Lfu => self.freq.touch(self.slab.nodes(), d, id),
        }
        true
    }

    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool {
        let size = u64::from(acc.size);
        if size > self.capacity {
            return false;
        }
        debug_assert!(!self.contains(acc.key), "insert of a resident key");
        let disk = acc.cost.disk_of(acc.key);
        self.ensure_disks((acc.cost.disks() as usize).max(disk as usize + 1));
        while self.used + size > self.capacity {
            let Some(victim) = self.victim(acc.now, acc.cost) else {
                break;
            };
            self.unlink(victim);
            let e = self.slab.remove(victim);
            self.used -= u64::from(e.size);
            evicted.push(e.key);
        }
        let id = self.slab.insert(Entry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
            disk,
            ts: acc.now,
            bucket: NIL,
        });
        match self.base {
            Base::Lru => self.stacks[disk as usize].push_front(self.slab.nodes(), id),
            Base::Lfu => self.freq.insert(self.slab.nodes(), disk as usize, id, 1),
        }
        self.used += size;
        true
    }

    slab_policy_accessors!();

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes()
            + self.freq.heap_bytes()
            + self.stacks.capacity() * std::mem::size_of::<List>()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::step;
    use super::super::{lfu::Lfu, lru::Lru};
    use super::*;

    /// A RAID-5 of `disks` disks, block `k` on disk `k % disks`, optionally with one failed
    /// disk whose penalty is `disks - 1`.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Raid5 {
        pub disks: u32,
        pub failed: Option<u32>,
    }

    impl MissCost for Raid5 {
        fn disks(&self) -> u32 {
            self.disks
        }
        fn disk_of(&self, key: u64) -> u32 {
            (key % u64::from(self.disks)) as u32
        }
        fn penalty(&self, disk: u32) -> u32 {
            if self.failed == Some(disk) {
                self.disks - 1
            } else {
                1
            }
        }
        fn degraded(&self) -> bool {
            self.failed.is_some()
        }
    }

    use super::super::testutil::run_costed as run;

    const DEGRADED: Raid5 = Raid5 {
        disks: 3,
        failed: Some(0),
    };
    const HEALTHY: Raid5 = Raid5 {
        disks: 3,
        failed: None,
    };

    #[test]
    fn a_rebuilt_row_of_the_failed_disk_costs_one_again() {
        // RAID-5 of 3 left-symmetric, one block per unit: lba 0 on disk 0 (row 0), lba 1 on
        // disk 1, lba 2 on disk 2 (row 1). Disk 0 failed and rebuilding, row 0 already
        // rebuilt and reads redirected to the replacement: a miss on lba 0 costs 1 read, as
        // the planner charges it, not the failed disk's 2.
        use crate::array::{Array, ArraySpec, Layout, Level, Plan};
        let mut a = Array::new(&ArraySpec {
            level: Level::Raid5,
            disks: 3,
            stripe_unit_bytes: 4096,
            layout: Layout::LeftSymmetric,
            failed: vec![0],
            block_size: 4096,
        })
        .unwrap();
        a.start_rebuild(0, 8, true, "test").unwrap();
        a.mark_rebuilt(0, 0);
        assert_eq!((a.disk_of(0), a.disk_of(1), a.disk_of(2)), (0, 1, 2));
        let mut plan = Plan::default();
        a.plan_read(0, &mut plan);
        assert_eq!((plan.read_blocks(), a.cost_of(0), a.penalty(0)), (1, 1, 2));
        // Capacity 2: lba 0 at t0, lba 1 at t1; lba 2 misses at t3. Both bottoms cost 1, so
        // the older, lba 0 (age 3 vs 2), goes, as plain LRU would evict it. Charging the
        // disk's penalty instead (the bug) scored lba 0 at 3 / 2 = 1.5 < 2 and evicted lba 1.
        let mut p = Vdf::new(Base::Lru, 2, 3);
        let mut ev = Vec::new();
        for (t, k) in [(0u64, 0u64), (1, 1), (3, 2)] {
            step(&mut p, k, 1, t, &a, &mut ev);
        }
        assert_eq!(ev, [0]);
    }

    #[test]
    fn vdf_lru_keeps_the_failed_disks_block() {
        // 3-disk RAID-5, disk 0 failed (MP = 2), capacity 3, key k on disk k % 3.
        //  t0 0 miss (disk 0); t1 1 miss (disk 1); t2 2 miss (disk 2)
        //  t3 4 miss: local bottoms 0 (age 3, MP 2 -> 1.5), 1 (age 2 -> 2), 2 (age 1 -> 1);
        //     largest age / MP is key 1 -> evicted, although plain LRU would evict 0.
        //  t4 5 miss: 0 (age 4 / 2 = 2), 4 (age 1), 2 (age 2 / 1 = 2): a tie of weights,
        //     broken by the older timestamp -> 0 goes now.
        let mut p = Vdf::new(Base::Lru, 3, 3);
        let (h, ev) = run(&mut p, &[0, 1, 2, 4, 5], &DEGRADED);
        assert_eq!(h, [false; 5]);
        assert_eq!(ev, [1, 0]);
        // Healthy: exactly LRU.
        let mut p = Vdf::new(Base::Lru, 3, 3);
        assert_eq!(run(&mut p, &[0, 1, 2, 4, 5], &HEALTHY).1, [0, 1]);
    }

    #[test]
    fn vdf_lfu_keeps_the_failed_disks_block() {
        // Same array, capacity 3. F = count, W = F x MP, ties by older timestamp.
        //  t0 0 miss; t1 1 miss; t2 1 hit (F 2); t3 2 miss
        //  t4 4 miss: bottoms 0 (F1, W2), 1 (F2, W2), 2 (F1, W1) -> evict 2.
        //     Plain LFU evicts 0 (F1 with the oldest timestamp).
        //  t5 5 miss: bottoms 0 (W2), disk 1's bottom is 4 (F1, W1) -> evict 4.
        //  t6 7 miss: 0 (W2), 1 (W2), 5 (W1) -> evict 5.
        //  t7 8 miss: 0 (W2), disk 1's bottom 7 (W1) -> evict 7. Block 0 survives all four.
        let keys = [0, 1, 1, 2, 4, 5, 7, 8];
        let mut p = Vdf::new(Base::Lfu, 3, 3);
        let (h, ev) = run(&mut p, &keys, &DEGRADED);
        assert_eq!(h, [false, false, true, false, false, false, false, false]);
        assert_eq!(ev, [2, 4, 5, 7]);
        assert!(p.contains(0));
        let mut p = Vdf::new(Base::Lfu, 3, 3);
        assert_eq!(run(&mut p, &keys, &HEALTHY).1, [0, 2, 4, 5]);
    }

    #[test]
    fn healthy_vdf_equals_plain_policies_on_a_longer_trace() {
        // A deterministic pseudo-random stream (LCG) over 64 keys, capacity 10.
        let mut x = 12345u64;
        let keys: Vec<u64> = (0..5000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 33) % 64
            })
            .collect();
        let cost = Raid5 {
            disks: 5,
            failed: None,
        };
        let mut a = Vdf::new(Base::Lru, 10, 10);
        let mut b = Lru::new(10, 10);
        assert_eq!(run(&mut a, &keys, &cost), run(&mut b, &keys, &cost));
        let mut a = Vdf::new(Base::Lfu, 10, 10);
        let mut b = Lfu::new(10, 10);
        assert_eq!(run(&mut a, &keys, &cost), run(&mut b, &keys, &cost));
    }
}
