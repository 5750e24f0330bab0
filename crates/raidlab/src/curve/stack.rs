//! Mattson's LRU stack distances in O(log n) per access (Mattson et al., 1970; the
//! last-access-time formulation of Bennett and Kruskal, 1975).
//!
//! Every key in the stack holds a *mark* at the logical time of its last access; the stack
//! depth of a key is the number of marks at or after its time. Marks live in a bitset, and a
//! Fenwick tree over the bitset's 64-bit words counts them, so a depth is one prefix query
//! (log of the words, a tree 64x smaller than one over times) plus a popcount.
//!
//! Writes that invalidate (`writes = "invalidate"`) leave a *hole*: the removed key's slot
//! stays in the stack as free space. A hole is exactly what an LRU cache of any size holding
//! the key has after the removal: one free slot, at the key's depth. The next access that
//! misses at some sizes fills the shallowest hole above its own depth: for sizes between the
//! hole and the old depth the access fills the free slot instead of evicting, so the hole moves
//! to the accessed key's old depth (a cold access deletes it). This keeps the cache of size
//! `c` equal to the keys among the top `c` slots for every `c` at once.
//!
//! Times grow without bound, so when they reach the bitset's end the marks are renumbered
//! `0..n` in order (compaction) and the bitset grows to at least twice the marks: a
//! compaction costs O(marks) and is followed by at least that many accesses.

use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap};
use std::hash::BuildHasherDefault;

use crate::error::{Error, Result};
use crate::workload::stats::BlockHasher;

/// Smallest bitset, in bits.
const MIN_BITS: usize = 1 << 16;
/// Times are `u32`: the bitset never passes this many bits.
const MAX_BITS: usize = 1 << 32;

/// An LRU stack answering depths.
pub(crate) struct Stack {
    /// Key -> time of its last access.
    map: HashMap<u64, u32, BuildHasherDefault<BlockHasher>>,
    /// Time -> key of the mark there (meaningless where there is no mark, or a hole).
    owner: Vec<u64>,
    /// One bit per time: a key's last access, or a hole.
    marks: Vec<u64>,
    /// The holes among the marks.
    hole_bits: Vec<u64>,
    /// Fenwick tree (1-based) over the popcounts of `marks`' words.
    tree: Vec<u32>,
    /// Marks set (live keys plus holes).
    total: u64,
    /// The next access's time.
    now: u32,
    /// Times of the holes; the largest is the shallowest.
    holes: BinaryHeap<u32>,
}

impl Stack {
    pub(crate) fn new() -> Stack {
        let words = MIN_BITS / 64;
        Stack {
            map: HashMap::default(),
            owner: vec![0; MIN_BITS],
            marks: vec![0; words],
            hole_bits: vec![0; words],
            tree: vec![0; words + 1],
            total: 0,
            now: 0,
            holes: BinaryHeap::new(),
        }
    }

