//! The per-disk (host-side) queue: FCFS, SSTF or C-LOOK within priority classes
//! (foreground > destage > rebuild > background), with bounded aging so no operation starves.
//!
//! # Rules of [`DiskQueue::pop`]
//!
//! 1. **Aging.** If the oldest queued operation (of any class) has waited `aging_ns` or more,
//!    it is served. Arrivals come in non-decreasing time, so the oldest operation is the first
//!    to age and aged operations are served strictly in arrival order (ties: push order),
//!    before any operation that has not aged. The usual rule promotes aged operations of the
//!    lower classes only; this one covers the class being served too, because SSTF and
//!    C-LOOK can starve an operation inside one class as well (a stream of requests near the
//!    head).
//! 2. **Priority.** Otherwise the highest non-empty class is served, by the discipline:
//!    - FCFS: the earliest arrival;
//!    - SSTF: the smallest `|position - head|`; ties (same distance, or same position) to the
//!      earlier arrival;
//!    - C-LOOK: the smallest position `>= head`, or when there is none the smallest position
//!      overall (the sweep wraps); ties to the earlier arrival.
//!
//! # Starvation bound
//!
//! Let `x` arrive at `a` with `n_ahead` operations already queued. From `a + aging_ns` on,
//! `x` is aged, so every pop until `x`'s serves an operation that arrived before `x`; at most
//! `n_ahead` of those are still queued. A single server that pops whenever it finishes an
//! operation, with service times `<= s_max`, therefore starts `x` by
//!
//! ```text
//!     a + aging_ns + (n_ahead + 1) * s_max
//! ```
//!
//! (the `+ 1` is the operation in service when `x` ages). The bound holds whatever arrives
//! after `x`, in any class; `tests.rs` checks it on random streams.
//!
//! # Cost
//!
//! Entries live in a grow-only arena linked by `u32` ids (a free list reuses slots), so push
//! and pop never allocate once the queue has reached its largest size. Each class keeps an
//! arrival-ordered list (FCFS and aging, O(1)) and, for SSTF and C-LOOK, a position-ordered
//! treap (`tree.rs`, expected O(log n)); the aging check looks at the four list heads.

#[cfg(test)]
mod tests;
pub(crate) mod tree;

use tree::{prio_of, Node, Tree, TreeNodes, NIL};

/// Largest number of operations one queue holds: a sanity bound far above any real depth
/// (an engine that reaches it has lost track of completions), and it keeps ids below `NIL`.
pub const QUEUE_LEN_MAX: usize = 1 << 24;

/// Priority class of a disk operation; lower value = served first.
///
/// Four bytes wide, so that `Queued` has no padding (copies of it then move whole fields;
/// see `workload::Op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u32)]
pub enum Class {
    /// User requests (reads and write-through writes).
    Foreground = 0,
    /// Write-cache destages.
    Destage = 1,
    /// Rebuild reads and writes.
    Rebuild = 2,
    /// Anything that may wait (placement reads, scrubbing).
    Background = 3,
}

impl Class {
    pub const COUNT: usize = 4;
    pub const ALL: [Class; 4] = [
        Class::Foreground,
        Class::Destage,
        Class::Rebuild,
        Class::Background,
    ];
}

/// Order of service within a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Discipline {
    /// First come, first served.
    Fcfs,
    /// Shortest seek (position distance) first; ties to the earlier arrival.
    Sstf,
    /// Circular LOOK: ascending positions from the head, then wrap to the lowest.
    Clook,
}

impl Discipline {
    pub const NAMES: &'static [&'static str] = &["fcfs", "sstf", "clook"];

    pub fn from_name(name: &str) -> Option<Discipline> {
        match name {
            "fcfs" => Some(Discipline::Fcfs),
            "sstf" => Some(Discipline::Sstf),
            "clook" | "c-look" => Some(Discipline::Clook),
            _ => None,
        }
    }
}

/// Scheduling parameters of one disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSpec {
    pub discipline: Discipline,
    /// A queued operation (of any class) that has waited this long is served before every
    /// younger one, whatever their class or position (the bound on starvation; 0 makes the
    /// queue FCFS across classes).
    pub aging_ns: u64,
    /// Commands the device holds at once, in service included (NCQ / TCQ depth), >= 1. With
    /// more than one, the drive picks the shortest positioning time among the commands it
    /// holds (see `device.rs`).
    pub ncq: u32,
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec {
            discipline: Discipline::Fcfs,
            aging_ns: 500_000_000,
            ncq: 1,
        }
    }
}

/// One queued operation as the queue sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// The caller's handle for the operation.
    pub token: u32,
    /// Scheduling position (cylinder), from `DiskModel::position_of`.
    pub position: u64,
    pub arrival_ns: u64,
    pub class: Class,
}

/// One queued operation in the arena.
#[derive(Debug, Clone, Copy)]
struct Entry {
    q: Queued,
    /// Push counter: arrival order, and the tie-breaker between equal arrival times.
    seq: u64,
    /// Arrival-ordered list of the entry's class (`prev` = older); the free list uses `next`.
    prev: u32,
    next: u32,
    node: Node,
}

