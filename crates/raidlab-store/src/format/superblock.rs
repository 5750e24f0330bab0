//! The superblock: one 4 KiB block at byte 4096 of every member (layout in the module doc
//! of `format`). Every byte read from a disk is untrusted: `decode` checks each field and
//! never panics.

use raidlab::array::{Geometry, Layout, Level};
use raidlab::{Error, Result};

use super::{
    BITMAP_OFFSET, CHUNK_MAX, CHUNK_MIN, DATA_OFFSET_MIN, DISKS_MAX, MEMBER_DATA_MAX,
    SUPERBLOCK_BYTES,
};
use crate::ctrl::{Shape, SlotState};

pub const MAGIC: [u8; 8] = *b"RAIDLAB1";
/// The newest format version this code reads and the one it writes.
pub const VERSION: u32 = 1;
/// Bytes of the array name field.
pub const NAME_BYTES: usize = 32;

const ROLE_SPARE: u32 = 0xFFFF_FFFF;
const ROLE_FAULTY: u32 = 0xFFFF_FFFE;
const FLAG_CLEAN: u32 = 1;
/// The array lost more members than its level survives; `serve --force` is needed to start.
const FLAG_FAILED: u32 = 2;
/// The slot a faulty device was taken out of, plus one (0: not recorded).
const OFF_FORMER_SLOT: usize = 140;
/// A faulty device's last event in sync in its slot, plus one (0: not in sync when it left).
const OFF_LEFT_IN_SYNC: usize = 144;
const OFF_CRC: usize = 12;
const OFF_STATES: usize = 256;
const OFF_CHECKPOINTS: usize = 512;

/// What one device is to the array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevRole {
    /// It holds this slot (in sync, failed or recovering per the slot table).
    Slot(u32),
    Spare,
    /// It failed and was taken out of its slot.
    Faulty,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    pub array_uuid: [u8; 16],
    pub device_uuid: [u8; 16],
    /// At most 32 bytes of UTF-8, no NUL.
    pub name: String,
    pub level: Level,
    pub layout: Layout,
    pub disks: u32,
    pub role: DevRole,
    pub chunk_bytes: u64,
    pub data_offset_bytes: u64,
    pub member_data_bytes: u64,
    pub events: u64,
    pub clean: bool,
    /// The array had failed (more members lost than the level survives) at this event.
    pub failed: bool,
    /// For a faulty device: the slot it was taken out of, when recorded.
    pub former_slot: Option<u32>,
    /// For a faulty device: the last event at which it was the in-sync member of its slot
    /// (its data holds every write up to its failure). `None` when it was not in sync when
    /// it left (a replacement being rebuilt, a spare) or when this was not recorded.
    pub left_in_sync: Option<u64>,
    /// One entry per slot (`disks` of them).
    pub slots: Vec<SlotState>,
}

impl Superblock {
    pub fn shape(&self) -> Shape {
        Shape {
            level: self.level,
            layout: self.layout,
            disks: self.disks,
            chunk_bytes: self.chunk_bytes,
            data_offset_bytes: self.data_offset_bytes,
            member_data_bytes: self.member_data_bytes,
        }
    }

