//! A position-ordered set threaded through an arena by `u32` links, so inserting and removing
//! never allocate: the queued operations of SSTF and C-LOOK, and the write groups of the sorted
//! destage orders (`cache/write/order`).
//!
//! Keys are `(position, seq)`: `seq` is the queue's arrival counter, unique per operation, so
//! the first key at a position is the earliest arrival there (the tie rule of both
//! disciplines). Each node's heap priority is a hash of its `seq`: the shape is a random
//! binary search tree (expected depth O(log n), whatever the order positions arrive in, e.g.
//! a sequential stream) and yet fully deterministic.

/// The "no node" link value.
pub(crate) const NIL: u32 = u32::MAX;

/// Tree links and heap priority of one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    pub left: u32,
    pub right: u32,
    pub parent: u32,
    pub prio: u32,
}

impl Node {
    pub const DETACHED: Node = Node {
        left: NIL,
        right: NIL,
        parent: NIL,
        prio: 0,
    };
}

/// Heap priority of the entry with arrival counter `seq` (the splitmix64 finalizer).
#[inline]
pub(crate) fn prio_of(seq: u64) -> u32 {
    let mut z = seq.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as u32
}

/// Storage whose entries carry a [`Node`] and a `(position, seq)` key.
pub(crate) trait TreeNodes {
    fn key(&self, id: u32) -> (u64, u64);
    fn node(&self, id: u32) -> &Node;
    fn node_mut(&mut self, id: u32) -> &mut Node;
}

/// The root and size of one treap; the nodes live in the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tree {
    root: u32,
    len: u32,
}

impl Tree {
    pub const EMPTY: Tree = Tree { root: NIL, len: 0 };

    pub fn len(&self) -> u32 {
        self.len
    }

    /// Insert entry `id`, whose key is not in the tree; its `prio` must already be set.
    pub fn insert<N: TreeNodes + ?Sized>(&mut self, nodes: &mut N, id: u32) {
        let key = nodes.key(id);
        let prio = nodes.node(id).prio;
        *nodes.node_mut(id) = Node {
            prio,
            ..Node::DETACHED
        };
        if self.root == NIL {
            self.root = id;
            self.len = 1;
            return;
        }
        let mut cur = self.root;
        let mut steps = 0u32;
        loop {
            debug_assert!(steps <= self.len, "tree descent longer than the tree");
            steps += 1;
            debug_assert_ne!(key, nodes.key(cur), "duplicate key");
            let n = *nodes.node(cur);
            let go_left = key < nodes.key(cur);
            let next = if go_left { n.left } else { n.right };
            if next == NIL {
                if go_left {
                    nodes.node_mut(cur).left = id;
                } else {
                    nodes.node_mut(cur).right = id;
                }
                nodes.node_mut(id).parent = cur;
                break;
            }
            cur = next;
        }
        // Restore the heap order: each rotation lifts `id` one level, so at most `steps`.
        loop {
            let p = nodes.node(id).parent;
            if p == NIL || nodes.node(p).prio >= prio {
                break;
            }
            self.rotate_up(nodes, id);
        }
        self.len += 1;
    }

    /// Remove entry `id`, which must be in this tree.
    pub fn remove<N: TreeNodes + ?Sized>(&mut self, nodes: &mut N, id: u32) {
        debug_assert!(self.len > 0);
        // Rotate `id` down (lifting its higher-priority child) until it has at most one
        // child; each rotation moves it one level deeper, so this ends within the depth.
        let mut steps = 0u32;
        loop {
            let n = *nodes.node(id);
            if n.left == NIL || n.right == NIL {
                break;
            }
            debug_assert!(steps <= self.len, "tree rotation loop longer than the tree");
            steps += 1;
            let child = if nodes.node(n.left).prio > nodes.node(n.right).prio {
                n.left
            } else {
                n.right
            };
            self.rotate_up(nodes, child);
        }
        let n = *nodes.node(id);
        let child = if n.left != NIL { n.left } else { n.right };
        self.replace_child(nodes, n.parent, id, child);
        if child != NIL {
            nodes.node_mut(child).parent = n.parent;
        }
        *nodes.node_mut(id) = Node {
            prio: n.prio,
            ..Node::DETACHED
        };
        self.len -= 1;
    }

