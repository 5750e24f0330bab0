//! Fuzz the vscsi reader: any input must end cleanly or yield an error naming the input and
//! a record, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raidlab::workload::{from_bytes, Format};

fuzz_target!(|data: &[u8]| {
    if let Ok(mut source) = from_bytes(Format::Vscsi, "fuzz", data, None) {
        while let Ok(Some(_)) = source.next_request() {}
    }
});
