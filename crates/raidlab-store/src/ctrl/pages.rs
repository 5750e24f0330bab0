//! A write of scattered pages of one stripe row with one parity update: the destager's.
//!
//! A write-back cache destages a group (a row) whose dirty pages lie anywhere in the row.
//! Written as one controller write per run of consecutive pages, a row of ten runs paid ten
//! read-modify-writes one after another, each reading and writing the same parity unit:
//! measured on a served RAID-5 of five disk-timed members under STOW's ramp, 13-14 member
//! operations per destage, about 20 pages each, and the members 60% busy at saturation.
//! The simulator plans the same group as one update (`raidlab::cache::write::plan`,
//! `sparse_parity_row`: read-modify-write or reconstruct-write, whichever reads fewer
//! blocks); this carries out that very plan. A row with a lost member (or a level without
//! parity) is written run by run as before, as the simulator plans it.

use super::io::SCRATCH;
use super::{Controller, IoFail, SlotSet, State};
use crate::ctrl::column::BLOCK;
use raidlab::array::Level;
use raidlab::cache::write::plan::sparse_parity_row;

impl Controller {
    /// Write `runs` (each a first block address and its pages' bytes, ascending, all inside
    /// row `row`) under the row's lock and write intent. Not synced. (The destager holds
    /// the intent already and calls `write_row_pages_begun`.)
    #[cfg(test)]
    pub(crate) fn write_row_pages(&self, row: u64, runs: &[(u64, &[u8])]) -> Result<(), IoFail> {
        self.intent_begin(row, row)?;
        let result = self.write_row_pages_begun(row, runs);
        self.intent_end(row, row);
        result
    }

    /// `write_row_pages` for a caller that holds the row's write intent already (the
    /// destager begins its rows' together, `intent_begin_all`): the intent lock is not
    /// taken, so a bitmap write of other rows in progress does not hold the writes up.
    pub(crate) fn write_row_pages_begun(
        &self,
        row: u64,
        runs: &[(u64, &[u8])],
    ) -> Result<(), IoFail> {
        let per_row = self.geo.blocks_per_stripe();
        let total: usize = runs.iter().map(|(_, b)| b.len()).sum();
        debug_assert!(runs.iter().all(|&(lba, b)| {
            lba / per_row == row && (lba + (b.len() / BLOCK) as u64 - 1) / per_row == row
        }));
        if runs.is_empty() || total == 0 {
            return Ok(());
        }
        self.check_range(runs[0].0 * BLOCK as u64, total as u64)?;
        self.busy.store(true, crate::sync::Ordering::Relaxed);
        let guard = self.locks.lock_row(row);
        let mut touched = SlotSet::default();
        let result = self.write_row_pages_locked(row, runs, &mut touched);
        if let Some(cache) = &self.cache {
            for &(lba, b) in runs {
                cache.invalidate(lba, (b.len() / BLOCK) as u64);
            }
        }
        drop(guard);
        result
    }

