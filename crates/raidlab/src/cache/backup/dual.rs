//! A dual-copy NVRAM cache: the backup is a mirror of the primary, same size and speed, so a
//! write is copied at once and never waits. The copy is tracked page by page only so the
//! invariants (two copies until destaged) can be checked.
//!
//! Failures: after a primary failure the mirror is copied back at once (memory speed). When
//! the mirror fails it is gone for the rest of the run: the pages it held have a single copy
//! until destaged (counted as unprotected) and later writes have only the primary's.

use std::collections::HashSet;

use super::{BackupStats, CacheFailure, Exposure, Restore};
use crate::cache::write::backup::destaged_pages;
use crate::cache::write::Backup;

pub struct Dual {
    /// Pages mirrored (lookups only: iteration order never matters).
    pages: HashSet<u64>,
    /// The mirror failed: `pages` are then the pages left with a single copy.
    lost: bool,
    stats: BackupStats,
}

impl Dual {
    pub fn new(primary_pages: u64) -> Dual {
        Dual {
            pages: HashSet::with_capacity(primary_pages.min(1 << 24) as usize),
            lost: false,
            stats: BackupStats::default(),
        }
    }
}

impl Backup for Dual {
    #[inline]
    fn on_write(&mut self, lba: u64, _overwrite: bool) {
        self.stats.page_writes += 1;
        if self.lost {
            return;
        }
        self.pages.insert(lba);
        self.stats.held_max = self.stats.held_max.max(self.pages.len() as u64);
    }

    fn on_destage(&mut self, first: u64, flight: &[u64], dirty: &[u64]) {
        for lba in destaged_pages(first, flight, dirty) {
            if self.pages.remove(&lba) {
                self.stats.destaged += 1;
            }
        }
    }

    #[inline]
    fn on_invalidate(&mut self, lba: u64) {
        if self.pages.remove(&lba) {
            self.stats.invalidated += 1;
        }
    }

    fn copies(&self, lba: u64) -> u32 {
        u32::from(!self.lost && self.pages.contains(&lba))
    }

    fn primary_failed(&mut self) -> Restore {
        Restore {
            memory_pages: if self.lost {
                0
            } else {
                self.pages.len() as u64
            },
            ..Restore::default()
        }
    }

    fn backup_failed(&mut self, what: CacheFailure, _reprotect: bool) -> Exposure {
        if what != CacheFailure::Backup || self.lost {
            return Exposure::default();
        }
        self.lost = true;
        Exposure {
            pages: self.pages.len() as u64,
            borrowed_pages: 0,
        }
    }

    fn unprotected(&self) -> u64 {
        if self.lost {
            self.pages.len() as u64
        } else {
            0
        }
    }

    fn forget(&mut self, lba: u64) {
        self.pages.remove(&lba);
    }

    fn stats(&self) -> BackupStats {
        self.stats.clone()
    }
}
