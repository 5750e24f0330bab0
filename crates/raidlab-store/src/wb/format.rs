//! On-disk formats of the write cache's backups: the backup superblock (two copies, the
//! newest valid one wins), the mirror's slot headers and the log's batch headers. Every
//! structure carries a CRC-32C; a reader rejects a magic, version or array it does not know.
//!
//! Backup superblock (4 KiB, at offsets 0 and 4096 of the backup's area):
//!
//! | bytes   | field                                                              |
//! |---------|--------------------------------------------------------------------|
//! | 0..8    | magic `RLWBACK1`                                                   |
//! | 8..12   | version (3; 2 had no release entries, 1 no plans or partial parity) |
//! | 12..16  | CRC-32C of the 4 KiB with this field zero                          |
//! | 16..20  | kind: 1 mirror, 2 log                                              |
//! | 20..36  | array UUID                                                         |
//! | 36..44  | generation (the copy with the larger one wins)                     |
//! | 44..52  | epoch: records of another epoch are not this backup's              |
//! | 52..60  | capacity: mirror slots, or log region bytes                        |
//! | 60..68  | log segment bytes (0 for a mirror)                                 |
//! | 68..76  | log tail: virtual position where recovery starts reading           |
//! | 76..80  | log members (logical log), then one u32 slot each from byte 80     |
//!
//! Mirror slot header (64 bytes; 64 per 4 KiB): magic `RLMS`, kind, epoch, lba, seq, data
//! CRC, header CRC. Log batch header (one 4 KiB block followed by its data blocks): magic
//! `RLLB`, epoch, its own virtual position, the next batch's position, record count, and per
//! record lba, seq, kind and data CRC; header CRC last. An entry of kind `Release` has no
//! data block: its lba field is the virtual position of an earlier record's data block (of
//! the same epoch) that is garbage, and its seq and CRC are zero.

use crate::format::superblock::{get32, get64};

pub const SUPER_MAGIC: [u8; 8] = *b"RLWBACK1";
/// Version 2 added the `Plan` and `Parity` record kinds, version 3 the log's `Release`
/// entries: a build that knows an older version refuses such a backup instead of stopping
/// its scan at the first unknown kind (or, for a release, replaying what it released).
pub const SUPER_VERSION: u32 = 3;
/// The oldest version this build still reads (its records are a subset of version 2's).
pub const SUPER_VERSION_MIN: u32 = 1;
pub const SUPER_BYTES: usize = 4096;
/// Two superblock copies precede the backup's records.
pub const SUPERS_BYTES: u64 = 2 * SUPER_BYTES as u64;
pub const KIND_MIRROR: u32 = 1;
pub const KIND_LOG: u32 = 2;
/// Most members a logical log spreads over (what fits in the superblock).
pub const LOG_MEMBERS_MAX: usize = 256;

pub const BLOCK: usize = crate::ctrl::column::BLOCK;
pub const SLOT_HEADER_BYTES: usize = 64;
const SLOT_MAGIC: u32 = u32::from_le_bytes(*b"RLMS");
const BATCH_MAGIC: u32 = u32::from_le_bytes(*b"RLLB");
/// Batch header: fixed part, then 24-byte entries, then the CRC in the last 4 bytes.
const BATCH_FIXED: usize = 40;
const BATCH_ENTRY: usize = 24;
/// Most records in one batch.
pub const BATCH_RECORDS_MAX: usize = (BLOCK - BATCH_FIXED - 4) / BATCH_ENTRY;

/// What a record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecKind {
    /// A version of a cached page (a client write).
    Data,
    /// The contents of a page on a member that a crash would leave unreadable, taken before
    /// a destage changes its row's parity (closes the RAID-5/6 write hole on replay).
    Image,
    /// A destage's plan of one row (RAID-5/6): which of the row's pages it rewrites, and the
    /// sequence numbers of its partial-parity records (`wb/ppl.rs`).
    Plan,
    /// One column's partial parity: the XOR of the row's data pages in that column that the
    /// destage leaves alone, as they were before it (md's PPL). Replay rebuilds from it a
    /// unit lost by a member that failed during the destage.
    Parity,
    /// Log only, a batch header entry without a data block: the position of an earlier
    /// record (an image, plan or partial parity) that is garbage, so a scan that still
    /// finds it skips it (`wb/log.rs`).
    Release,
}

