//! The I/O planner: one logical read or write becomes a list of per-disk operations.
//!
//! A plan is two phases: every `Read` op (old data, old parity, or survivors for
//! reconstruction) completes before any `Write` op is issued. Ops are kept sorted by (reads
//! first, disk, block) with contiguous blocks of one disk merged, so a plan has one canonical
//! form whatever order it was built in.
//!
//! Parity writes are planned per row. Inside a row the written range cuts the unit offsets
//! `0..bpu` into at most three segments (boundaries 0, start offset, end offset, bpu), and every
//! written unit covers whole segments, so the plan is decided per segment with no per-block
//! loop. For each touched segment the parity must be brought up to date one of three ways:
//!
//! - RMW (read-modify-write): read the old data of the written blocks and the old parity,
//!   then write new data and parity;
//! - RCW (reconstruct-write): read the data blocks that are *not* written, then write;
//! - full reconstruct: read every surviving block of the segment (RAID-6 with two failed data
//!   disks of which only one is written: both lost blocks must be solved for first).
//!
//! A healthy row takes whichever of RMW and RCW reads fewer blocks over the whole row (writes
//! are the same either way), RMW on a tie; a full row needs no reads under RCW. A failed data
//! disk forces the choice per segment: where its block is written only RCW works (its old
//! value is gone), where it is not written only RMW does (RCW would have to read it).
//! Without any surviving parity, only the surviving data is written.

use super::layout::{Geometry, Level, Role};
use super::mode::Mode;
use crate::workload::Op;

/// One per-disk operation of a plan: `count` contiguous blocks from `block` on `disk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DiskOp {
    pub disk: u32,
    pub op: Op,
    pub block: u64,
    pub count: u32,
}

impl DiskOp {
    fn key(&self) -> (bool, u32, u64, u32) {
        (self.op == Op::Write, self.disk, self.block, self.count)
    }

    /// Extend this operation over `next` when both are on one disk in one direction and
    /// `next` starts inside it or right at its end; false (and nothing changed) otherwise,
    /// or when the union would not fit a `u32` count.
    #[inline]
    fn absorb(&mut self, next: &DiskOp) -> bool {
        let end = self.block.saturating_add(u64::from(self.count));
        if self.disk != next.disk || self.op != next.op || !(self.block..=end).contains(&next.block)
        {
            return false;
        }
        let union_end = end.max(next.block.saturating_add(u64::from(next.count)));
        match u32::try_from(union_end - self.block) {
            Ok(count) => {
                self.count = count;
                true
            }
            Err(_) => false,
        }
    }
}

/// How far back [`Plan::push_merging`] looks for an operation to extend.
const MERGE_LOOKBACK_OPS: usize = 8;

/// A reusable list of per-disk operations (cleared by each `plan_*` call; no allocation once
/// it has grown to the largest plan). Reads come first; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub ops: Vec<DiskOp>,
}

impl Plan {
    /// Total blocks read.
    pub fn read_blocks(&self) -> u64 {
        self.blocks(Op::Read)
    }

    /// Total blocks written.
    pub fn write_blocks(&self) -> u64 {
        self.blocks(Op::Write)
    }

    fn blocks(&self, op: Op) -> u64 {
        self.ops
            .iter()
            .filter(|o| o.op == op)
            .map(|o| u64::from(o.count))
            .sum()
    }

    #[inline]
    fn push(&mut self, disk: u32, op: Op, block: u64, count: u32) {
        debug_assert!(count > 0);
        self.ops.push(DiskOp {
            disk,
            op,
            block,
            count,
        });
    }

    /// Sort into canonical order and merge ops that continue or overlap each other on one
    /// disk. The planners call it on every plan; the timed engine calls it on the
    /// concatenated plans of a multi-block request, where two reconstructions of one row can
    /// read the same survivor block.
    pub fn normalize(&mut self) {
        if self.ops.len() < 2 {
            // Already normal.
            return;
        }
        self.ops.sort_unstable_by_key(DiskOp::key);
        let mut w = 0usize;
        for r in 0..self.ops.len() {
            let cur = self.ops[r];
            // Sorted: `cur` starts at or after the operation before it on its disk.
            if w > 0 && self.ops[w - 1].absorb(&cur) {
                continue;
            }
            self.ops[w] = cur;
            w += 1;
        }
        self.ops.truncate(w);
    }

    /// Append `op`, or extend the latest of the last few operations of the same disk and
    /// direction when `op` starts inside or right at the end of it. The union of the ranges
    /// is unchanged, so [`Plan::normalize`] gives the same plan afterwards; it only has
    /// fewer, already ordered operations to sort (the blocks of one request arrive in
    /// ascending order, each disk's run growing at its end).
    #[inline]
    pub fn push_merging(&mut self, op: DiskOp) {
        let lookback = self.ops.len().saturating_sub(MERGE_LOOKBACK_OPS);
        let same = self.ops[lookback..]
            .iter_mut()
            .rev()
            .find(|o| o.disk == op.disk && o.op == op.op);
        if !same.is_some_and(|last| last.absorb(&op)) {
            self.ops.push(op);
        }
    }
}

