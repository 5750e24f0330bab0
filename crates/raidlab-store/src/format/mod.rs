//! On-disk formats: the member layout, the superblock, the write-intent bitmap, the members
//! manifest, and the rules that create and assemble an array from them.
//!
//! # Member layout
//!
//! Every member (a file or a block device) is laid out like a Linux md v1.2 member:
//!
//! | Bytes                     | Contents                                                   |
//! |---------------------------|------------------------------------------------------------|
//! | 0 .. 4096                 | unused, zero (md v1.2 leaves it for boot loaders)          |
//! | 4096 .. 8192              | the superblock (one 4 KiB block, see below)                |
//! | 8192 .. 12352             | the write-intent bitmap: 64-byte header + 4096 bytes of bits |
//! | 12352 .. `data_offset`    | unused, zero                                               |
//! | `data_offset` .. + `member_data_bytes` | data (chunks of the array's rows)             |
//!
//! `data_offset` is [`DATA_OFFSET_BYTES`] (1 MiB) for arrays made by [`create`]; a reader
//! accepts any 4 KiB-aligned offset of at least 16 KiB.
//!
//! # Superblock (4096 bytes, little-endian)
//!
//! | Offset | Size | Field                                                              |
//! |--------|------|--------------------------------------------------------------------|
//! | 0      | 8    | magic `b"RAIDLAB1"`                                                |
//! | 8      | 4    | format version (1)                                                 |
//! | 12     | 4    | CRC-32C of the 4096 bytes, computed with this field zero           |
//! | 16     | 16   | array UUID                                                         |
//! | 32     | 16   | device UUID                                                        |
//! | 48     | 32   | array name, UTF-8, NUL-padded                                      |
//! | 80     | 4    | level (md's numbers: 0, 1, 10, 5, 6)                               |
//! | 84     | 4    | layout (md's: 0 left-asym, 1 right-asym, 2 left-sym, 3 right-sym)  |
//! | 88     | 4    | disks (slots), 1 ..= 256                                           |
//! | 92     | 4    | role of this device: its slot, `0xFFFF_FFFF` spare, `0xFFFF_FFFE` faulty |
//! | 96     | 8    | chunk bytes (a power of two, 4 KiB ..= 1 GiB)                      |
//! | 104    | 8    | data offset bytes                                                  |
//! | 112    | 8    | member data bytes (a whole number of chunks)                       |
//! | 120    | 8    | bitmap offset bytes (8192)                                         |
//! | 128    | 8    | event counter                                                      |
//! | 136    | 4    | flags: bit 0 = clean (no write can be in flight), bit 1 = failed (more members lost than the level survives: `serve --force` to start) |
//! | 140    | 4    | a faulty device's former slot plus one (0: not recorded)           |
//! | 144    | 8    | a faulty device's last event in sync in its slot, plus one (0: it was not in sync when it left, or not recorded); `ctl re-add` trusts its data up to there |
//! | 152    | 104  | reserved, zero                                                     |
//! | 256    | 256  | slot states, one byte per slot: 0 in sync, 1 failed, 2 recovering  |
//! | 512    | 2048 | per slot, u64: rebuild checkpoint (rows below it rebuilt) of a recovering slot |
//! | 2560   | 1536 | reserved, zero                                                     |
//!
//! # Write-intent bitmap (4160 bytes at 8192)
//!
//! | Offset | Size | Field                                                              |
//! |--------|------|--------------------------------------------------------------------|
//! | 0      | 8    | magic `b"RLBITMAP"`                                                |
//! | 8      | 4    | format version (1)                                                 |
//! | 12     | 4    | CRC-32C of the 4160 bytes, computed with this field zero           |
//! | 16     | 8    | event counter of the superblocks when it was written               |
//! | 24     | 8    | rows per region                                                    |
//! | 32     | 4    | regions (bits in use, at most 32768)                               |
//! | 36     | 4    | reserved, zero                                                     |
//! | 40     | 8    | event counter when a bit was last cleared, plus one (0: not recorded); bits are kept while a slot is not in sync, so every region written since is set |
//! | 48     | 16   | reserved, zero                                                     |
//! | 64     | 4096 | bits: region `g` is bit `g % 8` of byte `g / 8`                    |
//!
//! # Array directory
//!
//! `DIR/members.json` lists the devices of the array (members first, then spares), relative
//! to DIR when inside it: `{"format": "raidlab-members", "version": 1, "paths": [...]}`. The
//! superblocks, not the order of that list, say which slot each device holds.

