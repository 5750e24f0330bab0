//! Member I/O: positioned reads and writes on one member (a file or a block device).
//!
//! The controller sees every member through [`Member`], so tests can put a fault-injecting or
//! recording wrapper between the controller and the bytes (TigerBeetle's storage fault model:
//! any read or write may fail).

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

pub mod nbd;
pub mod timed;

/// One member device. Every method may be called from many threads at once.
///
/// Caller's obligations: `offset + buf.len() <= len_bytes()`. Callee's: a read fills all of
/// `buf` or returns an error (a short read is an error, `UnexpectedEof`); a write writes all
/// of `buf` or returns an error; `sync` returns only when every write that returned before
/// it was called is durable (fdatasync).
/// The [`Member`] methods a wrapper forwards unchanged to the member in its field `inner`
/// (its length, path and identity: a wrapper is the same bytes). Used inside an
/// `impl Member for` block.
macro_rules! forward_identity {
    ($inner:ident) => {
        fn len_bytes(&self) -> u64 {
            self.$inner.len_bytes()
        }
        fn path(&self) -> &str {
            self.$inner.path()
        }
        fn identity(&self) -> $crate::member::DevId {
            self.$inner.identity()
        }
    };
}
pub(crate) use forward_identity;

pub trait Member: Send + Sync + std::fmt::Debug {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    fn sync(&self) -> io::Result<()>;
    fn len_bytes(&self) -> u64;
    /// The path it was opened from (names the member in messages and superblock records).
    fn path(&self) -> &str;
    /// What the device is, whatever path named it: two members with equal identities are
    /// the same bytes. Every command that names a device compares identities, never paths.
    fn identity(&self) -> DevId;
    /// A disk-timed member's model and counters (`timed::TimedMember`); `None` for others.
    fn timing(&self) -> Option<timed::TimingStatus> {
        None
    }
    /// A remote member's connection (`nbd::NbdMember`); `None` for local devices.
    fn link(&self) -> Option<&dyn nbd::Link> {
        None
    }
    /// Find the length again after the device grew behind this handle (a logical log's
    /// partition laid out past the data area of a member file). A no-op where the length
    /// cannot change.
    fn refresh_len(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Open the member `name` names: an NBD URI (`nbd::is_uri`) or a file or block device.
pub fn open_device(name: &str) -> io::Result<Arc<dyn Member>> {
    if nbd::is_uri(name) {
        Ok(Arc::new(nbd::NbdMember::open(name)?))
    } else {
        Ok(Arc::new(FileMember::open(name)?))
    }
}

/// A device's identity (DESIGN §9): the inode of a file, the device number of a block
/// device, or a unique number for a member that exists only in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DevId {
    /// A regular file: `st_dev` and `st_ino`.
    File { dev: u64, ino: u64 },
    /// A block device: its `st_rdev` (two device nodes of one disk are one device).
    Block { rdev: u64 },
    /// An in-memory member (tests): unique for the life of the process.
    Mem(u64),
    /// An NBD export: a hash of its server address and export name.
    Remote(u64),
}

impl DevId {
    /// The identity of the file or device at `path` (symlinks followed), or of the export
    /// an NBD URI names (no connection made).
    pub fn of_path(path: &std::path::Path) -> io::Result<DevId> {
        if let Some(uri) = path.to_str().filter(|p| nbd::is_uri(p)) {
            return nbd::uri_identity(uri);
        }
        Ok(DevId::of_meta(&std::fs::metadata(path)?))
    }

    fn of_meta(m: &std::fs::Metadata) -> DevId {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        if m.file_type().is_block_device() {
            DevId::Block { rdev: m.rdev() }
        } else {
            DevId::File {
                dev: m.dev(),
                ino: m.ino(),
            }
        }
    }

    /// A fresh identity for an in-memory member.
    pub fn fresh_mem() -> DevId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        DevId::Mem(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// A member file or block device, driven with pread/pwrite.
#[derive(Debug)]
pub struct FileMember {
    file: File,
    path: String,
    len_bytes: AtomicU64,
    id: DevId,
    /// Writes returned so far, and how many of them the last finished sync covered: a sync
    /// with nothing written since is skipped. On ext4 an fdatasync of a clean file still
    /// flushes the disk's cache, and the destager syncs every member after each round.
    written: AtomicU64,
    synced: AtomicU64,
}

impl FileMember {
    /// Open `path` for reading and writing. The length of a block device is found by seeking
    /// to its end (its metadata length is 0).
    pub fn open(path: &str) -> io::Result<FileMember> {
        let mut file = OpenOptions::new().read(true).write(true).open(path)?;
        let len_bytes = file.seek(SeekFrom::End(0))?;
        // The open descriptor's identity: a rename after the open cannot change it.
        let id = DevId::of_meta(&file.metadata()?);
        Ok(FileMember {
            file,
            path: path.to_string(),
            len_bytes: AtomicU64::new(len_bytes),
            id,
            // One write assumed, so the first sync runs (writes before the open, by an
            // earlier process, may not be durable yet).
            written: AtomicU64::new(1),
            synced: AtomicU64::new(0),
        })
    }

    /// Whether a sync now would run (tests).
    #[cfg(test)]
    fn sync_needed(&self) -> bool {
        self.synced.load(Ordering::SeqCst) < self.written.load(Ordering::SeqCst)
    }
}

impl Member for FileMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let r = self.file.write_all_at(buf, offset);
        // Counted once returned, failed or not (a failed write's sync reports the error).
        self.written.fetch_add(1, Ordering::SeqCst);
        r
    }

