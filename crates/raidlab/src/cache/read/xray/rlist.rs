//! X-RAY's recency list (R-list) as an order-statistic set of keys.
//!
//! X-RAY needs, besides ordered insertion and removal, the *rank* of a position (how many
//! blocks lie between the CB pointer and the MRU end: the predicted file-system cache size)
//! and in-order walks down from a position (the exclusive window of N blocks past CB). Inserts
//! are not only at the MRU end: an access time inferred from an inode write lands in the
//! middle. A treap whose nodes carry their subtree size gives all of these in O(log n).
//!
//! Nodes live in one arena addressed by `u32` ids; freed ids are reused, so once every block
//! of the workload has been seen the list allocates nothing more. Priorities come from a
//! splitmix64 sequence, so the tree's shape (and hence the run) is deterministic.

/// "No node".
const NIL: u32 = u32::MAX;

/// An R-list key: access time in nanoseconds in the high 64 bits, an insertion sequence number
/// in the low 64 bits (total order among equal times, older insertions first).
pub(crate) type Key = u128;

/// The key of an access at `time_ns` with tie-breaker `seq`.
#[inline]
pub(crate) fn key(time_ns: u64, seq: u64) -> Key {
    (u128::from(time_ns) << 64) | u128::from(seq)
}

/// The time part of a key.
#[cfg(test)]
#[inline]
pub(crate) fn time_of(k: Key) -> u64 {
    (k >> 64) as u64
}

#[derive(Clone, Copy, Debug)]
struct Node {
    key: Key,
    block: u64,
    left: u32,
    right: u32,
    prio: u64,
    size: u32,
}

/// Ordered set of (key, block) with rank and select.
#[derive(Clone, Debug, Default)]
pub(crate) struct RList {
    nodes: Vec<Node>,
    free: Vec<u32>,
    root: u32,
    prio_state: u64,
    /// Reused by the in-order walk (height of the tree, a few dozen ids).
    stack: Vec<u32>,
}

impl RList {
    pub fn new() -> Self {
        RList {
            root: NIL,
            ..Default::default()
        }
    }

    /// Number of keys.
    #[inline]
    pub fn len(&self) -> usize {
        self.size(self.root) as usize
    }

    #[inline]
    fn size(&self, id: u32) -> u32 {
        if id == NIL {
            0
        } else {
            self.nodes[id as usize].size
        }
    }

    #[inline]
    fn fix(&mut self, id: u32) {
        let n = self.nodes[id as usize];
        self.nodes[id as usize].size = 1 + self.size(n.left) + self.size(n.right);
    }

    fn next_prio(&mut self) -> u64 {
        // splitmix64
        self.prio_state = self.prio_state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.prio_state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Split `t` into (keys < `k`, keys >= `k`).
    fn split(&mut self, t: u32, k: Key) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        let n = self.nodes[t as usize];
        if n.key < k {
            let (l, r) = self.split(n.right, k);
            self.nodes[t as usize].right = l;
            self.fix(t);
            (t, r)
        } else {
            let (l, r) = self.split(n.left, k);
            self.nodes[t as usize].left = r;
            self.fix(t);
            (l, t)
        }
    }

