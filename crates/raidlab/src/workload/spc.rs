//! UMass Trace Repository SPC format (Financial, WebSearch): CSV `ASU,LBA,Size,Opcode,Timestamp`
//! with LBA in 512-byte sectors, Size in bytes, Opcode `r`/`R`/`w`/`W` and Timestamp in
//! seconds (decimal) from the start of the trace.
//!
//! Each ASU (application storage unit) is a separate address space; without a device filter
//! they are laid back to back in ascending ASU order (see [`super::text::Layout`]), which needs
//! a pre-pass over the file. Fields after the fifth are ignored: some published files carry
//! extra columns.

use super::parse::{dec, expect_fields, read_write, seconds, sectors, split_sep};
use super::text::{LineFormat, Rec};

/// The SPC line format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spc;

impl LineFormat for Spc {
    const MULTI_DEVICE: bool = true;

    fn parse(&self, _line_no: u64, line: &[u8]) -> Result<Option<Rec>, String> {
        if super::parse::is_blank(line) {
            return Ok(None);
        }
        let mut f = [&b""[..]; 5];
        expect_fields(split_sep(line, b',', &mut f), 5, true)?;
        let [asu, lba, size, opcode, ts] = f;
        let op = read_write(opcode, "Opcode", "r or w", b"r", b"w")?;
        Ok(Some(Rec {
            time: seconds(ts, "Timestamp")?,
            dev: dec(asu, "ASU")?,
            op,
            offset_bytes: sectors(lba, "LBA")?,
            len_bytes: dec(size, "Size")?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::text::{drain, error_of, rq};
    use crate::workload::Op;

    // ASU 0 reaches byte 2*512 + 4096 = 5120 -> rounded to 1 MiB; ASU 1 starts there.
    const SAMPLE: &[u8] = b"0,2,4096,r,0.5\n1,10,512,W,0.750001\n\n0,0,8192,w,1.0\n";

    #[test]
    fn worked_example() {
        let got = drain(SAMPLE, Spc, None).unwrap();
        assert_eq!(
            got,
            vec![
                rq(0, Op::Read, 1024, 4096),
                rq(250_001_000, Op::Write, (1 << 20) + 5120, 512),
                rq(500_000_000, Op::Write, 0, 8192),
            ]
        );
        // One ASU selected: its own offsets, the others skipped.
        let only = drain(SAMPLE, Spc, Some(1)).unwrap();
        assert_eq!(only, vec![rq(250_001_000, Op::Write, 5120, 512)]);
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            error_of(b"0,1,512,r,0\n0,1,512,x,0\n", Spc),
            "t: line 2: Opcode: expected r or w, found `x`"
        );
        assert_eq!(
            error_of(b"0,1,512\n", Spc),
            "t: line 1: expected at least 5 fields, found 3"
        );
        assert_eq!(
            error_of(b"0,-1,512,r,0\n", Spc),
            "t: line 1: LBA: expected a non-negative integer, found `-1`"
        );
        assert_eq!(
            error_of(b"0,36028797018963968,512,r,0\n", Spc),
            "t: line 1: LBA: 36028797018963968 x 512 overflows 64 bits"
        );
    }
}
