//! S3-FIFO (Yang, Zhang, Qiu, Yue and Rashmi, SOSP 2023): three static FIFO queues.
//!
//! - **S**, a small FIFO (10 % of the capacity) that new entries enter: most one-hit wonders
//!   leave from here quickly. A hit adds 1 to the entry's count.
//! - **M**, the main FIFO (the rest), run as a CLOCK with a 2-bit counter: a hit adds 1; at
//!   eviction an entry with count `f >= 1` is re-queued at the head with `min(f, 3) - 1`,
//!   one with count 0 is evicted.
//! - **G**, a ghost FIFO of keys recently evicted from S (90 % of the capacity, counted in
//!   the entries' units). A miss found in G enters M directly.
//!
//! Evicting: from M when M holds more than its share or S is empty, else from S. S's tail
//! moves to M's head (count reset) when its count reached `move_threshold` (2), and the next
//! tail is examined; the first that has not goes to G, and that is the one eviction.
//!
//! # libCacheSim
//!
//! This follows libCacheSim's `S3FIFO` (`cache/eviction/S3FIFO.c`, the version shipped with
//! the `libcachesim` 0.3.5 wheel), whose miss counts it matches exactly on the cross-check
//! traces (see `xcheck.rs`). Its details, which the paper leaves open:
//! - shares: S = `floor(c x 0.1)`, M = `c - S`, G = `floor(c x 0.9)` units, all by size;
//! - the ghost lookup happens in `get`, so the ghost is dropped even when the caller then
//!   declines to insert; a count never resets on a hit, only on a move;
//! - *warm-up*: until the first eviction, a new entry enters M instead of S once S is full,
//!   so the cache fills completely before anything is evicted (the paper's S3-FIFO, libCacheSim's
//!   `S3FIFOv0`, keeps inserting into S and starts evicting from it early);
//! - an entry found in G enters M whatever its size.
//!
//! Units: the shares are fractions of the capacity in its own units, rounded down. Block mode
//! over N blocks and object mode over N objects of 4096 bytes are therefore the same cache
//! only when 10 divides N (otherwise object mode's S holds a fraction of an object more, and
//! "S is full" and "M is over its share" trip at different counts); compare with libCacheSim
//! in object mode (`capacity_bytes`), as for ARC.
//!
//! One deliberate difference: libCacheSim refuses an entry (not found in G) whose size is
//! at least S's share (and, when it equals it, only after evicting to make room for it), so
//! in block mode a cache below 20 blocks caches nothing. Here an entry larger than S's share
//! enters M instead, and one of exactly S's size enters S, so every entry that fits in the
//! cache is cached, as [`ReadPolicy::insert`] promises. On the cross-check traces no entry
//! is that large (and block-mode caches are at least 20 blocks), so the miss counts agree.
//!
//! # VDF-S3FIFO
//!
//! S3-FIFO has no single eviction order either: whether S or M gives up an entry is decided by
//! their sizes, and that split (a quick filter for one-hit wonders, a long CLOCK for the rest)
//! is the algorithm. VDF-S3FIFO keeps the decision and weighs cost inside each queue, the
//! VDF-CLOCK way: an entry that would leave (S's tail below the move threshold, M's tail with
//! count 0) whose current miss cost (`cost.cost_of(key)`, read then, never cached) is `MP`
//! and that has made fewer than `MP - 1` extra trips is re-queued at the head of *its own*
//! queue with one more trip counted, and the next tail is examined. So an expensive block
//! gets `MP` trips through S to earn its move to M (rather than skipping the filter, which
//! would let every cold block of the failed disk crowd M), and `MP` rotations of M's clock
//! once its count has run down. Re-queued S entries keep their count, so hits from all trips
//! add up towards the threshold; a hit resets the trips, and a move to M clears them. The
//! victim of S still goes to G. Each re-queue raises one entry's trips towards its bounded
//! `MP - 1`, so the search ends. While `cost.degraded()` is false nothing makes a trip and
//! VDF-S3FIFO is S3-FIFO exactly (property test).

use super::list::{Link, List};
use super::slab::Slab;
use super::{Access, MissCost, ReadPolicy};

