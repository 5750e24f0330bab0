//! The request paths: reads (healthy, redirected to a replacement, or reconstructed) and
//! writes (the planner's RMW / RCW / full-stripe plans executed with real parity).
//!
//! Member errors follow one rule. In a read phase nothing has been written yet, so the
//! member is failed and the request is planned again in the new mode. In a write phase the
//! plan's other writes still complete: the parity they carry was computed from values read
//! before any write, so the row is consistent without the failed member, which is simply
//! failed afterwards. Only when the level cannot survive the failure does the client see
//! an error.

use crate::sync::{Arc, Ordering};
use std::cell::RefCell;

use raidlab::array::{Level, Plan, Role};
use raidlab::workload::Op;

use super::column::{Workspace, BLOCK};
use super::{fanout, Controller, Fault, IoFail, SlotSet};
use crate::member::Member;
use crate::parity;

/// Attempts of one request: each failed attempt fails a member, and no level survives more
/// than two, so three retries always reach an answer.
const ATTEMPTS_MAX: u32 = 4;

/// Per-row lists of a parity write, reused between writes (no allocation per request).
#[derive(Default)]
pub(crate) struct RowScratch {
    /// Data members in Q's syndrome order.
    data: Vec<usize>,
    /// Per member: lost in this row.
    lost: Vec<bool>,
    /// Per column of the workspace: parity written there.
    cols: Vec<bool>,
}

crate::sync::thread_local! {
    pub(crate) static SCRATCH: RefCell<(Plan, Workspace, RowScratch)> = RefCell::new(Default::default());
}

/// One attempt at a row's write: `Ok(devices that failed a write)`, `Err(Ok(fault))` for a
/// read failure (nothing written yet: fail the device and plan again).
/// Called by `run_row_plan` between a plan's reads and its writes: the plan, the row's
/// workspace holding what was read, and the workspace's first column.
pub(crate) type AfterReads<'a> = &'a mut dyn FnMut(&Plan, &Workspace, u32);

pub(crate) type RowAttempt = Result<Vec<Fault>, Result<Fault, IoFail>>;

impl Controller {
    /// Check a byte range against the export and the 4 KiB block size.
    pub fn check_range(&self, offset: u64, len: u64) -> Result<(), IoFail> {
        if !offset.is_multiple_of(BLOCK as u64) || !len.is_multiple_of(BLOCK as u64) {
            return Err(IoFail::Invalid(format!(
                "request at {offset} of {len} bytes is not aligned to {BLOCK} bytes"
            )));
        }
        if offset
            .checked_add(len)
            .is_none_or(|e| e > self.size_bytes())
        {
            return Err(IoFail::Invalid(format!(
                "request at {offset} of {len} bytes ends past the end of the array ({} bytes)",
                self.size_bytes()
            )));
        }
        Ok(())
    }

