//! Stripe-row locks of write-through writes, as a real controller holds them.
//!
//! A write that changes a row's data and parity must not overlap another write of that row,
//! or the row's parity is computed from data that is being changed. The store holds a row's
//! lock through the whole read-modify-write (its `ctrl/locks.rs`), and so does Linux md (a
//! stripe head is handled by one thread at a time). A second write to a held row waits.
//!
//! Under SPC-1's hot spots this waiting is most of the difference between the model without
//! it and the store: on a RAID-5 of five disk-timed wd10eals members at 100 IOPS, the
//! store's writes waited 4.5-6.0 ms each for rows (its `row_locks` counters), and were
//! 5.0-6.7 ms slower than the model's (`docs/reproductions.md`).
//!
//! The model follows the store's order: a write takes its rows in ascending order, each as
//! soon as it is free, and waits at the first held one while keeping those it has (so two
//! writes never wait on each other in a cycle). Waiters of a row are served first come,
//! first served. The rows are released when the write completes.
//!
//! Writes to the write-back cache take no row locks here: the destager writes whole rows
//! and never two destages of one row at once (`destage.rs`). Degraded reads, which the store
//! holds rows shared for, are not modelled.

use std::collections::{HashMap, VecDeque};

/// Held rows and who waits for them.
#[derive(Debug, Default)]
pub(super) struct RowLocks {
    /// Every held row, with the requests waiting for it, first come first. A row is in the
    /// map exactly while a request holds it.
    held: HashMap<u64, VecDeque<u32>>,
    /// Takings that found a row held (the store's `row_locks.waits`).
    pub waits: u64,
}

impl RowLocks {
    /// Take rows `next..=last` for request `slot`, ascending, as far as they are free.
    /// Returns `None` when it holds them all, or the row it now waits for (it keeps the rows
    /// below it). The caller must not call this again for `slot` until that row is handed
    /// to it by [`release`](Self::release).
    pub fn take(&mut self, slot: u32, next: u64, last: u64) -> Option<u64> {
        debug_assert!(next <= last);
        for row in next..=last {
            match self.held.get_mut(&row) {
                None => {
                    self.held.insert(row, VecDeque::new());
                }
                Some(q) => {
                    debug_assert!(!q.contains(&slot));
                    q.push_back(slot);
                    self.waits += 1;
                    return Some(row);
                }
            }
        }
        None
    }

    /// A request that holds rows `first..=last` is done with them. Each row with a waiter
    /// passes to its first waiter, pushed onto `handed` as (waiter, row); the caller then
    /// continues that waiter's taking from `row + 1`. Rows nobody waits for are freed.
    pub fn release(&mut self, first: u64, last: u64, handed: &mut Vec<(u32, u64)>) {
        for row in first..=last {
            let q = self
                .held
                .get_mut(&row)
                .expect("a request releases only the rows it holds");
            match q.pop_front() {
                Some(w) => handed.push((w, row)),
                None => {
                    self.held.remove(&row);
                }
            }
        }
    }

    /// No row is held (at the end of a run every write has completed).
    pub fn is_idle(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_waits_at_the_first_held_row_keeping_those_below() {
        let mut l = RowLocks::default();
        assert_eq!(l.take(1, 5, 6), None);
        // Request 2 spans rows 4..=6: it takes 4 and waits at 5.
        assert_eq!(l.take(2, 4, 6), Some(5));
        // Request 3 wants row 4 only: request 2 holds it.
        assert_eq!(l.take(3, 4, 4), Some(4));
        assert_eq!(l.waits, 2);
        let mut handed = Vec::new();
        l.release(5, 6, &mut handed);
        // Row 5 passes to request 2; row 6 is freed, and 2 then takes it itself.
        assert_eq!(handed, vec![(2, 5)]);
        assert_eq!(l.take(2, 6, 6), None);
        handed.clear();
        l.release(4, 6, &mut handed);
        assert_eq!(handed, vec![(3, 4)]);
        handed.clear();
        l.release(4, 4, &mut handed);
        assert!(handed.is_empty());
        assert!(l.is_idle());
    }

    #[test]
    fn waiters_of_a_row_are_served_in_arrival_order() {
        let mut l = RowLocks::default();
        assert_eq!(l.take(7, 0, 0), None);
        for s in [9, 8, 10] {
            assert_eq!(l.take(s, 0, 0), Some(0));
        }
        let mut order = Vec::new();
        let mut holder = 7;
        for _ in 0..3 {
            let mut handed = Vec::new();
            l.release(0, 0, &mut handed);
            assert_eq!(handed.len(), 1);
            holder = handed[0].0;
            order.push(holder);
        }
        assert_eq!(order, vec![9, 8, 10]);
        let mut handed = Vec::new();
        l.release(0, 0, &mut handed);
        assert!(handed.is_empty() && l.is_idle(), "{holder} was the last");
    }
}
