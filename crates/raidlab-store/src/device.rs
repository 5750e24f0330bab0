//! Operator-facing device handling: exclusive locks on members and spares while an array is
//! served, and preallocation of member files.
//!
//! - **Locks.** A regular file is locked with `flock(LOCK_EX | LOCK_NB)` on a descriptor of
//!   its own; a block device is opened with `O_EXCL`, which Linux grants to one opener at a
//!   time (a mounted file system or an md array holds it too). A lock lives as long as its
//!   [`DevLock`]; a process that dies releases its locks with its descriptors, so a crash
//!   never leaves a device locked.
//! - **Preallocation.** `fallocate` over the whole member file (mode 0: reserves blocks,
//!   never changes a byte), so a full file system is found at `array create` or `ctl
//!   add-spare`, not by a running array's write.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Mutex;

use raidlab::{Error, Result};

use crate::member::DevId;

/// An exclusive lock on one device, released on drop.
#[derive(Debug)]
pub struct DevLock {
    /// `None` for a remote member: its server, not this host, owns it.
    _file: Option<File>,
    pub path: String,
    pub id: DevId,
}

fn display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Take the exclusive lock of the file or block device at `path`; `Err` (naming it) when
/// another process, or another lock of this process, holds it.
pub fn lock_exclusive(path: &Path) -> Result<DevLock> {
    let name = display(path);
    if crate::member::nbd::is_uri(&name) {
        // Another host's export cannot be locked from here: the array's manifest and the
        // identity checks keep one array from naming it twice.
        let id = DevId::of_path(path).map_err(|e| Error::io(&name, &e))?;
        return Ok(DevLock {
            _file: None,
            path: name,
            id,
        });
    }
    let meta = std::fs::metadata(path).map_err(|e| Error::io(&name, &e))?;
    let id = DevId::of_path(path).map_err(|e| Error::io(&name, &e))?;
    if meta.file_type().is_block_device() {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_EXCL)
            .open(path)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::EBUSY) {
                    Error::store(
                        &name,
                        "in use: the block device is open exclusively elsewhere (another `raidlab serve`, a mounted file system or an md array)",
                    )
                } else {
                    Error::io(&name, &e)
                }
            })?;
        return Ok(DevLock {
            _file: Some(file),
            path: name,
            id,
        });
    }
    let file = File::open(path).map_err(|e| Error::io(&name, &e))?;
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(Error::store(
                &name,
                "in use: another process holds its lock (a `raidlab serve` of this or another array uses it)",
            ));
        }
        return Err(Error::io(&name, &e));
    }
    Ok(DevLock {
        _file: Some(file),
        path: name,
        id,
    })
}

/// Whether some process holds `path`'s lock: it is locked, then released at once. `Ok(())`
/// when free (or when it does not exist: nothing can hold it).
pub fn check_unlocked(path: &Path) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    lock_exclusive(path).map(drop)
}

/// The locks a server holds: its members and spares, and spares added while it runs.
#[derive(Debug, Default)]
pub struct Locks(Mutex<Vec<DevLock>>);

impl Locks {
    /// Lock every path, all or none: on the first refusal the ones taken are released.
    pub fn lock_all<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<Locks> {
        let locks = Locks::default();
        for p in paths {
            locks.add(lock_exclusive(Path::new(p))?);
        }
        Ok(locks)
    }

    pub fn add(&self, l: DevLock) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(l);
    }

    /// Release the lock of the device `path` names (by identity, else by spelling).
    pub fn release(&self, path: &str) {
        let id = DevId::of_path(Path::new(path)).ok();
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|l| l.path != path && Some(l.id) != id);
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Reserve the blocks of the first `len` bytes of the regular file `path` (fallocate mode 0:
/// the size grows to `len` if smaller, no byte changes). Block devices and file systems
/// without fallocate are left as they are (`Ok(false)`); no space is an error naming the
/// file.
pub fn preallocate(path: &Path, len: u64) -> Result<bool> {
    let name = display(path);
    if crate::member::nbd::is_uri(&name) {
        return Ok(false);
    }
    let meta = std::fs::metadata(path).map_err(|e| Error::io(&name, &e))?;
    if !meta.file_type().is_file() {
        return Ok(false);
    }
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| Error::io(&name, &e))?;
    preallocate_file(&f, &name, len)
}

/// [`preallocate`] on an open regular file.
pub fn preallocate_file(f: &File, name: &str, len: u64) -> Result<bool> {
    let Ok(len) = libc::off_t::try_from(len) else {
        return Err(Error::store(
            name,
            format!("{len} bytes: too large to allocate"),
        ));
    };
    // SAFETY: fallocate on a descriptor `f` owns; no memory is passed.
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len) };
    if rc == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) => Ok(false),
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => Err(Error::store(
            name,
            format!("cannot allocate {len} bytes for a member ({e}): free space on its file system, or use a smaller --size"),
        )),
        _ => Err(Error::io(name, &e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::testutil::TempDir;

    #[test]
    fn a_second_lock_is_refused_until_the_first_is_dropped() {
        let t = TempDir::new("lock");
        let p = t.path().join("m");
        std::fs::write(&p, b"x").unwrap();
        let l = lock_exclusive(&p).unwrap();
        let e = lock_exclusive(&p).unwrap_err().to_string();
        assert!(e.contains("in use") && e.contains(&display(&p)), "{e}");
        assert!(check_unlocked(&p).is_err());
        // Another name of the same file is the same lock.
        let q = t.path().join("link");
        std::os::unix::fs::symlink(&p, &q).unwrap();
        assert!(lock_exclusive(&q).is_err());
        drop(l);
        check_unlocked(&p).unwrap();
        let locks = Locks::lock_all([p.to_str().unwrap()]).unwrap();
        assert!(Locks::lock_all([q.to_str().unwrap()]).is_err());
        locks.release(q.to_str().unwrap());
        assert!(locks.is_empty(), "released by identity");
        check_unlocked(&p).unwrap();
    }

    #[test]
    fn preallocation_reserves_without_changing_bytes() {
        let t = TempDir::new("prealloc");
        let p = t.path().join("m");
        std::fs::write(&p, b"hello").unwrap();
        preallocate(&p, 1 << 20).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(bytes.len(), 1 << 20);
        assert_eq!(&bytes[..5], b"hello");
        assert!(bytes[5..].iter().all(|&b| b == 0));
        assert!(preallocate(&t.path().join("none"), 10).is_err());
    }
}
