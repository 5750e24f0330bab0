//! The host's file-system buffer cache: LRU (default), CLOCK or 2Q, with dirty blocks and a
//! size that can change during the run (memory pressure).
//!
//! Why not the array's `ReadPolicy` objects: those have a fixed capacity and arena, know
//! nothing of dirty data, and hash arbitrary keys. The host's address space is the file
//! system it laid out itself — small and dense — so this cache indexes per-block state
//! directly by block number (no hashing) and can shrink by evicting in policy order.

use crate::error::{Error, Result};

const NIL: u32 = u32::MAX;

/// Where a block is.
const ABSENT: u8 = 0;
/// LRU list, CLOCK's ring, or 2Q's Am.
const MAIN: u8 = 1;
/// 2Q's A1in (FIFO of blocks seen once).
const A1IN: u8 = 2;
/// 2Q's A1out: evicted from A1in, remembered but not resident.
const GHOST: u8 = 3;

const DIRTY: u8 = 1;
const REFERENCED: u8 = 2;

/// Replacement policy of the FS cache.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FsPolicy {
    Lru,
    /// CLOCK (second chance): a hit sets the block's reference bit; the hand clears set bits
    /// and evicts the first block whose bit is clear.
    Clock,
    /// Full 2Q (Johnson and Shasha): `kin` share of the capacity for A1in, A1out remembers
    /// `kout` x capacity blocks.
    TwoQ {
        kin: f64,
        kout: f64,
    },
}

impl FsPolicy {
    pub const NAMES: &'static [&'static str] = &["lru", "clock", "2q"];
}

/// A doubly linked list threaded through the cache's `prev`/`next` arrays; front = newest.
#[derive(Clone, Copy, Debug)]
struct DList {
    head: u32,
    tail: u32,
    len: u64,
}