pub mod assemble;
pub mod bitmap;
pub mod create;
pub mod manifest;
pub mod sink;
pub mod size;
pub mod superblock;

pub use assemble::{assemble, assemble_with, Assembled};
pub use bitmap::{decode_bitmap, encode_bitmap, encode_bitmap_kept, Bitmap};
pub use create::{create, CreateSpec, Created};
pub use manifest::{
    add_to_manifest, parse_manifest, read_manifest, remove_from_manifest, write_manifest,
};
pub use sink::SuperblockSink;
pub use size::parse_size;
pub use superblock::{decode, DevRole, Superblock};

/// Where the superblock starts on every member.
pub const SUPERBLOCK_OFFSET: u64 = 4096;
/// Size of the superblock.
pub const SUPERBLOCK_BYTES: usize = 4096;
/// Where the write-intent bitmap starts on every member.
pub const BITMAP_OFFSET: u64 = 8192;
/// Size of the on-disk bitmap: a 64-byte header and 4096 bytes of bits.
pub const BITMAP_BYTES: usize = 64 + 4096;
/// Where data starts on members of arrays made by [`create`].
pub const DATA_OFFSET_BYTES: u64 = 1 << 20;
/// The smallest data offset a reader accepts: room for the superblock and the bitmap.
pub const DATA_OFFSET_MIN: u64 = 16 << 10;
/// The most slots a superblock's tables hold.
pub const DISKS_MAX: u32 = 256;
/// Chunk bounds (bytes).
pub const CHUNK_MIN: u64 = 4096;
pub const CHUNK_MAX: u64 = 1 << 30;
/// The most data bytes per member (1 PiB): keeps every size computation far from overflow.
pub const MEMBER_DATA_MAX: u64 = 1 << 50;

// The regions of the member layout do not overlap.
const _: () = assert!(SUPERBLOCK_OFFSET + SUPERBLOCK_BYTES as u64 <= BITMAP_OFFSET);
const _: () = assert!(BITMAP_OFFSET + BITMAP_BYTES as u64 <= DATA_OFFSET_MIN);
const _: () = assert!(DATA_OFFSET_MIN <= DATA_OFFSET_BYTES);

/// A fresh random UUID (version 4 style). std's `RandomState` is seeded from the OS's
/// random source, so no extra dependency is needed for uniqueness.
pub(crate) fn new_uuid() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut out = [0u8; 16];
    for (i, half) in out.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(nanos);
        h.write_u64(n);
        h.write_u64(i as u64);
        h.write_u32(std::process::id());
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    out[6] = (out[6] & 0x0f) | 0x40;
    out[8] = (out[8] & 0x3f) | 0x80;
    out
}

/// A UUID in its usual text form.
pub fn uuid_string(u: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
pub(crate) mod testutil {
    use std::path::{Path, PathBuf};

    /// A scratch directory under the system temp dir, removed on drop.
    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> TempDir {
            let p = std::env::temp_dir().join(format!(
                "raidlab-format-{tag}-{}-{}",
                std::process::id(),
                super::uuid_string(&super::new_uuid())
            ));
            std::fs::create_dir_all(&p).expect("creating a temp dir");
            TempDir(p)
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_differ_and_print() {
        let (a, b) = (new_uuid(), new_uuid());
        assert_ne!(a, b);
        let s = uuid_string(&a);
        assert_eq!(s.len(), 36);
        assert_eq!(&s[14..15], "4");
    }
}