impl RecKind {
    fn code(self) -> u8 {
        match self {
            RecKind::Data => 1,
            RecKind::Image => 2,
            RecKind::Plan => 3,
            RecKind::Parity => 4,
            RecKind::Release => 5,
        }
    }
    fn of(code: u8) -> Option<RecKind> {
        match code {
            1 => Some(RecKind::Data),
            2 => Some(RecKind::Image),
            3 => Some(RecKind::Plan),
            4 => Some(RecKind::Parity),
            5 => Some(RecKind::Release),
            _ => None,
        }
    }
}

/// A record's identity: page, version (a sequence number over all records) and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecMeta {
    pub lba: u64,
    pub seq: u64,
    pub kind: RecKind,
}

/// The backup superblock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Super {
    pub kind: u32,
    pub uuid: [u8; 16],
    pub generation: u64,
    pub epoch: u64,
    pub capacity: u64,
    pub segment_bytes: u64,
    pub tail: u64,
    pub members: Vec<u32>,
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// CRC-32C of `b` with the 4 bytes at `at` taken as zero.
fn crc_skipping(b: &[u8], at: usize) -> u32 {
    let c = crc32c::crc32c(&b[..at]);
    let c = crc32c::crc32c_append(c, &[0; 4]);
    crc32c::crc32c_append(c, &b[at + 4..])
}

impl Super {
    pub fn encode(&self) -> Vec<u8> {
        assert!(
            self.members.len() <= LOG_MEMBERS_MAX,
            "too many log members"
        );
        let mut b = vec![0u8; SUPER_BYTES];
        b[..8].copy_from_slice(&SUPER_MAGIC);
        put32(&mut b, 8, SUPER_VERSION);
        put32(&mut b, 16, self.kind);
        b[20..36].copy_from_slice(&self.uuid);
        put64(&mut b, 36, self.generation);
        put64(&mut b, 44, self.epoch);
        put64(&mut b, 52, self.capacity);
        put64(&mut b, 60, self.segment_bytes);
        put64(&mut b, 68, self.tail);
        put32(&mut b, 76, self.members.len() as u32);
        for (i, &m) in self.members.iter().enumerate() {
            put32(&mut b, 80 + 4 * i, m);
        }
        let crc = crc_skipping(&b, 12);
        put32(&mut b, 12, crc);
        b
    }

    /// Decode one copy. `Err` says why it is not a valid superblock.
    pub fn decode(b: &[u8]) -> Result<Super, String> {
        if b.len() < SUPER_BYTES {
            return Err(format!("{} bytes, expected {SUPER_BYTES}", b.len()));
        }
        let b = &b[..SUPER_BYTES];
        if b[..8] != SUPER_MAGIC {
            return Err("no backup superblock (bad magic)".into());
        }
        if crc_skipping(b, 12) != get32(b, 12) {
            return Err("superblock checksum mismatch".into());
        }
        let version = get32(b, 8);
        if !(SUPER_VERSION_MIN..=SUPER_VERSION).contains(&version) {
            return Err(format!(
                "backup format version {version} is not supported (this build reads {SUPER_VERSION_MIN} to {SUPER_VERSION})"
            ));
        }
        let kind = get32(b, 16);
        if kind != KIND_MIRROR && kind != KIND_LOG {
            return Err(format!("unknown backup kind {kind}"));
        }
        let n = get32(b, 76) as usize;
        if n > LOG_MEMBERS_MAX {
            return Err(format!("{n} log members (at most {LOG_MEMBERS_MAX})"));
        }
        let s = Super {
            kind,
            uuid: b[20..36].try_into().expect("16 bytes"),
            generation: get64(b, 36),
            epoch: get64(b, 44),
            capacity: get64(b, 52),
            segment_bytes: get64(b, 60),
            tail: get64(b, 68),
            members: (0..n).map(|i| get32(b, 80 + 4 * i)).collect(),
        };
        Ok(s)
    }
}

/// The newer valid copy of two; `Err` carries both reasons when neither is valid.
pub fn newest_super(a: &[u8], b: &[u8]) -> Result<Super, String> {
    match (Super::decode(a), Super::decode(b)) {
        (Ok(x), Ok(y)) => Ok(if y.generation > x.generation { y } else { x }),
        (Ok(x), Err(_)) | (Err(_), Ok(x)) => Ok(x),
        (Err(x), Err(y)) => Err(format!("copy A: {x}; copy B: {y}")),
    }
}

