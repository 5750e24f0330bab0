//! MSR Cambridge CSV: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, with
//! Timestamp (and ResponseTime) in 100 ns ticks (Windows FILETIME), Type `Read`/`Write`,
//! Offset and Size in bytes. No header.
//!
//! DiskNumber is the device: disks are laid back to back in ascending order unless one is
//! selected. Hostname is ignored (one published file holds one host). ResponseTime is the
//! traced system's, not ours, and is dropped.

use super::parse::{dec, expect_fields, read_write, split_sep};
use super::text::{LineFormat, Rec};

/// The MSR Cambridge line format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Msr;

impl LineFormat for Msr {
    const TICK_NS: u64 = 100;
    const MULTI_DEVICE: bool = true;

    fn parse(&self, _line_no: u64, line: &[u8]) -> Result<Option<Rec>, String> {
        if super::parse::is_blank(line) {
            return Ok(None);
        }
        let mut f = [&b""[..]; 7];
        expect_fields(split_sep(line, b',', &mut f), 7, false)?;
        let [ts, _host, disk, kind, offset, size, _resp] = f;
        let op = read_write(kind, "Type", "Read or Write", b"read", b"write")?;
        Ok(Some(Rec {
            time: dec(ts, "Timestamp")?,
            dev: dec(disk, "DiskNumber")?,
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

    const SAMPLE: &[u8] = b"128166385295514663,hm,1,Write,4096,2048,2833\r\n\
128166385295514878,hm,0,Read,0,512,2617\r\n\
128166385295515175,hm,1,read,8192,4096,2320\r\n";

    #[test]
    fn worked_example() {
        // Disk 0 reaches 512 bytes -> disk 1 starts at 1 MiB.
        let got = drain(SAMPLE, Msr, None).unwrap();
        assert_eq!(
            got,
            vec![
                rq(0, Op::Write, (1 << 20) + 4096, 2048),
                rq(21_500, Op::Read, 0, 512),
                rq(51_200, Op::Read, (1 << 20) + 8192, 4096),
            ]
        );
        assert_eq!(
            drain(SAMPLE, Msr, Some(0)).unwrap(),
            vec![rq(21_500, Op::Read, 0, 512)]
        );
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            error_of(b"1,h,0,Read,0,512,1\n2,h,0,Trim,0,512,1\n", Msr),
            "t: line 2: Type: expected Read or Write, found `Trim`"
        );
        assert_eq!(
            error_of(b"1,h,0,Read,0,512\n", Msr),
            "t: line 1: expected 7 fields, found 6"
        );
        assert_eq!(
            error_of(b"x,h,0,Read,0,512,1\n", Msr),
            "t: line 1: Timestamp: expected a non-negative integer, found `x`"
        );
    }
}
