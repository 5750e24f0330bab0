//! Failures of the write cache's copies (RAPID-Cache section 3, "recovery and availability"):
//! the types the backups (`cache/backup/`) and the timed engine (`engine/timed/cachefail.rs`)
//! share. What each backup does is documented in `docs/rapid.md` ("Failures and recovery").
//!
//! One rule holds throughout: a disk transfer already issued when a cache memory fails
//! completes with its data (the controller handed it to the disk); a copy counts once it sits
//! in a memory that survives (primary, mirror, backup NVRAM) or on a cache-disk segment.

/// Which copy of the write cache's dirty data fails (`[[events]] fail_cache = "..."`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheFailure {
    /// The primary write cache loses its contents; it is rebuilt from the backup.
    Primary,
    /// The backup's memory: the dual NVRAM's mirror, or RAPID's NVRAM (LRU and buffers).
    Backup,
    /// RAPID's dedicated (physical) cache disk; the backup falls back to a logical one.
    CacheDisk,
}

impl CacheFailure {
    pub const NAMES: &'static [&'static str] = &["primary", "backup", "cache_disk"];

    pub fn name(self) -> &'static str {
        match self {
            CacheFailure::Primary => "primary",
            CacheFailure::Backup => "backup",
            CacheFailure::CacheDisk => "cache_disk",
        }
    }

    pub fn from_name(name: &str) -> Option<CacheFailure> {
        match name {
            "primary" => Some(CacheFailure::Primary),
            "backup" => Some(CacheFailure::Backup),
            "cache_disk" => Some(CacheFailure::CacheDisk),
            _ => None,
        }
    }
}

/// How a backup rebuilds the primary after it failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restore {
    /// Pages copied back at once from the backup's memory (mirror, NVRAM LRU and buffers).
    pub memory_pages: u64,
    /// Pages read back from the cache disk, and the segment reads queued for them (one large
    /// read per segment, taken with `next_io`, `read = true`).
    pub disk_pages: u64,
    pub segment_reads: u32,
}

/// What a failure of the backup's own copies did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exposure {
    /// Pages that lost their backup copy (copied again at once, re-protected over time, or
    /// left with a single copy until destaged).
    pub pages: u64,
    /// Pages of the primary cache borrowed as the backup's NVRAM (RAPID's NVRAM failure).
    pub borrowed_pages: u64,
}
