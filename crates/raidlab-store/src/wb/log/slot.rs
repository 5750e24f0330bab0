//! The NVRAM slot header: the first 4 KiB block of each slot of the log's NVRAM file
//! (`nvram.rs`); the slot's segment image follows it.
//!
//! | bytes  | field                                                                  |
//! |--------|------------------------------------------------------------------------|
//! | 0..8   | magic `RLNVSLOT`                                                       |
//! | 8..12  | version (1)                                                            |
//! | 12..16 | state: 0 free (nothing to replay), 1 staged (replay onto the leg)      |
//! | 16..32 | array UUID                                                             |
//! | 32..40 | generation: slot assignments are numbered; replay goes oldest first    |
//! | 40..44 | leg index (the order of the legs in `wb.json`)                         |
//! | 44..48 | zero                                                                   |
//! | 48..56 | byte offset of the segment on its leg                                  |
//! | 56..64 | the segment's virtual log position                                     |
//! | 64..72 | segment bytes (the image's length)                                     |
//! | 72..76 | CRC-32C of bytes 0..72                                                 |
//!
//! The rest of the block is zero. The header carries no CRC of the image: the log's batch
//! headers and records carry their own, and the image grows one group commit at a time.

use std::fmt;

pub const SLOT_MAGIC: [u8; 8] = *b"RLNVSLOT";
pub const SLOT_VERSION: u32 = 1;
/// Bytes of the header block before each slot's image.
pub const SLOT_HEADER_BLOCK: u64 = 4096;
const CRC_AT: usize = 72;
const ENCODED: usize = 76;
/// Largest image a slot holds (the log's largest segment, `--segment`).
pub const SLOT_IMAGE_MAX: u64 = 16 << 20;

/// What a slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// Nothing: its image reached its leg (or it was never used).
    Free,
    /// A segment image that may hold acknowledged batches not yet on the leg.
    Staged,
}

/// A decoded slot header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotHeader {
    pub state: SlotState,
    pub uuid: [u8; 16],
    pub generation: u64,
    pub leg: u32,
    pub leg_offset: u64,
    pub pos: u64,
    pub len: u64,
}

/// Why a block is not a slot header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotError {
    /// Fewer bytes than a header.
    Short(usize),
    /// All zero: a slot never written.
    Blank,
    BadMagic,
    BadVersion(u32),
    BadCrc {
        stored: u32,
        computed: u32,
    },
    BadState(u32),
    /// An image length that is zero, not whole blocks, or larger than `SLOT_IMAGE_MAX`.
    BadLength(u64),
}

impl fmt::Display for SlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlotError::Short(n) => write!(f, "{n} bytes is shorter than a slot header"),
            SlotError::Blank => write!(f, "blank slot"),
            SlotError::BadMagic => write!(f, "not an NVRAM slot header (magic)"),
            SlotError::BadVersion(v) => {
                write!(
                    f,
                    "NVRAM slot version {v} (this build reads {SLOT_VERSION})"
                )
            }
            SlotError::BadCrc { stored, computed } => write!(
                f,
                "NVRAM slot header CRC {stored:#010x}, computed {computed:#010x}"
            ),
            SlotError::BadState(s) => write!(f, "NVRAM slot state {s} is unknown"),
            SlotError::BadLength(n) => write!(f, "NVRAM slot image of {n} bytes"),
        }
    }
}

impl std::error::Error for SlotError {}

fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl SlotHeader {
    /// The header block (`SLOT_HEADER_BLOCK` bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; SLOT_HEADER_BLOCK as usize];
        b[0..8].copy_from_slice(&SLOT_MAGIC);
        b[8..12].copy_from_slice(&SLOT_VERSION.to_le_bytes());
        let state: u32 = match self.state {
            SlotState::Free => 0,
            SlotState::Staged => 1,
        };
        b[12..16].copy_from_slice(&state.to_le_bytes());
        b[16..32].copy_from_slice(&self.uuid);
        b[32..40].copy_from_slice(&self.generation.to_le_bytes());
        b[40..44].copy_from_slice(&self.leg.to_le_bytes());
        b[48..56].copy_from_slice(&self.leg_offset.to_le_bytes());
        b[56..64].copy_from_slice(&self.pos.to_le_bytes());
        b[64..72].copy_from_slice(&self.len.to_le_bytes());
        let crc = crc32c::crc32c(&b[..CRC_AT]);
        b[CRC_AT..ENCODED].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode the first bytes of a slot: any input gives a header or a typed error.
    pub fn decode(b: &[u8]) -> Result<SlotHeader, SlotError> {
        if b.len() < ENCODED {
            return Err(SlotError::Short(b.len()));
        }
        let b = &b[..ENCODED];
        if b.iter().all(|&x| x == 0) {
            return Err(SlotError::Blank);
        }
        if b[0..8] != SLOT_MAGIC {
            return Err(SlotError::BadMagic);
        }
        let version = get32(b, 8);
        if version != SLOT_VERSION {
            return Err(SlotError::BadVersion(version));
        }
        let stored = get32(b, CRC_AT);
        let computed = crc32c::crc32c(&b[..CRC_AT]);
        if stored != computed {
            return Err(SlotError::BadCrc { stored, computed });
        }
        let state = match get32(b, 12) {
            0 => SlotState::Free,
            1 => SlotState::Staged,
            s => return Err(SlotError::BadState(s)),
        };
        let len = get64(b, 64);
        if state == SlotState::Staged
            && (len == 0 || len > SLOT_IMAGE_MAX || !len.is_multiple_of(SLOT_HEADER_BLOCK))
        {
            return Err(SlotError::BadLength(len));
        }
        Ok(SlotHeader {
            state,
            uuid: b[16..32].try_into().expect("16 bytes"),
            generation: get64(b, 32),
            leg: get32(b, 40),
            leg_offset: get64(b, 48),
            pos: get64(b, 56),
            len,
        })
    }
}

/// Decode a slot header (the fuzz target's entry).
pub fn decode_slot(b: &[u8]) -> Result<SlotHeader, SlotError> {
    SlotHeader::decode(b)
}
