//! Member I/O: positioned reads and writes on one member (a file or a block device).
//!
//! The controller sees every member through [`Member`], so tests can put a fault-injecting or
//! recording wrapper between the controller and the bytes (TigerBeetle's storage fault model:
//! any read or write may fail).

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::sync::RwLock;

/// One member device. Every method may be called from many threads at once.
///
/// Caller's obligations: `offset + buf.len() <= len_bytes()`. Callee's: a read fills all of
/// `buf` or returns an error (a short read is an error, `UnexpectedEof`); a write writes all
/// of `buf` or returns an error; `sync` returns only when every write that returned before
/// it was called is durable (fdatasync).
pub trait Member: Send + Sync + std::fmt::Debug {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    fn sync(&self) -> io::Result<()>;
    fn len_bytes(&self) -> u64;
    /// The path it was opened from (names the member in messages and superblock records).
    fn path(&self) -> &str;
}

/// A member file or block device, driven with pread/pwrite.
#[derive(Debug)]
pub struct FileMember {
    file: File,
    path: String,
    len_bytes: u64,
}

impl FileMember {
    /// Open `path` for reading and writing. The length of a block device is found by seeking
    /// to its end (its metadata length is 0).
    pub fn open(path: &str) -> io::Result<FileMember> {
        let mut file = OpenOptions::new().read(true).write(true).open(path)?;
        let len_bytes = file.seek(SeekFrom::End(0))?;
        Ok(FileMember {
            file,
            path: path.to_string(),
            len_bytes,
        })
    }
}

impl Member for FileMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn len_bytes(&self) -> u64 {
        self.len_bytes
    }

    fn path(&self) -> &str {
        &self.path
    }
}

/// A member in memory (tests of the data path).
#[derive(Debug)]
pub struct MemMember {
    name: String,
    data: RwLock<Vec<u8>>,
}

impl MemMember {
    pub fn new(name: &str, len_bytes: u64) -> MemMember {
        MemMember {
            name: name.to_string(),
            data: RwLock::new(vec![0; len_bytes as usize]),
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
            return Err(io::Error::new(io::ErrorKind::WriteZero, "write past the end"));
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
}
