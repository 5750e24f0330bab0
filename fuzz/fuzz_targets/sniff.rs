//! Fuzz format sniffing (with and without a telling file name) and the reader it picks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raidlab::workload::{from_bytes, sniff::sniff, Format};

fuzz_target!(|data: &[u8]| {
    for name in ["fuzz", "fuzz.mqsim.txt", "fuzz.disksim", "fuzz.u32le"] {
        let _ = sniff(name, data, true);
        let _ = sniff(name, data, false);
        if let Ok(mut source) = from_bytes(Format::Auto, name, data, None) {
            while let Ok(Some(_)) = source.next_request() {}
        }
    }
});