/// Plan the read of `lba`: one op on its disk when that disk can serve it, otherwise the
/// reconstruction reads (see `docs/array.md`). While a disk rebuilds, its rebuilt rows are
/// read from the replacement (redirection) and the others reconstruct.
pub fn plan_read(geo: &Geometry, mode: &Mode, lba: u64, plan: &mut Plan) {
    plan.ops.clear();
    let loc = geo.locate(lba);
    let row = loc.block / u64::from(geo.blocks_per_stripe_unit());
    if !mode.lost_for_read(loc.disk, row) {
        plan.push(loc.disk, Op::Read, loc.block, 1);
        return;
    }
    let n = geo.disks();
    match geo.level() {
        // Unreachable in a valid array (RAID-0 survives no failure); plan nothing.
        Level::Raid0 => {}
        Level::Raid1 => {
            // The next readable copy after the preferred one, cyclically.
            if let Some(d) = (1..n)
                .map(|i| (loc.disk + i) % n)
                .find(|&d| !mode.lost_for_read(d, row))
            {
                plan.push(d, Op::Read, loc.block, 1);
            }
        }
        Level::Raid10 => {
            let partner = loc.disk ^ 1;
            debug_assert!(!mode.lost_for_read(partner, row));
            plan.push(partner, Op::Read, loc.block, 1);
        }
        Level::Raid5 | Level::Raid6 => {
            // RAID-5 reads every survivor. RAID-6 with this disk the only loss in the row
            // rebuilds from P (skipping Q, n-2 reads); with two it needs all n-2 survivors.
            let lost_here = mode
                .failed()
                .iter()
                .filter(|&&d| mode.lost_for_read(d, row))
                .count();
            let skip_q = geo.level() == Level::Raid6 && lost_here == 1;
            let q = geo.parity_disks(geo.stripe_of(lba)).q;
            for d in 0..n {
                if d == loc.disk || mode.lost_for_read(d, row) || (skip_q && Some(d) == q) {
                    continue;
                }
                plan.push(d, Op::Read, loc.block, 1);
            }
        }
    }
    debug_assert!(plan.ops.iter().all(|o| !mode.lost_for_read(o.disk, row)));
}

/// Blocks of one row written by a request: data slots `first_slot..=last_slot`; the first
/// starts at unit offset `start`, the last ends (exclusive) at `end`; slots between are whole.
#[derive(Debug, Clone, Copy)]
struct RowWrite {
    row: u64,
    first_slot: u32,
    last_slot: u32,
    start: u32,
    end: u32,
}

impl RowWrite {
    /// Whether data `slot` is written at unit offset `off`.
    #[inline]
    fn writes(&self, slot: u32, off: u32) -> bool {
        slot >= self.first_slot
            && slot <= self.last_slot
            && (slot != self.first_slot || off >= self.start)
            && (slot != self.last_slot || off < self.end)
    }

    /// Total blocks written in the row.
    fn len(&self, bpu: u32) -> u64 {
        let slots = u64::from(self.last_slot - self.first_slot);
        slots * u64::from(bpu) + u64::from(self.end) - u64::from(self.start)
    }

    /// Elementary offset segments: sorted, distinct boundaries among {0, start, end, bpu}.
    fn segments(&self, bpu: u32) -> ([u32; 4], usize) {
        let mut b = [0, self.start, self.end, bpu];
        b.sort_unstable();
        let mut n = 1;
        for i in 1..4 {
            if b[i] != b[n - 1] {
                b[n] = b[i];
                n += 1;
            }
        }
        (b, n)
    }
}

/// How a segment's parity is brought up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Update {
    Rmw,
    Rcw,
    Full,
}

/// Rows whose planning pushed this many raw ops trigger a merge, which bounds the plan's
/// length by O(disks) for long sequential writes.
const MERGE_EVERY_OPS: usize = 256;

/// Plan the write of `count` blocks from `first`. The range is clipped at `u64::MAX`
/// (exclusive); the work is proportional to the rows it spans.
pub fn plan_write(geo: &Geometry, mode: &Mode, first: u64, count: u64, plan: &mut Plan) {
    plan.ops.clear();
    let end = first.saturating_add(count);
    let bpu = geo.blocks_per_stripe_unit();
    let bpu64 = u64::from(bpu);
    let per_row = geo.blocks_per_stripe();
    let mut pos = first;
    let mut merge_at = MERGE_EVERY_OPS;
    while pos < end {
        let row = pos / per_row;
        let row_start = row * per_row;
        let a = pos - row_start;
        let b = end.min(row_start.saturating_add(per_row)) - row_start;
        debug_assert!(a < b && b <= per_row);
        let w = RowWrite {
            row,
            first_slot: (a / bpu64) as u32,
            last_slot: ((b - 1) / bpu64) as u32,
            start: (a % bpu64) as u32,
            end: ((b - 1) % bpu64) as u32 + 1,
        };
        match geo.level() {
            Level::Raid5 | Level::Raid6 => parity_row(geo, mode, &w, plan),
            _ => plain_row(geo, mode, &w, plan),
        }
        pos = row_start + b;
        if plan.ops.len() >= merge_at {
            plan.normalize();
            merge_at = plan.ops.len() + MERGE_EVERY_OPS;
        }
    }
    plan.normalize();
    debug_assert!(plan.ops.iter().all(|o| !mode.lost(o.disk, o.block / bpu64)));
}

