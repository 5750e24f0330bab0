//! CloudPhysics vSCSI trace as CSV, as libCacheSim ships it: header `version,time,op,size,lbn`,
//! then `version` (integer), `time` in whole seconds, `op` the SCSI opcode in hex, `size` in
//! bytes and `lbn` in 512-byte sectors. One device.
//!
//! Opcodes: the READ family (`08` READ(6), `28` READ(10), `a8` READ(12), `88` READ(16)) are
//! reads and the WRITE family (`0a`, `2a`, `aa`, `8a`) writes. Any other well-formed opcode is
//! a command that moves no user data (TEST UNIT READY, INQUIRY, SYNCHRONIZE CACHE, ...), so
//! the line is skipped rather than rejected; a field that is not hex is an error.

use super::parse::{dec, expect_fields, field, sectors, split_sep, u64_hex};
use super::text::{LineFormat, Rec};
use super::Op;

/// The CloudPhysics CSV line format.
#[derive(Debug, Clone, Copy, Default)]
pub struct CloudPhysics;

/// Direction of a SCSI opcode, `None` for commands without user data (also the vscsi
/// reader's).
pub(super) fn scsi_op(code: u64) -> Option<Op> {
    match code {
        0x08 | 0x28 | 0xa8 | 0x88 => Some(Op::Read),
        0x0a | 0x2a | 0xaa | 0x8a => Some(Op::Write),
        _ => None,
    }
}

impl LineFormat for CloudPhysics {
    const TICK_NS: u64 = 1_000_000_000;
    const MULTI_DEVICE: bool = false;

    fn parse(&self, line_no: u64, line: &[u8]) -> Result<Option<Rec>, String> {
        if super::parse::is_blank(line) || (line_no == 1 && line.starts_with(b"version")) {
            return Ok(None);
        }
        let mut f = [&b""[..]; 5];
        expect_fields(split_sep(line, b',', &mut f), 5, false)?;
        let [version, time, opcode, size, lbn] = f;
        dec(version, "version")?;
        let code = field(opcode, "op", "a hex SCSI opcode", u64_hex)?;
        let time = dec(time, "time")?;
        let len_bytes = dec(size, "size")?;
        let offset_bytes = sectors(lbn, "lbn")?;
        Ok(scsi_op(code).map(|op| Rec {
            time,
            dev: 0,
            op,
            offset_bytes,
            len_bytes,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::text::{drain, error_of, rq};

    #[test]
    fn worked_example() {
        let sample = b"version,time,op,size,lbn\n1,5633898,2a,512,42932745\n\
1,5633898,00,0,0\n1,5633900,28,4096,8\n";
        assert_eq!(
            drain(sample, CloudPhysics, None).unwrap(),
            vec![
                rq(0, Op::Write, 42932745 * 512, 512),
                rq(2_000_000_000, Op::Read, 4096, 4096),
            ]
        );
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            error_of(b"version,time,op,size,lbn\n1,1,zz,512,0\n", CloudPhysics),
            "t: line 2: op: expected a hex SCSI opcode, found `zz`"
        );
        assert_eq!(
            error_of(b"version,time,op,size,lbn\n1,1,28,512\n", CloudPhysics),
            "t: line 2: expected 5 fields, found 4"
        );
        // A header anywhere but the first line is a malformed record.
        assert_eq!(
            error_of(b"1,1,28,512,0\nversion,time,op,size,lbn\n", CloudPhysics),
            "t: line 2: version: expected a non-negative integer, found `version`"
        );
    }
}
