//! W-TinyLFU (Einziger, Friedman and Manes, ACM TOS 2017): a small LRU *window* in front of a
//! segmented-LRU *main* cache, with a frequency sketch deciding which of the window's victim
//! and the main cache's victim to keep.
//!
//! - New entries enter the window's head; their key is counted in the sketch.
//! - To make room (one *round*, repeated until the new entry fits): while the window holds
//!   entries, its LRU entry `w` is considered. If it fits in the main cache it moves there and
//!   the next `w` is considered. Otherwise the main cache's victim `m` (the LRU entry of its
//!   lowest non-empty segment) is compared with `w` by estimated frequency: `w` wins only with
//!   a strictly higher estimate, and then `m` is evicted and `w` moves to the main cache; else
//!   `w` is evicted; either way the round ends. Each `w` considered is counted in the sketch
//!   again. When the window is empty, the main cache's victim is evicted.
//! - The main cache is a 2-segment SLRU, 20 % probationary and 80 % protected (the paper's
//!   split), as in `slru.rs`: a hit moves an entry up a segment, overflow cools down, an entry
//!   enters the lowest segment with room. Unlike `slru.rs`, and as libCacheSim's SLRU, a
//!   probationary segment over its share after a cool-down evicts its LRU entries *inside the
//!   hit* (below).
//! - A hit in the main cache counts the key in the sketch; every `32 x main capacity` such hits
//!   all counters are halved (the paper's "reset" aging, sample size 32).
//!
//! # libCacheSim
//!
//! This follows libCacheSim's `WTinyLFU` (`cache/eviction/WTinyLFU.c`) with its defaults
//! (`main-cache=SLRU`, `window-size=0.01`, main SLRU `seg-size=1:4`), whose details the paper
//! leaves open:
//! - the window's 1 % share only limits what can be inserted (libCacheSim refuses larger
//!   entries); the window itself is not trimmed to it: it drains into the main cache at every
//!   eviction, so while the cache fills it holds everything that is not yet in the main cache;
//! - the sketch is a counting Bloom filter of `ceil(b x n)` 32-bit counters and `ceil(ln 2 x b)`
//!   = 10 hash functions for `n` entries and a 0.1 % error (`b = -ln 0.001 / ln^2 2`), counter
//!   `i` of key `k` at `(a + i x b) mod counters` with `a`, `b` the low 32 bits of XXH64 of the
//!   key's 8 little-endian bytes under two seeds; an add increments all of a key's counters,
//!   the estimate is their minimum.
//!
//! (Older libCacheSim sources let the round go on after `w` wins; the 0.3.5 wheel ends it,
//! which is what gives its miss counts.)
//!
//! Evictions inside a hit. The two shares are `floor(0.2 m)` and `floor(0.8 m)` of the main
//! cache's `m` units, one unit short of `m` unless 5 divides it; the main cache still fills to
//! `m`, the last entry going to probation, which is then one over its share. libCacheSim's
//! SLRU cools a hit's overflow down one segment at a time and evicts from the lowest segment
//! when it overflows, so a later hit in probation evicts probation's LRU entry without the
//! frequency duel, and the next round moves a window entry into the freed unit unopposed.
//! That is followed here: raidlab's `SLRU` never evicts on a hit, and did so here until the
//! difference was measured at up to 7.5 % of the misses (ARC's OLTP trace, block mode; up to
//! 2.7 % on Zipf traces), against exactly 0 with it (`docs/read-caches.md`). A `get` cannot
//! report an eviction, so the keys evicted inside hits are reported at the next `insert`
//! (first, before any eviction of its own); until then the caller still counts them cached
//! while `get` misses them, and `remove` of one reports it instead.
//!
//! Deliberate differences, none of which shows in block mode below 4.6 M blocks (identical
//! miss counts on the CloudPhysics trace and on Zipf and real traces at every size tried,
//! `tests/test_libcachesim_numbers.py`):
//! - libCacheSim sizes the sketch for `n` = the main cache's capacity *in bytes* (a 128 MiB
//!   object cache gets 2^31 counters, 8 GiB); here `n` is the main cache's capacity in block
//!   mode and its capacity / 4096 in object mode, at most 2^26 counters (256 MiB), so object
//!   mode differs (a sketch 4096 times smaller collides more: up to 3.4 % more misses on Zipf
//!   traces of 4 KiB objects) and so do block-mode main caches above 2^26 / 14.4 blocks;
//! - entries larger than the window's share are cached like any other (libCacheSim refuses
//!   them, so its block-mode caches below 100 blocks cache nothing).

use super::list::{Link, List};
use super::slab::Slab;
use super::{Access, ReadPolicy};

const WINDOW: u8 = 0;
const PROBATION: u8 = 1;
const PROTECTED: u8 = 2;

