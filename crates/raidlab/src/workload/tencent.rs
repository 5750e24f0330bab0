//! Tencent Cloud Block Storage traces: CSV without header,
//! `timestamp_s,offset_sectors,size_sectors,type,volume`, with whole-second timestamps,
//! offset and size in 512-byte sectors, type 0 = read and 1 = write. Volumes are laid back to
//! back unless one is selected.

use super::parse::{dec, expect_fields, read_write, sectors, split_sep};
use super::text::{LineFormat, Rec};

/// The Tencent CBS line format.
#[derive(Debug, Clone, Copy, Default)]
pub struct TencentCbs;

impl LineFormat for TencentCbs {
    const TICK_NS: u64 = 1_000_000_000;
    const MULTI_DEVICE: bool = true;

    fn parse(&self, _line_no: u64, line: &[u8]) -> Result<Option<Rec>, String> {
        if super::parse::is_blank(line) {
            return Ok(None);
        }
        let mut f = [&b""[..]; 5];
        expect_fields(split_sep(line, b',', &mut f), 5, false)?;
        let [ts, offset, size, kind, volume] = f;
        let op = read_write(kind, "type", "0 (read) or 1 (write)", b"0", b"1")?;
        Ok(Some(Rec {
            time: dec(ts, "timestamp")?,
            dev: dec(volume, "volume")?,
            op,
            offset_bytes: sectors(offset, "offset")?,
            len_bytes: sectors(size, "size")?,
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
        let sample =
            b"1538323200,4247200,128,1,1063\n1538323199,8,16,0,1058\n1538323201,0,8,0,1063\n";
        // Volume 1058 ends at 24 * 512 bytes -> volume 1063 starts at 1 MiB.
        assert_eq!(
            drain(sample, TencentCbs, None).unwrap(),
            vec![
                rq(0, Op::Write, (1 << 20) + 4247200 * 512, 65536),
                rq(0, Op::Read, 4096, 8192),
                rq(1_000_000_000, Op::Read, 1 << 20, 4096),
            ]
        );
        assert_eq!(
            drain(sample, TencentCbs, Some(1058)).unwrap(),
            vec![rq(0, Op::Read, 4096, 8192)]
        );
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            error_of(b"1,0,8,R,1\n", TencentCbs),
            "t: line 1: type: expected 0 (read) or 1 (write), found `R`"
        );
        assert_eq!(
            error_of(b"1,0,8,0,1\n\n2,0,8,0\n", TencentCbs),
            "t: line 3: expected 5 fields, found 4"
        );
    }
}