    /// The block as written to disk. Fields past the tables' capacity (more than 256 slots,
    /// a name over 32 bytes) are cut; `create` never builds such a superblock.
    pub fn encode(&self) -> [u8; SUPERBLOCK_BYTES] {
        let mut b = [0u8; SUPERBLOCK_BYTES];
        b[0..8].copy_from_slice(&MAGIC);
        put32(&mut b, 8, VERSION);
        b[16..32].copy_from_slice(&self.array_uuid);
        b[32..48].copy_from_slice(&self.device_uuid);
        let name = self.name.as_bytes();
        let n = name.len().min(NAME_BYTES);
        b[48..48 + n].copy_from_slice(&name[..n]);
        put32(&mut b, 80, level_code(self.level));
        put32(&mut b, 84, layout_code(self.layout));
        put32(&mut b, 88, self.disks);
        let role = match self.role {
            DevRole::Slot(s) => s,
            DevRole::Spare => ROLE_SPARE,
            DevRole::Faulty => ROLE_FAULTY,
        };
        put32(&mut b, 92, role);
        put64(&mut b, 96, self.chunk_bytes);
        put64(&mut b, 104, self.data_offset_bytes);
        put64(&mut b, 112, self.member_data_bytes);
        put64(&mut b, 120, BITMAP_OFFSET);
        put64(&mut b, 128, self.events);
        let flags =
            if self.clean { FLAG_CLEAN } else { 0 } | if self.failed { FLAG_FAILED } else { 0 };
        put32(&mut b, 136, flags);
        put32(
            &mut b,
            OFF_FORMER_SLOT,
            self.former_slot.map_or(0, |s| s.saturating_add(1)),
        );
        put64(
            &mut b,
            OFF_LEFT_IN_SYNC,
            self.left_in_sync.map_or(0, |e| e.saturating_add(1)),
        );
        for (i, st) in self.slots.iter().take(DISKS_MAX as usize).enumerate() {
            let (code, cp) = match *st {
                SlotState::InSync => (0, 0),
                SlotState::Failed => (1, 0),
                SlotState::Recovering { checkpoint } => (2, checkpoint),
            };
            b[OFF_STATES + i] = code;
            put64(&mut b, OFF_CHECKPOINTS + 8 * i, cp);
        }
        let crc = checksum(&b);
        put32(&mut b, OFF_CRC, crc);
        b
    }
}