    /// The entry with the smallest key whose position is `>= pos`: the earliest arrival at
    /// the nearest position at or above `pos`.
    pub fn ceil<N: TreeNodes + ?Sized>(&self, nodes: &N, pos: u64) -> Option<u32> {
        let (mut cur, mut best, mut steps) = (self.root, NIL, 0u32);
        while cur != NIL {
            debug_assert!(steps <= self.len);
            steps += 1;
            let n = nodes.node(cur);
            if nodes.key(cur).0 >= pos {
                best = cur;
                cur = n.left;
            } else {
                cur = n.right;
            }
        }
        (best != NIL).then_some(best)
    }

    /// In one descent: [`Tree::ceil`] of `pos`, and the entry with the largest key whose
    /// position is `< pos` (the latest arrival at the nearest position below `pos`).
    pub fn around<N: TreeNodes + ?Sized>(&self, nodes: &N, pos: u64) -> (Option<u32>, Option<u32>) {
        let (mut cur, mut up, mut down, mut steps) = (self.root, NIL, NIL, 0u32);
        while cur != NIL {
            debug_assert!(steps <= self.len);
            steps += 1;
            let n = nodes.node(cur);
            if nodes.key(cur).0 >= pos {
                up = cur;
                cur = n.left;
            } else {
                down = cur;
                cur = n.right;
            }
        }
        ((up != NIL).then_some(up), (down != NIL).then_some(down))
    }

    /// The entry with the smallest key.
    pub fn first<N: TreeNodes + ?Sized>(&self, nodes: &N) -> Option<u32> {
        self.ceil(nodes, 0)
    }

    /// Lift `x` above its parent (a right rotation if `x` is a left child, else a left one).
    fn rotate_up<N: TreeNodes + ?Sized>(&mut self, nodes: &mut N, x: u32) {
        let p = nodes.node(x).parent;
        debug_assert_ne!(p, NIL);
        let g = nodes.node(p).parent;
        if nodes.node(p).left == x {
            let b = nodes.node(x).right;
            nodes.node_mut(p).left = b;
            if b != NIL {
                nodes.node_mut(b).parent = p;
            }
            nodes.node_mut(x).right = p;
        } else {
            let b = nodes.node(x).left;
            nodes.node_mut(p).right = b;
            if b != NIL {
                nodes.node_mut(b).parent = p;
            }
            nodes.node_mut(x).left = p;
        }
        nodes.node_mut(p).parent = x;
        nodes.node_mut(x).parent = g;
        self.replace_child(nodes, g, p, x);
    }

    /// Make `new` take `old`'s place under `parent` (or as the root).
    fn replace_child<N: TreeNodes + ?Sized>(
        &mut self,
        nodes: &mut N,
        parent: u32,
        old: u32,
        new: u32,
    ) {
        if parent == NIL {
            debug_assert_eq!(self.root, old);
            self.root = new;
        } else if nodes.node(parent).left == old {
            nodes.node_mut(parent).left = new;
        } else {
            debug_assert_eq!(nodes.node(parent).right, old);
            nodes.node_mut(parent).right = new;
        }
    }

