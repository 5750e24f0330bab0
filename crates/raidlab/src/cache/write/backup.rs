//! The hook a backup of the write cache plugs into (RAPID-Cache's backup log, a dual NVRAM
//! copy). The write cache calls it on every page it accepts, on every completed destage and on
//! every page version it supersedes; a backup keeps whatever copy it wants and may drop a
//! page's copy once [`Backup::on_destage`] reports it on disk. Sans-IO like the cache: a
//! backup that needs I/O (a log disk) records it and lets the engine ask for it.

/// Told of every change to the write cache's dirty data.
pub trait Backup {
    /// Page `lba` was written into the cache (`overwrite`: it replaced a dirty version).
    fn on_write(&mut self, lba: u64, overwrite: bool);
    /// The destage of `pages` pages of the group starting at page `first` completed: those
    /// versions are on disk.
    fn on_destage(&mut self, first: u64, pages: u32);
    /// The cached version of page `lba` was superseded (an overwrite, or a write to a page
    /// whose older version is being destaged): a backup copy of the old version is garbage.
    fn on_invalidate(&mut self, lba: u64);
}

/// No backup (the write cache alone; the default).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoBackup;

impl Backup for NoBackup {
    #[inline]
    fn on_write(&mut self, _lba: u64, _overwrite: bool) {}
    #[inline]
    fn on_destage(&mut self, _first: u64, _pages: u32) {}
    #[inline]
    fn on_invalidate(&mut self, _lba: u64) {}
}
