//! Backups of the write cache (RAPID-Cache, Hu, Nightingale and Yang): what keeps a second
//! copy of every dirty page until it is destaged. All plug into `cache::write::Backup`.
//!
//! - `none`: a single-copy NVRAM cache (no second copy);
//! - `dual`: a mirrored NVRAM of the same size and speed (`dual.rs`): every write is copied,
//!   nothing is ever waited for;
//! - `rapid`: RAPID-Cache's backup (`rapid.rs`): a small NVRAM holding an LRU cache of pages,
//!   2-4 segment buffers and the hash table, over a log-structured cache disk whose segment
//!   table (`segments.rs`) keeps valid-slot counts and slot maps. Evictions from the NVRAM
//!   LRU fill the current segment buffer; a full buffer is one large write to the cache disk;
//!   garbage collection copies live pages from the primary cache (never reading the cache
//!   disk) into a new segment.
//! - `triple`: two identical RAPID backups behind one primary (`triple.rs`, Fig. 2b), each
//!   with its own NVRAM and cache disk; a write is acknowledged when both hold it.
//!
//! Sans-IO: the RAPID backup queues its large writes and the engine performs them
//! (`engine/timed/backup.rs`), on a dedicated disk (`physical`) or on a partition of each data
//! disk (`logical`).

mod dual;
mod failure;
mod rapid;
#[cfg(test)]
mod recover_tests;
mod segments;
#[cfg(test)]
mod tests;
mod triple;
#[cfg(test)]
mod triple_tests;

pub use dual::Dual;
pub use failure::{CacheFailure, Exposure, Restore};
pub use rapid::Rapid;
pub use segments::{SegState, Segments, EMPTY_SLOT};
pub use triple::{Triple, TRIPLE_BACKUPS};

use crate::cache::write::{Backup, NoBackup};

/// Where RAPID's cache disk lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheDisk {
    /// A dedicated disk (like the hot spare), an extra device of the disk model.
    Physical,
    /// A partition at the end of every data disk, outside parity; segment `s` lives on data
    /// disk `s mod disks`.
    Logical,
}

impl CacheDisk {
    pub const NAMES: &'static [&'static str] = &["physical", "logical"];

    pub fn name(self) -> &'static str {
        match self {
            CacheDisk::Physical => "physical",
            CacheDisk::Logical => "logical",
        }
    }
}

/// RAPID's backup, validated (`config/backup.rs`). Sizes are in pages (cache blocks).
#[derive(Debug, Clone, PartialEq)]
pub struct RapidSpec {
    /// NVRAM of the backup, pages: the LRU cache plus the segment buffers.
    pub nvram_pages: u64,
    /// Pages (slots) per segment; a segment buffer holds one segment.
    pub segment_pages: u32,
    /// Segment buffers in the NVRAM (2-4 in the paper).
    pub segment_buffers: u32,
    /// Segments on the cache disk.
    pub segments: u32,
    /// Garbage collection runs when free segments fall below this.
    pub gc_free_segments: u32,
    pub cache_disk: CacheDisk,
}

impl RapidSpec {
    /// Pages of the NVRAM LRU cache (what the segment buffers leave; validated >= 1).
    pub fn lru_pages(&self) -> u64 {
        self.nvram_pages - u64::from(self.segment_buffers) * u64::from(self.segment_pages)
    }
}

/// The `[backup]` table.
#[derive(Debug, Clone, PartialEq)]
pub enum BackupSpec {
    None,
    Dual,
    Rapid(RapidSpec),
    /// Two identical RAPID backups (triple RAPID-Cache).
    Triple(RapidSpec),
}

impl BackupSpec {
    pub const NAMES: &'static [&'static str] = &["none", "dual", "rapid", "triple"];

    pub fn name(&self) -> &'static str {
        match self {
            BackupSpec::None => "none",
            BackupSpec::Dual => "dual",
            BackupSpec::Rapid(_) => "rapid",
            BackupSpec::Triple(_) => "triple",
        }
    }

    /// The backup for a write cache of `primary_pages` pages.
    pub fn build(&self, primary_pages: u64) -> Box<dyn Backup> {
        match self {
            BackupSpec::None => Box::new(NoBackup),
            BackupSpec::Dual => Box::new(Dual::new(primary_pages)),
            BackupSpec::Rapid(r) => Box::new(Rapid::new(r, primary_pages)),
            BackupSpec::Triple(r) => Box::new(Triple::new(r, primary_pages)),
        }
    }

    /// The RAPID spec of a backup with cache disks, and how many cache disks it has (one per
    /// RAPID backup).
    pub fn log_spec(&self) -> Option<(&RapidSpec, u32)> {
        match self {
            BackupSpec::Rapid(r) => Some((r, 1)),
            BackupSpec::Triple(r) => Some((r, TRIPLE_BACKUPS)),
            _ => None,
        }
    }
}

/// Counters of a backup over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackupStats {
    /// Pages copied into the backup (every accepted page write).
    pub page_writes: u64,
    /// Copies dropped because the page reached the disks (destage) or was superseded.
    pub destaged: u64,
    pub invalidated: u64,
    /// RAPID: rewrites of a page while in the NVRAM LRU (absorbed there).
    pub nvram_hits: u64,
    /// RAPID: pages moved from the NVRAM LRU to a segment buffer.
    pub evictions: u64,
    /// RAPID: segment-buffer writes to the cache disk and their pages.
    pub log_writes: u64,
    pub log_pages: u64,
    /// RAPID: garbage collections, the pages they copied from the primary cache, and their
    /// segment writes.
    pub gc_runs: u64,
    pub gc_pages: u64,
    /// Segments freed by GC.
    pub gc_segments_freed: u64,
    /// Reads of the cache disk (only recovery reads; GC never reads it).
    pub disk_reads: u64,
    /// Fewest free segments seen, and most pages held.
    pub free_segments_min: u32,
    pub held_max: u64,
}
