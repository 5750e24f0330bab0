//! Linux `blkparse` default text output. An event line reads
//! `maj,min cpu seq time_s pid action rwbs sector + nblocks [process]`, e.g.
//! `8,0  3  1  0.000000000  697  Q  WS 3417048 + 8 [jbd2/sda3-8]`.
//!
//! By default the `Q` (queued: the request as the file system issued it) events are taken;
//! [`Blkparse::dispatch`] takes `D` (issued to the driver: after merging and splitting)
//! instead. An event is a read when its rwbs flags contain `R`, a write when they contain
//! `W`; events with neither (flushes without data, discards) and other actions are skipped.
//! Lines that do not start with `maj,min` (blkparse's per-CPU and total summaries, blank
//! lines, notes) are skipped too. Sectors are 512 bytes; the device is `maj << 32 | min`,
//! laid back to back with the others unless one is selected.

use super::parse::{seconds, sectors, show, split_ws, u64_dec};
use super::text::{LineFormat, Rec};
use super::Op;

/// The blkparse line format, keeping one action.
#[derive(Debug, Clone, Copy)]
pub struct Blkparse {
    action: u8,
}

impl Default for Blkparse {
    fn default() -> Self {
        Blkparse::queue()
    }
}

impl Blkparse {
    /// Keep `Q` events (the default).
    pub fn queue() -> Self {
        Blkparse { action: b'Q' }
    }

    /// Keep `D` events.
    pub fn dispatch() -> Self {
        Blkparse { action: b'D' }
    }
}

/// `maj,min` as one device number, `None` when the token is not a device.
fn device(tok: &[u8]) -> Option<u64> {
    let comma = tok.iter().position(|&b| b == b',')?;
    let maj = u64_dec(tok.get(..comma)?)?;
    let min = u64_dec(tok.get(comma + 1..)?)?;
    if maj > u64::from(u32::MAX) || min > u64::from(u32::MAX) {
        return None;
    }
    Some(maj << 32 | min)
}

impl LineFormat for Blkparse {
    const MULTI_DEVICE: bool = true;

    fn parse(&self, _line_no: u64, line: &[u8]) -> Result<Option<Rec>, String> {
        let mut f = [&b""[..]; 10];
        let n = split_ws(line, &mut f);
        let [dev, _cpu, _seq, time, _pid, action, rwbs, sector, plus, count] = f;
        // Not an event line: summaries and notes are free text.
        let Some(dev) = device(dev) else {
            return Ok(None);
        };
        if n < 7 {
            return Err(format!(
                "expected `maj,min cpu seq time pid action rwbs ...`, found {n} fields"
            ));
        }
        if action != [self.action] {
            return Ok(None);
        }
        let op = if rwbs.contains(&b'W') {
            Op::Write
        } else if rwbs.contains(&b'R') {
            Op::Read
        } else {
            return Ok(None);
        };
        if n < 10 || plus != b"+" {
            return Err(format!(
                "expected `sector + nblocks` after rwbs `{}`, found {} field(s)",
                show(rwbs),
                n.saturating_sub(7)
            ));
        }
        Ok(Some(Rec {
            time: seconds(time, "time")?,
            dev,
            op,
            offset_bytes: sectors(sector, "sector")?,
            len_bytes: sectors(count, "nblocks")?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::text::{drain, error_of, rq};

    const SAMPLE: &[u8] =
        b"  8,0    3        1     0.000000000   697  Q  WS 3417048 + 8 [jbd2/sda3-8]
  8,0    3        2     0.000002831   697  G  WS 3417048 + 8 [jbd2/sda3-8]
  8,0    3        4     0.000010000   697  D  WS 3417048 + 8 [jbd2/sda3-8]
  8,16   0        1     0.001000000  1200  Q   R 64 + 16 [cat]
  8,0    0        0     0.001100000     0  m   N cfq697 put_queue
  8,0    1        3     0.002000000   697  Q  FN [kworker]
  8,0    1        4     0.003000000   900  Q  RA 0 + 8 [cp]

CPU0 (8,0):
 Reads Queued:           1,        4KiB\t Writes Queued:           1,        4KiB
Total (8,0):
Throughput (R/W): 0KiB/s / 0KiB/s
Events (8,0): 7 entries
";

    #[test]
    fn worked_example() {
        // Device 8,0 ends at (3417048 + 8) * 512 bytes = 1668.48 MiB -> 8,16 starts at 1669 MiB.
        let dev16 = 1669 << 20;
        assert_eq!(
            drain(SAMPLE, Blkparse::queue(), None).unwrap(),
            vec![
                rq(0, Op::Write, 3417048 * 512, 4096),
                rq(1_000_000, Op::Read, dev16 + 64 * 512, 8192),
                rq(3_000_000, Op::Read, 0, 4096),
            ]
        );
        assert_eq!(
            drain(SAMPLE, Blkparse::dispatch(), None).unwrap(),
            vec![rq(0, Op::Write, 3417048 * 512, 4096)]
        );
        assert_eq!(
            drain(SAMPLE, Blkparse::queue(), Some(8 << 32 | 16)).unwrap(),
            vec![rq(1_000_000, Op::Read, 64 * 512, 8192)]
        );
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            error_of(b"8,0 0 1 0.1 5 Q R 12 +\n", Blkparse::queue()),
            "t: line 1: expected `sector + nblocks` after rwbs `R`, found 2 field(s)"
        );
        assert_eq!(
            error_of(b"\n8,0 0 1 0.1 5 Q W x + 8 [p]\n", Blkparse::queue()),
            "t: line 2: sector: expected a non-negative integer, found `x`"
        );
        assert_eq!(
            error_of(b"8,0 0 1\n", Blkparse::queue()),
            "t: line 1: expected `maj,min cpu seq time pid action rwbs ...`, found 3 fields"
        );
    }
}