    /// Skipped when a finished sync began after every write that returned before this call:
    /// that sync's count was read after those writes were counted, so it covers them.
    fn sync(&self) -> io::Result<()> {
        let target = self.written.load(Ordering::SeqCst);
        if self.synced.load(Ordering::SeqCst) >= target {
            return Ok(());
        }
        let covers = self.written.load(Ordering::SeqCst);
        self.file.sync_data()?;
        self.synced.fetch_max(covers, Ordering::SeqCst);
        Ok(())
    }

    fn len_bytes(&self) -> u64 {
        self.len_bytes.load(Ordering::Relaxed)
    }

    fn path(&self) -> &str {
        &self.path
    }

    fn identity(&self) -> DevId {
        self.id
    }

    fn refresh_len(&self) -> io::Result<()> {
        // A block device's metadata length is 0: seek to its end, as `open` does (the
        // descriptor's offset is not used by pread and pwrite).
        let len = (&self.file).seek(SeekFrom::End(0))?;
        self.len_bytes.store(len, Ordering::Relaxed);
        Ok(())
    }
}

/// A member in memory (tests of the data path).
#[derive(Debug)]
pub struct MemMember {
    name: String,
    data: RwLock<Vec<u8>>,
    id: DevId,
}

impl MemMember {
    pub fn new(name: &str, len_bytes: u64) -> MemMember {
        MemMember {
            name: name.to_string(),
            data: RwLock::new(vec![0; len_bytes as usize]),
            id: DevId::fresh_mem(),
        }
    }

    /// A copy of the whole contents.
    pub fn contents(&self) -> Vec<u8> {
        self.data.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

fn past_end(offset: u64, len: usize, size: usize) -> bool {
    offset
        .checked_add(len as u64)
        .is_none_or(|end| end > size as u64)
}

impl Member for MemMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let d = self.data.read().unwrap_or_else(|e| e.into_inner());
        if past_end(offset, buf.len(), d.len()) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let o = offset as usize;
        buf.copy_from_slice(&d[o..o + buf.len()]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut d = self.data.write().unwrap_or_else(|e| e.into_inner());
        if past_end(offset, buf.len(), d.len()) {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "write past the end",
            ));
        }
        let o = offset as usize;
        d[o..o + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        Ok(())
    }

    fn len_bytes(&self) -> u64 {
        self.data.read().unwrap_or_else(|e| e.into_inner()).len() as u64
    }

    fn path(&self) -> &str {
        &self.name
    }

    fn identity(&self) -> DevId {
        self.id
    }
}

/// Linux's EIO: what a failing disk returns.
const EIO: i32 = 5;

/// The longest [`FaultMember::delay`]: a test that wants a slow member should not hang.
const MAX_DELAY: Duration = Duration::from_secs(1);

fn eio() -> io::Error {
    io::Error::from_raw_os_error(EIO)
}

/// A member whose faults a test sets at run time, from any thread, while the controller uses
/// it (every setter takes `&self`).
///
/// Every `read_at`, `write_at` and `sync` is one data operation: it counts in [`ops`], and in
/// [`failures`] when it returns an error (injected or the inner member's). Checks, in order:
/// the delay; [`fail_now`]; [`fail_after_ops`]; [`fail_range`] (reads and writes); short I/O
/// (reads and writes); then the inner member.
///
/// [`ops`]: FaultMember::ops
/// [`failures`]: FaultMember::failures
/// [`fail_now`]: FaultMember::fail_now
/// [`fail_after_ops`]: FaultMember::fail_after_ops
/// [`fail_range`]: FaultMember::fail_range
#[derive(Debug)]
pub struct FaultMember {
    inner: Arc<dyn Member>,
    ops: AtomicU64,
    failures: AtomicU64,
    /// Operations with a number (1-based) above this fail; u64::MAX: never.
    fail_above: AtomicU64,
    fail_all: AtomicBool,
    short: AtomicBool,
    delay_nanos: AtomicU64,
    /// Byte ranges [start, end) whose reads and writes fail.
    ranges: Mutex<Vec<(u64, u64)>>,
}

impl FaultMember {
    pub fn new(inner: Arc<dyn Member>) -> FaultMember {
        FaultMember {
            inner,
            ops: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            fail_above: AtomicU64::new(u64::MAX),
            fail_all: AtomicBool::new(false),
            short: AtomicBool::new(false),
            delay_nanos: AtomicU64::new(0),
            ranges: Mutex::new(Vec::new()),
        }
    }