const SMALL: u8 = 0;
const MAIN: u8 = 1;
const GHOST: u8 = 2;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    link: Link,
    size: u32,
    queue: u8,
    count: u8,
    /// VDF-S3FIFO: extra trips through its queue made unreferenced since the last access.
    trips: u16,
}

impl_slot!(Entry);

/// The ghost hit of the current request, kept from `get` for the `insert` that follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct GhostHit {
    key: u64,
    now: u64,
}

/// S3-FIFO over a fixed arena (resident entries plus up to `ghost` x capacity of ghosts).
#[derive(Clone, Debug)]
pub struct S3Fifo {
    slab: Slab<Entry>,
    queues: [List; 3],
    /// Units in each queue, indexed like `queues`.
    sizes: [u64; 3],
    small_cap: u64,
    main_cap: u64,
    ghost_cap: u64,
    move_threshold: u8,
    /// Whether anything was evicted yet (ends the warm-up).
    has_evicted: bool,
    ghost_hit: Option<GhostHit>,
    resident: usize,
    capacity: u64,
    /// VDF-S3FIFO: entries about to leave a queue get `cost - 1` extra trips through it.
    weighted: bool,
}

impl S3Fifo {
    /// `capacity` units; S holds `small` of it, G `ghost` of it; an entry in S with count
    /// `move_threshold` moves to M. Room for `entries` entries (resident + ghost).
    pub fn new(capacity: u64, small: f64, ghost: f64, move_threshold: u8, entries: usize) -> Self {
        Self::with_weighting(capacity, small, ghost, move_threshold, entries, false)
    }

    /// VDF-S3FIFO with S3-FIFO's tunables (see [`S3Fifo::new`]).
    pub fn vdf(capacity: u64, small: f64, ghost: f64, move_threshold: u8, entries: usize) -> Self {
        Self::with_weighting(capacity, small, ghost, move_threshold, entries, true)
    }

    fn with_weighting(
        capacity: u64,
        small: f64,
        ghost: f64,
        move_threshold: u8,
        entries: usize,
        weighted: bool,
    ) -> Self {
        let small_cap = (capacity as f64 * small) as u64;
        S3Fifo {
            slab: Slab::with_capacity(entries),
            queues: [List::new(); 3],
            sizes: [0; 3],
            small_cap,
            main_cap: capacity - small_cap,
            ghost_cap: (capacity as f64 * ghost) as u64,
            move_threshold,
            has_evicted: false,
            ghost_hit: None,
            resident: 0,
            capacity,
            weighted,
        }
    }

    /// Detach `id` from its queue and unit count.
    #[inline(always)]
    fn unlink(&mut self, id: u32) -> Entry {
        let e = *self.slab.get(id);
        self.queues[e.queue as usize].unlink(self.slab.nodes(), id);
        self.sizes[e.queue as usize] -= u64::from(e.size);
        e
    }

    #[inline(always)]
    fn push_front(&mut self, id: u32, queue: u8, count: u8) {
        let e = self.slab.get_mut(id);
        e.queue = queue;
        e.count = count;
        e.trips = 0;
        let size = u64::from(e.size);
        self.queues[queue as usize].push_front(self.slab.nodes(), id);
        self.sizes[queue as usize] += size;
    }

    #[inline]
    fn used_units(&self) -> u64 {
        self.sizes[SMALL as usize] + self.sizes[MAIN as usize]
    }

    /// Turn resident `id` (already unlinked) into a ghost, dropping the oldest ghosts to stay
    /// within G's share; an entry larger than G is dropped outright.
    #[inline(always)]
    fn make_ghost(&mut self, id: u32) {
        self.resident -= 1;
        let size = u64::from(self.slab.get(id).size);
        if size > self.ghost_cap {
            self.slab.remove(id);
            return;
        }
        while self.sizes[GHOST as usize] + size > self.ghost_cap {
            let Some(old) = self.queues[GHOST as usize].back() else {
                break;
            };
            self.unlink(old);
            self.slab.remove(old);
        }
        self.push_front(id, GHOST, 0);
    }