/// Window share of the capacity (libCacheSim's default; the paper's 1 %).
pub const WINDOW_SHARE: f64 = 0.01;
/// Most sketch counters.
const MAX_COUNTERS: u64 = 1 << 26;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    link: Link,
    size: u32,
    loc: u8,
}

impl_slot!(Entry);

/// XXH64 of one little-endian `u64`.
fn xxh64_u64(v: u64, seed: u64) -> u64 {
    const P1: u64 = 0x9E37_79B1_85EB_CA87;
    const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    const P3: u64 = 0x1656_67B1_9E37_79F9;
    const P4: u64 = 0x85EB_CA77_C2B2_AE63;
    const P5: u64 = 0x27D4_EB2F_1656_67C5;
    let mut h = seed.wrapping_add(P5).wrapping_add(8);
    let k = v.wrapping_mul(P2).rotate_left(31).wrapping_mul(P1);
    h ^= k;
    h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^= h >> 32;
    h
}

/// The counting Bloom filter that estimates access frequencies.
#[derive(Clone, Debug)]
struct Sketch {
    counters: Vec<u32>,
    hashes: u32,
}

impl Sketch {
    const SEED0: u64 = 0x1234_5678;
    const SEED1: u64 = 0x1234_4321;

    /// Sized for `entries` keys at a 0.1 % error.
    fn new(entries: u64) -> Self {
        // libCacheSim's literal for ln^2 2 (the counter count is a ceiling of a product).
        let bpe = -(0.001f64.ln()) / 0.480_453_013_918_201;
        let hashes = (std::f64::consts::LN_2 * bpe).ceil() as u32;
        let entries = entries.min(i32::MAX as u64) as f64;
        let n = ((bpe * entries).ceil() as u64)
            .min(i32::MAX as u64)
            .min(MAX_COUNTERS)
            .max(2 * u64::from(hashes));
        Sketch {
            counters: vec![0; n as usize],
            hashes,
        }
    }

    /// Add 1 to every counter of `key` (`add`) and return the estimate before the add
    /// (without).
    #[inline]
    fn touch(&mut self, key: u64, add: bool) -> u32 {
        let a = xxh64_u64(key, Self::SEED0) as u32;
        let b = xxh64_u64(key, Self::SEED1) as u32;
        let n = self.counters.len() as u32;
        let mut min = u32::MAX;
        for i in 0..self.hashes {
            let x = (a.wrapping_add(i.wrapping_mul(b)) % n) as usize;
            min = min.min(self.counters[x]);
        }
        if add && min < u32::MAX {
            for i in 0..self.hashes {
                let x = (a.wrapping_add(i.wrapping_mul(b)) % n) as usize;
                self.counters[x] = self.counters[x].wrapping_add(1);
            }
        }
        min
    }

    fn halve(&mut self) {
        for c in &mut self.counters {
            *c >>= 1;
        }
    }
}

/// W-TinyLFU over a fixed arena.
#[derive(Clone, Debug)]
pub struct WTinyLfu {
    slab: Slab<Entry>,
    /// Window, probationary and protected lists, indexed by `loc`.
    lists: [List; 3],
    /// Units in each list.
    units: [u64; 3],
    /// Shares of the probationary and protected segments.
    seg_cap: [u64; 2],
    main_cap: u64,
    sketch: Sketch,
    /// Main-cache hits since the last halving, and how many trigger one.
    hits_since_decay: u64,
    decay_every: u64,
    used: u64,
    capacity: u64,
    /// Keys evicted inside a hit (libCacheSim's probationary overflow), reported at the next
    /// `insert`.
    doomed: Vec<u64>,
}

impl WTinyLfu {
    /// `capacity` units (`bytes`: object mode); room for `entries` entries.
    pub fn new(capacity: u64, bytes: bool, entries: usize) -> Self {
        let window = (capacity as f64 * WINDOW_SHARE) as u64;
        let main_cap = capacity - window;
        let seg_cap = [
            (1.0 / 5.0 * main_cap as f64) as u64,
            (4.0 / 5.0 * main_cap as f64) as u64,
        ];
        let sketch_entries = if bytes { main_cap / 4096 } else { main_cap };
        WTinyLfu {
            slab: Slab::with_capacity(entries),
            lists: [List::new(); 3],
            units: [0; 3],
            seg_cap,
            main_cap,
            sketch: Sketch::new(sketch_entries),
            hits_since_decay: 0,
            decay_every: 32 * main_cap,
            used: 0,
            capacity,
            doomed: Vec::with_capacity(4),
        }
    }

    fn unlink(&mut self, id: u32) {
        let e = *self.slab.get(id);
        self.lists[e.loc as usize].unlink(self.slab.nodes(), id);
        self.units[e.loc as usize] -= u64::from(e.size);
    }

