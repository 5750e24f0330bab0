//! Fuzz the log's NVRAM slot header decoder: any bytes decode to a header or a typed error,
//! never panic; a decoded header encodes back to a block that decodes equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raidlab_store::wb::log::decode_slot;
use raidlab_store::wb::log::slot::SlotHeader;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = decode_slot(data) {
        let again = SlotHeader::decode(&h.encode()).expect("an encoded header decodes");
        assert_eq!(again, h);
    }
});