    /// Read `buf.len()` bytes at `offset` (through the read cache when there is one).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoFail> {
        self.check_range(offset, buf.len() as u64)?;
        self.busy.store(true, Ordering::Relaxed);
        let first = offset / BLOCK as u64;
        match &self.cache {
            Some(cache) => cache.read(self, first, buf),
            None => self.read_blocks(first, buf),
        }
    }

    /// Read whole blocks from the array, bypassing the cache.
    pub(crate) fn read_blocks(&self, first: u64, buf: &mut [u8]) -> Result<(), IoFail> {
        let bpu = u64::from(self.geo.blocks_per_stripe_unit());
        let count = (buf.len() / BLOCK) as u64;
        let mut lba = first;
        while lba < first + count {
            let run = ((lba / bpu + 1) * bpu).min(first + count) - lba;
            let at = ((lba - first) as usize) * BLOCK;
            let out = &mut buf[at..at + run as usize * BLOCK];
            self.read_unit_run(lba, run, out)?;
            lba += run;
        }
        Ok(())
    }

    /// Read `run` blocks from `lba`, all in one stripe unit.
    fn read_unit_run(&self, lba: u64, run: u64, out: &mut [u8]) -> Result<(), IoFail> {
        let loc = self.geo.locate(lba);
        let row = loc.block / u64::from(self.geo.blocks_per_stripe_unit());
        self.with_retries(format_args!("block {lba}"), || {
            let st = self.read_state();
            if let Some(d) = &st.dead {
                return Err(Err(IoFail::Failed(d.clone())));
            }
            let direct = SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                st.array.plan_read(lba, &mut s.0);
                (s.0.ops.len() == 1).then(|| s.0.ops[0])
            });
            match direct {
                Some(op) => {
                    let dev = st.devs[op.disk as usize].clone();
                    drop(st);
                    self.member_read(op.disk, dev, op.block, out).map_err(Ok)
                }
                None => {
                    drop(st);
                    self.reconstruct_run(lba, run, row, out)
                }
            }
        })
    }

    /// Run `attempt` until it succeeds. A failed attempt names the device whose read failed
    /// (`Err(Ok(fault))`): nothing has been written yet, so that device is failed and the
    /// request planned again in the new mode. Bounded: no level survives more than two
    /// failures, so `ATTEMPTS_MAX` attempts always reach an answer (a device that already
    /// left its slot is not failed again, and the next attempt reads its replacement).
    pub(crate) fn with_retries<T>(
        &self,
        what: std::fmt::Arguments<'_>,
        mut attempt: impl FnMut() -> Result<T, Result<Fault, IoFail>>,
    ) -> Result<T, IoFail> {
        for _ in 0..ATTEMPTS_MAX {
            match attempt() {
                Ok(v) => return Ok(v),
                Err(Ok(f)) => self.fail_device(&f, "read error")?,
                Err(Err(e)) => return Err(e),
            }
        }
        Err(IoFail::Failed(format!("{what}: too many member failures")))
    }

    /// Reconstruct `run` blocks from `lba` (one unit) whose member is lost in `row`. `Err(Ok)`
    /// names a member that failed while reading.
    fn reconstruct_run(
        &self,
        lba: u64,
        run: u64,
        row: u64,
        out: &mut [u8],
    ) -> Result<(), Result<Fault, IoFail>> {
        // Shared: this only reads the row's survivors (`locks.rs`).
        let _row = self.locks.share(row, row);
        let st = self.read_state();
        if let Some(d) = &st.dead {
            return Err(Err(IoFail::Failed(d.clone())));
        }
        let loc = self.geo.locate(lba);
        let n = self.geo.disks() as usize;
        let (disks, dev_list): (Vec<u32>, Vec<Option<Arc<dyn Member>>>) = SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            st.array.plan_read(lba, &mut s.0);
            let d: Vec<u32> = s.0.ops.iter().map(|o| o.disk).collect();
            let devs = d.iter().map(|&x| st.devs[x as usize].clone()).collect();
            (d, devs)
        });
        if disks.len() == 1 {
            // The mode changed since the caller planned: a direct read now.
            drop(st);
            return self
                .member_read(disks[0], dev_list[0].clone(), loc.block, out)
                .map_err(Ok);
        }
        if self.opts.rebuild_order != raidlab::rebuild::OrderSpec::Sequential
            || self.rebuild_active()
        {
            self.note_user_read(loc.disk, row);
        }
        let lost: Vec<bool> = (0..n as u32).map(|d| st.array.lost(d, row)).collect();
        drop(st);
        let width = run as usize;
        let bpu = self.geo.blocks_per_stripe_unit();
        let col0 = (loc.block % u64::from(bpu)) as u32;
        let parallel = self.fan_out(disks.iter().copied());
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            let ws = &mut s.1;
            ws.reset(n, col0, width);
            // The survivors' reads, all at once when the members are slow.
            let spans: Vec<(usize, usize, usize)> =
                disks.iter().map(|&d| (d as usize, 0, width)).collect();
            let jobs: Vec<_> = disks
                .iter()
                .zip(dev_list)
                .zip(ws.old_spans_mut(&spans))
                .collect();
            let done = fanout::each(parallel, jobs, |((&d, dev), buf)| {
                self.member_read(d, dev, loc.block, buf)
            });
            done.into_iter()
                .collect::<Result<(), Fault>>()
                .map_err(Ok)?;
            // Slot order: data slots, P, Q; the plan read every member needed.
            let ndata = self.geo.data_disks() as usize;
            let par = self.geo.parity_disks(row);
            // Data in Q's syndrome order (md's), then P, then Q if it was read.
            let q_read = par.q.is_some_and(|q| disks.contains(&q));
            let order: Vec<usize> = self
                .geo
                .parity_order(row)
                .take(ndata + 1 + usize::from(q_read))
                .map(|d| d as usize)
                .collect();
            let missing: Vec<usize> = order
                .iter()
                .enumerate()
                .filter(|(_, &d)| lost[d] || !disks.contains(&(d as u32)))
                .map(|(i, _)| i)
                .collect();
            if missing.len() > 2 || (!q_read && missing.len() > 1) {
                return Err(Err(IoFail::Failed(format!(
                    "block {lba}: more members lost than parity can solve"
                ))));
            }
            // Each member's run is contiguous in the workspace, and parity works bytewise,
            // so the whole run is solved at once, in place: no copy per block.
            let k = order
                .iter()
                .position(|&d| d == loc.disk as usize)
                .expect("target in row");
            let mut runs: Vec<Option<&mut [u8]>> = ws.old_runs_mut().map(Some).collect();
            let mut refs: Vec<&mut [u8]> = order
                .iter()
                .map(|&d| runs[d].take().expect("members of a row are distinct"))
                .collect();
            parity::reconstruct(ndata, &mut refs, &missing);
            out.copy_from_slice(refs[k]);
            Ok(())
        })
    }

    /// Read from slot `slot`'s device; `Err` names the device on any error (or a missing
    /// device).
    pub(crate) fn member_read(
        &self,
        slot: u32,
        dev: Option<Arc<dyn Member>>,
        block: u64,
        buf: &mut [u8],
    ) -> Result<(), Fault> {
        let blocks = (buf.len() / BLOCK) as u64;
        let c = &self.counters[slot as usize];
        self.member_io(slot, dev.as_ref(), &c.read_blocks, blocks, |d| {
            d.read_at(buf, self.shape.data_offset_bytes + block * BLOCK as u64)
        })
    }

    pub(crate) fn member_write(
        &self,
        slot: u32,
        dev: Option<&Arc<dyn Member>>,
        block: u64,
        buf: &[u8],
    ) -> Result<(), Fault> {
        let blocks = (buf.len() / BLOCK) as u64;
        let c = &self.counters[slot as usize];
        self.member_io(slot, dev, &c.write_blocks, blocks, |d| {
            d.write_at(buf, self.shape.data_offset_bytes + block * BLOCK as u64)
        })
    }

    /// One data-area operation on a member, counted in `done` (blocks) or as an error.
    fn member_io(
        &self,
        slot: u32,
        dev: Option<&Arc<dyn Member>>,
        done: &std::sync::atomic::AtomicU64,
        blocks: u64,
        op: impl FnOnce(&dyn Member) -> std::io::Result<()>,
    ) -> Result<(), Fault> {
        let Some(dev) = dev else {
            return Err(Fault::missing(slot));
        };
        let t0 = std::time::Instant::now();
        let r = op(dev.as_ref());
        fanout::observe(
            &self.counters[slot as usize].op_ns_mean,
            t0.elapsed().as_nanos() as u64,
        );
        match r {
            Ok(()) => {
                done.fetch_add(blocks, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                self.counters[slot as usize]
                    .errors
                    .fetch_add(1, Ordering::Relaxed);
                Err(Fault::new(slot, Some(dev), &e))
            }
        }
    }

    /// Write `data` at `offset`; with `fua` the members written are synced before returning.
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoFail> {
        self.check_range(offset, data.len() as u64)?;
        if data.is_empty() {
            return Ok(());
        }
        self.busy.store(true, Ordering::Relaxed);
        let first = offset / BLOCK as u64;
        let count = (data.len() / BLOCK) as u64;
        let per_row = self.geo.blocks_per_stripe();
        let (r0, r1) = (first / per_row, (first + count - 1) / per_row);
        let guard = self.locks.lock(r0, r1);
        self.intent_begin(r0, r1)?;
        let mut touched = SlotSet::default();
        let mut result = Ok(());
        let piece = |row: u64| {
            let a = first.max(row * per_row);
            let b = (first + count).min((row + 1) * per_row);
            (
                row,
                a,
                b - a,
                &data[((a - first) as usize) * BLOCK..((b - first) as usize) * BLOCK],
            )
        };
        if r1 > r0 && self.fan_out(0..self.geo.disks()) {
            // Slow members: the rows' read-modify-writes go out together, as the model plans
            // a request's rows as one read phase and one write phase (written one after
            // another, a write over two rows took two in series). Every row is attempted;
            // the first error is the request's.
            let rows: Vec<_> = (r0..=r1).map(piece).collect();
            let done = fanout::each(true, rows, |(row, a, n, src)| {
                let mut t = SlotSet::default();
                (self.write_row(row, a, n, src, &mut t), t)
            });
            for (r, t) in done {
                touched.union(t);
                if result.is_ok() {
                    result = r;
                }
            }
        } else {
            for row in r0..=r1 {
                let (row, a, n, src) = piece(row);
                result = self.write_row(row, a, n, src, &mut touched);
                if result.is_err() {
                    break;
                }
            }
        }
        if let Some(cache) = &self.cache {
            cache.invalidate(first, count);
        }
        if result.is_ok() && fua {
            result = self.sync_slots(touched);
        }
        drop(guard);
        self.intent_end(r0, r1);
        result
    }

    /// Write zeros over a range (NBD WRITE_ZEROES and TRIM), in bounded pieces.
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> Result<(), IoFail> {
        self.check_range(offset, len)?;
        zero_pieces(offset, len, |at, zeros| self.write(at, zeros, fua))
    }

    /// fdatasync the members of `which`; one that fails its sync is failed (md does the
    /// same: Linux reports a lost write-back once per descriptor, so a later sync would
    /// succeed over data the kernel dropped).
    pub(crate) fn sync_slots(&self, which: SlotSet) -> Result<(), IoFail> {
        // The devices are looked up first so no lock is held across the syncs, which run
        // all at once when the members are slow (an fdatasync on a disk is).
        let devs: Vec<(u32, Arc<dyn Member>)> = {
            let st = self.read_state();
            which
                .iter()
                .filter_map(|slot| Some((slot, st.devs[slot as usize].clone()?)))
                .collect()
        };
        let parallel = self.fan_out_syncs(devs.iter().map(|&(s, _)| s));
        let done = fanout::each(parallel, devs, |(slot, d)| {
            let t0 = std::time::Instant::now();
            let r = d.sync();
            fanout::observe(
                &self.counters[slot as usize].sync_ns_mean,
                t0.elapsed().as_nanos() as u64,
            );
            r.map_err(|e| Fault::new(slot, Some(&d), &e))
        });
        for f in done.into_iter().filter_map(Result::err) {
            self.fail_device(&f, "sync")?;
        }
        Ok(())
    }

    /// Write blocks `first..first + count` of one row (the row lock is held by the caller).
    pub(crate) fn write_row(
        &self,
        row: u64,
        first: u64,
        count: u64,
        src: &[u8],
        touched: &mut SlotSet,
    ) -> Result<(), IoFail> {
        self.write_row_with(row, touched, |touched| {
            self.write_row_once(row, first, count, src, touched)
        })
    }

    /// Run `once` (one attempt at a row's write) until it succeeds, then settle its failed
    /// writes: a full disk is the request's error, any other failure fails its member.
    fn write_row_with(
        &self,
        row: u64,
        touched: &mut SlotSet,
        mut once: impl FnMut(&mut SlotSet) -> RowAttempt,
    ) -> Result<(), IoFail> {
        let failed = self.with_retries(format_args!("row {row}"), || once(touched))?;
        self.settle_row_writes(row, failed)
    }

    /// After a row's write: the writes that failed (`failed`).
    pub(crate) fn settle_row_writes(&self, row: u64, failed: Vec<Fault>) -> Result<(), IoFail> {
        // A full file system under a member is the request's error, not the member's: the
        // row's other writes landed, so its redundancy is resynced from its data.
        if let Some(f) = failed.iter().find(|f| f.no_space) {
            self.queue_resync(row);
            return Err(IoFail::NoSpace(format!(
                "row {row}: {}: {} (the member is kept; free space and retry)",
                f.dev.as_ref().map_or("(missing)", |d| d.path()),
                f.why
            )));
        }
        // Write-phase failures: the row is consistent without these members.
        for f in &failed {
            self.fail_device(f, "write error")?;
        }
        Ok(())
    }

    /// One attempt; `Ok(devices that failed a write)`, `Err(Ok(fault))` for a read failure.
    fn write_row_once(
        &self,
        row: u64,
        first: u64,
        count: u64,
        src: &[u8],
        touched: &mut SlotSet,
    ) -> RowAttempt {
        let st = self.read_state();
        if let Some(d) = &st.dead {
            return Err(Err(IoFail::Failed(d.clone())));
        }
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            let (plan, ws, rs) = &mut *s;
            st.array.plan_write(first, count, plan);
            let pages = (first..first + count)
                .map(|lba| (lba, &src[((lba - first) as usize) * BLOCK..][..BLOCK]));
            self.run_row_plan(&st, row, plan, ws, rs, pages, touched, None)
        })
    }

    /// Carry out `plan`, the plan of a write of `pages` (each a block's address and new
    /// bytes) to row `row`: its reads, the new parity of every column whose parity it
    /// writes, its writes. `st` is held for the attempt. `after_reads` is called once the
    /// plan's reads are in `ws` (its columns counted from the plan's first, given) and
    /// before any write.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_row_plan<'a>(
        &self,
        st: &super::State,
        row: u64,
        plan: &Plan,
        ws: &mut Workspace,
        rs: &mut RowScratch,
        pages: impl Iterator<Item = (u64, &'a [u8])>,
        touched: &mut SlotSet,
        after_reads: Option<AfterReads<'_>>,
    ) -> RowAttempt {
        let n = self.geo.disks() as usize;
        let bpu = self.geo.blocks_per_stripe_unit();
        let base = self.geo.row_block(row);
        let per_row = self.geo.blocks_per_stripe();
        let level = self.geo.level();
        if plan.ops.is_empty() {
            return Ok(Vec::new());
        }
        self.row_writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.row_plan_ops
            .fetch_add(plan.ops.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let c0 = plan.ops.iter().map(|o| o.block - base).min().unwrap_or(0);
        let c1 = plan
            .ops
            .iter()
            .map(|o| o.block - base + u64::from(o.count))
            .max()
            .unwrap_or(0);
        debug_assert!(c1 <= u64::from(bpu));
        // The written range never leaves the columns the plan touches.
        let (c0, width) = (c0 as u32, (c1 - c0) as usize);
        ws.reset(n, c0, width);
        // New data of every written slot, lost members included (parity needs it).
        for (lba, page) in pages {
            let off = lba - row * per_row;
            let slot = (off / u64::from(bpu)) as u32;
            let col = (off % u64::from(bpu)) as u32;
            if col < c0 || col >= c0 + width as u32 {
                continue;
            }
            let (d0, copies) = self.geo.copies(row, slot);
            for d in d0..d0 + copies {
                ws.new_mut(d as usize, (col - c0) as usize, 1)
                    .copy_from_slice(page);
            }
        }
        // The plan's reads, all at once when the members are slow; then its writes.
        let parallel = self.fan_out(plan.ops.iter().map(|o| o.disk));
        let reads: Vec<_> = plan.ops.iter().filter(|o| o.op == Op::Read).collect();
        let spans: Vec<(usize, usize, usize)> = reads
            .iter()
            .map(|op| {
                let col = (op.block - base) as usize - c0 as usize;
                (op.disk as usize, col, op.count as usize)
            })
            .collect();
        let jobs: Vec<_> = reads.iter().zip(ws.old_spans_mut(&spans)).collect();
        let done = fanout::each(parallel, jobs, |(op, buf)| {
            let dev = st.devs[op.disk as usize].clone();
            self.member_read(op.disk, dev, op.block, buf)
        });
        done.into_iter()
            .collect::<Result<(), Fault>>()
            .map_err(Ok)?;
        if let Some(f) = after_reads {
            f(plan, ws, c0);
        }
        if matches!(level, Level::Raid5 | Level::Raid6) {
            let par = self.geo.parity_disks(row);
            // In Q's syndrome order (md's), which column.rs weights by g^position.
            rs.data.clear();
            rs.data.extend(
                (0..self.geo.data_disks()).map(|i| self.geo.syndrome_disk(row, i) as usize),
            );
            rs.lost.clear();
            rs.lost.extend((0..n as u32).map(|d| st.array.lost(d, row)));
            rs.cols.clear();
            rs.cols.resize(width, false);
            for op in plan.ops.iter().filter(|o| o.op == Op::Write) {
                if matches!(self.geo.role(row, op.disk), Role::P | Role::Q) {
                    let col = (op.block - base) as usize - c0 as usize;
                    rs.cols[col..col + op.count as usize].fill(true);
                }
            }
            for (c, _) in rs.cols.iter().enumerate().filter(|(_, &w)| w) {
                let ok = ws.parity_column(
                    c,
                    &rs.data,
                    par.p.map(|d| d as usize),
                    par.q.map(|d| d as usize),
                    &rs.lost,
                );
                if !ok {
                    return Err(Err(IoFail::Failed(format!(
                        "row {row}: the write plan gathered too little to update parity"
                    ))));
                }
            }
        }
        let writes: Vec<_> = plan.ops.iter().filter(|o| o.op == Op::Write).collect();
        for op in &writes {
            touched.insert(op.disk);
        }
        let ws = &*ws;
        let done = fanout::each(parallel, writes, |op| {
            let col = (op.block - base) as usize - c0 as usize;
            let dev = st.devs[op.disk as usize].as_ref();
            let buf = ws.new_ref(op.disk as usize, col, op.count as usize);
            self.member_write(op.disk, dev, op.block, buf)
        });
        Ok(done.into_iter().filter_map(Result::err).collect())
    }
}

/// Call `write(at, zeros)` over `offset..offset + len` in pieces of at most 1 MiB of zeros
/// (bounded: one call per MiB), stopping at the first error.
pub(crate) fn zero_pieces(
    offset: u64,
    len: u64,
    mut write: impl FnMut(u64, &'static [u8]) -> Result<(), IoFail>,
) -> Result<(), IoFail> {
    const PIECE: u64 = 1 << 20;
    static ZEROS: [u8; PIECE as usize] = [0; PIECE as usize];
    let mut at = offset;
    while at < offset + len {
        let n = PIECE.min(offset + len - at);
        write(at, &ZEROS[..n as usize])?;
        at += n;
    }
    Ok(())
}
