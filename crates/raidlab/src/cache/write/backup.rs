//! The hook a backup of the write cache plugs into (RAPID-Cache's backup log, a dual NVRAM
//! copy; implementations in `cache/backup/`). The write cache calls it on every page it
//! accepts, on every completed destage and on every page version it supersedes; a backup keeps
//! whatever copy it wants and may drop a page's copy once [`Backup::on_destage`] reports it on
//! disk. Sans-IO like the cache: a backup that needs I/O (a log disk) queues it and the engine
//! takes it with [`Backup::next_io`] and reports it with [`Backup::io_done`].

use crate::cache::backup::{CacheFailure, Exposure, Restore};

/// A large write (or recovery read) a backup asks the engine to perform on its cache disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupIo {
    /// Cache-disk segment the transfer covers.
    pub segment: u32,
    /// Blocks transferred (from the segment's first slot).
    pub blocks: u32,
    /// A read (recovery) rather than a write.
    pub read: bool,
    /// Opaque tag the backup wants back in [`Backup::io_done`].
    pub tag: u32,
}

/// Told of every change to the write cache's dirty data. `Send`, as the destage orders.
pub trait Backup: Send {
    /// Page `lba` was written into the cache (`overwrite`: it replaced a dirty version). Only
    /// called after [`Backup::can_accept`] said yes (the engine asks first).
    fn on_write(&mut self, lba: u64, overwrite: bool);
    /// A destage of the group starting at page `first` completed: the pages whose bit is set
    /// in `flight` are on disk, except those also set in `dirty` (rewritten meanwhile: the
    /// backup holds their newer version, which must stay).
    fn on_destage(&mut self, first: u64, flight: &[u64], dirty: &[u64]);
    /// The cached version of page `lba` was superseded (an overwrite, or a write to a page
    /// whose older version is being destaged): a backup copy of the old version is garbage.
    fn on_invalidate(&mut self, lba: u64);
    /// Whether a write of page `lba` can be backed up now (RAPID: false while no segment
    /// buffer is free; the write waits).
    fn can_accept(&self, _lba: u64) -> bool {
        true
    }
    /// The next cache-disk transfer to issue, if any.
    fn next_io(&mut self) -> Option<BackupIo> {
        None
    }
    /// A transfer taken from [`Backup::next_io`] completed.
    fn io_done(&mut self, _io: BackupIo) {}
    /// Copies of page `lba` the backup holds (tests and invariant checks).
    fn copies(&self, _lba: u64) -> u32 {
        0
    }
    /// The backup's internal invariants, as an error message (tests).
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
    /// Counters, for the run's metrics.
    fn stats(&self) -> crate::cache::backup::BackupStats {
        crate::cache::backup::BackupStats::default()
    }
    /// Whether page `lba`'s copy would survive a failure of the primary cache now (cache
    /// failures, `cache/backup/failure.rs`).
    fn survives_primary(&self, lba: u64) -> bool {
        self.copies(lba) > 0
    }
    /// The primary cache failed (pages without a surviving copy already forgotten): rebuild
    /// it, queueing any cache-disk reads.
    fn primary_failed(&mut self) -> Restore {
        Restore::default()
    }
    /// The backup's own memory or cache disk failed. `reprotect`: the primary can be read to
    /// copy the pages that lost their copy again (false while it is being recovered: those
    /// pages are then gone with it).
    fn backup_failed(&mut self, _what: CacheFailure, _reprotect: bool) -> Exposure {
        Exposure::default()
    }
    /// Data disk `member` of `members` failed while the backup logs to a logical cache disk
    /// (segment `s` on member `s mod members`): its segments are gone for good. `reprotect`:
    /// the primary can be read to copy the pages that lost their copy again (false while it
    /// is being recovered).
    fn log_member_failed(&mut self, _member: u32, _members: u32, _reprotect: bool) -> Exposure {
        Exposure::default()
    }
    /// Pages that lost their backup copy in a backup failure and have none yet.
    fn unprotected(&self) -> u64 {
        0
    }
    /// Drop page `lba`'s copy without counting it: its primary copy was lost with the
    /// primary cache, so the page is gone.
    fn forget(&mut self, lba: u64) {
        self.on_invalidate(lba);
    }
}

/// The pages a completed destage put on disk, ascending: those set in `flight` but not in
/// `dirty` (the [`Backup::on_destage`] arguments). Allocation-free.
pub fn destaged_pages<'a>(
    first: u64,
    flight: &'a [u64],
    dirty: &'a [u64],
) -> impl Iterator<Item = u64> + 'a {
    flight
        .iter()
        .zip(dirty)
        .enumerate()
        .flat_map(move |(w, (&f, &d))| {
            let base = first + w as u64 * 64;
            let mut bits = f & !d;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = u64::from(bits.trailing_zeros());
                bits &= bits - 1;
                Some(base + b)
            })
        })
}

/// No backup (the write cache alone; the default).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoBackup;

impl Backup for NoBackup {
    #[inline]
    fn on_write(&mut self, _lba: u64, _overwrite: bool) {}
    #[inline]
    fn on_destage(&mut self, _first: u64, _flight: &[u64], _dirty: &[u64]) {}
    #[inline]
    fn on_invalidate(&mut self, _lba: u64) {}
}
