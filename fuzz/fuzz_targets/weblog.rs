//! Fuzz the Common Log Format reader (the web-log workload): any input must end cleanly or
//! yield an error naming the input, never panic, in both malformed-line modes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raidlab::workload::files::weblog::{parse_line, WebLog};
use raidlab::workload::files::{FileSource, OnMalformed};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        for line in text.lines() {
            let _ = parse_line(line);
        }
    }
    for mode in [OnMalformed::Skip, OnMalformed::Fail] {
        if let Ok(mut log) = WebLog::from_bytes("fuzz", data, mode, 1.0, 4096, true) {
            let sizes = log.file_blocks().to_vec();
            while let Ok(Some(op)) = log.next_op() {
                assert!((op.file as usize) < sizes.len());
                assert!(op.blocks >= 1 && op.blocks <= sizes[op.file as usize]);
            }
        }
    }
});
