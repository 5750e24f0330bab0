//! Fuzz the seek-file reader: any input parses or yields an error naming the line, never
//! panics; a parsed table always compiles into a seek curve.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raidlab::disk::files::parse_seek;
use raidlab::disk::model::SeekSpec;

fuzz_target!(|data: &[u8]| {
    if let Ok(points) = parse_seek(data, "fuzz") {
        let seek = SeekSpec::Table(points)
            .compile(1000)
            .expect("a parsed table is valid");
        let _ = seek.ns(500);
    }
});