/// CRC-32C of a block with its checksum field (bytes 12..16) taken as zero.
pub(crate) fn checksum(b: &[u8]) -> u32 {
    let c = crc32c::crc32c(&b[..OFF_CRC]);
    let c = crc32c::crc32c_append(c, &[0; 4]);
    crc32c::crc32c_append(c, &b[OFF_CRC + 4..])
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// Little-endian reads; callers index only inside a block whose length they checked.
pub(crate) fn get32(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}

pub(crate) fn get64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

fn level_code(l: Level) -> u32 {
    match l {
        Level::Raid0 => 0,
        Level::Raid1 => 1,
        Level::Raid10 => 10,
        Level::Raid5 => 5,
        Level::Raid6 => 6,
    }
}

fn level_of(code: u32) -> Option<Level> {
    Some(match code {
        0 => Level::Raid0,
        1 => Level::Raid1,
        10 => Level::Raid10,
        5 => Level::Raid5,
        6 => Level::Raid6,
        _ => return None,
    })
}

fn layout_code(l: Layout) -> u32 {
    match l {
        Layout::LeftAsymmetric => 0,
        Layout::RightAsymmetric => 1,
        Layout::LeftSymmetric => 2,
        Layout::RightSymmetric => 3,
    }
}

fn layout_of(code: u32) -> Option<Layout> {
    Some(match code {
        0 => Layout::LeftAsymmetric,
        1 => Layout::RightAsymmetric,
        2 => Layout::LeftSymmetric,
        3 => Layout::RightSymmetric,
        _ => return None,
    })
}

/// Check the shape fields every reader and `create` rely on; `Err` holds what is wrong.
pub(crate) fn check_shape(
    level: Level,
    layout: Layout,
    disks: u32,
    chunk_bytes: u64,
    data_offset_bytes: u64,
    member_data_bytes: u64,
) -> std::result::Result<(), String> {
    if disks > DISKS_MAX {
        return Err(format!("{disks} disks, expected at most {DISKS_MAX}"));
    }
    if !chunk_bytes.is_power_of_two() || !(CHUNK_MIN..=CHUNK_MAX).contains(&chunk_bytes) {
        return Err(format!(
            "chunk of {chunk_bytes} bytes, expected a power of two from {CHUNK_MIN} to {CHUNK_MAX}"
        ));
    }
    // The core's checks of level and disk count (raid10 even, raid5 at least 3, ...).
    Geometry::new(level, layout, disks, chunk_bytes, CHUNK_MIN as u32).map_err(|e| match e {
        Error::Config { msg, .. } => msg,
        other => other.to_string(),
    })?;
    if data_offset_bytes < DATA_OFFSET_MIN || !data_offset_bytes.is_multiple_of(4096) {
        return Err(format!(
            "data offset {data_offset_bytes}, expected a multiple of 4096 of at least {DATA_OFFSET_MIN}"
        ));
    }
    if member_data_bytes == 0
        || !member_data_bytes.is_multiple_of(chunk_bytes)
        || member_data_bytes > MEMBER_DATA_MAX
    {
        return Err(format!(
            "member data size {member_data_bytes}, expected a positive whole number of \
             {chunk_bytes}-byte chunks, at most {MEMBER_DATA_MAX}"
        ));
    }
    Ok(())
}

/// Read a superblock from `bytes` (its first 4096 bytes); `path` names the member in errors.
pub fn decode(bytes: &[u8], path: &str) -> Result<Superblock> {
    let bad = |msg: String| Error::store(path, msg);
    if bytes.len() < SUPERBLOCK_BYTES {
        return Err(bad(format!(
            "superblock truncated: {} bytes, expected {SUPERBLOCK_BYTES}",
            bytes.len()
        )));
    }
    let b = &bytes[..SUPERBLOCK_BYTES];
    if b[0..8] != MAGIC {
        return Err(bad(format!(
            "not a raidlab member (no superblock magic {:?} at byte 4096)",
            String::from_utf8_lossy(&MAGIC)
        )));
    }
    // The version comes before the checksum: a newer format may checksum differently.
    let version = get32(b, 8);
    if version > VERSION {
        return Err(bad(format!(
            "superblock format version {version} is newer than this raidlab reads (up to {VERSION}); use a newer raidlab"
        )));
    }
    if version == 0 {
        return Err(bad("superblock format version 0, expected 1".into()));
    }
    let stored = get32(b, OFF_CRC);
    let computed = checksum(b);
    if stored != computed {
        return Err(bad(format!(
            "superblock checksum mismatch (corrupt): stored {stored:#010x}, computed {computed:#010x}"
        )));
    }
    let impossible = |what: String| bad(format!("superblock holds an impossible value: {what}"));
    let mut array_uuid = [0u8; 16];
    array_uuid.copy_from_slice(&b[16..32]);
    let mut device_uuid = [0u8; 16];
    device_uuid.copy_from_slice(&b[32..48]);
    let raw_name = &b[48..48 + NAME_BYTES];
    let name_len = raw_name.iter().position(|&c| c == 0).unwrap_or(NAME_BYTES);
    if raw_name[name_len..].iter().any(|&c| c != 0) {
        return Err(impossible(
            "array name has bytes after its NUL padding".into(),
        ));
    }
    let name = std::str::from_utf8(&raw_name[..name_len])
        .map_err(|_| impossible("array name is not UTF-8".into()))?
        .to_string();
    let level = level_of(get32(b, 80)).ok_or_else(|| {
        impossible(format!(
            "level code {}, expected 0, 1, 10, 5 or 6",
            get32(b, 80)
        ))
    })?;
    let layout = layout_of(get32(b, 84))
        .ok_or_else(|| impossible(format!("layout code {}, expected 0 to 3", get32(b, 84))))?;
    let disks = get32(b, 88);
    let chunk_bytes = get64(b, 96);
    let data_offset_bytes = get64(b, 104);
    let member_data_bytes = get64(b, 112);
    check_shape(
        level,
        layout,
        disks,
        chunk_bytes,
        data_offset_bytes,
        member_data_bytes,
    )
    .map_err(impossible)?;
    let bitmap_offset = get64(b, 120);
    if bitmap_offset != BITMAP_OFFSET {
        return Err(impossible(format!(
            "bitmap offset {bitmap_offset}, expected {BITMAP_OFFSET}"
        )));
    }
    let role = match get32(b, 92) {
        ROLE_SPARE => DevRole::Spare,
        ROLE_FAULTY => DevRole::Faulty,
        s if s < disks => DevRole::Slot(s),
        s => {
            return Err(impossible(format!(
                "role (slot) {s}, expected a slot below {disks}, spare or faulty"
            )))
        }
    };
    let events = get64(b, 128);
    let flags = get32(b, 136);
    if flags & !(FLAG_CLEAN | FLAG_FAILED) != 0 {
        return Err(impossible(format!("unknown flags {flags:#x}")));
    }
    let former_slot = match get32(b, OFF_FORMER_SLOT) {
        0 => None,
        s if s <= disks => Some(s - 1),
        s => {
            return Err(impossible(format!(
                "former slot {}, expected a slot below {disks}",
                s - 1
            )))
        }
    };
    let left_in_sync = match get64(b, OFF_LEFT_IN_SYNC) {
        0 => None,
        e if e - 1 <= events => Some(e - 1),
        e => {
            return Err(impossible(format!(
                "left its slot in sync at event {}, after its own event {events}",
                e - 1
            )))
        }
    };
    let rows = member_data_bytes / chunk_bytes;
    let mut slots = Vec::with_capacity(disks as usize);
    for i in 0..disks as usize {
        let cp = get64(b, OFF_CHECKPOINTS + 8 * i);
        slots.push(match b[OFF_STATES + i] {
            0 => SlotState::InSync,
            1 => SlotState::Failed,
            2 if cp <= rows => SlotState::Recovering { checkpoint: cp },
            2 => {
                return Err(impossible(format!(
                    "slot {i} rebuild checkpoint {cp}, expected at most {rows} rows"
                )))
            }
            c => {
                return Err(impossible(format!(
                    "slot {i} state {c}, expected 0 (in sync), 1 (failed) or 2 (recovering)"
                )))
            }
        });
    }
    Ok(Superblock {
        array_uuid,
        device_uuid,
        name,
        level,
        layout,
        disks,
        role,
        chunk_bytes,
        data_offset_bytes,
        member_data_bytes,
        events,
        clean: flags & FLAG_CLEAN != 0,
        failed: flags & FLAG_FAILED != 0,
        former_slot,
        left_in_sync,
        slots,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Superblock {
        Superblock {
            array_uuid: [0x11; 16],
            device_uuid: [0x22; 16],
            name: "tank".into(),
            level: Level::Raid5,
            layout: Layout::LeftSymmetric,
            disks: 4,
            role: DevRole::Slot(2),
            chunk_bytes: 65536,
            data_offset_bytes: 1 << 20,
            member_data_bytes: 64 * 65536,
            events: 0x0102_0304_0506_0708,
            clean: true,
            failed: false,
            former_slot: None,
            left_in_sync: None,
            slots: vec![
                SlotState::InSync,
                SlotState::Failed,
                SlotState::Recovering { checkpoint: 7 },
                SlotState::InSync,
            ],
        }
    }

    fn err(b: &[u8]) -> String {
        decode(b, "d/disk1").unwrap_err().to_string()
    }

    #[test]
    fn round_trip() {
        let sb = sample();
        assert_eq!(decode(&sb.encode(), "x").unwrap(), sb);
        for role in [DevRole::Spare, DevRole::Faulty, DevRole::Slot(0)] {
            let s = Superblock {
                role,
                clean: false,
                failed: role == DevRole::Slot(0),
                former_slot: (role == DevRole::Faulty).then_some(3),
                left_in_sync: (role == DevRole::Faulty).then_some(0x0102),
                ..sample()
            };
            assert_eq!(decode(&s.encode(), "x").unwrap(), s);
        }
        let s = Superblock {
            level: Level::Raid10,
            name: "x".repeat(32),
            slots: vec![SlotState::InSync; 4],
            ..sample()
        };
        assert_eq!(decode(&s.encode(), "x").unwrap(), s);
    }

    /// A worked example of the byte layout (the table in the module doc).
    #[test]
    fn field_offsets() {
        let b = sample().encode();
        assert_eq!(&b[0..8], b"RAIDLAB1");
        assert_eq!(b[8..12], [1, 0, 0, 0]);
        assert_eq!(b[16..32], [0x11; 16]);
        assert_eq!(b[32..48], [0x22; 16]);
        assert_eq!(&b[48..53], b"tank\0");
        assert_eq!(b[80..84], [5, 0, 0, 0]); // raid5
        assert_eq!(b[84..88], [2, 0, 0, 0]); // left-symmetric, md's code 2
        assert_eq!(b[88..92], [4, 0, 0, 0]);
        assert_eq!(b[92..96], [2, 0, 0, 0]); // slot 2
        assert_eq!(b[96..104], [0, 0, 1, 0, 0, 0, 0, 0]); // 65536
        assert_eq!(b[104..112], [0, 0, 0x10, 0, 0, 0, 0, 0]); // 1 MiB
        assert_eq!(b[120..128], [0, 0x20, 0, 0, 0, 0, 0, 0]); // 8192
        assert_eq!(b[128..136], [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(b[136..140], [1, 0, 0, 0]); // clean
        assert_eq!(b[144..152], [0; 8]); // not a faulty device
        assert_eq!(b[256..261], [0, 1, 2, 0, 0]);
        assert_eq!(b[512 + 16..512 + 24], [7, 0, 0, 0, 0, 0, 0, 0]);
        let crc = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        let mut z = b;
        z[12..16].fill(0);
        assert_eq!(crc, crc32c::crc32c(&z));
        let role = Superblock {
            role: DevRole::Spare,
            ..sample()
        }
        .encode();
        assert_eq!(role[92..96], [0xff; 4]);
    }

    #[test]
    fn rejects_with_a_reason() {
        let good = sample().encode();
        let mut b = good;
        b[200] ^= 1;
        let e = err(&b);
        assert!(
            e.starts_with("d/disk1: superblock checksum mismatch (corrupt)"),
            "{e}"
        );

        let mut b = good;
        b[0] = b'X';
        assert!(err(&b).contains("not a raidlab member"), "{}", err(&b));
        assert!(err(&[0u8; 4096]).contains("not a raidlab member"));

        let mut b = good;
        put32(&mut b, 8, 2);
        let e = err(&b);
        assert!(e.contains("version 2 is newer"), "{e}");

        let e = err(&good[..4000]);
        assert!(e.contains("truncated: 4000 bytes, expected 4096"), "{e}");
    }

    /// Re-checksummed blocks with impossible fields.
    #[test]
    fn rejects_impossible_values() {
        type Patch = fn(&mut [u8]);
        let cases: Vec<(Patch, &str)> = vec![
            (|b| put32(b, 80, 4), "level code 4"),
            (|b| put32(b, 84, 9), "layout code 9"),
            (|b| put32(b, 88, 2), "raid5 needs at least 3"),
            (|b| put32(b, 88, 300), "300 disks"),
            (|b| put64(b, 96, 6144), "chunk of 6144"),
            (|b| put64(b, 96, 2048), "chunk of 2048"),
            (|b| put64(b, 104, 8192), "data offset 8192"),
            (|b| put64(b, 104, (1 << 20) + 512), "data offset"),
            (|b| put64(b, 112, 65536 * 3 + 1), "member data size"),
            (|b| put64(b, 112, 0), "member data size"),
            (|b| put32(b, 92, 4), "role (slot) 4"),
            (|b| put32(b, 136, 6), "unknown flags"),
            (|b| put32(b, OFF_FORMER_SLOT, 5), "former slot 4"),
            (
                |b| put64(b, OFF_LEFT_IN_SYNC, u64::MAX),
                "left its slot in sync",
            ),
            (|b| b[OFF_STATES + 1] = 9, "slot 1 state 9"),
            (|b| put64(b, OFF_CHECKPOINTS + 16, 65), "checkpoint 65"),
            (|b| b[60] = b'z', "after its NUL"),
            (|b| b[48] = 0xff, "not UTF-8"),
            (|b| put64(b, 120, 0), "bitmap offset 0"),
        ];
        for (patch, want) in cases {
            let mut b = sample().encode();
            patch(&mut b);
            let crc = checksum(&b);
            put32(&mut b, OFF_CRC, crc);
            let e = err(&b);
            assert!(
                e.starts_with("d/disk1: superblock holds an impossible value"),
                "{e}"
            );
            assert!(e.contains(want), "{e} should contain {want}");
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4200)) {
            let _ = decode(&bytes, "p");
        }

        #[test]
        fn one_flipped_byte_is_an_error(at in 0usize..4096, x in 1u8..=255) {
            let mut b = sample().encode();
            b[at] ^= x;
            prop_assert!(decode(&b, "p").is_err());
        }

        #[test]
        fn magic_and_checksum_ok_never_panics(
            body in proptest::collection::vec(any::<u8>(), 4096 - 16..=4096 - 16)
        ) {
            // Past the checksum, so the field checks themselves are exercised.
            let mut b = [0u8; 4096];
            b[0..8].copy_from_slice(&MAGIC);
            put32(&mut b, 8, 1);
            b[16..].copy_from_slice(&body);
            let crc = checksum(&b);
            put32(&mut b, OFF_CRC, crc);
            let _ = decode(&b, "p");
        }
    }
}
