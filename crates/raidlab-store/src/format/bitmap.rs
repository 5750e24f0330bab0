//! The write-intent bitmap on disk: 4160 bytes at byte 8192 of every member (layout in the
//! module doc of `format`).
//!
//! It is written whole (header and bits in one write) and checksummed, so a write torn by a
//! crash reads back as corrupt; assembly then resyncs every region, which is always safe.

use raidlab::{Error, Result};

use super::superblock::{checksum, get32, get64};
use super::BITMAP_BYTES;
use crate::ctrl::sync::REGIONS_MAX;

pub const MAGIC: [u8; 8] = *b"RLBITMAP";
pub const VERSION: u32 = 1;
const HEADER: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bitmap {
    /// The superblocks' event counter when it was written.
    pub events: u64,
    pub rows_per_region: u64,
    /// One entry per region.
    pub dirty: Vec<bool>,
    /// The superblocks' event counter when a bit was last cleared (or the bitmap was
    /// created): every region written since then still has its bit set, because bits are
    /// never cleared while a slot is not in sync. `None` when not recorded (a bitmap of an
    /// older raidlab): then no device can be re-added on the bitmap's word.
    pub cleared_events: Option<u64>,
}

/// Where the cleared-events field sits: the event count plus one (0: not recorded).
const OFF_CLEARED: usize = 40;

/// The on-disk bytes of a fresh bitmap, its bits kept since event `events`.
pub fn encode_bitmap(events: u64, rows_per_region: u64, dirty: &[bool]) -> Vec<u8> {
    encode_bitmap_kept(events, rows_per_region, dirty, Some(events))
}

