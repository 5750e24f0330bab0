//! Fuzz the store's on-disk readers: any bytes must decode to a superblock, a bitmap or a
//! members manifest, or yield an error naming the file, never panic. The input is read as
//! all three; a decoded superblock must encode back to a block that decodes equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raidlab_store::format::{decode, decode_bitmap, parse_manifest};

fuzz_target!(|data: &[u8]| {
    if let Ok(sb) = decode(data, "fuzz") {
        let again = decode(&sb.encode(), "fuzz").expect("an encoded superblock decodes");
        assert_eq!(again, sb);
    }
    let _ = decode_bitmap(data, "fuzz");
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_manifest(text, std::path::Path::new("dir"), "fuzz");
    }
});
