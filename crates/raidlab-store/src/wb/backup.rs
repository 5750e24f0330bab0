//! The second copy of the write cache's dirty pages: what a backup must do, and the pieces
//! the mirror and the log share.
//!
//! The cache stages a record (a page version, or an image of a page a destage may make
//! unreadable) with [`Backup::put`] while holding its own lock, then calls
//! [`Backup::commit`] without it; the write is acknowledged when `commit` returns. A record
//! is released when it is garbage: its page was destaged and the members synced, or a newer
//! version of the page was committed.
//!
//! Recovery reads every record of the current epoch ([`Backup::scan`]); the newest version
//! of each page wins. Records of destaged pages may still be found: replaying them writes
//! what the members already hold. What a backup must never do is keep an old version of a
//! page while dropping a newer one; each implementation says how it avoids that.

use std::io;
use std::sync::Arc;

use super::format::{RecMeta, Super};
use crate::member::Member;

/// Where a record lives (the backup's own numbering).
pub type Handle = u64;

/// The cache's live pages, for a log cleaner copying live records forward (RAPID's garbage
/// collection copies from the primary cache and never reads the cache disk).
pub trait LiveData {
    /// The newest cached version of `lba`: its sequence number and bytes, or `None` when the
    /// page is not dirty in the cache.
    fn newest(&self, lba: u64) -> Option<(u64, &[u8])>;
}

/// A record found by recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub meta: RecMeta,
    pub data: Vec<u8>,
}

/// What a scan found, and what it skipped.
#[derive(Debug, Default)]
pub struct Scan {
    pub records: Vec<Found>,
    /// Records whose data did not match their checksum (a torn write: never acknowledged).
    pub torn: u64,
    /// Log: records left out because a release entry in the scan names them.
    pub released: u64,
}

/// Counters for `ctl status`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BackupStats {
    pub records: u64,
    /// Group commits run (each one write of the staged records and one sync per leg).
    pub commits: u64,
    /// Calls to `commit` (writes waiting for durability, images, releases): with
    /// `commits`, how many callers one sync covered.
    pub commit_calls: u64,
    pub bytes_written: u64,
    /// Log: garbage collections (segments cleaned) and records they copied forward.
    pub gc_segments: u64,
    pub gc_records: u64,
    /// Records held (live) now, and the backup's capacity in records.
    pub live: u64,
    pub capacity: u64,
    /// Log with an NVRAM: its slots, the segments that waited for a free slot (RAPID's
    /// stall) and the slots drained to the legs.
    pub nvram_slots: u64,
    pub nvram_stalls: u64,
    pub nvram_drained: u64,
    /// Log: images (and plans and partial parities) released; the release entries appended
    /// to name them; and the voids written in place instead (a log short of free segments)
    /// whose segment had already reached its leg, so that the void cost a leg write.
    pub images_released: u64,
    pub release_entries: u64,
    pub image_void_leg_writes: u64,
}

pub trait Backup: Send + Sync {
    /// `mirror` or `log`.
    fn name(&self) -> &'static str;
    /// Stage a record. Called with the cache's lock held; `live` is the cache.
    fn put(&self, meta: RecMeta, data: &[u8], live: &dyn LiveData) -> io::Result<Handle>;
    /// Make everything staged so far durable (group commit). Called without the cache's lock.
    fn commit(&self) -> io::Result<()>;
    /// The record is garbage: `superseded` when a newer version of its page is durable,
    /// otherwise its page (or, for an image, its destage) is on the members.
    fn release(&self, h: Handle, superseded: bool);
    /// Release the records of one destage round (their pages are durable on the members).
    /// A page has one record among them at most; the backup must make every earlier
    /// release durable before any of these can be, so a crash never keeps an older
    /// version of a page while dropping a newer one.
    fn release_destaged(&self, hs: &[Handle]) {
        for &h in hs {
            self.release(h, false);
        }
    }
    /// Release images (and plan and partial-parity records) after their destage completed:
    /// their release (a void, or a record naming them) is written or staged now and made
    /// durable by the next commit, without a sync of its own. That is soon enough: a stale
    /// image must be gone before a newer version of its page can be dropped (a drop becomes
    /// durable only with a later sync), and a plan before the next destage changes the
    /// pages it describes (every destage that rewrites part of a row commits its own plan
    /// first; one that rewrites whole rows replays whole from its records, which stay live
    /// until it is on the members).
    fn release_images(&self, hs: &[Handle]) -> io::Result<()>;
    /// Every record of the current epoch.
    fn scan(&self) -> io::Result<Scan>;
    /// Start a new, empty epoch (after recovery replayed the records). Durable on return.
    fn reset(&self) -> io::Result<()>;
    /// The current epoch (records of other epochs are never this backup's).
    fn epoch(&self) -> u64;
    fn stats(&self) -> BackupStats;
    /// A one-line description for `ctl status`.
    fn describe(&self) -> String;
}

/// Read both superblock copies of a backup area starting at `base` of `dev`.
pub fn read_supers(dev: &Arc<dyn Member>, base: u64) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let mut a = vec![0u8; super::format::SUPER_BYTES];
    let mut b = vec![0u8; super::format::SUPER_BYTES];
    dev.read_at(&mut a, base)?;
    dev.read_at(&mut b, base + super::format::SUPER_BYTES as u64)?;
    Ok((a, b))
}

/// Write superblock `s` into the copy its generation selects (alternating, so a torn write
/// leaves the other copy), then sync.
pub fn write_super(dev: &Arc<dyn Member>, base: u64, s: &Super) -> io::Result<()> {
    let at = base + (s.generation % 2) * super::format::SUPER_BYTES as u64;
    dev.write_at(&s.encode(), at)?;
    dev.sync()
}

/// A backup problem found when opening it: the path and what is wrong.
pub fn bad(path: &str, msg: impl std::fmt::Display) -> raidlab::Error {
    raidlab::Error::Store {
        path: path.to_string(),
        msg: msg.to_string(),
    }
}
