//! Destage orders, one file per algorithm, behind [`DestageOrder`].
//!
//! An order is a sans-IO state machine over the write groups present in the cache. The cache
//! ([`super::WriteCache`]) tells it of every page written into a group that is waiting for
//! destage, and asks it for the next group to destage; the chosen group leaves the order. A
//! group that was written while its destage was in flight comes back with
//! [`DestageOrder::reinsert`] when that destage completes.
//!
//! Groups are named by the cache's dense slot id (`< OrderCtx::slots`), so an order keeps its
//! per-group state in plain vectors indexed by slot, and by their group number (the key of the
//! sorted orders: a group number is its first logical page / pages per group, so group order is
//! LBA order).

use crate::disk::queue::tree::{prio_of, Node, Tree, TreeNodes};

pub mod cscan;
pub mod lrw;
pub mod stow;
pub mod wow;

pub use cscan::Cscan;
pub use lrw::Lrw;
pub use stow::Stow;
pub use wow::Wow;

/// One page written into a group that is in the order (or enters it with this write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageWrite {
    /// The group's slot id.
    pub slot: u32,
    /// The group number (LBA order).
    pub group: u64,
    /// The group was not present: it enters the order with this page.
    pub new_group: bool,
    /// The page was already dirty in the cache (an overwrite hit).
    pub page_hit: bool,
    /// The page is the last page of its group.
    pub last_page: bool,
    /// The cache's sequential detector classed the page as part of a sequential stream
    /// (computed only for orders whose [`DestageOrder::needs_seq`] is true).
    pub seq: bool,
    /// The page is the first of its user write request (see `WriteCache::start_request`).
    pub request_start: bool,
}

/// What an order is told when it is built.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OrderCtx {
    /// Upper bound on group slot ids.
    pub slots: u32,
    /// Disks of the array (STOW's `n` and its spindle count); 1 without an array.
    pub disks: u32,
    /// RAID-10 (or any mirror): STOW counts page hits instead of group hits (Algorithm 3).
    pub page_hits_only: bool,
    /// STOW's hysteresis in pages (see `stow.rs`).
    pub hysteresis_pages: u64,
    /// The rate's maximum number of destages in flight (STOW's "queue depth").
    pub queue_depth: u32,
    /// The cache's capacity in pages (STOW bounds its target SeqQ size by it).
    pub capacity_pages: u64,
    /// STOW's ablation switches.
    pub stow: super::StowKnobs,
}

/// A destage order. `Send`: the store moves it behind a lock its threads share.
pub trait DestageOrder: Send {
    /// A page was written into group `w.slot` (see [`PageWrite`]).
    fn on_write(&mut self, w: &PageWrite);
    /// Choose the next group to destage and remove it from the order; `None` when empty.
    fn next_victim(&mut self) -> Option<u32>;
    /// Group `slot` (number `group`) holding `pages` dirty pages re-enters the order after a
    /// destage of its older pages completed.
    fn reinsert(&mut self, slot: u32, group: u64, pages: u32);
    /// Occupancy reached the rate's low threshold for the first time.
    fn on_low_threshold(&mut self) {}
    /// Groups in the order.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether the order reads [`PageWrite::seq`] (the cache skips the detector otherwise).
    fn needs_seq(&self) -> bool {
        false
    }
    /// A short description of internal state for results (STOW's queue sizes).
    fn state(&self) -> OrderState {
        OrderState::default()
    }
}

/// Internal state worth reporting.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OrderState {
    pub seq_pages: u64,
    pub ran_pages: u64,
    pub desired_seq_pages: f64,
}

/// Which order, as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderKind {
    Lrw,
    Cscan,
    Wow,
    Stow,
}