    /// Keys in the stack (holes not counted).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Heap bytes held, for memory figures.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.map.capacity() * 16
            + self.owner.capacity() * 8
            + (self.marks.capacity() + self.hole_bits.capacity()) * 8
            + self.tree.capacity() * 4
            + self.holes.capacity() * 4
    }

    /// Look up every key of `keys` and drop the answers: independent loads the CPU overlaps,
    /// so the accesses that follow find the map's slots cached. Changes nothing.
    pub(crate) fn touch(&self, keys: &[u64]) {
        let found = keys.iter().filter(|&k| self.map.contains_key(k)).count();
        std::hint::black_box(found);
    }

    /// Access `key`: its depth before the access (1 = most recent; holes above it count),
    /// `None` for a key not in the stack (a cold miss at every size). The key moves to the top.
    #[inline]
    pub(crate) fn access(&mut self, key: u64) -> Result<Option<u64>> {
        if self.now as usize == self.owner.len() {
            self.compact()?;
        }
        let t_new = self.now;
        self.now += 1;
        let old = match self.map.entry(key) {
            Entry::Occupied(mut e) => Some(std::mem::replace(e.get_mut(), t_new)),
            Entry::Vacant(e) => {
                e.insert(t_new);
                None
            }
        };
        let depth = match old {
            Some(t) => {
                let depth = self.total - self.before(t);
                match self.holes.peek() {
                    // A hole above the key: sizes between them fill it instead of evicting,
                    // so it moves down to the key's old slot, which keeps its mark.
                    Some(&h) if h > t => {
                        self.holes.pop();
                        self.holes.push(t);
                        flip(&mut self.hole_bits, h);
                        flip(&mut self.hole_bits, t);
                        self.unmark(h);
                    }
                    _ => self.unmark(t),
                }
                Some(depth)
            }
            None => {
                // A cold access fills the shallowest hole at every size that has one.
                if let Some(h) = self.holes.pop() {
                    flip(&mut self.hole_bits, h);
                    self.unmark(h);
                }
                None
            }
        };
        self.owner[t_new as usize] = key;
        self.mark(t_new);
        Ok(depth)
    }

    /// `key` is removed from every cache holding it (a write invalidating it): its slot
    /// becomes a hole. Nothing happens to a key not in the stack.
    pub(crate) fn invalidate(&mut self, key: u64) {
        if let Some(t) = self.map.remove(&key) {
            flip(&mut self.hole_bits, t);
            self.holes.push(t);
        }
    }

    /// Drop `key` from the stack altogether (it left a sample); returns whether it was there.
    pub(crate) fn remove(&mut self, key: u64) -> bool {
        match self.map.remove(&key) {
            Some(t) => {
                self.unmark(t);
                true
            }
            None => false,
        }
    }

    /// Marks at times `< t`.
    #[inline]
    fn before(&self, t: u32) -> u64 {
        before(&self.marks, &self.tree, t)
    }

    #[inline]
    fn mark(&mut self, t: u32) {
        let w = (t / 64) as usize;
        debug_assert_eq!(self.marks[w] >> (t % 64) & 1, 0);
        self.marks[w] |= 1 << (t % 64);
        self.total += 1;
        let mut i = w + 1;
        while i < self.tree.len() {
            self.tree[i] += 1;
            i += i & i.wrapping_neg();
        }
    }

    #[inline]
    fn unmark(&mut self, t: u32) {
        let w = (t / 64) as usize;
        debug_assert_eq!(self.marks[w] >> (t % 64) & 1, 1);
        self.marks[w] &= !(1 << (t % 64));
        self.total -= 1;
        let mut i = w + 1;
        while i < self.tree.len() {
            self.tree[i] -= 1;
            i += i & i.wrapping_neg();
        }
    }

    /// Renumber the marks `0..total` in time order, growing the bitset to at least twice
    /// the marks (so at least `total` accesses pass before the next compaction).
    #[cold]
    fn compact(&mut self) -> Result<()> {
        let n = self.total as usize;
        let mut bits = self.owner.len();
        while bits < 2 * n + 64 {
            bits *= 2;
        }
        if bits > MAX_BITS {
            return Err(Error::config(
                "workload",
                format!(
                    "the stream holds more than {} distinct blocks, more than an exact curve \
                     indexes; sample it (--sample-rate or --sample-size)",
                    MAX_BITS / 2 - 64
                ),
            ));
        }
        // A mark's new time is the number of marks before it, which the tree answers; the
        // map is walked in its own (memory) order, so no key is looked up at random.
        let holes = std::mem::take(&mut self.holes).into_vec();
        let renumbered: Vec<u32> = holes.iter().map(|&h| self.before(h) as u32).collect();
        for (&key, t) in self.map.iter_mut() {
            let new = before(&self.marks, &self.tree, *t) as u32;
            self.owner[new as usize] = key;
            *t = new;
        }
        self.holes = renumbered.into();
        debug_assert_eq!(self.map.len() + self.holes.len(), n);
        let words = bits / 64;
        self.owner.resize(bits, 0);
        self.marks.clear();
        self.marks.resize(words, 0);
        self.hole_bits.clear();
        self.hole_bits.resize(words, 0);
        for t in 0..n {
            self.marks[t / 64] |= 1 << (t % 64);
        }
        for &h in self.holes.iter() {
            self.hole_bits[h as usize / 64] |= 1 << (h % 64);
        }
        // Linear-time Fenwick build: each node passes its sum to its parent.
        self.tree.clear();
        self.tree.resize(words + 1, 0);
        for i in 1..=words {
            self.tree[i] += self.marks[i - 1].count_ones();
            let parent = i + (i & i.wrapping_neg());
            if parent <= words {
                self.tree[parent] += self.tree[i];
            }
        }
        self.now = n as u32;
        Ok(())
    }
}

