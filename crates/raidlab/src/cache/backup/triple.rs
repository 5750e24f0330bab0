//! Triple RAPID-Cache (section 2, Fig. 2b): one primary cache backed by TWO RAPID backup
//! caches, each with its own NVRAM and cache disk. A composite of the simple policy
//! (libCacheSim style): every hook is forwarded to both [`Rapid`]s, so each dirty page has a
//! copy in the primary and one in each backup (triple redundancy in normal operation).
//!
//! - **Acknowledge** only when both backups took the page: `can_accept` is the conjunction, so
//!   a write waits while either backup has no segment buffer free.
//! - **Routing.** Both backups number their segments `0..segments`; the transfers this backup
//!   hands the engine carry backup `k`'s segment `s` as `k x segments + s` (one segment space
//!   of `2 x segments`), so the engine places each on the right cache disk
//!   (`engine/timed/backup.rs`) without another field in [`BackupIo`]. `next_io` alternates
//!   between the backups so neither's log writes starve the other's.
//! - **Counters** are summed over both backups (`page_writes` counts copies: twice the pages
//!   written), except `free_segments_min` (the smaller) and `held_max` (the larger; both hold
//!   the same pages).

use super::{BackupStats, Rapid, RapidSpec};
use crate::cache::write::{Backup, BackupIo};

/// Backups of a triple RAPID-Cache.
pub const TRIPLE_BACKUPS: u32 = 2;

pub struct Triple {
    backups: [Rapid; TRIPLE_BACKUPS as usize],
    /// Segments per backup: the offset between the backups' segment spaces.
    segments: u32,
    /// The backup `next_io` asks first.
    turn: usize,
}

impl Triple {
    /// Two identical RAPID backups for `spec` behind a primary of `primary_pages` pages.
    pub fn new(spec: &RapidSpec, primary_pages: u64) -> Triple {
        Triple {
            backups: [
                Rapid::new(spec, primary_pages),
                Rapid::new(spec, primary_pages),
            ],
            segments: spec.segments,
            turn: 0,
        }
    }

    /// Backup `k` (0 or 1).
    pub fn backup(&self, k: usize) -> &Rapid {
        &self.backups[k]
    }

    /// Which backup a transfer's (combined) segment belongs to, and its own segment.
    fn split(&self, segment: u32) -> (usize, u32) {
        let k = segment / self.segments;
        debug_assert!(k < TRIPLE_BACKUPS);
        (k as usize, segment - k * self.segments)
    }
}

impl Backup for Triple {
    fn on_write(&mut self, lba: u64, overwrite: bool) {
        for b in &mut self.backups {
            b.on_write(lba, overwrite);
        }
    }

    fn on_destage(&mut self, first: u64, flight: &[u64], dirty: &[u64]) {
        for b in &mut self.backups {
            b.on_destage(first, flight, dirty);
        }
    }

    fn on_invalidate(&mut self, lba: u64) {
        for b in &mut self.backups {
            b.on_invalidate(lba);
        }
    }

    #[inline]
    fn can_accept(&self, lba: u64) -> bool {
        self.backups.iter().all(|b| b.can_accept(lba))
    }

    fn next_io(&mut self) -> Option<BackupIo> {
        for i in 0..self.backups.len() {
            let k = (self.turn + i) % self.backups.len();
            if let Some(mut io) = self.backups[k].next_io() {
                io.segment += k as u32 * self.segments;
                self.turn = (k + 1) % self.backups.len();
                return Some(io);
            }
        }
        None
    }

    fn io_done(&mut self, mut io: BackupIo) {
        let (k, segment) = self.split(io.segment);
        io.segment = segment;
        self.backups[k].io_done(io);
    }

    fn copies(&self, lba: u64) -> u32 {
        self.backups.iter().map(|b| b.copies(lba)).sum()
    }

    fn check(&self) -> Result<(), String> {
        for (k, b) in self.backups.iter().enumerate() {
            b.check().map_err(|e| format!("backup {k}: {e}"))?;
        }
        if self.backups[0].held() != self.backups[1].held() {
            return Err(format!(
                "the backups hold {} and {} pages",
                self.backups[0].held(),
                self.backups[1].held()
            ));
        }
        Ok(())
    }

    fn stats(&self) -> BackupStats {
        let [a, b] = [self.backups[0].stats(), self.backups[1].stats()];
        BackupStats {
            page_writes: a.page_writes + b.page_writes,
            destaged: a.destaged + b.destaged,
            invalidated: a.invalidated + b.invalidated,
            nvram_hits: a.nvram_hits + b.nvram_hits,
            evictions: a.evictions + b.evictions,
            log_writes: a.log_writes + b.log_writes,
            log_pages: a.log_pages + b.log_pages,
            gc_runs: a.gc_runs + b.gc_runs,
            gc_pages: a.gc_pages + b.gc_pages,
            gc_segments_freed: a.gc_segments_freed + b.gc_segments_freed,
            disk_reads: a.disk_reads + b.disk_reads,
            free_segments_min: a.free_segments_min.min(b.free_segments_min),
            held_max: a.held_max.max(b.held_max),
        }
    }
}
