//! Fuzz the generic CSV reader: the first bytes choose its parameters (columns, header,
//! delimiter, numeric or hashed ids), the rest is the file; any input must end cleanly or
//! yield an error naming the input and a line, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raidlab::workload::csvtrace::CsvSpec;
use raidlab::workload::{from_bytes, Format};

fuzz_target!(|data: &[u8]| {
    let Some((params, body)) = data.split_first_chunk::<6>() else {
        return;
    };
    let [time, id, size, op, flags, delimiter] = *params;
    let spec = CsvSpec {
        time_col: u32::from(time % 8),
        obj_id_col: u32::from(id % 8),
        obj_size_col: u32::from(size % 8),
        op_col: u32::from(op % 8),
        has_header: flags & 1 != 0,
        delimiter,
        obj_id_is_num: flags & 2 != 0,
    };
    if spec.validate().is_err() {
        return;
    }
    if let Ok(mut source) = from_bytes(Format::Csv(spec), "fuzz", body, None) {
        while let Ok(Some(_)) = source.next_request() {}
    }
});
