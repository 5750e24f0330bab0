//! The event queue of the timed engine: a binary min-heap of fixed-size entries.
//!
//! ORDER: events fire by (time, insertion sequence). The sequence is a counter the queue
//! stamps on every `push`, so two events at the same nanosecond fire in the order they were
//! scheduled — the tie-break that makes runs deterministic whatever the heap's internal
//! layout. Both parts live in one `u128` key (`time << 64 | seq`), so a comparison is one
//! integer compare.
//!
//! Payloads (a kind and two `u32`s) are stored inline in the entry, so there is nothing to pool:
//! the heap's vector grows to the largest number of pending events and never allocates again.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

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
}

impl EventQueue {
    pub fn with_capacity(n: usize) -> EventQueue {
        EventQueue {
            heap: BinaryHeap::with_capacity(n),
            seq: 0,
        }
    }

    /// Schedule an event at `time_ns`.
    #[inline]
    pub fn push(&mut self, time_ns: u64, kind: Kind, a: u32, b: u32) {
        let key = (u128::from(time_ns) << 64) | u128::from(self.seq);
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            key,
            payload: (kind, a, b),
        }));
    }

    /// Remove and return the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        let Reverse(e) = self.heap.pop()?;
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