impl OrderKind {
    pub const NAMES: &'static [&'static str] = &["lrw", "cscan", "wow", "stow"];

    pub fn from_name(name: &str) -> Option<OrderKind> {
        Some(match name {
            "lrw" => OrderKind::Lrw,
            "cscan" => OrderKind::Cscan,
            "wow" => OrderKind::Wow,
            "stow" => OrderKind::Stow,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn build(self, ctx: &OrderCtx) -> Box<dyn DestageOrder> {
        match self {
            OrderKind::Lrw => Box::new(Lrw::new(ctx)),
            OrderKind::Cscan => Box::new(Cscan::new(ctx)),
            OrderKind::Wow => Box::new(Wow::new(ctx)),
            OrderKind::Stow => Box::new(Stow::new(ctx)),
        }
    }
}

/// Write groups in ascending group number, seen as a circle with a destage pointer (the
/// "clock arm" of CSCAN, WOW and each STOW queue).
///
/// The groups are an ordered set threaded through an arena indexed by slot (the disk queues'
/// treap), so inserting and sweeping never allocate once the arena covers the cache's slots
/// (`with_slots`; a ring made with `default` grows to the largest slot it is given).
#[derive(Debug, Clone)]
pub struct SortedRing {
    /// Group number and tree links per slot.
    nodes: Vec<RingNode>,
    tree: Tree,
    /// The next group number the pointer considers.
    ptr: u64,
}

#[derive(Debug, Clone, Copy)]
struct RingNode {
    group: u64,
    node: Node,
}

impl TreeNodes for [RingNode] {
    #[inline]
    fn key(&self, id: u32) -> (u64, u64) {
        // Group numbers are unique in a ring, so the second half of the key never decides.
        (self[id as usize].group, 0)
    }
    #[inline]
    fn node(&self, id: u32) -> &Node {
        &self[id as usize].node
    }
    #[inline]
    fn node_mut(&mut self, id: u32) -> &mut Node {
        &mut self[id as usize].node
    }
}

impl Default for SortedRing {
    fn default() -> SortedRing {
        SortedRing::with_slots(0)
    }
}

impl SortedRing {
    /// A ring for groups in slots `< slots`.
    pub fn with_slots(slots: u32) -> SortedRing {
        let detached = RingNode {
            group: 0,
            node: Node::DETACHED,
        };
        SortedRing {
            nodes: vec![detached; slots as usize],
            tree: Tree::EMPTY,
            ptr: 0,
        }
    }

    pub fn insert(&mut self, group: u64, slot: u32) {
        let i = slot as usize;
        if i >= self.nodes.len() {
            self.nodes.resize(
                i + 1,
                RingNode {
                    group: 0,
                    node: Node::DETACHED,
                },
            );
        }
        // The tree asserts (in debug builds) that the group is not in the ring yet.
        self.nodes[i].group = group;
        self.nodes[i].node.prio = prio_of(group);
        self.tree.insert(&mut self.nodes[..], slot);
    }

    pub fn len(&self) -> usize {
        self.tree.len() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The group under the pointer: the first at or after it, wrapping to the lowest.
    #[inline]
    fn at_ptr(&self) -> Option<(u64, u32)> {
        let nodes = &self.nodes[..];
        self.tree
            .ceil(nodes, self.ptr)
            .or_else(|| self.tree.first(nodes))
            .map(|s| (nodes[s as usize].group, s))
    }

    /// Sweep from the pointer: a group for which `skip(slot)` is true is passed over (`skip`
    /// clears its recency bit, so a full circle finds a victim); the first other group is
    /// removed and returned, and the pointer moves past it.
    pub fn sweep(&mut self, mut skip: impl FnMut(u32) -> bool) -> Option<(u64, u32)> {
        // Each skip clears a bit, so after len() skips every group has bit 0.
        let mut skips_left = self.len();
        loop {
            let (g, s) = self.at_ptr()?;
            self.ptr = g.wrapping_add(1);
            if skips_left > 0 && skip(s) {
                skips_left -= 1;
                continue;
            }
            debug_assert!(skips_left > 0 || !skip(s), "skip must clear the bit");
            self.tree.remove(&mut self.nodes[..], s);
            return Some((g, s));
        }
    }
}

/// A recency bit per group slot (WOW and STOW).
#[derive(Debug, Clone)]
pub struct Bits(Vec<bool>);

impl Bits {
    pub fn new(slots: u32) -> Bits {
        Bits(vec![false; slots as usize])
    }
    #[inline]
    pub fn get(&self, slot: u32) -> bool {
        self.0[slot as usize]
    }
    #[inline]
    pub fn set(&mut self, slot: u32, v: bool) {
        self.0[slot as usize] = v;
    }
    /// Clear the bit and say whether it was set (the sweep's skip test).
    #[inline]
    pub fn take(&mut self, slot: u32) -> bool {
        std::mem::replace(&mut self.0[slot as usize], false)
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;

    pub fn ctx() -> OrderCtx {
        OrderCtx {
            slots: 256,
            disks: 5,
            page_hits_only: false,
            hysteresis_pages: 4,
            queue_depth: 20,
            capacity_pages: 1 << 20,
            stow: Default::default(),
        }
    }

    /// A write of a page of group `group` (slot = group number, for readable tests).
    pub fn w(group: u64, new_group: bool, page_hit: bool) -> PageWrite {
        PageWrite {
            slot: group as u32,
            group,
            new_group,
            page_hit,
            last_page: false,
            seq: false,
            request_start: true,
        }
    }

    pub fn drain(o: &mut dyn DestageOrder) -> Vec<u32> {
        std::iter::from_fn(|| o.next_victim()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_sweeps_from_the_pointer_and_wraps() {
        let mut r = SortedRing::default();
        for g in [40u64, 10, 30, 20] {
            r.insert(g, g as u32);
        }
        assert_eq!(r.sweep(|_| false), Some((10, 10)));
        // Pointer at 11: 20 next; skipping 20 (bit set) gives 30.
        let mut bits = Bits::new(64);
        bits.set(20, true);
        assert_eq!(r.sweep(|s| bits.take(s)), Some((30, 30)));
        assert!(!bits.get(20));
        // Pointer at 31: 40, then wrap to 20.
        r.insert(5, 5);
        assert_eq!(r.sweep(|_| false), Some((40, 40)));
        assert_eq!(r.sweep(|_| false), Some((5, 5)));
        assert_eq!(r.sweep(|_| false), Some((20, 20)));
        assert_eq!(r.sweep(|_| false), None);
    }

    #[test]
    fn every_bit_set_takes_one_circle() {
        let mut r = SortedRing::default();
        let mut bits = Bits::new(8);
        for g in 0..4u64 {
            r.insert(g, g as u32);
            bits.set(g as u32, true);
        }
        // One full circle clears every bit, then the first group after the start is taken.
        assert_eq!(r.sweep(|s| bits.take(s)), Some((0, 0)));
        assert_eq!(r.len(), 3);
    }
}