    /// VDF-S3FIFO: whether `id`, about to leave its queue, instead makes another trip
    /// through it (re-queued at the head, count kept, one more trip counted).
    #[inline(always)]
    fn another_trip(&mut self, id: u32, cost: Option<&dyn MissCost>) -> bool {
        let Some(cost) = cost else {
            return false;
        };
        let e = *self.slab.get(id);
        if u32::from(e.trips) + 1 >= cost.cost_of(e.key) {
            return false;
        }
        self.queues[e.queue as usize].move_to_front(self.slab.nodes(), id);
        self.slab.get_mut(id).trips = e.trips.saturating_add(1);
        true
    }

    /// Evict from S: move tails that earned it to M, send the first that did not (and, VDF,
    /// has no trip left) to G. Evicts nothing when every entry of S moves.
    #[inline(always)]
    fn evict_small(&mut self, cost: Option<&dyn MissCost>, evicted: &mut Vec<u64>) {
        while let Some(id) = self.queues[SMALL as usize].back() {
            if self.slab.get(id).count < self.move_threshold && self.another_trip(id, cost) {
                continue;
            }
            let e = self.unlink(id);
            if e.count >= self.move_threshold {
                self.push_front(id, MAIN, 0);
            } else {
                evicted.push(e.key);
                self.make_ghost(id);
                return;
            }
        }
    }

    /// Evict from M, a CLOCK with a 2-bit counter. Terminates: each re-queue lowers a count
    /// or (VDF) raises bounded trips.
    #[inline(always)]
    fn evict_main(&mut self, cost: Option<&dyn MissCost>, evicted: &mut Vec<u64>) {
        while let Some(id) = self.queues[MAIN as usize].back() {
            if self.slab.get(id).count == 0 && self.another_trip(id, cost) {
                continue;
            }
            let e = self.unlink(id);
            if e.count >= 1 {
                self.push_front(id, MAIN, e.count.min(3) - 1);
            } else {
                self.slab.remove(id);
                self.resident -= 1;
                evicted.push(e.key);
                return;
            }
        }
    }

    #[inline(always)]
    fn evict(&mut self, cost: &dyn MissCost, evicted: &mut Vec<u64>) {
        self.has_evicted = true;
        let cost = Some(cost).filter(|c| self.weighted && c.degraded());
        if self.sizes[MAIN as usize] > self.main_cap || self.queues[SMALL as usize].is_empty() {
            self.evict_main(cost, evicted);
        } else {
            self.evict_small(cost, evicted);
        }
    }
}