/// Marks at times `< t` in the bitset `marks` with the Fenwick tree `tree` over its words.
#[inline]
fn before(marks: &[u64], tree: &[u32], t: u32) -> u64 {
    let w = (t / 64) as usize;
    let mut sum = u64::from((marks[w] & ((1u64 << (t % 64)) - 1)).count_ones());
    let mut i = w;
    while i > 0 {
        sum += u64::from(tree[i]);
        i &= i - 1;
    }
    sum
}

#[inline]
fn flip(bits: &mut [u64], t: u32) {
    bits[(t / 64) as usize] ^= 1 << (t % 64);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Depth by brute force: a Vec stack with `None` holes, updated by the rules in the
    /// module comment.
    struct Naive(Vec<Option<u64>>);

    impl Naive {
        fn access(&mut self, key: u64) -> Option<u64> {
            let pos = self.0.iter().position(|&k| k == Some(key));
            let hole = self.0.iter().position(|k| k.is_none());
            match pos {
                Some(p) => {
                    self.0.remove(p);
                    if let Some(h) = hole.filter(|&h| h < p) {
                        self.0.remove(h);
                        self.0.insert(p - 1, None);
                    }
                    self.0.insert(0, Some(key));
                    Some(p as u64 + 1)
                }
                None => {
                    if let Some(h) = hole {
                        self.0.remove(h);
                    }
                    self.0.insert(0, Some(key));
                    None
                }
            }
        }
        fn invalidate(&mut self, key: u64) {
            if let Some(p) = self.0.iter().position(|&k| k == Some(key)) {
                self.0[p] = None;
            }
        }
    }

    /// The worked example of docs/curves.md: a b c a b d a, depths by hand.
    #[test]
    fn worked_example_depths() {
        let mut s = Stack::new();
        let keys = [1, 2, 3, 1, 2, 4, 1];
        let got: Vec<_> = keys.iter().map(|&k| s.access(k).unwrap()).collect();
        // a: cold; b: cold; c: cold; a: under c, b -> 3; b: under a, c -> 3; d: cold;
        // a: under d, b -> 3.
        assert_eq!(got, vec![None, None, None, Some(3), Some(3), None, Some(3)]);
        assert_eq!(s.len(), 4);
    }

    /// A hole above a key moves to the key's old depth; a cold access fills it.
    #[test]
    fn holes_worked_example() {
        let mut s = Stack::new();
        for k in [1, 2, 3] {
            s.access(k).unwrap();
        }
        // Stack 3 2 1; invalidate 3: hole at depth 1.
        s.invalidate(3);
        // 1 is at depth 3 (hole counts). An LRU of size 2 held {3, 2}, now {2}: 1 misses and
        // fills the free slot (2 stays); size 3 hits. The hole moves to depth 3.
        assert_eq!(s.access(1).unwrap(), Some(3));
        // Stack 1 2 hole: 2 at depth 2.
        assert_eq!(s.access(2).unwrap(), Some(2));
        // A new key fills the hole: stack 9 2 1.
        assert_eq!(s.access(9).unwrap(), None);
        assert_eq!(s.access(1).unwrap(), Some(3));
    }

    #[test]
    fn matches_a_naive_stack_through_compactions() {
        let mut s = Stack::new();
        let mut n = Naive(Vec::new());
        let mut x: u64 = 12345;
        // Enough accesses to compact the 65,536-bit bitset several times.
        for i in 0..300_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = x % 300;
            if i % 17 == 0 {
                s.invalidate(key);
                n.invalidate(key);
            } else {
                assert_eq!(s.access(key).unwrap(), n.access(key), "access {i}");
            }
        }
    }

    #[test]
    fn remove_drops_the_key_and_its_slot() {
        let mut s = Stack::new();
        for k in [1, 2, 3] {
            s.access(k).unwrap();
        }
        assert!(s.remove(2));
        assert!(!s.remove(2));
        assert_eq!(s.access(1).unwrap(), Some(2));
    }
}
