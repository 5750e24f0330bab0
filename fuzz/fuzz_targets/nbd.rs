//! Fuzz the NBD server's protocol code with a client's byte stream: the handshake and the
//! request checks must end cleanly (a reply, an error or a close), never panic, never hold
//! more option data than the bound, and never pass a request the backend must not see.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use raidlab_store::nbd::proto::{
    decide, discard, parse_request, read_full, serve_handshake, Command, Decision, ExportInfo,
    Handshake, MAX_OPTION_LEN, REQUEST_LEN,
};
use raidlab_store::nbd::BlockSize;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the export's properties, so read-only and odd sizes are covered.
    let Some((&knobs, stream)) = data.split_first() else {
        return;
    };
    let export = ExportInfo {
        name: "fuzz".to_string(),
        description: "fuzzed export".to_string(),
        size: (1 << 20) + u64::from(knobs & 0x0f) * 4096,
        flags: ExportInfo::flags_for(knobs & 0x10 != 0, knobs & 0x20 != 0),
        block: BlockSize {
            minimum: 1 << ((knobs >> 6) * 4),
            preferred: 4096,
            maximum: 65536,
        },
    };
    let mut r = Cursor::new(stream);
    let mut w = Vec::new();
    let (mut scratch, mut out) = (Vec::new(), Vec::new());
    let shook = serve_handshake(&mut r, &mut w, &export, &mut scratch, &mut out);
    assert!(scratch.capacity() <= 2 * MAX_OPTION_LEN as usize);
    if !matches!(shook, Ok(Handshake::Transmit)) {
        return;
    }
    let mut head = [0u8; REQUEST_LEN];
    // The input is finite; the bound only keeps a pathological case short.
    for _ in 0..100_000 {
        if !matches!(read_full(&mut r, &mut head), Ok(true)) {
            break;
        }
        let Some(req) = parse_request(&head) else {
            break;
        };
        match decide(&req, &export) {
            Decision::Run(cmd) => {
                if cmd != Command::Flush {
                    let end = req.offset.checked_add(u64::from(req.len));
                    assert!(end.is_some_and(|e| e <= export.size) && req.len > 0);
                    assert_eq!(req.offset % u64::from(export.block.minimum), 0);
                    assert_eq!(req.len % export.block.minimum, 0);
                }
                if matches!(cmd, Command::Read | Command::Write { .. }) {
                    assert!(req.len <= export.block.maximum);
                }
                if cmd != Command::Read && cmd != Command::Flush {
                    assert!(export.flags & 2 == 0, "write to a read-only export");
                }
            }
            Decision::Disconnect => break,
            Decision::Done | Decision::Reject(_) => {}
        }
        if discard(&mut r, u64::from(req.payload_len())).is_err() {
            break;
        }
    }
});
