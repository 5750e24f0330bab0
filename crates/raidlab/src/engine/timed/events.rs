//! The event queue of the timed engine: a binary min-heap of fixed-size entries, plus a short
//! sorted list for the events of *bounded* sources.
//!
//! ORDER: events fire by (time, insertion sequence). The sequence is a counter the queue
//! stamps on every push (heap or list), so two events at the same nanosecond fire in the order
//! they were scheduled — the tie-break that makes runs deterministic whatever the heap's
//! internal layout. Both parts live in one `u128` key (`time << 64 | seq`), so a comparison is
//! one integer compare.
//!
//! BOUNDED SOURCES: a disk that serves one operation at a time has at most one completion
//! pending, and the open loop at most one arrival. Their events go to `near`, a list kept in
//! descending key order whose length is bounded by the number of such sources (at most
//! [`NEAR_MAX`]): a push scans from the latest key down to its place (new events are mostly
//! later than the pending ones, so the scan is short) and a pop takes the last entry. `pop`
//! takes the smaller key of the heap's top and the list's last, so the order is exactly the
//! heap-only order; the list only saves the heap's sifts on the two most frequent events.
//!
//! Payloads (a kind and two `u32`s) are stored inline, so there is nothing to pool: the heap's
//! vector grows to the largest number of pending events and never allocates again, and the
//! list is allocated at its bound up front.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Most bounded sources a queue takes (beyond about this many, the list's shifts cost more
/// than the heap's sifts; such sources use the heap).
pub const NEAR_MAX: usize = 32;

/// What happens when an event fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The driver issues its next request (open-loop arrival, closed-loop think time over).
    Arrival,
    /// A disk finished an operation: `a` = disk, `b` = operation token.
    DiskDone,
    /// A user request completes after the controller's overhead: `a` = request slot.
    RequestDone,
    /// A `rebuild` event of the config: `a` = its index in `[[events]]`.
    RebuildStart,
    /// The rebuild's rate control lets it go on.
    RebuildWake,
    /// A `fail_cache` event of the config: `a` = its index in `[[events]]`.
    CacheFail,
}

/// A fired event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub time_ns: u64,
    pub kind: Kind,
    pub a: u32,
    pub b: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    key: u128,
    /// Keys are unique, so the payload never decides the order.
    payload: (Kind, u32, u32),
}

/// Pending events.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    /// Events of the bounded sources, in descending key order (the next to fire is last).
    near: Vec<Entry>,
    /// Bound on `near.len()`: the number of bounded sources.
    near_len_max: usize,
}

impl EventQueue {
    /// A queue with room for `n` heap events and `sources` bounded sources (at most
    /// [`NEAR_MAX`]), each of which has at most one event pending at a time.
    pub fn with_capacity(n: usize, sources: usize) -> EventQueue {
        assert!(sources <= NEAR_MAX, "{sources} bounded sources");
        EventQueue {
            heap: BinaryHeap::with_capacity(n),
            seq: 0,
            near: Vec::with_capacity(sources),
            near_len_max: sources,
        }
    }

    #[inline]
    fn key(&mut self, time_ns: u64) -> u128 {
        assert!(self.seq < u64::MAX, "event sequence exhausted");
        let key = (u128::from(time_ns) << 64) | u128::from(self.seq);
        self.seq += 1;
        key
    }

    /// Schedule an event at `time_ns`.
    #[inline]
    pub fn push(&mut self, time_ns: u64, kind: Kind, a: u32, b: u32) {
        let key = self.key(time_ns);
        self.heap.push(Reverse(Entry {
            key,
            payload: (kind, a, b),
        }));
    }

    /// Schedule an event of a bounded source at `time_ns` (the source has no other pending).
    #[inline]
    pub fn push_bounded(&mut self, time_ns: u64, kind: Kind, a: u32, b: u32) {
        let key = self.key(time_ns);
        assert!(
            self.near.len() < self.near_len_max,
            "more bounded events than sources"
        );
        // Keys are unique: the first entry below the new key is where it goes.
        let at = self
            .near
            .iter()
            .position(|e| e.key < key)
            .unwrap_or(self.near.len());
        self.near.insert(
            at,
            Entry {
                key,
                payload: (kind, a, b),
            },
        );
    }

    /// Remove and return the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        let e = match (self.heap.peek(), self.near.last()) {
            (Some(Reverse(top)), Some(n)) if top.key < n.key => self.heap.pop()?.0,
            (Some(_), None) => self.heap.pop()?.0,
            _ => self.near.pop()?,
        };
        debug_assert!(self.near.windows(2).all(|w| w[0].key > w[1].key));
        let (kind, a, b) = e.payload;
        Some(Event {
            time_ns: (e.key >> 64) as u64,
            kind,
            a,
            b,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_then_insertion_order() {
        let mut q = EventQueue::default();
        q.push(20, Kind::Arrival, 1, 0);
        q.push(10, Kind::DiskDone, 2, 7);
        q.push(20, Kind::RequestDone, 3, 0);
        q.push(10, Kind::Arrival, 4, 0);
        let order: Vec<(u64, u32)> = std::iter::from_fn(|| q.pop())
            .map(|e| (e.time_ns, e.a))
            .collect();
        // Same-time events keep the order they were scheduled in.
        assert_eq!(order, vec![(10, 2), (10, 4), (20, 1), (20, 3)]);
        assert!(q.pop().is_none());
    }

    proptest::proptest! {
        /// Bounded sources and heap together fire in the heap-only order: by time, then push
        /// order.
        #[test]
        fn bounded_sources_keep_the_heap_order(
            steps in proptest::collection::vec((0u64..30, 0usize..4, proptest::bool::ANY), 0..300)
        ) {
            // Sources 0..3 are bounded, 3 stands for the heap. A bounded source pushes only when
            // it has nothing pending; a pop happens when `pop` is set, so sources free up again.
            let mut q = EventQueue::with_capacity(4, 3);
            let mut reference = EventQueue::default();
            let mut busy = [false; 3];
            let mut now = 0u64;
            for (i, &(dt, lane, pop)) in steps.iter().enumerate() {
                let t = now + dt;
                if lane < 3 && !busy[lane] {
                    q.push_bounded(t, Kind::DiskDone, lane as u32, i as u32);
                    busy[lane] = true;
                } else {
                    q.push(t, Kind::Arrival, 3, i as u32);
                }
                reference.push(t, Kind::Arrival, 0, i as u32);
                if pop {
                    let (e, r) = (q.pop().unwrap(), reference.pop().unwrap());
                    proptest::prop_assert_eq!((e.time_ns, e.b), (r.time_ns, r.b));
                    if e.a < 3 {
                        busy[e.a as usize] = false;
                    }
                    now = e.time_ns;
                }
            }
            while let Some(r) = reference.pop() {
                let e = q.pop().unwrap();
                proptest::prop_assert_eq!((e.time_ns, e.b), (r.time_ns, r.b));
            }
            proptest::prop_assert!(q.pop().is_none());
        }

        #[test]
        fn pops_sorted_by_time_then_seq(times in proptest::collection::vec(0u64..50, 0..200)) {
            let mut q = EventQueue::default();
            for (i, &t) in times.iter().enumerate() {
                q.push(t, Kind::Arrival, i as u32, 0);
            }
            let mut last = (0u64, 0u32);
            let mut n = 0;
            while let Some(e) = q.pop() {
                if n > 0 {
                    proptest::prop_assert!((e.time_ns, e.a) > last);
                }
                last = (e.time_ns, e.a);
                n += 1;
            }
            proptest::prop_assert_eq!(n, times.len());
        }
    }
}