/// RAID-0 and mirrors: write every written unit to each healthy copy.
fn plain_row(geo: &Geometry, mode: &Mode, w: &RowWrite, plan: &mut Plan) {
    let bpu = geo.blocks_per_stripe_unit();
    let base = geo.row_block(w.row);
    for slot in w.first_slot..=w.last_slot {
        let lo = if slot == w.first_slot { w.start } else { 0 };
        let hi = if slot == w.last_slot { w.end } else { bpu };
        let (first, copies) = geo.copies(w.row, slot);
        for d in first..first + copies {
            if !mode.lost(d, w.row) {
                plan.push(d, Op::Write, base + u64::from(lo), hi - lo);
            }
        }
    }
}

/// RAID-5/6: one row of a write, with parity upkeep (see the module docs).
fn parity_row(geo: &Geometry, mode: &Mode, w: &RowWrite, plan: &mut Plan) {
    let n = geo.disks();
    let bpu = geo.blocks_per_stripe_unit();
    let base = geo.row_block(w.row);
    let par = geo.parity_disks(w.row);
    let live_parity = [par.p, par.q]
        .into_iter()
        .flatten()
        .filter(|&d| !mode.lost(d, w.row))
        .count() as u64;
    // Failed data slots of this row (at most two, since RAID-6 survives two failures).
    let mut lost = [u32::MAX; 2];
    let mut n_lost = 0usize;
    for &d in mode.failed() {
        if !mode.lost(d, w.row) {
            continue;
        }
        if let Role::Data(slot) = geo.role(w.row, d) {
            if n_lost < 2 {
                lost[n_lost] = slot;
                n_lost += 1;
            }
        }
    }
    let (bounds, nb) = w.segments(bpu);
    let segs = || (0..nb - 1).map(|i| (bounds[i], bounds[i + 1]));
    let touched = |off: u32| (w.first_slot..=w.last_slot).any(|s| w.writes(s, off));

    // Healthy-row choice: compare reads over the whole row (writes are equal either way).
    let healthy_choice = if n_lost == 0 && live_parity > 0 {
        let written = w.len(bpu);
        let t: u64 = segs()
            .filter(|&(lo, _)| touched(lo))
            .map(|(lo, hi)| u64::from(hi - lo))
            .sum();
        let rmw = written + live_parity * t;
        let rcw = u64::from(geo.data_disks()) * t - written;
        if rcw < rmw {
            Update::Rcw
        } else {
            Update::Rmw
        }
    } else {
        Update::Rmw
    };

    for (lo, hi) in segs() {
        if !touched(lo) {
            continue;
        }
        let len = hi - lo;
        let block = base + u64::from(lo);
        let update = match n_lost {
            0 => healthy_choice,
            1 if w.writes(lost[0], lo) => Update::Rcw,
            1 => Update::Rmw,
            _ => match (w.writes(lost[0], lo), w.writes(lost[1], lo)) {
                (true, true) => Update::Rcw,
                (false, false) => Update::Rmw,
                _ => Update::Full,
            },
        };
        for d in 0..n {
            if mode.lost(d, w.row) {
                continue;
            }
            let (read, write) = match geo.role(w.row, d) {
                Role::Data(slot) => {
                    let written = w.writes(slot, lo);
                    let read = live_parity > 0
                        && match update {
                            Update::Rmw => written,
                            Update::Rcw => !written,
                            Update::Full => true,
                        };
                    (read, written)
                }
                Role::P | Role::Q => (update != Update::Rcw, true),
            };
            if read {
                plan.push(d, Op::Read, block, len);
            }
            if write {
                plan.push(d, Op::Write, block, len);
            }
        }
    }
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    proptest::proptest! {
        /// Merging as planned, then normalizing, gives the plan normalizing alone gives.
        #[test]
        fn merging_as_planned_keeps_the_normal_plan(
            raw in proptest::collection::vec((0u32..3, proptest::bool::ANY, 0u64..40, 1u32..6), 0..40)
        ) {
            let ops: Vec<DiskOp> = raw
                .iter()
                .map(|&(disk, w, block, count)| DiskOp {
                    disk,
                    op: if w { Op::Write } else { Op::Read },
                    block,
                    count,
                })
                .collect();
            let mut want = Plan { ops: ops.clone() };
            want.normalize();
            let mut got = Plan::default();
            for op in &ops {
                got.push_merging(*op);
            }
            got.normalize();
            proptest::prop_assert_eq!(got.ops, want.ops);
        }
    }
}