/// CRC-32C of a data block.
pub fn data_crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// A mirror slot header for `meta` whose data has CRC `crc`.
pub fn slot_header(meta: RecMeta, epoch: u64, crc: u32) -> [u8; SLOT_HEADER_BYTES] {
    let mut b = [0u8; SLOT_HEADER_BYTES];
    put32(&mut b, 0, SLOT_MAGIC);
    b[4] = meta.kind.code();
    put64(&mut b, 8, epoch);
    put64(&mut b, 16, meta.lba);
    put64(&mut b, 24, meta.seq);
    put32(&mut b, 32, crc);
    let c = crc_skipping(&b, 60);
    put32(&mut b, 60, c);
    b
}

/// Decode a slot header of `epoch`: the record and its data CRC. `None` for a free, torn,
/// foreign or older-epoch slot, and for a release (only a log's batch headers hold those).
pub fn decode_slot_header(b: &[u8], epoch: u64) -> Option<(RecMeta, u32)> {
    let b = b.get(..SLOT_HEADER_BYTES)?;
    if get32(b, 0) != SLOT_MAGIC || crc_skipping(b, 60) != get32(b, 60) || get64(b, 8) != epoch {
        return None;
    }
    let kind = RecKind::of(b[4]).filter(|&k| k != RecKind::Release)?;
    Some((
        RecMeta {
            lba: get64(b, 16),
            seq: get64(b, 24),
            kind,
        },
        get32(b, 32),
    ))
}

/// A decoded batch header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub pos: u64,
    pub next: u64,
    /// Records and their data CRCs, in the order of the data blocks after the header.
    pub records: Vec<(RecMeta, u32)>,
    /// Positions of earlier records its release entries name.
    pub released: Vec<u64>,
}

/// A release entry for the record whose data block is at `pos` (no data block of its own).
pub fn release_entry(pos: u64) -> (RecMeta, u32) {
    let meta = RecMeta {
        lba: pos,
        seq: 0,
        kind: RecKind::Release,
    };
    (meta, 0)
}

/// Encode a batch header into `out` (one block). `records` are its entries in order: each
/// one but a release has a data block, in the same order, after the header.
pub fn encode_batch(epoch: u64, pos: u64, next: u64, records: &[(RecMeta, u32)], out: &mut [u8]) {
    assert!(records.len() <= BATCH_RECORDS_MAX && out.len() == BLOCK);
    out.fill(0);
    put32(out, 0, BATCH_MAGIC);
    put32(out, 4, records.len() as u32);
    put64(out, 8, epoch);
    put64(out, 16, pos);
    put64(out, 24, next);
    for (i, (m, crc)) in records.iter().enumerate() {
        let at = BATCH_FIXED + i * BATCH_ENTRY;
        put64(out, at, m.lba);
        put64(out, at + 8, m.seq);
        put32(out, at + 16, *crc);
        out[at + 20] = m.kind.code();
    }
    let c = crc_skipping(out, BLOCK - 4);
    put32(out, BLOCK - 4, c);
}

