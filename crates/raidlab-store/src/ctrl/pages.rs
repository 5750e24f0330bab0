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
//!
//! The plan's reads also give the write cache its partial parities ([`BeforeRowWrites`]):
//! read separately before, they were 4.3 more member operations per destage under the
//! same ramp.

use super::column::Workspace;
use super::io::SCRATCH;
use super::{Controller, IoFail, SlotSet, State};
use crate::ctrl::column::BLOCK;
use raidlab::array::Level;
use raidlab::cache::write::plan::sparse_parity_row;
use raidlab::workload::Op;

/// What a destage does between a row's reads and its first write
/// (`Controller::write_row_pages_begun`), given the row and its partial parities: per
/// column of the stripe unit that the write rewrites in part (the page offset inside the
/// unit), the XOR of the row's data pages in that column that the write leaves alone, as
/// they are now. They come from the reads the row's parity update makes anyway, as md's
/// partial parity log takes them: for a read-modify-write the old parity XOR the old data
/// rewritten, for a reconstruct-write the XOR of the data it reads. `None` when the row is
/// written run by run (a lost member, or no parity): the callee then reads them itself, and
/// is called with the row unlocked. Called at most once per row, before any of its writes.
pub(crate) type BeforeRowWrites<'a> = &'a (dyn Fn(u64, Option<&[(u64, Vec<u8>)]>) + Sync);

impl Controller {
    /// Write `runs` (each a first block address and its pages' bytes, ascending, all inside
    /// row `row`) under the row's lock and write intent. Not synced. (The destager holds
    /// the intent already and calls `write_row_pages_begun`.)
    #[cfg(test)]
    pub(crate) fn write_row_pages(&self, row: u64, runs: &[(u64, &[u8])]) -> Result<(), IoFail> {
        self.intent_begin(row, row)?;
        let result = self.write_row_pages_begun(row, runs, None);
        self.intent_end(row, row);
        result
    }

    /// `write_row_pages` for a caller that holds the row's write intent already (the
    /// destager begins its rows' together, `intent_begin_all`): the intent lock is not
    /// taken, so a bitmap write of other rows in progress does not hold the writes up.
    /// With `before`, a healthy RAID-5/6 row always takes one parity update (even one run
    /// of pages), and `before` is called between its reads and its writes.
    pub(crate) fn write_row_pages_begun(
        &self,
        row: u64,
        runs: &[(u64, &[u8])],
        before: Option<BeforeRowWrites<'_>>,
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
        let called = std::cell::Cell::new(before.is_none());
        let mut touched = SlotSet::default();
        // Bounded: a second pass happens only when the locked pass found that the row
        // cannot take one update and `before` was not called; it is then called (unlocked)
        // first, and with it called a locked pass always writes.
        let mut result = Ok(());
        for pass in 0..2 {
            if let (Some(f), false) = (before, called.get()) {
                if pass > 0 || !self.one_update(&self.read_state(), row) {
                    // Unlocked: the callee reads the row through the controller.
                    f(row, None);
                    called.set(true);
                }
            }
            let guard = self.locks.lock_row(row);
            let wrote = self.write_row_pages_locked(row, runs, &mut touched, before, &called);
            drop(guard);
            match wrote {
                Some(r) => {
                    result = r;
                    break;
                }
                None => assert!(pass == 0, "row {row}: not written after `before`"),
            }
        }
        if let Some(cache) = &self.cache {
            for &(lba, b) in runs {
                cache.invalidate(lba, (b.len() / BLOCK) as u64);
            }
        }
        result
    }