    /// Join two treaps, every key of `a` below every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.nodes[a as usize].right;
            let m = self.merge(r, b);
            self.nodes[a as usize].right = m;
            self.fix(a);
            a
        } else {
            let l = self.nodes[b as usize].left;
            let m = self.merge(a, l);
            self.nodes[b as usize].left = m;
            self.fix(b);
            b
        }
    }

    /// Insert `k` (which must be absent) for `block`.
    pub fn insert(&mut self, k: Key, block: u64) {
        let node = Node {
            key: k,
            block,
            left: NIL,
            right: NIL,
            prio: self.next_prio(),
            size: 1,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        let (l, r) = self.split(self.root, k);
        debug_assert!(r == NIL || self.min_key(r) != k, "duplicate R-list key");
        let l = self.merge(l, id);
        self.root = self.merge(l, r);
    }

    fn min_key(&self, mut t: u32) -> Key {
        while self.nodes[t as usize].left != NIL {
            t = self.nodes[t as usize].left;
        }
        self.nodes[t as usize].key
    }

    /// Remove `k`; returns whether it was present.
    pub fn remove(&mut self, k: Key) -> bool {
        let (l, r) = self.split(self.root, k);
        let (mid, r) = self.split(r, k + 1);
        let found = mid != NIL;
        if found {
            debug_assert_eq!(self.size(mid), 1);
            self.free.push(mid);
        }
        self.root = self.merge(l, r);
        found
    }

    /// Number of keys `<= k`.
    pub fn rank_le(&self, k: Key) -> usize {
        let mut t = self.root;
        let mut acc = 0usize;
        while t != NIL {
            let n = &self.nodes[t as usize];
            if n.key <= k {
                acc += self.size(n.left) as usize + 1;
                t = n.right;
            } else {
                t = n.left;
            }
        }
        acc
    }

    /// The `i`-th smallest key (0-based) and its block.
    pub fn select(&self, mut i: usize) -> Option<(Key, u64)> {
        let mut t = self.root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            let ls = self.size(n.left) as usize;
            if i < ls {
                t = n.left;
            } else if i == ls {
                return Some((n.key, n.block));
            } else {
                i -= ls + 1;
                t = n.right;
            }
        }
        None
    }

    /// Smallest key `> k`.
    pub fn succ(&self, k: Key) -> Option<Key> {
        self.select(self.rank_le(k)).map(|(key, _)| key)
    }

    /// Largest key `< k`.
    pub fn pred(&self, k: Key) -> Option<Key> {
        let below = self.rank_le(k.saturating_sub(1));
        if k == 0 || below == 0 {
            None
        } else {
            self.select(below - 1).map(|(key, _)| key)
        }
    }

    /// Call `f(key, block)` for keys `<= k` in descending order until it returns `false` or
    /// `limit` keys were visited.
    pub fn walk_down_from(&mut self, k: Key, limit: usize, mut f: impl FnMut(Key, u64) -> bool) {
        let mut stack = std::mem::take(&mut self.stack);
        stack.clear();
        // Descend to the largest key <= k, stacking every node whose key is <= k on the way:
        // those and their left subtrees are what remains to visit, in descending order.
        let mut t = self.root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            if n.key <= k {
                stack.push(t);
                t = n.right;
            } else {
                t = n.left;
            }
        }
        let mut visited = 0usize;
        while let Some(id) = stack.pop() {
            if visited >= limit {
                break;
            }
            let n = self.nodes[id as usize];
            visited += 1;
            if !f(n.key, n.block) {
                break;
            }
            // Next smaller keys: the rightmost spine of the left subtree.
            let mut c = n.left;
            while c != NIL {
                stack.push(c);
                c = self.nodes[c as usize].right;
            }
        }
        self.stack = stack;
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>() + self.free.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rank_select_pred_succ() {
        let mut r = RList::new();
        for (i, t) in [50u64, 10, 30, 20, 40].into_iter().enumerate() {
            r.insert(key(t, i as u64), t);
        }
        assert_eq!(r.len(), 5);
        assert_eq!(r.rank_le(key(30, u64::MAX)), 3);
        assert_eq!(r.select(0).map(|x| x.1), Some(10));
        assert_eq!(r.select(4).map(|x| x.1), Some(50));
        assert_eq!(r.succ(key(30, u64::MAX)).map(time_of), Some(40));
        assert_eq!(r.pred(key(30, 0)).map(time_of), Some(20));
        assert_eq!(r.pred(key(10, 1)), None);
        assert!(r.remove(key(30, 2)));
        assert!(!r.remove(key(30, 2)));
        let mut seen = Vec::new();
        r.walk_down_from(key(45, 0), 10, |k, _| {
            seen.push(time_of(k));
            true
        });
        assert_eq!(seen, [40, 20, 10]);
    }

    proptest! {
        // The treap agrees with a sorted vector on every query after any insert/remove mix.
        #[test]
        fn agrees_with_sorted_vec(ops in prop::collection::vec((any::<bool>(), 0u64..200), 1..300)) {
            let mut r = RList::new();
            let mut v: Vec<Key> = Vec::new();
            for (ins, t) in ops {
                let k = key(t, 0);
                if ins {
                    if !v.contains(&k) {
                        r.insert(k, t);
                        v.push(k);
                        v.sort_unstable();
                    }
                } else {
                    prop_assert_eq!(r.remove(k), v.contains(&k));
                    v.retain(|&x| x != k);
                }
                prop_assert_eq!(r.len(), v.len());
                let probe = key(t, 0);
                prop_assert_eq!(r.rank_le(probe), v.iter().filter(|&&x| x <= probe).count());
                let mut down = Vec::new();
                r.walk_down_from(probe, 7, |k, _| { down.push(k); true });
                let want: Vec<Key> = v.iter().rev().filter(|&&x| x <= probe).take(7).copied().collect();
                prop_assert_eq!(down, want);
                prop_assert_eq!(r.succ(probe), v.iter().copied().find(|&x| x > probe));
                prop_assert_eq!(r.pred(probe), v.iter().rev().copied().find(|&x| x < probe));
            }
        }
    }
}
