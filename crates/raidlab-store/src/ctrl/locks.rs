//! Stripe locks: a fixed table of mutexes that serialises every read-modify-write of a stripe
//! row (user writes, degraded reads that reconstruct, rebuild, resync and check).
//!
//! Rows hash into `BUCKETS` mutexes; a request takes the buckets of all its rows in ascending
//! bucket order, so two requests can never wait on each other in a cycle. Two rows that share
//! a bucket are serialised needlessly, which costs a little parallelism and nothing else.

use crate::sync::{Mutex, MutexGuard};

/// Buckets in the table: enough that independent 4 KiB writes rarely collide.
const BUCKETS: usize = 4096;

/// Rows a single lock call may cover (bounds the guard list; a 32 MiB request on a 4 KiB
/// chunk RAID-0 spans 8192 rows, but distinct buckets are at most `BUCKETS`).
pub struct StripeLocks {
    table: Vec<Mutex<()>>,
}

/// The held buckets; dropping it releases them.
pub struct RowGuard<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl Default for StripeLocks {
    fn default() -> Self {
        StripeLocks {
            table: (0..BUCKETS).map(|_| Mutex::new(())).collect(),
        }
    }
}

impl StripeLocks {
    /// Lock rows `first..=last`.
    pub fn lock(&self, first: u64, last: u64) -> RowGuard<'_> {
        debug_assert!(first <= last);
        let span = last - first + 1;
        let mut buckets: Vec<usize> = if span >= BUCKETS as u64 {
            (0..BUCKETS).collect()
        } else {
            let mut v: Vec<usize> = (first..=last)
                .map(|r| (r % BUCKETS as u64) as usize)
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        buckets.shrink_to_fit();
        let guards = buckets
            .into_iter()
            // A poisoned bucket only means another request panicked while holding it; the
            // lock protects no data of its own, so carry on.
            .map(|b| self.table[b].lock().unwrap_or_else(|e| e.into_inner()))
            .collect();
        RowGuard { _guards: guards }
    }

    /// Lock one row.
    pub fn lock_row(&self, row: u64) -> RowGuard<'_> {
        self.lock(row, row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_ranges_in_any_order_do_not_deadlock() {
        let locks = std::sync::Arc::new(StripeLocks::default());
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let l = locks.clone();
                std::thread::spawn(move || {
                    for i in 0..2000u64 {
                        let a = (i * 7 + t * 13) % 9000;
                        let _g = l.lock(a, a + (i % 5000));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}
