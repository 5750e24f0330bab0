//! MQSim's text trace: whitespace-separated `arrival_ns device lba_sectors size_sectors type`,
//! with arrival in nanoseconds, LBA and size in 512-byte sectors and type 1 = read,
//! 0 = write. Devices are laid back to back unless one is selected.

use super::parse::{dec, expect_fields, read_write, sectors, split_ws};
use super::text::{LineFormat, Rec};

/// The MQSim line format.
#[derive(Debug, Clone, Copy, Default)]
pub struct MqSim;

impl LineFormat for MqSim {
    const MULTI_DEVICE: bool = true;

    fn parse(&self, _line_no: u64, line: &[u8]) -> Result<Option<Rec>, String> {
        if super::parse::is_blank(line) {
            return Ok(None);
        }
        let mut f = [&b""[..]; 5];
        expect_fields(split_ws(line, &mut f), 5, false)?;
        let [time, dev, lba, size, kind] = f;
        let op = read_write(kind, "type", "1 (read) or 0 (write)", b"1", b"0")?;
        Ok(Some(Rec {
            time: dec(time, "arrival_ns")?,
            dev: dec(dev, "device")?,
            op,
            offset_bytes: sectors(lba, "lba")?,
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
        let sample = b"11413000 0 100 16 1\n11565000 2 8 64 0\n11721000  0\t0 16 1";
        // Device 0 ends at (100 + 16) * 512 = 59392 -> device 2 starts at 1 MiB.
        assert_eq!(
            drain(sample, MqSim, None).unwrap(),
            vec![
                rq(0, Op::Read, 51200, 8192),
                rq(152_000, Op::Write, (1 << 20) + 4096, 32768),
                rq(308_000, Op::Read, 0, 8192),
            ]
        );
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            error_of(b"1 0 0 16 1\n2 0 0 16 2\n", MqSim),
            "t: line 2: type: expected 1 (read) or 0 (write), found `2`"
        );
        assert_eq!(
            error_of(b"1 0 0 16\n", MqSim),
            "t: line 1: expected 5 fields, found 4"
        );
    }
}