    fn push_front(&mut self, id: u32, loc: u8) {
        let e = self.slab.get_mut(id);
        e.loc = loc;
        let size = u64::from(e.size);
        self.lists[loc as usize].push_front(self.slab.nodes(), id);
        self.units[loc as usize] += size;
    }

    #[inline]
    fn main_used(&self) -> u64 {
        self.units[PROBATION as usize] + self.units[PROTECTED as usize]
    }

    /// The main cache's victim: the LRU entry of its lowest non-empty segment.
    fn main_victim(&self) -> Option<u32> {
        self.lists[PROBATION as usize]
            .back()
            .or(self.lists[PROTECTED as usize].back())
    }

    fn evict_id(&mut self, id: u32, evicted: &mut Vec<u64>) {
        self.unlink(id);
        let e = self.slab.remove(id);
        self.used -= u64::from(e.size);
        evicted.push(e.key);
    }

    /// Move window entry `id` into the main cache (libCacheSim's `SLRU_insert`): the lowest
    /// segment with room; when none has, evict main victims until it fits, then probation.
    fn admit(&mut self, id: u32, evicted: &mut Vec<u64>) {
        self.unlink(id);
        let size = u64::from(self.slab.get(id).size);
        let loc = if self.units[PROBATION as usize] + size <= self.seg_cap[0] {
            PROBATION
        } else if self.units[PROTECTED as usize] + size <= self.seg_cap[1] {
            PROTECTED
        } else {
            while self.main_used() + size > self.main_cap {
                let Some(m) = self.main_victim() else { break };
                self.evict_id(m, evicted);
            }
            PROBATION
        };
        self.push_front(id, loc);
    }

    /// One round of eviction (libCacheSim's `WTinyLFU_evict`): drain the window until one of
    /// its entries loses to the main cache's victim, or evict from the main cache when the
    /// window is empty.
    fn evict_round(&mut self, evicted: &mut Vec<u64>) {
        loop {
            let Some(w) = self.lists[WINDOW as usize].back() else {
                if let Some(m) = self.main_victim() {
                    self.evict_id(m, evicted);
                }
                return;
            };
            let e = *self.slab.get(w);
            let done = if self.main_used() + u64::from(e.size) <= self.main_cap {
                self.admit(w, evicted);
                false
            } else {
                match self.main_victim() {
                    Some(m)
                        if self.sketch.touch(e.key, false)
                            > self.sketch.touch(self.slab.get(m).key, false) =>
                    {
                        self.evict_id(m, evicted);
                        self.admit(w, evicted);
                        true
                    }
                    _ => {
                        self.evict_id(w, evicted);
                        true
                    }
                }
            };
            self.sketch.touch(e.key, true);
            if done {
                return;
            }
        }
    }

    /// Move protected's LRU entries to probation's head while protected is over its share;
    /// after each, evict probation's LRU entries while probation is over its share
    /// (libCacheSim's `SLRU_cool`), into `doomed`.
    fn cool(&mut self) {
        while self.units[PROTECTED as usize] > self.seg_cap[1] {
            let Some(id) = self.lists[PROTECTED as usize].back() else {
                break;
            };
            self.unlink(id);
            self.push_front(id, PROBATION);
            while self.units[PROBATION as usize] > self.seg_cap[0] {
                let Some(v) = self.lists[PROBATION as usize].back() else {
                    break;
                };
                let mut doomed = std::mem::take(&mut self.doomed);
                self.evict_id(v, &mut doomed);
                self.doomed = doomed;
            }
        }
    }
}

