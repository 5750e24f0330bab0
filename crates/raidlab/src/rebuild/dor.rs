//! Disk-oriented reconstruction, DOR (Holland, Gibson and Siewiorek, 1993-94), with the job
//! queue through which PRO feeds it (PRO paper, section 3.3, "Reconstruction Executor").
//!
//! One reader per member disk walks the shared job list (units in the order's sequence), and
//! for every job whose unit it holds keeps reading: up to `depth` rebuild reads at its disk
//! at once (`depth = 2`: one in service, one queued, so the disk never idles between two
//! rebuild reads and rebuild absorbs all bandwidth users leave). A job gets a unit buffer
//! when it is created; with all `buffers` in use no job is created, so the reader that needs
//! one blocks until a buffer frees (the paper's "block the process if the buffer is full").
//! When every source of a unit has been read, the unit is complete and the replacement's
//! writer writes it (up to two writes at the replacement, in completion order); the buffer
//! frees when that write completes. Complete units that follow each other (consecutive jobs
//! of consecutive units) go out as one write of up to `WRITE_UNITS_MAX` units, as a block
//! layer would merge them: a drive that settles before every write would otherwise lose a
//! rotation per unit on the replacement.
//!
//! Jobs are created lazily, when a reader reaches the end of the list, so PRO decides with
//! the newest popularity. Readers run ahead of each other by at most `buffers` jobs (a
//! job's buffer is held until its slowest source is read), which bounds the list.
//!
//! Deadlock freedom: every reader follows the same job sequence, so the oldest incomplete job
//! is one the slowest reader has yet to read, and it already holds a buffer.

use std::collections::VecDeque;

use super::{Action, Ctx, Feed};

/// Writes kept at the replacement at once.
const WRITE_DEPTH: u32 = 2;
/// Most units merged into one replacement write.
pub const WRITE_UNITS_MAX: u32 = 16;

#[derive(Debug, Clone, Copy)]
struct Job {
    unit: u64,
    /// Sources not yet read.
    reads_left: u32,
    written: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct Reader {
    /// Sequence number of the next job to look at.
    cursor: u64,
    in_flight: u32,
}

#[derive(Debug, Clone)]
pub struct Dor {
    buffers: u32,
    depth: u32,
    /// Job `base + i` is `jobs[i]`.
    jobs: VecDeque<Job>,
    base: u64,
    readers: Vec<Reader>,
    buffers_used: u32,
    /// Complete jobs waiting for the writer, in completion order.
    to_write: VecDeque<u64>,
    writes_in_flight: u32,
    feed: Feed,
}

impl Dor {
    pub fn new(disks: u32, buffers: u32, depth: u32) -> Dor {
        debug_assert!(buffers >= 1 && depth >= 1);
        Dor {
            buffers,
            depth,
            jobs: VecDeque::with_capacity(buffers as usize),
            base: 0,
            readers: vec![Reader::default(); disks as usize],
            buffers_used: 0,
            to_write: VecDeque::with_capacity(buffers as usize),
            writes_in_flight: 0,
            feed: Feed::default(),
        }
    }

    /// Units handed to the replacement and written.
    pub fn written(&self) -> u64 {
        self.feed.units_written()
    }

    /// Every unit the order handed out is written and it has no more.
    pub fn is_done(&self) -> bool {
        self.feed.is_done()
    }

    fn job(&mut self, seq: u64) -> &mut Job {
        &mut self.jobs[(seq - self.base) as usize]
    }

    /// Start whatever can start now.
    pub fn pump(&mut self, ctx: &mut Ctx<'_>, out: &mut Vec<Action>) {
        self.feed.wake(ctx.now_ns);
        while self.writes_in_flight < WRITE_DEPTH {
            let Some(seq) = self.to_write.pop_front() else {
                break;
            };
            let unit = self.job(seq).unit;
            let mut count = 1u32;
            while count < WRITE_UNITS_MAX
                && self.to_write.front() == Some(&(seq + u64::from(count)))
                && self.job(seq + u64::from(count)).unit == unit + u64::from(count)
            {
                self.to_write.pop_front();
                count += 1;
            }
            self.writes_in_flight += 1;
            out.push(Action::Write {
                unit,
                count,
                job: seq,
            });
        }
        for disk in 0..self.readers.len() as u32 {
            self.run_reader(disk, ctx, out);
        }
    }

    fn run_reader(&mut self, disk: u32, ctx: &mut Ctx<'_>, out: &mut Vec<Action>) {
        // Each pass reads or skips one job, or stops; jobs are bounded by the buffer pool.
        loop {
            let r = self.readers[disk as usize];
            if r.in_flight >= self.depth {
                return;
            }
            if r.cursor == self.base + self.jobs.len() as u64 && !self.create(ctx, out) {
                return;
            }
            let seq = r.cursor;
            self.readers[disk as usize].cursor += 1;
            let unit = self.job(seq).unit;
            if ctx.survivors.reads(unit, disk) {
                self.readers[disk as usize].in_flight += 1;
                out.push(Action::Read {
                    disk,
                    unit,
                    job: seq,
                });
            }
        }
    }

    /// Append a job (with its buffer); `false` when none may be created now.
    fn create(&mut self, ctx: &mut Ctx<'_>, out: &mut Vec<Action>) -> bool {
        if self.buffers_used >= self.buffers {
            return false;
        }
        let Some((unit, seq)) = self.feed.next(ctx, out) else {
            return false;
        };
        debug_assert_eq!(seq, self.base + self.jobs.len() as u64);
        let reads_left = (0..ctx.survivors.disks())
            .filter(|&d| ctx.survivors.reads(unit, d))
            .count() as u32;
        debug_assert!(reads_left > 0, "a unit with nothing to read it from");
        self.jobs.push_back(Job {
            unit,
            reads_left,
            written: false,
        });
        self.buffers_used += 1;
        true
    }