    /// `None`: nothing written, and `before` must be called unlocked first (the row lost a
    /// member since the caller looked).
    fn write_row_pages_locked(
        &self,
        row: u64,
        runs: &[(u64, &[u8])],
        touched: &mut SlotSet,
        before: Option<BeforeRowWrites<'_>>,
        called: &std::cell::Cell<bool>,
    ) -> Option<Result<(), IoFail>> {
        let row_lba = row * self.geo.blocks_per_stripe();
        let present = |i: u64| {
            let lba = row_lba + i;
            runs.iter()
                .any(|&(a, b)| lba >= a && lba < a + (b.len() / BLOCK) as u64)
        };
        // One attempt: `Ok(None)` when the row cannot take one update (write it run by run).
        let sparse = self.with_retries(format_args!("row {row}"), || {
            let st = self.read_state();
            if let Some(d) = &st.dead {
                return Err(Err(IoFail::Failed(d.clone())));
            }
            if (runs.len() < 2 && before.is_none()) || !self.one_update(&st, row) {
                return Ok(None);
            }
            SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                let (plan, ws, rs) = &mut *s;
                plan.ops.clear();
                sparse_parity_row(&st.array, row_lba, &present, plan);
                plan.normalize();
                let pages = runs.iter().flat_map(|&(a, b)| {
                    b.chunks(BLOCK)
                        .enumerate()
                        .map(move |(i, p)| (a + i as u64, p))
                });
                let mut after_reads = |plan: &raidlab::array::Plan, ws: &Workspace, c0: u32| {
                    if let (Some(f), false) = (before, called.get()) {
                        let pps = self.partial_parities(row, plan, ws, c0, &present);
                        f(row, Some(&pps));
                        called.set(true);
                    }
                };
                self.run_row_plan(
                    &st,
                    row,
                    plan,
                    ws,
                    rs,
                    pages,
                    touched,
                    Some(&mut after_reads),
                )
                .map(Some)
            })
        });
        match sparse {
            Err(e) => Some(Err(e)),
            Ok(Some(failed)) => Some(self.settle_row_writes(row, failed)),
            // Run by run; `before` first if it was not called (unlocked: see the caller).
            Ok(None) if !called.get() => None,
            Ok(None) => Some(runs.iter().try_for_each(|&(lba, b)| {
                self.write_row(row, lba, (b.len() / BLOCK) as u64, b, touched)
            })),
        }
    }

    /// The partial parities of a healthy RAID-5/6 row (see [`BeforeRowWrites`]) from the
    /// old contents that `plan` (the row's one parity update, of the pages `present` says)
    /// has read into `ws`.
    fn partial_parities(
        &self,
        row: u64,
        plan: &raidlab::array::Plan,
        ws: &Workspace,
        c0: u32,
        present: &dyn Fn(u64) -> bool,
    ) -> Vec<(u64, Vec<u8>)> {
        let bpu = u64::from(self.geo.blocks_per_stripe_unit());
        let data = self.geo.data_disks();
        let base = self.geo.row_block(row);
        let p = self
            .geo
            .parity_disks(row)
            .p
            .expect("a RAID-5/6 row has a P");
        let reads_at = |disk: u32, block: u64| {
            plan.ops.iter().any(|o| {
                o.op == Op::Read
                    && o.disk == disk
                    && o.block <= block
                    && block < o.block + u64::from(o.count)
            })
        };
        let mut out = Vec::new();
        for j in 0..bpu {
            let hit = (0..data)
                .filter(|&s| present(u64::from(s) * bpu + j))
                .count() as u32;
            if hit == 0 || hit == data {
                continue;
            }
            let col = (j - u64::from(c0)) as usize;
            let mut pp = vec![0u8; BLOCK];
            // Read-modify-write reads the column's parity: the pages left alone are the
            // old parity XOR the old pages rewritten. Reconstruct-write reads them.
            let rmw = reads_at(p, base + j);
            if rmw {
                crate::parity::xor_into(&mut pp, ws.old_ref(p as usize, col, 1));
            }
            for s in 0..data {
                if present(u64::from(s) * bpu + j) == rmw {
                    let d = self.geo.data_disk(row, s);
                    debug_assert!(reads_at(d, base + j), "the plan read slot {s} at {j}");
                    crate::parity::xor_into(&mut pp, ws.old_ref(d as usize, col, 1));
                }
            }
            out.push((j, pp));
        }
        out
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

    /// Fill the array with `model`, fail member `fail`, and return row 1 and the blocks of
    /// `pages` (data slot, column) in it, ascending.
    fn fill_and_pick(
        c: &Controller,
        model: &[u8],
        fail: Option<u32>,
        pages: &[(u64, u64)],
    ) -> (u64, Vec<u64>) {
        c.write(0, model, false).unwrap();
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
        (row, lbas)
    }

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
        let (row, lbas) = fill_and_pick(&c, &model, fail, pages);
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

    /// Write `pages` (data slot, column) of row 1 with a `before` hook and return what it
    /// was given, beside the partial parities the array held before the write (per column
    /// rewritten in part, the XOR of the column's pages left alone).
    #[allow(clippy::type_complexity)]
    fn partial_parities_of(
        level: Level,
        disks: u32,
        fail: Option<u32>,
        pages: &[(u64, u64)],
    ) -> (Vec<Option<Vec<(u64, Vec<u8>)>>>, Vec<(u64, Vec<u8>)>) {
        let sh = shape(level, disks, 8);
        let m = mem_members(&sh, &format!("pp-{level:?}-{fail:?}-{pages:?}"), disks);
        let (c, _) = controller(&sh, &m, Options::default());
        let model = pattern(5, c.size_bytes() as usize);
        let (row, lbas) = fill_and_pick(&c, &model, fail, pages);
        let bpu = CHUNK / BLOCK as u64;
        let data = u64::from(c.geo.data_disks());
        let row_lba = row * c.geo.blocks_per_stripe();
        let new = pattern(13, lbas.len() * BLOCK);
        let runs: Vec<(u64, &[u8])> = lbas
            .iter()
            .enumerate()
            .map(|(k, &lba)| (lba, &new[k * BLOCK..(k + 1) * BLOCK]))
            .collect();
        let mut want = Vec::new();
        for j in 0..bpu {
            let left: Vec<u64> = (0..data)
                .map(|s| row_lba + s * bpu + j)
                .filter(|lba| !lbas.contains(lba))
                .collect();
            if left.is_empty() || left.len() as u64 == data {
                continue;
            }
            let mut pp = vec![0u8; BLOCK];
            for lba in left {
                let at = lba as usize * BLOCK;
                crate::parity::xor_into(&mut pp, &model[at..at + BLOCK]);
            }
            want.push((j, pp));
        }
        let got = std::sync::Mutex::new(Vec::new());
        let hook = |r: u64, pps: Option<&[(u64, Vec<u8>)]>| {
            assert_eq!(r, row);
            if pps.is_none() {
                // Called unlocked: the callee may read the row through the controller.
                let mut b = vec![0u8; BLOCK];
                c.read(row_lba * BLOCK as u64, &mut b).unwrap();
            }
            got.lock().unwrap().push(pps.map(<[_]>::to_vec));
        };
        c.intent_begin(row, row).unwrap();
        c.write_row_pages_begun(row, &runs, Some(&hook)).unwrap();
        c.intent_end(row, row);
        let mut after = model.clone();
        for (k, &lba) in lbas.iter().enumerate() {
            let at = lba as usize * BLOCK;
            after[at..at + BLOCK].copy_from_slice(&new[k * BLOCK..][..BLOCK]);
        }
        assert!(read_all(&c) == after, "the row's pages read back");
        (got.into_inner().unwrap(), want)
    }

    #[test]
    fn partial_parities_come_from_a_read_modify_write() {
        // Columns 0 (slot 0) and 3 (slot 1): read-modify-write (4 reads against 6).
        let (got, want) = partial_parities_of(Level::Raid5, 5, None, &[(0, 0), (1, 3)]);
        assert_eq!(want.len(), 2);
        assert_eq!(got, vec![Some(want)]);
    }

    #[test]
    fn partial_parities_come_from_a_reconstruct_write() {
        // Column 2 written in slots 0, 1, 2 of 4: reconstruct-write reads slot 3 alone.
        let (got, want) = partial_parities_of(
            Level::Raid5,
            5,
            None,
            &[(0, 2), (1, 2), (2, 2), (0, 0), (1, 0), (3, 0)],
        );
        assert_eq!(want.len(), 2);
        assert_eq!(got, vec![Some(want)]);
    }

    #[test]
    fn partial_parities_of_raid6_and_of_one_run() {
        let (got, want) = partial_parities_of(Level::Raid6, 6, None, &[(0, 1), (2, 1), (3, 2)]);
        assert_eq!(got, vec![Some(want)]);
        // One run of consecutive pages takes the one update too when asked for them.
        let (got, want) = partial_parities_of(Level::Raid5, 5, None, &[(1, 1), (1, 2)]);
        assert_eq!(want.len(), 2);
        assert_eq!(got, vec![Some(want)]);
        // A whole row has none.
        let all: Vec<(u64, u64)> = (0..4).flat_map(|s| (0..4).map(move |c| (s, c))).collect();
        let (got, want) = partial_parities_of(Level::Raid5, 5, None, &all);
        assert!(want.is_empty());
        assert_eq!(got, vec![Some(Vec::new())]);
    }

    #[test]
    fn a_row_with_a_lost_member_asks_for_its_partial_parities_unlocked() {
        for fail in 0..5 {
            let (got, _) = partial_parities_of(Level::Raid5, 5, Some(fail), &[(0, 0), (2, 3)]);
            assert_eq!(got, vec![None], "member {fail} failed");
        }
    }

    #[test]
    fn a_row_with_a_lost_member_is_written_run_by_run() {
        let pages = [(0, 0), (0, 2), (2, 3), (3, 1)];
        for fail in 0..5 {
            write_pages(Level::Raid5, 5, Some(fail), &pages);
        }
    }
}