    /// Check the search order, heap order, parent links and size; return the keys in order.
    #[cfg(test)]
    pub fn check<N: TreeNodes + ?Sized>(&self, nodes: &N) -> Vec<(u64, u64)> {
        fn walk<N: TreeNodes + ?Sized>(nodes: &N, id: u32, parent: u32, out: &mut Vec<(u64, u64)>) {
            if id == NIL {
                return;
            }
            let n = *nodes.node(id);
            assert_eq!(n.parent, parent, "parent link of {id}");
            for c in [n.left, n.right] {
                if c != NIL {
                    assert!(nodes.node(c).prio <= n.prio, "heap order at {id}");
                }
            }
            walk(nodes, n.left, id, out);
            out.push(nodes.key(id));
            walk(nodes, n.right, id, out);
        }
        let mut out = Vec::new();
        walk(nodes, self.root, NIL, &mut out);
        assert!(out.windows(2).all(|w| w[0] < w[1]), "search order");
        assert_eq!(out.len(), self.len as usize);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Entries with a key and a node, for testing the tree alone.
    struct Plain(Vec<((u64, u64), Node)>);
    impl TreeNodes for Plain {
        fn key(&self, id: u32) -> (u64, u64) {
            self.0[id as usize].0
        }
        fn node(&self, id: u32) -> &Node {
            &self.0[id as usize].1
        }
        fn node_mut(&mut self, id: u32) -> &mut Node {
            &mut self.0[id as usize].1
        }
    }

    fn plain(positions: &[u64]) -> Plain {
        Plain(
            positions
                .iter()
                .enumerate()
                .map(|(seq, &p)| {
                    let prio = prio_of(seq as u64);
                    (
                        (p, seq as u64),
                        Node {
                            prio,
                            ..Node::DETACHED
                        },
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn queries_on_a_small_tree() {
        // seq:        0   1   2  3   4   5
        let mut n = plain(&[50, 10, 50, 90, 30, 10]);
        let mut t = Tree::EMPTY;
        for id in 0..6 {
            t.insert(&mut n, id);
        }
        t.check(&n);
        // Earliest arrival at the nearest position >= pos.
        assert_eq!(t.ceil(&n, 0), Some(1));
        assert_eq!(t.ceil(&n, 11), Some(4));
        assert_eq!(t.ceil(&n, 50), Some(0));
        assert_eq!(t.ceil(&n, 91), None);
        // Latest arrival at the nearest position < pos.
        assert_eq!(t.around(&n, 50), (Some(0), Some(4)));
        assert_eq!(t.around(&n, 30), (Some(4), Some(5)));
        assert_eq!(t.around(&n, 10), (Some(1), None));
        assert_eq!(t.around(&n, 91), (None, Some(3)));
        assert_eq!(t.first(&n), Some(1));
        t.remove(&mut n, 1);
        t.remove(&mut n, 0);
        t.check(&n);
        assert_eq!(t.first(&n), Some(5));
        assert_eq!(t.ceil(&n, 50), Some(2));
        assert_eq!(t.len(), 4);
    }

    proptest! {
        /// Random inserts and removals keep a valid treap holding exactly the live keys, and
        /// `ceil`/`floor_below` agree with a linear scan.
        #[test]
        fn matches_a_sorted_list(
            positions in proptest::collection::vec(0u64..40, 1..120),
            removals in proptest::collection::vec(any::<prop::sample::Index>(), 0..120),
            probes in proptest::collection::vec(0u64..45, 1..10),
        ) {
            let mut n = plain(&positions);
            let mut t = Tree::EMPTY;
            let mut live: Vec<u32> = Vec::new();
            let mut removals = removals.into_iter();
            for id in 0..positions.len() as u32 {
                t.insert(&mut n, id);
                live.push(id);
                if id % 3 == 2 {
                    if let Some(ix) = removals.next() {
                        let victim = live.swap_remove(ix.index(live.len()));
                        t.remove(&mut n, victim);
                    }
                }
            }
            let mut want: Vec<(u64, u64)> = live.iter().map(|&id| n.key(id)).collect();
            want.sort_unstable();
            prop_assert_eq!(t.check(&n), want.clone());
            for pos in probes {
                let ceil = want.iter().find(|k| k.0 >= pos).copied();
                prop_assert_eq!(t.ceil(&n, pos).map(|id| n.key(id)), ceil);
                let floor = want.iter().rev().find(|k| k.0 < pos).copied();
                let (up, down) = t.around(&n, pos);
                prop_assert_eq!(up.map(|id| n.key(id)), ceil);
                prop_assert_eq!(down.map(|id| n.key(id)), floor);
            }
        }
    }
}