impl DList {
    const EMPTY: DList = DList {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

/// A victim of the cache: its block and whether it was dirty (it must be written first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Victim {
    pub block: u64,
    pub dirty: bool,
}

/// The FS buffer cache over blocks `0..space`.
#[derive(Debug, Clone)]
pub struct FsCache {
    policy: FsPolicy,
    capacity: u64,
    prev: Vec<u32>,
    next: Vec<u32>,
    place: Vec<u8>,
    flags: Vec<u8>,
    main: DList,
    a1in: DList,
    ghost: DList,
    resident: u64,
}

impl FsCache {
    /// A cache of `capacity` blocks over an address space of `space` blocks.
    pub fn new(policy: FsPolicy, capacity: u64, space: u64) -> Result<FsCache> {
        if space >= u64::from(NIL) {
            return Err(Error::config(
                "host.space_blocks",
                format!("at most {} blocks", NIL - 1),
            ));
        }
        if capacity == 0 {
            return Err(Error::config("host.fs_cache_blocks", "must be > 0"));
        }
        let n = space as usize;
        Ok(FsCache {
            policy,
            capacity,
            prev: vec![NIL; n],
            next: vec![NIL; n],
            place: vec![ABSENT; n],
            flags: vec![0; n],
            main: DList::EMPTY,
            a1in: DList::EMPTY,
            ghost: DList::EMPTY,
            resident: 0,
        })
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Resident blocks.
    pub fn len(&self) -> u64 {
        self.resident
    }

    pub fn is_empty(&self) -> bool {
        self.resident == 0
    }

    /// Whether `block` is resident (no state change).
    #[inline]
    pub fn contains(&self, block: u64) -> bool {
        matches!(self.place[block as usize], MAIN | A1IN)
    }

    #[inline]
    pub fn is_dirty(&self, block: u64) -> bool {
        self.flags[block as usize] & DIRTY != 0
    }

    /// Look `block` up; a hit updates the policy's state.
    #[inline]
    pub fn lookup(&mut self, block: u64) -> bool {
        let b = block as u32;
        match self.place[b as usize] {
            MAIN => {
                match self.policy {
                    FsPolicy::Clock => self.flags[b as usize] |= REFERENCED,
                    FsPolicy::Lru | FsPolicy::TwoQ { .. } => {
                        let mut l = self.main;
                        self.unlink(&mut l, b);
                        self.push_front(&mut l, b);
                        self.main = l;
                    }
                }
                true
            }
            // 2Q: a hit in A1in leaves it where it is (correlated references).
            A1IN => true,
            _ => false,
        }
    }

    /// Insert absent `block` (dirty or clean), evicting into `victims` to make room.
    pub fn insert(&mut self, block: u64, dirty: bool, victims: &mut Vec<Victim>) {
        debug_assert!(!self.contains(block));
        while self.resident >= self.capacity {
            match self.evict_one() {
                Some(v) => victims.push(v),
                None => break,
            }
        }
        let b = block as u32;
        self.flags[b as usize] = if dirty { DIRTY } else { 0 };
        let to_am = match self.policy {
            FsPolicy::TwoQ { .. } => {
                if self.place[b as usize] == GHOST {
                    let mut g = self.ghost;
                    self.unlink(&mut g, b);
                    self.ghost = g;
                    true
                } else {
                    false
                }
            }
            _ => true,
        };
        if to_am {
            let mut l = self.main;
            self.push_front(&mut l, b);
            self.main = l;
            self.place[b as usize] = MAIN;
        } else {
            let mut l = self.a1in;
            self.push_front(&mut l, b);
            self.a1in = l;
            self.place[b as usize] = A1IN;
        }
        self.resident += 1;
        debug_assert!(self.resident <= self.capacity);
    }

    pub fn mark_dirty(&mut self, block: u64) {
        debug_assert!(self.contains(block));
        self.flags[block as usize] |= DIRTY;
    }

    pub fn mark_clean(&mut self, block: u64) {
        self.flags[block as usize] &= !DIRTY;
    }

    /// Change the size; shrinking evicts in policy order into `victims`.
    pub fn set_capacity(&mut self, capacity: u64, victims: &mut Vec<Victim>) {
        self.capacity = capacity.max(1);
        while self.resident > self.capacity {
            match self.evict_one() {
                Some(v) => victims.push(v),
                None => break,
            }
        }
    }

    /// Append every dirty resident block to `out`, in ascending block order.
    pub fn dirty_blocks(&self, out: &mut Vec<u64>) {
        out.extend(
            self.flags
                .iter()
                .enumerate()
                .filter(|&(b, f)| f & DIRTY != 0 && matches!(self.place[b], MAIN | A1IN))
                .map(|(b, _)| b as u64),
        );
    }

    fn kin_blocks(&self, kin: f64) -> u64 {
        ((self.capacity as f64 * kin).round() as u64).max(1)
    }

    fn evict_one(&mut self) -> Option<Victim> {
        let b = match self.policy {
            FsPolicy::Lru => {
                let mut l = self.main;
                let b = self.pop_back(&mut l);
                self.main = l;
                b?
            }
            FsPolicy::Clock => {
                // Each pass clears at most one bit per block, so two rounds find a victim.
                let mut steps = 2 * self.main.len + 1;
                loop {
                    let mut l = self.main;
                    let b = self.pop_back(&mut l)?;
                    if self.flags[b as usize] & REFERENCED != 0 && steps > 0 {
                        steps -= 1;
                        self.flags[b as usize] &= !REFERENCED;
                        self.push_front(&mut l, b);
                        self.main = l;
                        continue;
                    }
                    self.main = l;
                    break b;
                }
            }
            FsPolicy::TwoQ { kin, kout } => {
                if self.a1in.len > self.kin_blocks(kin) || self.main.len == 0 {
                    let mut l = self.a1in;
                    let b = self.pop_back(&mut l);
                    self.a1in = l;
                    let b = b?;
                    let v = Victim {
                        block: u64::from(b),
                        dirty: self.flags[b as usize] & DIRTY != 0,
                    };
                    self.flags[b as usize] = 0;
                    self.resident -= 1;
                    // Remember it in A1out (bounded).
                    let mut g = self.ghost;
                    self.push_front(&mut g, b);
                    self.place[b as usize] = GHOST;
                    let ghost_max = (self.capacity as f64 * kout).round() as u64;
                    while g.len > ghost_max {
                        let Some(old) = self.pop_back(&mut g) else {
                            break;
                        };
                        self.place[old as usize] = ABSENT;
                    }
                    self.ghost = g;
                    return Some(v);
                }
                let mut l = self.main;
                let b = self.pop_back(&mut l);
                self.main = l;
                b?
            }
        };
        let v = Victim {
            block: u64::from(b),
            dirty: self.flags[b as usize] & DIRTY != 0,
        };
        self.flags[b as usize] = 0;
        self.place[b as usize] = ABSENT;
        self.resident -= 1;
        Some(v)
    }

    #[inline]
    fn push_front(&mut self, l: &mut DList, b: u32) {
        self.prev[b as usize] = NIL;
        self.next[b as usize] = l.head;
        if l.head == NIL {
            l.tail = b;
        } else {
            self.prev[l.head as usize] = b;
        }
        l.head = b;
        l.len += 1;
    }

    #[inline]
    fn unlink(&mut self, l: &mut DList, b: u32) {
        let (p, n) = (self.prev[b as usize], self.next[b as usize]);
        if p == NIL {
            l.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            l.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.prev[b as usize] = NIL;
        self.next[b as usize] = NIL;
        l.len -= 1;
    }

    #[inline]
    fn pop_back(&mut self, l: &mut DList) -> Option<u32> {
        if l.tail == NIL {
            return None;
        }
        let b = l.tail;
        self.unlink(l, b);
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `trace` (block, is_write) and return hits and victims in order.
    fn run(p: FsPolicy, cap: u64, trace: &[u64]) -> (Vec<bool>, Vec<u64>) {
        let mut c = FsCache::new(p, cap, 64).unwrap();
        let mut victims = Vec::new();
        let hits = trace
            .iter()
            .map(|&b| {
                let hit = c.lookup(b);
                if !hit {
                    c.insert(b, false, &mut victims);
                }
                hit
            })
            .collect();
        (hits, victims.iter().map(|v| v.block).collect())
    }

    #[test]
    fn lru_worked_example() {
        // Capacity 3: 1 2 3 1 4 (evicts 2) 2 (evicts 3) 1 3 (evicts 4).
        let (h, v) = run(FsPolicy::Lru, 3, &[1, 2, 3, 1, 4, 2, 1, 3]);
        assert_eq!(h, [false, false, false, true, false, false, true, false]);
        assert_eq!(v, [2, 3, 4]);
    }

    #[test]
    fn clock_gives_a_second_chance() {
        // Capacity 3: 1 2 3, hit 1 (ref bit). 4: back is 1 with bit set -> cleared, moved to
        // the front; 2 is evicted. 5: back is 3 (clear) -> evicted. 6: 1 (clear now) evicted.
        let (h, v) = run(FsPolicy::Clock, 3, &[1, 2, 3, 1, 4, 5, 6]);
        assert_eq!(h, [false, false, false, true, false, false, false]);
        assert_eq!(v, [2, 3, 1]);
    }

    #[test]
    fn twoq_promotes_from_a1out() {
        // Capacity 4, kin 0.25 (1 block), kout 0.5 (2 ghosts). 1 2 3 4 fill A1in; 5 evicts
        // A1in's oldest, 1, into A1out; 1 then misses, is found in A1out and goes to Am, the
        // room for it made by evicting 2 from A1in; the second 1 hits in Am.
        let twoq = FsPolicy::TwoQ {
            kin: 0.25,
            kout: 0.5,
        };
        let (h, v) = run(twoq, 4, &[1, 2, 3, 4, 5, 1, 1]);
        assert_eq!(h, [false, false, false, false, false, false, true]);
        assert_eq!(v, [1, 2]);
        let mut c = FsCache::new(twoq, 4, 64).unwrap();
        let mut vict = Vec::new();
        for b in [1, 2, 3, 4, 5, 1] {
            if !c.lookup(b) {
                c.insert(b, false, &mut vict);
            }
        }
        assert_eq!(c.place[1], MAIN);
        assert_eq!(c.len(), 4);
    }

    #[test]
    fn shrinking_evicts_in_lru_order_and_reports_dirty() {
        let mut c = FsCache::new(FsPolicy::Lru, 4, 16).unwrap();
        let mut v = Vec::new();
        for b in 0..4 {
            c.insert(b, b == 1, &mut v);
        }
        assert!(v.is_empty());
        c.set_capacity(2, &mut v);
        assert_eq!(
            v,
            [
                Victim {
                    block: 0,
                    dirty: false
                },
                Victim {
                    block: 1,
                    dirty: true
                }
            ]
        );
        assert_eq!(c.len(), 2);
        let mut d = Vec::new();
        c.mark_dirty(3);
        c.dirty_blocks(&mut d);
        assert_eq!(d, [3]);
    }
}
