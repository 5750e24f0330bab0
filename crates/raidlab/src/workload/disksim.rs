//! DiskSim's ASCII trace: whitespace-separated `time_ms devno blkno bcount flags`, with time
//! in milliseconds (decimal), block number and count in 512-byte sectors, and `flags` in hex
//! as DiskSim reads it, bit 0 set for a read. Devices are laid back to back unless one is
//! selected.

use super::parse::{dec, expect_fields, field, scaled_dec, sectors, split_ws, u64_hex};
use super::text::{LineFormat, Rec};
use super::Op;

/// The DiskSim ASCII line format.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiskSim;

impl LineFormat for DiskSim {
    const MULTI_DEVICE: bool = true;

    fn parse(&self, _line_no: u64, line: &[u8]) -> Result<Option<Rec>, String> {
        if super::parse::is_blank(line) {
            return Ok(None);
        }
        let mut f = [&b""[..]; 5];
        expect_fields(split_ws(line, &mut f), 5, false)?;
        let [time, dev, blk, count, flags] = f;
        let flags = field(flags, "flags", "a hex flag word", u64_hex)?;
        Ok(Some(Rec {
            // Milliseconds with a fraction, scaled by 10^6 to nanoseconds exactly.
            time: field(time, "time_ms", "non-negative milliseconds", |s| {
                scaled_dec(s, 6)
            })?,
            dev: dec(dev, "devno")?,
            op: if flags & 1 == 1 { Op::Read } else { Op::Write },
            offset_bytes: sectors(blk, "blkno")?,
            len_bytes: sectors(count, "bcount")?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::text::{drain, error_of, rq};

    #[test]
    fn worked_example() {
        let sample =
            b"13.191135\t30\t0\t5\t1\n17.829285\t20\t576560\t6\t1\n25.911729\t30\t28601\t12\t0\n";
        // Device 20 ends at (576560 + 6) * 512 = 295201792 B = 281.5 MiB -> 282 MiB.
        let dev30 = 282 << 20;
        assert_eq!(
            drain(sample, DiskSim, None).unwrap(),
            vec![
                rq(0, Op::Read, dev30, 2560),
                rq(4_638_150, Op::Read, 576560 * 512, 3072),
                rq(12_720_594, Op::Write, dev30 + 28601 * 512, 6144),
            ]
        );
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            error_of(b"1.5 0 0 1 1\n-2 0 0 1 1\n", DiskSim),
            "t: line 2: time_ms: expected non-negative milliseconds, found `-2`"
        );
        assert_eq!(
            error_of(b"1 0 0 1 q\n", DiskSim),
            "t: line 1: flags: expected a hex flag word, found `q`"
        );
    }
}