    fn write_row_pages_locked(
        &self,
        row: u64,
        runs: &[(u64, &[u8])],
        touched: &mut SlotSet,
    ) -> Result<(), IoFail> {
        // One attempt: `Ok(None)` when the row cannot take one update (write it run by run).
        let sparse = self.with_retries(format_args!("row {row}"), || {
            let st = self.read_state();
            if let Some(d) = &st.dead {
                return Err(Err(IoFail::Failed(d.clone())));
            }
            if runs.len() < 2 || !self.one_update(&st, row) {
                return Ok(None);
            }
            SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                let (plan, ws, rs) = &mut *s;
                let row_lba = row * self.geo.blocks_per_stripe();
                let present = |i: u64| {
                    let lba = row_lba + i;
                    runs.iter()
                        .any(|&(a, b)| lba >= a && lba < a + (b.len() / BLOCK) as u64)
                };
                plan.ops.clear();
                sparse_parity_row(&st.array, row_lba, &present, plan);
                plan.normalize();
                let pages = runs.iter().flat_map(|&(a, b)| {
                    b.chunks(BLOCK)
                        .enumerate()
                        .map(move |(i, p)| (a + i as u64, p))
                });
                self.run_row_plan(&st, row, plan, ws, rs, pages, touched)
                    .map(Some)
            })
        })?;
        match sparse {
            Some(failed) => self.settle_row_writes(row, failed),
            None => runs.iter().try_for_each(|&(lba, b)| {
                self.write_row(row, lba, (b.len() / BLOCK) as u64, b, touched)
            }),
        }
    }

    /// Whether row `row` takes one parity update for any pages: RAID-5/6 with every member
    /// present in the row (the simulator's destage planner asks the same).
    fn one_update(&self, st: &State, row: u64) -> bool {
        matches!(self.geo.level(), Level::Raid5 | Level::Raid6)
            && st.array.failed().is_empty()
            && (0..self.geo.disks()).all(|d| !st.array.lost(d, row))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{controller, mem_members, pattern, read_all, shape, CHUNK};
    use super::super::Options;
    use super::*;
    use crate::sync::Ordering;

    /// Write the pages (data slot, column) of row `row` with `write_row_pages`, check the
    /// bytes and the parity, and return the member blocks read and written.
    fn write_pages(
        level: Level,
        disks: u32,
        fail: Option<u32>,
        pages: &[(u64, u64)],
    ) -> (u64, u64) {
        let sh = shape(level, disks, 8);
        let m = mem_members(
            &sh,
            &format!("pages-{level:?}-{fail:?}-{}", pages.len()),
            disks,
        );
        let (c, _) = controller(&sh, &m, Options::default());
        let mut model = pattern(7, c.size_bytes() as usize);
        c.write(0, &model, false).unwrap();
        if let Some(d) = fail {
            c.fail_member(d, "test").unwrap();
        }
        let bpu = CHUNK / BLOCK as u64;
        let row = 1;
        let row_lba = row * c.geo.blocks_per_stripe();
        let mut lbas: Vec<u64> = pages
            .iter()
            .map(|&(s, col)| row_lba + s * bpu + col)
            .collect();
        lbas.sort_unstable();
        let new = pattern(11, lbas.len() * BLOCK);
        // Runs of consecutive pages, as the destager hands them.
        let mut runs: Vec<(u64, &[u8])> = Vec::new();
        let mut i = 0;
        while i < lbas.len() {
            let j = (i + 1..lbas.len())
                .find(|&j| lbas[j] != lbas[i] + (j - i) as u64)
                .unwrap_or(lbas.len());
            runs.push((lbas[i], &new[i * BLOCK..j * BLOCK]));
            i = j;
        }
        for (k, &lba) in lbas.iter().enumerate() {
            let at = lba as usize * BLOCK;
            model[at..at + BLOCK].copy_from_slice(&new[k * BLOCK..][..BLOCK]);
        }
        for s in c.counters() {
            s.reset();
        }
        c.write_row_pages(row, &runs).unwrap();
        let io = c.counters().iter().fold((0, 0), |(r, w), s| {
            (
                r + s.read_blocks.load(Ordering::Relaxed),
                w + s.write_blocks.load(Ordering::Relaxed),
            )
        });
        assert!(read_all(&c) == model, "the row's pages read back");
        if fail.is_none() {
            let rep = c.check();
            assert_eq!((rep.mismatches, rep.skipped), (0, 0), "{rep:?}");
        }
        io
    }

    #[test]
    fn scattered_pages_of_a_row_take_one_reconstruct_write() {
        // RAID-5 of 5, 4 blocks per unit. Columns 0 (slots 0, 3), 2 (slot 0), 3 (slots 0,
        // 2): read-modify-write would read 8 blocks, reconstruct-write 7 (the unwritten data
        // of those columns). One update: 7 blocks read, 5 data and 3 parity written.
        let io = write_pages(
            Level::Raid5,
            5,
            None,
            &[(0, 0), (0, 2), (0, 3), (2, 3), (3, 0)],
        );
        assert_eq!(io, (7, 8));
    }

    #[test]
    fn scattered_pages_of_a_row_take_one_read_modify_write() {
        // Columns 0 (slot 0) and 3 (slot 1): RMW reads 2 data + 2 parity, RCW would read 6.
        let io = write_pages(Level::Raid5, 5, None, &[(0, 0), (1, 3)]);
        assert_eq!(io, (4, 4));
    }

    #[test]
    fn raid6_scattered_pages_keep_both_parities() {
        // Columns 1 (slots 0, 2) and 2 (slot 3) of a RAID-6 of 6 (4 data): RMW reads
        // 3 data + 2x2 parity = 7, RCW 2 + 3 = 5; writes 3 data + 2x2 parity.
        let io = write_pages(Level::Raid6, 6, None, &[(0, 1), (2, 1), (3, 2)]);
        assert_eq!(io, (5, 7));
    }

    #[test]
    fn a_row_with_a_lost_member_is_written_run_by_run() {
        let pages = [(0, 0), (0, 2), (2, 3), (3, 1)];
        for fail in 0..5 {
            write_pages(Level::Raid5, 5, Some(fail), &pages);
        }
    }
}