impl ReadPolicy for WTinyLfu {
    fn name(&self) -> &'static str {
        "wtinylfu"
    }

    #[inline(always)]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        let Some(id) = self.slab.find(acc.key) else {
            return false;
        };
        match self.slab.get(id).loc {
            WINDOW => self.lists[WINDOW as usize].move_to_front(self.slab.nodes(), id),
            loc => {
                if loc == PROTECTED {
                    self.lists[PROTECTED as usize].move_to_front(self.slab.nodes(), id);
                } else {
                    self.unlink(id);
                    self.push_front(id, PROTECTED);
                    self.cool();
                }
                self.sketch.touch(acc.key, true);
                self.hits_since_decay += 1;
                if self.hits_since_decay >= self.decay_every {
                    self.hits_since_decay = 0;
                    self.sketch.halve();
                }
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
        evicted.append(&mut self.doomed);
        while self.used + size > self.capacity && self.slab.len() > 0 {
            self.evict_round(evicted);
        }
        let id = self.slab.insert(Entry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
            loc: WINDOW,
        });
        self.push_front(id, WINDOW);
        self.used += size;
        self.sketch.touch(acc.key, true);
        debug_assert!(self.used <= self.capacity);
        true
    }

    /// A key evicted inside a hit but not yet reported is still cached for the caller:
    /// dropping it reports it here instead of at the next insert.
    fn remove(&mut self, key: u64) -> bool {
        let Some(id) = self.slab.find(key) else {
            let before = self.doomed.len();
            self.doomed.retain(|&k| k != key);
            return self.doomed.len() < before;
        };
        self.unlink(id);
        let e = self.slab.remove(id);
        self.used -= u64::from(e.size);
        true
    }

    #[inline]
    fn contains(&self, key: u64) -> bool {
        self.slab.find(key).is_some()
    }

    fn len(&self) -> usize {
        self.slab.len()
    }

    fn used(&self) -> u64 {
        self.used
    }

    fn capacity(&self) -> u64 {
        self.capacity
    }

    super::slab::slab_prefetch!();

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes() + self.sketch.counters.capacity() * 4 + self.doomed.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::run_evictions;
    use super::*;

    #[test]
    fn xxh64_matches_the_reference() {
        // XXH64 of the key's 8 little-endian bytes, as computed by the reference
        // implementation (xxhash.h, the copy libCacheSim compiles), under the sketch's seeds.
        assert_eq!(xxh64_u64(0, 0), 0x34c9_6acd_cadb_1bbb);
        assert_eq!(xxh64_u64(1, 0), 0x9f29_cb17_a2a4_9995);
        assert_eq!(xxh64_u64(42, Sketch::SEED0), 0xf78b_4ad5_3460_7625);
        assert_eq!(xxh64_u64(123_456_789, Sketch::SEED1), 0xaa7d_e97a_bad7_cda4);
        assert_eq!(xxh64_u64(u64::MAX, Sketch::SEED0), 0x60b3_8a7d_6d1e_7ea9);
    }

    #[test]
    fn worked_example() {
        // Capacity 100 blocks: window share 1, main 99 (probation 19, protected 79).
        // (libCacheSim 0.3.5's `WTinyLFU(100)` with every obj_size 1 gives the same hits.)
        //  0..99 miss: all enter the window (it is not trimmed while nothing is evicted); each
        //     is counted once in the sketch.
        //  100 miss, the cache is full: one round of eviction drains the window, LRU first,
        //     while the main cache has room: 0..18 fill probation, 19..97 protected (the
        //     lowest segment with room), 98 finds no segment with room but the main cache has
        //     (98 + 1 <= 99): probation, now 20. Each is counted again as it moves (0: 2).
        //     99 does not fit: it meets the main victim, probation's LRU entry 0. Estimates:
        //     99 has 1, 0 has 2; 99 must be strictly more frequent, so 99 is evicted.
        //  100 enters the window.
        //  #101 99 miss: the window's LRU entry, 100 (counted once), meets probation's LRU
        //     entry 0 (twice) and is evicted; the round ends. 99 enters the window.
        //  #102 0 hit in probation: to protected's head, which is then over its share (79):
        //     its LRU entry 19 cools to probation's head. Probation, back to 20, is over its
        //     share (19): its LRU entry 1 is evicted inside the hit, as libCacheSim's SLRU
        //     does, and reported at the next insert.  #103 98 hit, likewise (20 cools;
        //     probation stays at 19).
        //  #104 1 miss (it was evicted at #102): the insert reports 1, and finds room (99 of
        //     100 used), so nothing else is evicted; 1 enters the window.
        //  #105 2 hit in probation (21 cools).
        let mut p = WTinyLfu::new(100, false, 128);
        let mut keys: Vec<u64> = (0..=100).collect();
        keys.extend([99, 0, 98, 1, 2]);
        let (h, ev) = run_evictions(&mut p, &keys);
        let hit_at: Vec<usize> = (0..h.len()).filter(|&i| h[i]).collect();
        assert_eq!(hit_at, [102, 103, 105]);
        assert_eq!(ev, [99, 100, 1]);
        assert_eq!(p.units, [2, 19, 79]);
    }

    #[test]
    fn a_key_evicted_inside_a_hit_is_reported_once() {
        // As in the worked example: the hit on 0 at #102 evicts 1 inside the hit.
        let mut p = WTinyLfu::new(100, false, 128);
        let mut keys: Vec<u64> = (0..=100).collect();
        keys.extend([99, 0]);
        let (_, ev) = run_evictions(&mut p, &keys);
        assert_eq!(ev, [99, 100]);
        assert!(!p.contains(1));
        assert_eq!((p.len(), p.used()), (99, 99));
        // Dropped by the caller before the next insert: reported by `remove`, then not again.
        assert!(p.remove(1));
        assert!(!p.remove(1));
        let (h, ev) = run_evictions(&mut p, &[500]);
        assert_eq!(h, [false]);
        assert!(ev.is_empty(), "{ev:?}");
    }
}