impl TreeNodes for [Entry] {
    #[inline]
    fn key(&self, id: u32) -> (u64, u64) {
        let e = &self[id as usize];
        (e.q.position, e.seq)
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

/// The operations of one class.
#[derive(Debug, Clone, Copy)]
struct ClassQueue {
    /// Arrival-ordered list: `oldest` is served first by FCFS and ages first.
    oldest: u32,
    newest: u32,
    len: u32,
    /// Position order (SSTF and C-LOOK only; empty under FCFS).
    tree: Tree,
}

impl ClassQueue {
    const EMPTY: ClassQueue = ClassQueue {
        oldest: NIL,
        newest: NIL,
        len: 0,
        tree: Tree::EMPTY,
    };
}

/// The host-side queue of one disk.
#[derive(Debug, Clone)]
pub struct DiskQueue {
    spec: QueueSpec,
    entries: Vec<Entry>,
    /// Free slots of `entries`, chained through `next`.
    free: u32,
    classes: [ClassQueue; Class::COUNT],
    len: u32,
    seq_next: u64,
    arrival_last_ns: u64,
}

impl DiskQueue {
    pub fn new(spec: QueueSpec) -> DiskQueue {
        DiskQueue {
            spec,
            entries: Vec::new(),
            free: NIL,
            classes: [ClassQueue::EMPTY; Class::COUNT],
            len: 0,
            seq_next: 0,
            arrival_last_ns: 0,
        }
    }

    pub fn spec(&self) -> &QueueSpec {
        &self.spec
    }

    /// Queue `q`. Arrivals must come in non-decreasing `arrival_ns`.
    pub fn push(&mut self, q: Queued) {
        debug_assert!(
            q.arrival_ns >= self.arrival_last_ns,
            "arrival {} before the previous {}",
            q.arrival_ns,
            self.arrival_last_ns
        );
        debug_assert!((self.len as usize) < QUEUE_LEN_MAX, "disk queue overflow");
        self.arrival_last_ns = q.arrival_ns;
        let seq = self.seq_next;
        self.seq_next += 1;
        let c = &mut self.classes[q.class as usize];
        let entry = Entry {
            q,
            seq,
            prev: c.newest,
            next: NIL,
            node: Node {
                prio: prio_of(seq),
                ..Node::DETACHED
            },
        };
        let id = if self.free != NIL {
            let id = self.free;
            self.free = self.entries[id as usize].next;
            self.entries[id as usize] = entry;
            id
        } else {
            self.entries.push(entry);
            (self.entries.len() - 1) as u32
        };
        if c.newest == NIL {
            c.oldest = id;
        } else {
            self.entries[c.newest as usize].next = id;
        }
        c.newest = id;
        c.len += 1;
        if self.spec.discipline != Discipline::Fcfs {
            c.tree.insert(self.entries.as_mut_slice(), id);
        }
        self.len += 1;
    }

    /// Remove and return the operation to serve next, the head being at `head` at `now_ns`
    /// (see the module documentation for the rules).
    pub fn pop(&mut self, head: u64, now_ns: u64) -> Option<Queued> {
        let id = self.pick(head, now_ns)?;
        Some(self.remove(id))
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Operations queued in `class`.
    pub fn class_len(&self, class: Class) -> usize {
        self.classes[class as usize].len as usize
    }

    /// Arrival time of the oldest queued operation.
    pub fn oldest_arrival_ns(&self) -> Option<u64> {
        self.oldest()
            .map(|id| self.entries[id as usize].q.arrival_ns)
    }

    /// The earliest pushed operation still queued: the first of the class lists' heads.
    fn oldest(&self) -> Option<u32> {
        let mut best = NIL;
        for c in &self.classes {
            if c.oldest != NIL
                && (best == NIL
                    || self.entries[c.oldest as usize].seq < self.entries[best as usize].seq)
            {
                best = c.oldest;
            }
        }
        (best != NIL).then_some(best)
    }

    fn pick(&self, head: u64, now_ns: u64) -> Option<u32> {
        let oldest = self.oldest()?;
        if now_ns.saturating_sub(self.entries[oldest as usize].q.arrival_ns) >= self.spec.aging_ns {
            return Some(oldest);
        }
        // Non-empty: it holds at least `oldest`.
        let c = self.classes.iter().find(|c| c.len > 0)?;
        let nodes = self.entries.as_slice();
        Some(match self.spec.discipline {
            Discipline::Fcfs => c.oldest,
            Discipline::Sstf => {
                let (up, down) = c.tree.around(nodes, head);
                // `down` is the latest arrival at its position; the rule wants the earliest,
                // found by a second descent only when that position can win.
                let earliest = |id: u32| c.tree.ceil(nodes, nodes.key(id).0);
                match (up, down) {
                    (Some(u), Some(d)) => {
                        let (du, dd) = (nodes.key(u).0 - head, head - nodes.key(d).0);
                        if dd > du {
                            u
                        } else {
                            let d = earliest(d)?;
                            if dd < du || nodes.key(d).1 < nodes.key(u).1 {
                                d
                            } else {
                                u
                            }
                        }
                    }
                    (Some(u), None) => u,
                    (None, Some(d)) => earliest(d)?,
                    (None, None) => return None,
                }
            }
            Discipline::Clook => c.tree.ceil(nodes, head).or_else(|| c.tree.first(nodes))?,
        })
    }

    /// Unlink entry `id` from its class and free its slot.
    fn remove(&mut self, id: u32) -> Queued {
        let e = self.entries[id as usize];
        let c = &mut self.classes[e.q.class as usize];
        if e.prev == NIL {
            debug_assert_eq!(c.oldest, id);
            c.oldest = e.next;
        } else {
            self.entries[e.prev as usize].next = e.next;
        }
        if e.next == NIL {
            debug_assert_eq!(c.newest, id);
            c.newest = e.prev;
        } else {
            self.entries[e.next as usize].prev = e.prev;
        }
        c.len -= 1;
        if self.spec.discipline != Discipline::Fcfs {
            c.tree.remove(self.entries.as_mut_slice(), id);
        }
        self.len -= 1;
        let slot = &mut self.entries[id as usize];
        slot.prev = NIL;
        slot.next = self.free;
        self.free = id;
        e.q
    }
}
