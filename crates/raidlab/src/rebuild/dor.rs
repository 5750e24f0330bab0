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
//! With `read_units > 1` a reader merges the jobs it reads next into one read while their
//! units follow each other, up to `read_units` (a block layer merging md's resync reads does
//! this; so do the store's rebuild runs, one read per survivor's extent). Each merged read
//! counts once against `depth`. Bigger reads stream the survivors faster, and a user's read
//! that arrives during one waits for all of it: the trade the option is there to measure.
//!
//! Jobs are created lazily, when a reader reaches the end of the list, so PRO decides with
//! the newest popularity. Readers run ahead of each other by at most `buffers` jobs (a
//! job's buffer is held until its slowest source is read). At most `buffers` jobs are
//! unwritten; written jobs leave the list once every older one is written too, so the list
//! also holds the written jobs behind an older one whose write is still in flight (the
//! replacement serves its two writes in turn, so in the engine that is a handful; under an
//! adversarial completion order it is bounded only by the units handed out).
//!
//! Deadlock freedom: every reader follows the same job sequence, so the oldest incomplete job
//! is one the slowest reader has yet to read, and it already holds a buffer.
//!
//! A job's sources are the ones the survivors named when it was created: its readers keep
//! to them even if a member fails (RAID-6) or the view changes before they reach it, so the
//! reads a job counts are the reads it gets. Asking the live view at each reader let a
//! disk read a job that did not count it, or wait for one that no longer read it.

use std::collections::VecDeque;

use super::{Action, Ctx, Feed};

/// Writes kept at the replacement at once.
pub const WRITE_DEPTH: u32 = 2;
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
    read_units: u32,
    /// Job `base + i` is `jobs[i]`.
    jobs: VecDeque<Job>,
    /// Job `base + i`'s sources, a bit per disk: words `i * words..(i + 1) * words`.
    sources: VecDeque<u64>,
    words: usize,
    base: u64,
    readers: Vec<Reader>,
    buffers_used: u32,
    /// Complete jobs waiting for the writer, in completion order.
    to_write: VecDeque<u64>,
    writes_in_flight: u32,
    feed: Feed,
}

impl Dor {
    pub fn new(disks: u32, buffers: u32, depth: u32, read_units: u32) -> Dor {
        debug_assert!(buffers >= 1 && depth >= 1 && read_units >= 1);
        Dor {
            buffers,
            depth,
            read_units,
            jobs: VecDeque::with_capacity(buffers as usize),
            sources: VecDeque::new(),
            words: (disks as usize).div_ceil(64),
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

    /// Whether job `seq` reads `disk` (as the survivors said when it was created).
    fn reads(&self, seq: u64, disk: u32) -> bool {
        let word = (seq - self.base) as usize * self.words + disk as usize / 64;
        self.sources[word] >> (disk % 64) & 1 == 1
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
            if self.reads(seq, disk) {
                let count = self.merge(disk, seq, unit, ctx, out);
                self.readers[disk as usize].in_flight += 1;
                out.push(Action::Read {
                    disk,
                    unit,
                    count,
                    job: seq,
                });
            }
        }
    }

    /// How many jobs from `seq` (whose `unit` `disk` reads) one read at `disk` covers: the
    /// following jobs while their units follow on, `disk` reads them, and they exist or can
    /// be created now, up to `read_units`. Advances the reader's cursor past the merged ones.
    fn merge(
        &mut self,
        disk: u32,
        seq: u64,
        unit: u64,
        ctx: &mut Ctx<'_>,
        out: &mut Vec<Action>,
    ) -> u32 {
        let mut count = 1u32;
        while count < self.read_units {
            let next = seq + u64::from(count);
            if next == self.base + self.jobs.len() as u64 && !self.create(ctx, out) {
                break;
            }
            let u = self.job(next).unit;
            if u != unit + u64::from(count) || !self.reads(next, disk) {
                break;
            }
            count += 1;
        }
        self.readers[disk as usize].cursor = seq + u64::from(count);
        count
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
        let at = self.sources.len();
        self.sources.resize(at + self.words, 0);
        let mut reads_left = 0u32;
        for d in (0..ctx.survivors.disks()).filter(|&d| ctx.survivors.reads(unit, d)) {
            self.sources[at + d as usize / 64] |= 1 << (d % 64);
            reads_left += 1;
        }
        debug_assert!(reads_left > 0, "a unit with nothing to read it from");
        self.jobs.push_back(Job {
            unit,
            reads_left,
            written: false,
        });
        self.buffers_used += 1;
        true
    }

    /// A rebuild read of jobs `job..job + count` at `disk` completed.
    pub fn read_done(&mut self, disk: u32, job: u64, count: u32) {
        let r = &mut self.readers[disk as usize];
        debug_assert!(r.in_flight > 0);
        r.in_flight -= 1;
        for seq in job..job + u64::from(count) {
            let j = self.job(seq);
            debug_assert!(j.reads_left > 0);
            j.reads_left -= 1;
            if j.reads_left == 0 {
                self.to_write.push_back(seq);
            }
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
            self.sources.drain(..self.words);
            self.base += 1;
        }
        debug_assert!(self.buffers_used <= self.buffers);
    }
}

#[cfg(test)]
pub(super) mod tests;