    /// The next `n` data operations succeed (as far as this fault goes); every one after
    /// them fails with EIO. Counted from this call.
    pub fn fail_after_ops(&self, n: u64) {
        let done = self.ops.load(Ordering::SeqCst);
        self.fail_above
            .store(done.saturating_add(n), Ordering::SeqCst);
    }

    /// Reads and writes touching a byte of [start, end) fail with EIO (a bad region); ranges
    /// add up until [`heal`](FaultMember::heal).
    pub fn fail_range(&self, start: u64, end: u64) {
        self.ranges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((start, end));
    }

    /// Every operation fails with EIO (the member died).
    pub fn fail_now(&self) {
        self.fail_all.store(true, Ordering::SeqCst);
    }

    /// Stop failing: clears fail_now, fail_after_ops, the ranges and short I/O (not the
    /// delay, which is no fault).
    pub fn heal(&self) {
        self.fail_all.store(false, Ordering::SeqCst);
        self.fail_above.store(u64::MAX, Ordering::SeqCst);
        self.short.store(false, Ordering::SeqCst);
        self.ranges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Reads and writes transfer only the first half of the buffer and then fail: a short
    /// read is `UnexpectedEof`, a short write `WriteZero` after writing the first half (a
    /// torn write).
    pub fn short_io(&self, on: bool) {
        self.short.store(on, Ordering::SeqCst);
    }

    /// Sleep this long before each operation (capped at 1 s; zero for none).
    pub fn delay(&self, d: Duration) {
        let nanos = d.min(MAX_DELAY).as_nanos() as u64;
        self.delay_nanos.store(nanos, Ordering::SeqCst);
    }

    /// Data operations attempted so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::SeqCst)
    }

    /// Data operations that returned an error so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::SeqCst)
    }

    /// The checks every operation makes before it reaches the inner member; `span` is the
    /// byte range of a read or write.
    fn admit(&self, span: Option<(u64, usize)>) -> io::Result<()> {
        // Member I/O is where other threads can observe this one: a scheduling point.
        crate::sync::switch();
        let nanos = self.delay_nanos.load(Ordering::SeqCst);
        if nanos > 0 {
            crate::sync::thread::sleep(Duration::from_nanos(nanos));
        }
        let nth = self.ops.fetch_add(1, Ordering::SeqCst) + 1;
        if self.fail_all.load(Ordering::SeqCst) || nth > self.fail_above.load(Ordering::SeqCst) {
            return Err(eio());
        }
        if let Some((offset, len)) = span {
            let end = offset.saturating_add(len as u64);
            let ranges = self.ranges.lock().unwrap_or_else(|e| e.into_inner());
            // An empty transfer touches no byte, so no range.
            if len > 0 && ranges.iter().any(|&(s, e)| offset < e && s < end) {
                return Err(eio());
            }
        }
        Ok(())
    }

    /// Count an error on its way out.
    fn tally<T>(&self, r: io::Result<T>) -> io::Result<T> {
        if r.is_err() {
            self.failures.fetch_add(1, Ordering::SeqCst);
        }
        r
    }
}

impl Member for FaultMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let r = self.admit(Some((offset, buf.len()))).and_then(|()| {
            if self.short.load(Ordering::SeqCst) {
                let half = buf.len() / 2;
                self.inner.read_at(&mut buf[..half], offset)?;
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read"));
            }
            self.inner.read_at(buf, offset)
        });
        self.tally(r)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let r = self.admit(Some((offset, buf.len()))).and_then(|()| {
            if self.short.load(Ordering::SeqCst) {
                let half = buf.len() / 2;
                self.inner.write_at(&buf[..half], offset)?;
                return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
            }
            self.inner.write_at(buf, offset)
        });
        self.tally(r)
    }

    fn sync(&self) -> io::Result<()> {
        let r = self.admit(None).and_then(|()| self.inner.sync());
        self.tally(r)
    }

    crate::member::forward_identity!(inner);

    fn link(&self) -> Option<&dyn nbd::Link> {
        self.inner.link()
    }
}

#[cfg(test)]
mod tests;
