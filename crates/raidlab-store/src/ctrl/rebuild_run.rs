//! Rebuild of a run of consecutive rows: one read per survivor, one write per replacement.
//!
//! Rows are contiguous on every member (row `r` sits at `r * unit` on each), so a run of
//! rows is one extent per member. Rebuilding it a row at a time costs a positioning delay
//! per row and per member on a disk; a run reads each survivor's extent in one operation
//! (all survivors at once on slow members), solves every row in memory, and writes the
//! replacement's rows back in one operation per stretch of rows that need it. This is what
//! the simulator's disk-oriented reconstruction (DOR) gets from its per-disk readers, which
//! stream through the units, and from merging up to 16 consecutive units into one
//! replacement write (`raidlab::rebuild::dor::WRITE_UNITS_MAX`); md gets it from the block
//! layer merging its resync reads.
//!
//! The whole run holds its rows' locks shared: writes of those rows wait for the run (at
//! most [`RUN_BYTES_MAX`] per member, read then written); degraded reads of them do not.

use crate::sync::Arc;

use raidlab::array::Level;
use raidlab::rebuild::reads_for;

use super::column::BLOCK;
use super::{fanout, Controller, Fault};
use crate::member::Member;
use crate::parity;

/// Rows one run may hold: the simulator's DOR merges up to this many into one write.
pub const RUN_UNITS_MAX: u32 = raidlab::rebuild::dor::WRITE_UNITS_MAX;

/// Bytes of one member's extent in a run (bounds a rebuild thread's buffer at this times
/// the members; 16 units of 64 KiB fit).
pub const RUN_BYTES_MAX: u64 = 1 << 20;

/// Units a run of at most `run_bytes` per member holds with `chunk_bytes` units: whole
/// units, at least one, at most [`RUN_UNITS_MAX`] and [`RUN_BYTES_MAX`].
pub(crate) fn run_units(run_bytes: u64, chunk_bytes: u64) -> u32 {
    let per_unit = chunk_bytes.max(1);
    (run_bytes.min(RUN_BYTES_MAX) / per_unit).clamp(1, u64::from(RUN_UNITS_MAX)) as u32
}

/// One row's plan: which members are read for it and which are solved.
pub(super) struct RowPlan {
    /// Row members in slot order (data in Q's syndrome order, then P, then Q).
    pub order: Vec<u32>,
    /// Where in `order` the rebuilt unit lands.
    pub target_at: usize,
    /// Members this row reads (the rest of `order` is solved).
    pub reads: Vec<u32>,
    /// The row was already rebuilt (a resumed job): read along, not written.
    pub done: bool,
}

impl Controller {
    /// Units a run may hold on this array: the whole chunks of `--rebuild-run-kib` (1 MiB
    /// unless set), at least one.
    pub(crate) fn run_units_max(&self) -> u32 {
        run_units(self.opts.rebuild_run_bytes, self.shape.chunk_bytes)
    }

    /// Rebuild rows `first..first + count` of `slot` for rebuild job `job`. Returns the
    /// rows solved, written and marked rebuilt; `Err` names the device whose read or write
    /// failed.
    ///
    /// The state is read, the lock released, the rows solved and written, and only then are
    /// they marked rebuilt; by then the job may have ended and another started onto a new
    /// replacement in the same slot (the first one failed). So the run is tagged with its job
    /// and its target device, and marked only if both are still current: otherwise the new
    /// replacement's map would call the rows rebuilt without holding their data.
    pub(crate) fn rebuild_run(
        &self,
        slot: u32,
        first: u64,
        count: u32,
        job: u64,
    ) -> Result<u64, Fault> {
        assert!(
            (1..=RUN_UNITS_MAX).contains(&count),
            "a run of {count} rows"
        );
        let last = first + u64::from(count) - 1;
        // Shared: a run reads the survivors and writes only the replacement, which no read of
        // these rows touches until they are marked rebuilt below (`locks.rs`).
        let _rows = self.locks.share(first, last);
        let (plans, devs, target) = {
            let st = self.read_state();
            let Some(map) = st.array.rebuilding(slot) else {
                return Ok(0);
            };
            if !self.job_is(job) {
                return Ok(0);
            }
            let Some(plans) = self.row_plans(&st, map, slot, first, last) else {
                return Ok(0);
            };
            if plans.iter().all(|p| p.done) {
                return Ok(0);
            }
            let devs: Vec<Option<Arc<dyn Member>>> = st.devs.clone();
            (plans, devs, st.devs[slot as usize].clone())
        };
        let n = self.geo.disks();
        // Each member read at most once, over the whole run: the union of the rows' reads.
        let mut sources: Vec<u32> = plans.iter().flat_map(|p| p.reads.iter().copied()).collect();
        sources.sort_unstable();
        sources.dedup();
        let unit_bytes = self.geo.blocks_per_stripe_unit() as usize * BLOCK;
        let extent = unit_bytes * count as usize;
        let block = self.geo.row_block(first);
        RUN_BUFS.with(|cell| -> Result<(), Fault> {
            let mut bufs = cell.borrow_mut();
            // Member-major: slot d's extent is bufs[d * extent..][..extent].
            bufs.resize(n as usize * extent, 0);
            {
                let mut jobs: Vec<SourceRead> = Vec::with_capacity(sources.len());
                for (d, ext) in bufs.chunks_mut(extent).enumerate() {
                    if sources.binary_search(&(d as u32)).is_ok() {
                        jobs.push((d as u32, devs[d].clone(), ext));
                    }
                }
                let parallel = self.fan_out(sources.iter().copied());
                fanout::each(parallel, jobs, |(d, dev, buf)| {
                    self.member_read(d, dev, block, buf)
                })
                .into_iter()
                .collect::<Result<(), Fault>>()?;
            }
            // grid[d][i]: slot d's unit of the run's row i.
            let mut grid: Vec<Vec<&mut [u8]>> = bufs
                .chunks_mut(extent)
                .map(|ext| ext.chunks_mut(unit_bytes).collect())
                .collect();
            for (i, plan) in plans.iter().enumerate().filter(|(_, p)| !p.done) {
                let mut chunks: Vec<&mut [u8]> = plan
                    .order
                    .iter()
                    .map(|&d| std::mem::take(&mut grid[d as usize][i]))
                    .collect();
                self.solve_row(plan, &mut chunks);
            }
            drop(grid);
            // The replacement's stretches of rows to write (rows already rebuilt are
            // skipped, not rewritten); a failed write fails the replacement and its job.
            let ext = &bufs[slot as usize * extent..][..extent];
            let mut i = 0usize;
            while i < plans.len() {
                if plans[i].done {
                    i += 1;
                    continue;
                }
                let start = i;
                while i < plans.len() && !plans[i].done {
                    i += 1;
                }
                let at = block + (start * unit_bytes / BLOCK) as u64;
                let bytes = &ext[start * unit_bytes..i * unit_bytes];
                self.member_write(slot, target.as_ref(), at, bytes)?;
            }
            Ok(())
        })?;
        Ok(self.mark_rebuilt_if_current(slot, target.as_ref(), job, first, &plans))
    }