impl ReadPolicy for S3Fifo {
    fn name(&self) -> &'static str {
        if self.weighted {
            "vdf-s3fifo"
        } else {
            "s3fifo"
        }
    }

    #[inline(always)]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        self.ghost_hit = None;
        let Some(id) = self.slab.find(acc.key) else {
            return false;
        };
        let e = self.slab.get_mut(id);
        if e.queue != GHOST {
            // Saturating: main's re-queue takes `min(count, 3) - 1` and the move
            // threshold is a `u8`, so a count stuck at 255 decides the same as a larger one.
            e.count = e.count.saturating_add(1);
            e.trips = 0;
            return true;
        }
        self.unlink(id);
        self.slab.remove(id);
        self.ghost_hit = Some(GhostHit {
            key: acc.key,
            now: acc.now,
        });
        false
    }

    #[inline(always)]
    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool {
        let ghost = self
            .ghost_hit
            .take()
            .is_some_and(|g| g.key == acc.key && g.now == acc.now);
        let size = u64::from(acc.size);
        if size > self.capacity {
            return false;
        }
        debug_assert!(!self.contains(acc.key), "insert of a resident key");
        while self.used_units() + size > self.capacity {
            let before = self.resident;
            self.evict(acc.cost, evicted);
            if before == 0 {
                break;
            }
        }
        let queue = if ghost
            || size > self.small_cap
            || (!self.has_evicted && self.sizes[SMALL as usize] >= self.small_cap)
        {
            MAIN
        } else {
            SMALL
        };
        let id = self.slab.insert(Entry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
            queue,
            count: 0,
            trips: 0,
        });
        self.push_front(id, queue, 0);
        self.resident += 1;
        debug_assert!(self.used_units() <= self.capacity);
        true
    }

    ghost_policy_accessors!(|e| e.queue != GHOST);

    fn used(&self) -> u64 {
        self.used_units()
    }

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{hits, raid6, run_costed, run_evictions};
    use super::super::vdf::tests::Raid5;
    use super::*;

    #[test]
    fn worked_example() {
        // Capacity 20 blocks: S = 2, M = 18, G = 18. Queues head .. tail, counts after ':'.
        // (libCacheSim 0.3.5's `S3FIFO(20)` with every obj_size 1 gives the same hits.)
        //  0..19 miss: 0 and 1 enter S; S is then full and nothing was evicted yet, so
        //     2..19 enter M (warm-up)                S=[1 0]  M=[19 .. 2]
        //  #20 0 hit (0:1), #21 0 hit (0:2), #22 5 hit (5:1)
        //  #23 20 miss: M (18) is not over its share and S is not empty: evict from S. Its
        //     tail 0:2 reached the threshold and moves to M's head (0:0); the next tail 1:0
        //     goes to G: evicted. 20 enters S.       S=[20]  M=[0 19 .. 2]  G=[1]
        //  #24 21 miss: M holds 19 > 18: evict from M, whose tail 2:0 goes.
        //                                            S=[21 20]  M=[0 19 .. 3]
        //  #25 1 miss, found in G (the ghost goes): it will enter M. Room: M = 18 is not
        //     over and S is not empty: S's tail 20:0 goes to G. 1 enters M's head.
        //                                            S=[21]  M=[1 0 19 .. 3]  G=[20]
        //  #26 22 miss: M = 19 > 18: M's tail 3 goes. 22 enters S.  S=[22 21]
        //  #27 23 miss: M = 18, S not empty: S's tail 21 to G.      S=[23 22]
        //  #28 4 hit (M, 4:1)
        //  #29 24, #30 25, #31 26 miss: each sends S's tail to G: 22, 23, 24.
        let mut p = S3Fifo::new(20, 0.1, 0.9, 2, 64);
        let mut keys: Vec<u64> = (0..20).collect();
        keys.extend([0, 0, 5, 20, 21, 1, 22, 23, 4, 24, 25, 26]);
        let (h, ev) = run_evictions(&mut p, &keys);
        let hit_at: Vec<usize> = (0..h.len()).filter(|&i| h[i]).collect();
        assert_eq!(hit_at, [20, 21, 22, 28]);
        assert_eq!(ev, [1, 2, 20, 3, 21, 22, 23, 24]);
        assert_eq!(p.len(), 20);
        assert!(p.contains(0) && p.contains(1) && p.contains(5) && p.contains(4));
        // G holds 24 23 22 21 20: a miss on 20 enters M.
        assert!(!p.contains(20));
    }

    #[test]
    fn main_is_a_clock_with_a_two_bit_counter() {
        // Capacity 20 as above. 2 is hit five times (2:5) and 0 twice (0:2).
        //  #27 20 miss: from S: 0:2 moves to M (M = 19), 1 to G. 20 enters S.
        //  #28 21 miss: M = 19 > 18: from M. Tail 2:5 is re-queued at the head with
        //     min(5, 3) - 1 = 2; tail 3:0 goes.      M=[2:2 0 19 .. 4]
        let mut p = S3Fifo::new(20, 0.1, 0.9, 2, 64);
        let mut keys: Vec<u64> = (0..20).collect();
        keys.extend([2, 2, 2, 2, 2, 0, 0, 20, 21]);
        let (_, ev) = run_evictions(&mut p, &keys);
        assert_eq!(ev, [1, 3]);
        let e = p.slab.get(p.slab.find(2).expect("2 resident"));
        assert_eq!((e.queue, e.count), (MAIN, 2));
        assert_eq!(
            p.queues[MAIN as usize].iter_back(p.slab.nodes()).last(),
            Some(p.slab.find(2).unwrap())
        );
    }

    #[test]
    fn an_entry_too_large_for_s_enters_m() {
        // Object mode, capacity 100: S = 10. A 5-byte entry enters S; an 11-byte one cannot
        // fit in S and enters M (libCacheSim refuses it).
        let mut p = S3Fifo::new(100, 0.1, 0.9, 2, 8);
        assert_eq!(hits(&mut p, &[(1, 5), (2, 11)]), [false, false]);
        assert!(p.contains(1) && p.contains(2));
        assert_eq!(p.used(), 16);
        assert_eq!(p.sizes, [5, 11, 0]);
    }

    #[test]
    fn vdf_s3fifo_on_a_degraded_raid5() {
        // 3-disk RAID-5, disk 0 failed: keys divisible by 3 cost 2. Capacity 20 (S = 2,
        // M = 18). `(t)` = extra trips made.
        //  0..19 miss (warm-up)              S=[1 0]  M=[19 .. 2]
        //  20: from S. Tail 0 (cost 2) makes its trip: S=[0(1) 1]; tail 1 goes to G
        //                                    S=[20 0(1)]
        //  21: tail 0 has no trip left: to G S=[21 20]
        //  1: found in G, enters M. From S: tail 20 to G    M=[1 19 .. 2] (19)
        //  22: M over its share: its tail 2 (count 0, cost 1) goes
        //  23: from S: tail 21 (cost 2) makes its trip; tail 22 to G   S=[23 21(1)]
        //  24: tail 21 to G                  S=[24 23]
        //  0: found in G, enters M; from S: tail 23 to G   M=[0 1 19 .. 3] (19)
        //  25: M over its share: tail 3 (count 0, cost 2) makes its trip, tail 4 goes
        // Plain S3-FIFO evicts 0 and 21 a request earlier and 3 instead of 4.
        let cost = Raid5 {
            disks: 3,
            failed: Some(0),
        };
        let mut keys: Vec<u64> = (0..20).collect();
        keys.extend([20, 21, 1, 22, 23, 24, 0, 25]);
        let mut p = S3Fifo::vdf(20, 0.1, 0.9, 2, 64);
        let (h, ev) = run_costed(&mut p, &keys, &cost);
        assert!(h.iter().all(|&x| !x));
        assert_eq!(ev, [1, 0, 20, 2, 22, 21, 23, 4]);
        assert!(p.contains(3));
        let (h, ev) = run_costed(&mut S3Fifo::new(20, 0.1, 0.9, 2, 64), &keys, &cost);
        assert!(h.iter().all(|&x| !x));
        assert_eq!(ev, [0, 1, 20, 2, 21, 22, 23, 3]);
    }

    #[test]
    fn vdf_s3fifo_on_raid6_with_two_failed_disks() {
        // 6-disk RAID-6, disks 0 and 1 failed: 0 costs 4, 1 and 20..23 cost 1. Capacity 20.
        //  0..19 miss (warm-up)              S=[1 0]  M=[19 .. 2]
        //  20: tail 0 makes trip 1 of 3; 1 to G   S=[20 0(1)]
        //  21: trip 2; 20 to G               S=[21 0(2)]
        //  22: trip 3; 21 to G               S=[22 0(3)]
        //  23: 0 has no trip left: to G      S=[23 22]
        //  0: found in G, enters M; from S, 22 to G
        // Plain S3-FIFO sends 0 to G at once.
        let cost = raid6(&[0, 1]);
        let mut keys: Vec<u64> = (0..20).collect();
        keys.extend([20, 21, 22, 23, 0]);
        let (h, ev) = run_costed(&mut S3Fifo::vdf(20, 0.1, 0.9, 2, 64), &keys, &cost);
        assert!(h.iter().all(|&x| !x));
        assert_eq!(ev, [1, 20, 21, 0, 22]);
        let (_, ev) = run_costed(&mut S3Fifo::new(20, 0.1, 0.9, 2, 64), &keys, &cost);
        assert_eq!(ev, [0, 1, 20, 21, 22]);
    }

    #[test]
    fn a_hit_resets_the_trips() {
        // Degraded 3-disk RAID-5 (0 costs 2), capacity 20. After 20, 0 has made its trip;
        // a hit on 0 (count 1, trips 0) earns it another before G: 21 evicts 20, not 0.
        let cost = Raid5 {
            disks: 3,
            failed: Some(0),
        };
        let mut keys: Vec<u64> = (0..20).collect();
        keys.extend([20, 0, 21]);
        let (h, ev) = run_costed(&mut S3Fifo::vdf(20, 0.1, 0.9, 2, 64), &keys, &cost);
        assert!(h[21]);
        assert_eq!(ev, [1, 20]);
    }
}