/// The on-disk bytes of a bitmap whose bits were last cleared at event `cleared_events`.
/// At most `REGIONS_MAX` regions fit; the caller keeps `dirty` within that (the store's sink
/// refuses longer ones before calling).
pub fn encode_bitmap_kept(
    events: u64,
    rows_per_region: u64,
    dirty: &[bool],
    cleared_events: Option<u64>,
) -> Vec<u8> {
    let mut b = vec![0u8; BITMAP_BYTES];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[16..24].copy_from_slice(&events.to_le_bytes());
    b[24..32].copy_from_slice(&rows_per_region.to_le_bytes());
    let regions = dirty.len().min(REGIONS_MAX as usize);
    b[32..36].copy_from_slice(&(regions as u32).to_le_bytes());
    let cleared = cleared_events.map_or(0, |e| e.saturating_add(1));
    b[OFF_CLEARED..OFF_CLEARED + 8].copy_from_slice(&cleared.to_le_bytes());
    for (g, _) in dirty.iter().take(regions).enumerate().filter(|(_, &d)| d) {
        b[HEADER + g / 8] |= 1 << (g % 8);
    }
    let crc = checksum(&b);
    b[12..16].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Read a bitmap; `path` names the member in errors. Any error means "unknown": the caller
/// must then treat every region as dirty.
pub fn decode_bitmap(bytes: &[u8], path: &str) -> Result<Bitmap> {
    let bad = |msg: String| Error::store(path, msg);
    if bytes.len() < BITMAP_BYTES {
        return Err(bad(format!(
            "write-intent bitmap truncated: {} bytes, expected {BITMAP_BYTES}",
            bytes.len()
        )));
    }
    let b = &bytes[..BITMAP_BYTES];
    if b[0..8] != MAGIC {
        return Err(bad(
            "no write-intent bitmap at byte 8192 (magic \"RLBITMAP\" missing)".into(),
        ));
    }
    let version = get32(b, 8);
    if version != VERSION {
        return Err(bad(format!(
            "write-intent bitmap format version {version}, expected {VERSION}"
        )));
    }
    let (stored, computed) = (get32(b, 12), checksum(b));
    if stored != computed {
        return Err(bad(format!(
            "write-intent bitmap checksum mismatch (corrupt or torn): stored {stored:#010x}, computed {computed:#010x}"
        )));
    }
    let events = get64(b, 16);
    let rows_per_region = get64(b, 24);
    let regions = u64::from(get32(b, 32));
    if rows_per_region == 0 || regions > REGIONS_MAX {
        return Err(bad(format!(
            "write-intent bitmap holds impossible values: {rows_per_region} rows per region, \
             {regions} regions (expected at least 1 row per region, at most {REGIONS_MAX} regions)"
        )));
    }
    let cleared_events = match get64(b, OFF_CLEARED) {
        0 => None,
        c if c - 1 <= events => Some(c - 1),
        c => {
            return Err(bad(format!(
                "write-intent bitmap holds impossible values: cleared at event {}, after its own event {events}",
                c - 1
            )))
        }
    };
    let dirty = (0..regions as usize)
        .map(|g| b[HEADER + g / 8] & (1 << (g % 8)) != 0)
        .collect();
    Ok(Bitmap {
        events,
        rows_per_region,
        dirty,
        cleared_events,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_and_offsets() {
        let mut dirty = vec![false; 20];
        dirty[0] = true;
        dirty[9] = true;
        dirty[19] = true;
        let b = encode_bitmap(42, 3, &dirty);
        assert_eq!(b.len(), 4160);
        assert_eq!(&b[0..8], b"RLBITMAP");
        assert_eq!(b[16], 42);
        assert_eq!(b[24], 3);
        assert_eq!(b[32..36], [20, 0, 0, 0]);
        assert_eq!(b[64..67], [0b0000_0001, 0b0000_0010, 0b0000_1000]);
        assert_eq!(
            b[40..48],
            [43, 0, 0, 0, 0, 0, 0, 0],
            "cleared at 42, plus one"
        );
        let m = decode_bitmap(&b, "x").unwrap();
        assert_eq!((m.events, m.rows_per_region, m.dirty), (42, 3, dirty));
        assert_eq!(m.cleared_events, Some(42));
        let k = encode_bitmap_kept(50, 3, &[true], Some(7));
        assert_eq!(decode_bitmap(&k, "x").unwrap().cleared_events, Some(7));
        let old = encode_bitmap_kept(50, 3, &[true], None);
        assert_eq!(old[40..48], [0; 8], "an older raidlab's bitmap: zero");
        assert_eq!(decode_bitmap(&old, "x").unwrap().cleared_events, None);
        let future = encode_bitmap_kept(50, 3, &[true], Some(51));
        assert!(decode_bitmap(&future, "x")
            .unwrap_err()
            .to_string()
            .contains("cleared at event 51"));
        let full = vec![true; REGIONS_MAX as usize];
        assert_eq!(
            decode_bitmap(&encode_bitmap(1, 1, &full), "x")
                .unwrap()
                .dirty,
            full
        );
    }

    #[test]
    fn torn_or_foreign_is_an_error() {
        let b = encode_bitmap(5, 1, &[true, false, true]);
        // A torn write: the second 4 KiB sector still holds the older bytes.
        let mut torn = b.clone();
        torn[4096..].fill(0xaa);
        let e = decode_bitmap(&torn, "d/disk0").unwrap_err().to_string();
        assert!(
            e.starts_with("d/disk0: write-intent bitmap checksum mismatch"),
            "{e}"
        );
        let e = decode_bitmap(&[0u8; 4160], "d/disk0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no write-intent bitmap"), "{e}");
        let e = decode_bitmap(&b[..100], "d/disk0").unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
        let mut v = b.clone();
        v[8] = 2;
        let e = decode_bitmap(&v, "d/disk0").unwrap_err().to_string();
        assert!(e.contains("version 2"), "{e}");
        let mut z = encode_bitmap(5, 0, &[]);
        z[32] = 0;
        assert!(decode_bitmap(&z, "d")
            .unwrap_err()
            .to_string()
            .contains("impossible"));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4300)) {
            let _ = decode_bitmap(&bytes, "p");
        }

        #[test]
        fn one_flipped_byte_is_an_error(at in 0usize..4160, x in 1u8..=255) {
            let mut b = encode_bitmap(9, 2, &[true; 100]);
            b[at] ^= x;
            prop_assert!(decode_bitmap(&b, "p").is_err());
        }
    }
}