    /// The plan of each row `first..=last` for rebuilding `slot` (`map`: its rows already
    /// rebuilt); `None` for a level with nothing to rebuild.
    pub(super) fn row_plans(
        &self,
        st: &super::State,
        map: &raidlab::rebuild::SharedUnitMap,
        slot: u32,
        first: u64,
        last: u64,
    ) -> Option<Vec<RowPlan>> {
        let n = self.geo.disks();
        let mut plans: Vec<RowPlan> = Vec::with_capacity((last - first + 1) as usize);
        for row in first..=last {
            let reads: Vec<u32> = (0..n)
                .filter(|&d| {
                    reads_for(
                        &self.geo,
                        |x| x != slot && st.array.lost(x, row),
                        slot,
                        row,
                        d,
                    )
                })
                .collect();
            let (order, target_at) = self.row_order(slot, row, &reads)?;
            plans.push(RowPlan {
                order,
                target_at,
                reads,
                done: map.get(row),
            });
        }
        Some(plans)
    }

    /// Solve a row's lost units in `chunks` (the row's members in `plan.order`, those it
    /// reads filled in).
    pub(super) fn solve_row(&self, plan: &RowPlan, chunks: &mut [&mut [u8]]) {
        let missing: Vec<usize> = (0..plan.order.len())
            .filter(|&k| !plan.reads.contains(&plan.order[k]))
            .collect();
        debug_assert!(missing.contains(&plan.target_at));
        if matches!(self.geo.level(), Level::Raid5 | Level::Raid6) {
            parity::reconstruct(self.geo.data_disks() as usize, chunks, &missing);
        } else {
            let (src, dst) = chunks.split_at_mut(1);
            dst[0].copy_from_slice(src[0]);
        }
    }

    /// Mark the rows of `plans` (from `first`) that were not rebuilt before as rebuilt, if
    /// `job` is still the rebuild running and `target` still the device in `slot`; returns
    /// how many were marked.
    pub(super) fn mark_rebuilt_if_current(
        &self,
        slot: u32,
        target: Option<&Arc<dyn Member>>,
        job: u64,
        first: u64,
        plans: &[RowPlan],
    ) -> u64 {
        // Shared: the rows' own locks keep their writers out, and the map is set through a
        // shared reference (`SharedUnitMap`); no request waits for the marks. Held while
        // checking and marking, so no failure or new job comes between the two.
        let st = self.read_state();
        let same_target = match (&st.devs[slot as usize], target) {
            (Some(now), Some(t)) => Arc::ptr_eq(now, t),
            _ => false,
        };
        if !(same_target && st.array.rebuilding(slot).is_some() && self.job_is(job)) {
            return 0;
        }
        let mut marked = 0;
        for (row, plan) in (first..).zip(plans) {
            if !plan.done {
                st.array.mark_rebuilt(slot, row);
                marked += 1;
            }
        }
        marked
    }

    /// Row `row`'s members in slot order and where `slot`'s unit lands among them; `None`
    /// for a level with nothing to rebuild. `reads` are the members the row reads.
    fn row_order(&self, slot: u32, row: u64, reads: &[u32]) -> Option<(Vec<u32>, usize)> {
        let mut order: Vec<u32> = Vec::with_capacity(self.geo.disks() as usize);
        let at = match self.geo.level() {
            Level::Raid0 => return None,
            Level::Raid1 | Level::Raid10 => {
                order.push(*reads.first()?);
                order.push(slot);
                1
            }
            Level::Raid5 | Level::Raid6 => {
                order.extend(self.geo.parity_order(row));
                order.iter().position(|&d| d == slot)?
            }
        };
        Some((order, at))
    }
}

/// A survivor's read for a run: its slot, device and where its extent lands.
type SourceRead<'a> = (u32, Option<Arc<dyn Member>>, &'a mut [u8]);

crate::sync::thread_local! {
    /// One run's extents for a rebuild thread (reused: no allocation per run).
    static RUN_BUFS: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}
