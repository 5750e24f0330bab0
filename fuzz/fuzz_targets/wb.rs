//! Fuzz the write cache's on-disk readers: any bytes must decode to a backup superblock,
//! a mirror slot header, a log batch header, a destage plan, a partial-parity side file or
//! a `wb.json` record, or be rejected, never panic. A decoded plan must encode back to
//! the same plan. A decoded superblock or log batch header must encode back to a block
//! that decodes equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raidlab_store::wb::format::{
    decode_batch, decode_slot_header, encode_batch, release_entry, Super, BLOCK,
};
use raidlab_store::wb::ppl::{decode_side, Plan};
use raidlab_store::wb::setup::parse_record;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = Super::decode(data) {
        let again = Super::decode(&s.encode()).expect("an encoded superblock decodes");
        assert_eq!(again, s);
    }
    let epoch = data.get(..8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
    let _ = decode_slot_header(data, epoch);
    if let Some(b) = decode_batch(data, epoch, 8192) {
        let mut entries = b.records.clone();
        entries.extend(b.released.iter().map(|&p| release_entry(p)));
        let mut again = vec![0u8; BLOCK];
        encode_batch(epoch, 8192, b.next, &entries, &mut again);
        assert_eq!(decode_batch(&again, epoch, 8192), Some(b));
    }
    let row_pages = data.get(8..10).map_or(12, |b| u64::from(u16::from_le_bytes([b[0], b[1]])));
    if let Some(p) = Plan::decode(data, row_pages) {
        assert_eq!(Plan::decode(&p.encode(), row_pages), Some(p));
    }
    let _ = decode_side(data, epoch);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_record(text, "wb.json");
    }
});
