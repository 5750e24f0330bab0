//! SNIA SYSTOR'17 enterprise VDI traces: CSV with header
//! `Timestamp,Response,IOType,LUN,Offset,Size`; Timestamp and Response in seconds (decimal),
//! IOType `R`/`W`, Offset and Size in bytes. LUNs are laid back to back unless one is
//! selected; Response (the traced system's latency) is dropped.

use super::parse::{dec, expect_fields, read_write, seconds, split_sep};
use super::text::{LineFormat, Rec};

/// The SYSTOR'17 line format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Systor;

impl LineFormat for Systor {
    const MULTI_DEVICE: bool = true;

    fn parse(&self, line_no: u64, line: &[u8]) -> Result<Option<Rec>, String> {
        if super::parse::is_blank(line) || (line_no == 1 && line.starts_with(b"Timestamp")) {
            return Ok(None);
        }
        let mut f = [&b""[..]; 6];
        expect_fields(split_sep(line, b',', &mut f), 6, false)?;
        let [ts, _resp, kind, lun, offset, size] = f;
        let op = read_write(kind, "IOType", "R or W", b"R", b"W")?;
        Ok(Some(Rec {
            time: seconds(ts, "Timestamp")?,
            dev: dec(lun, "LUN")?,
            op,
            offset_bytes: dec(offset, "Offset")?,
            len_bytes: dec(size, "Size")?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::text::{drain, error_of, rq};
    use crate::workload::Op;

    #[test]
    fn worked_example() {
        let sample = b"Timestamp,Response,IOType,LUN,Offset,Size\n\
1456095145.133076000,0.000806000,R,0,899056122368,131072\n\
1456095145.126285000,0.008044000,W,2,4096,8192\n\
1456095146.5,0.1,R,0,0,4096\n";
        // LUN 0 ends at 899056122368 + 131072 = 857406 MiB + 0.125 MiB -> LUN 2 at 857407 MiB.
        assert_eq!(
            drain(sample, Systor, None).unwrap(),
            vec![
                rq(0, Op::Read, 899056122368, 131072),
                // Earlier than the first record: clamped to 0.
                rq(0, Op::Write, (857407 << 20) + 4096, 8192),
                rq(1_366_924_000, Op::Read, 0, 4096),
            ]
        );
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            error_of(
                b"Timestamp,Response,IOType,LUN,Offset,Size\n1,0,X,0,0,1\n",
                Systor
            ),
            "t: line 2: IOType: expected R or W, found `X`"
        );
        assert_eq!(
            error_of(b"1,0,R,0,0\n", Systor),
            "t: line 1: expected 6 fields, found 5"
        );
    }
}
