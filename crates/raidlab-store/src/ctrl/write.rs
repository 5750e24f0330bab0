//! The write path: a request's rows, each written through the planner's plan (read-modify-
//! write, reconstruct-write or full-stripe) with real parity, under the rows' locks.
//! Member errors follow `io.rs`'s rule.

use crate::sync::Ordering;

use raidlab::array::{Level, Plan, Role};
use raidlab::workload::Op;

use super::column::{Workspace, BLOCK};
use super::io::{AfterReads, RowAttempt, RowScratch, SCRATCH};
use super::{fanout, Controller, Fault, IoFail, SlotSet};

impl Controller {
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

    /// Write blocks `first..first + count` of one row (the row lock is held by the caller).
    pub(crate) fn write_row(
        &self,
        row: u64,
        first: u64,
        count: u64,
        src: &[u8],
        touched: &mut SlotSet,
    ) -> Result<(), IoFail> {
        // Attempts until one succeeds (each `Ok(devices that failed a write)`, or
        // `Err(Ok(fault))` for a read failure); then a full disk is the request's error, any
        // other failed write fails its member.
        let failed = self.with_retries(format_args!("row {row}"), || -> RowAttempt {
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
        })?;
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
