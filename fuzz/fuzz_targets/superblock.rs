//! Fuzz the store's on-disk readers: any bytes must decode to a superblock or bitmap, or
//! yield an error naming the member, never panic. The input is read both as a superblock
//! and as a bitmap; a decoded superblock must encode back to a block that decodes equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raidlab_store::format::{decode, decode_bitmap};

fuzz_target!(|data: &[u8]| {
    if let Ok(sb) = decode(data, "fuzz") {
        let again = decode(&sb.encode(), "fuzz").expect("an encoded superblock decodes");
        assert_eq!(again, sb);
    }
    let _ = decode_bitmap(data, "fuzz");
});