/// Decode a batch header expected at virtual position `pos` of `epoch`. `None` for anything
/// else (torn, stale from an earlier lap or epoch, or not a header).
pub fn decode_batch(b: &[u8], epoch: u64, pos: u64) -> Option<Batch> {
    let b = b.get(..BLOCK)?;
    if get32(b, 0) != BATCH_MAGIC || crc_skipping(b, BLOCK - 4) != get32(b, BLOCK - 4) {
        return None;
    }
    let n = get32(b, 4) as usize;
    if n > BATCH_RECORDS_MAX || get64(b, 8) != epoch || get64(b, 16) != pos {
        return None;
    }
    let next = get64(b, 24);
    let mut records = Vec::with_capacity(n);
    let mut released = Vec::new();
    for i in 0..n {
        let at = BATCH_FIXED + i * BATCH_ENTRY;
        let kind = RecKind::of(b[at + 20])?;
        let (lba, seq, crc) = (get64(b, at), get64(b, at + 8), get32(b, at + 16));
        if kind == RecKind::Release {
            // Names an earlier data block, and carries nothing else.
            if lba >= pos || seq != 0 || crc != 0 {
                return None;
            }
            released.push(lba);
            continue;
        }
        records.push((RecMeta { lba, seq, kind }, crc));
    }
    if next < pos + ((records.len() + 1) * BLOCK) as u64 {
        return None;
    }
    Some(Batch {
        pos,
        next,
        records,
        released,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(lba: u64, seq: u64) -> RecMeta {
        RecMeta {
            lba,
            seq,
            kind: RecKind::Data,
        }
    }

    #[test]
    fn superblock_round_trip_and_newest_copy() {
        let s = Super {
            kind: KIND_LOG,
            uuid: [7; 16],
            generation: 3,
            epoch: 9,
            capacity: 1 << 20,
            segment_bytes: 1 << 16,
            tail: 12288,
            members: vec![0, 2, 3],
        };
        let a = s.encode();
        assert_eq!(Super::decode(&a).unwrap(), s);
        let mut newer = s.clone();
        newer.generation = 4;
        newer.tail = 16384;
        let b = newer.encode();
        assert_eq!(newest_super(&a, &b).unwrap(), newer);
        let mut torn = b.clone();
        torn[100] ^= 1;
        assert_eq!(newest_super(&a, &torn).unwrap(), s);
        let e = newest_super(&[0; SUPER_BYTES], &torn).unwrap_err();
        assert!(e.contains("bad magic") && e.contains("checksum"), "{e}");
    }

    #[test]
    fn slot_headers_check_epoch_and_checksum() {
        let h = slot_header(meta(42, 7), 3, 0xdead_beef);
        assert_eq!(decode_slot_header(&h, 3), Some((meta(42, 7), 0xdead_beef)));
        assert_eq!(decode_slot_header(&h, 4), None);
        let mut bad = h;
        bad[20] ^= 0x80;
        assert_eq!(decode_slot_header(&bad, 3), None);
        assert_eq!(decode_slot_header(&[0; 64], 0), None);
    }

    #[test]
    fn batch_headers_check_position() {
        let recs = vec![(meta(1, 10), 5), (meta(9, 11), 6)];
        let mut b = vec![0u8; BLOCK];
        encode_batch(2, 8192, 8192 + 3 * 4096, &recs, &mut b);
        let got = decode_batch(&b, 2, 8192).unwrap();
        assert_eq!(got.records, recs);
        assert_eq!(got.next, 8192 + 3 * 4096);
        // A header from an earlier lap sits where a later position is expected.
        assert_eq!(decode_batch(&b, 2, 8192 + (1 << 20)), None);
        assert_eq!(decode_batch(&b, 1, 8192), None);
        assert_eq!(BATCH_RECORDS_MAX, 168);
    }

    #[test]
    fn release_entries_take_no_data_block() {
        let img = RecMeta {
            lba: 7,
            seq: 12,
            kind: RecKind::Image,
        };
        let entries = vec![release_entry(4096), (img, 9), release_entry(12288)];
        let mut b = vec![0u8; BLOCK];
        // One data block: `next` may follow it directly.
        encode_batch(1, 65536, 65536 + 2 * 4096, &entries, &mut b);
        let got = decode_batch(&b, 1, 65536).unwrap();
        assert_eq!(
            (got.records, got.released),
            (vec![(img, 9)], vec![4096, 12288])
        );
        // A release of a position at or past the batch's own is not one this log wrote.
        encode_batch(1, 65536, 65536 + 4096, &[release_entry(65536)], &mut b);
        assert_eq!(decode_batch(&b, 1, 65536), None);
        // Nor is one that carries a sequence number or a CRC.
        let (mut meta, _) = release_entry(4096);
        meta.seq = 1;
        encode_batch(1, 65536, 65536 + 4096, &[(meta, 0)], &mut b);
        assert_eq!(decode_batch(&b, 1, 65536), None);
        encode_batch(
            1,
            65536,
            65536 + 4096,
            &[(release_entry(4096).0, 5)],
            &mut b,
        );
        assert_eq!(decode_batch(&b, 1, 65536), None);
        // A mirror slot never holds a release.
        let rel = release_entry(4096).0;
        assert_eq!(decode_slot_header(&slot_header(rel, 1, 0), 1), None);
    }
}