    /// A rebuild read of job `job` at `disk` completed.
    pub fn read_done(&mut self, disk: u32, job: u64) {
        let r = &mut self.readers[disk as usize];
        debug_assert!(r.in_flight > 0);
        r.in_flight -= 1;
        let j = self.job(job);
        debug_assert!(j.reads_left > 0);
        j.reads_left -= 1;
        if j.reads_left == 0 {
            self.to_write.push_back(job);
        }
    }

    /// The replacement write of jobs `job..job + count` completed; their units are rebuilt.
    pub fn write_done(&mut self, job: u64, count: u32) {
        debug_assert!(self.writes_in_flight > 0);
        self.writes_in_flight -= 1;
        for seq in job..job + u64::from(count) {
            let j = self.job(seq);
            debug_assert!(!j.written && j.reads_left == 0);
            j.written = true;
        }
        self.buffers_used -= count;
        self.feed.written(u64::from(count));
        // Drop the jobs every reader has passed and the writer has finished.
        let slowest = self.readers.iter().map(|r| r.cursor).min().unwrap_or(0);
        while self.base < slowest && self.jobs.front().is_some_and(|j| j.written) {
            self.jobs.pop_front();
            self.base += 1;
        }
        debug_assert!(self.jobs.len() <= (self.buffers as usize) + self.readers.len() * 2);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::rate::{RateSpec, Throttle};
    use super::super::{Order, OrderSpec, Survivors};
    use super::*;

    /// RAID-5-like: every disk but `failed` is read.
    pub struct AllBut {
        pub disks: u32,
        pub failed: u32,
    }

    impl Survivors for AllBut {
        fn disks(&self) -> u32 {
            self.disks
        }
        fn reads(&self, _unit: u64, disk: u32) -> bool {
            disk != self.failed
        }
    }

    fn pump(dor: &mut Dor, order: &mut Order, throttle: &mut Throttle, out: &mut Vec<Action>) {
        let s = AllBut {
            disks: 3,
            failed: 1,
        };
        let mut ctx = Ctx {
            now_ns: 0,
            busy: false,
            order,
            survivors: &s,
            throttle,
            unit_bytes: 65536,
        };
        out.clear();
        dor.pump(&mut ctx, out);
    }

    #[test]
    fn readers_keep_depth_buffers_bound_and_writes_follow() {
        // 3 disks, disk 1 failed, 2 buffers, depth 2, 4 units.
        let mut order = OrderSpec::Sequential.build(4);
        let mut th = Throttle::new(RateSpec::Full, 0);
        let mut dor = Dor::new(3, 2, 2);
        let mut out = Vec::new();
        pump(&mut dor, &mut order, &mut th, &mut out);
        // Disk 0 creates jobs 0 and 1 (both buffers) and reads both; disk 1 skips them;
        // disk 2 reads both. No third job: the pool is full.
        let r = |disk, unit| Action::Read {
            disk,
            unit,
            job: unit,
        };
        let w = |unit, count| Action::Write {
            unit,
            count,
            job: unit,
        };
        assert_eq!(out, vec![r(0, 0), r(0, 1), r(2, 0), r(2, 1)]);
        dor.read_done(0, 0);
        pump(&mut dor, &mut order, &mut th, &mut out);
        assert!(
            out.is_empty(),
            "unit 0 still waits for disk 2; no buffer free"
        );
        dor.read_done(2, 0);
        pump(&mut dor, &mut order, &mut th, &mut out);
        assert_eq!(out, vec![w(0, 1)]);
        dor.write_done(0, 1);
        pump(&mut dor, &mut order, &mut th, &mut out);
        // The freed buffer lets disk 0 create job 2; disk 2 has 1 read in flight, reads it.
        assert_eq!(out, vec![r(0, 2), r(2, 2)]);
        for (d, j) in [(0, 1), (2, 1), (0, 2), (2, 2)] {
            dor.read_done(d, j);
        }
        pump(&mut dor, &mut order, &mut th, &mut out);
        // Units 1 and 2 are consecutive: one write.
        assert_eq!(out, vec![w(1, 2)]);
        dor.write_done(1, 2);
        pump(&mut dor, &mut order, &mut th, &mut out);
        assert_eq!(out, vec![r(0, 3), r(2, 3)]);
        dor.read_done(0, 3);
        dor.read_done(2, 3);
        pump(&mut dor, &mut order, &mut th, &mut out);
        assert_eq!(out, vec![w(3, 1)]);
        assert!(!dor.is_done());
        dor.write_done(3, 1);
        pump(&mut dor, &mut order, &mut th, &mut out);
        assert!(out.is_empty() && dor.is_done() && dor.written() == 4);
    }

    #[test]
    fn rate_control_asks_for_one_wake_up() {
        let mut order = OrderSpec::Sequential.build(100);
        let mut th = Throttle::new(
            RateSpec::Md {
                min_bytes_s: 65536.0,
                max_bytes_s: 65536.0,
            },
            0,
        );
        let mut dor = Dor::new(3, 8, 2);
        let mut out = Vec::new();
        pump(&mut dor, &mut order, &mut th, &mut out);
        // One unit per second: job 0 starts, job 1 must wait until t = 1 s.
        assert_eq!(
            out,
            vec![
                Action::Read {
                    disk: 0,
                    unit: 0,
                    job: 0
                },
                Action::WakeAt(1_000_000_000),
                Action::Read {
                    disk: 2,
                    unit: 0,
                    job: 0
                },
            ]
        );
        pump(&mut dor, &mut order, &mut th, &mut out);
        assert!(out.is_empty(), "the wake-up is pending");
    }
}
