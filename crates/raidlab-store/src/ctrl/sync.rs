//! The write-intent bitmap, resync after an unclean stop, and md's `check`.
//!
//! Like md's bitmap, the array is cut into regions of rows; a region's bit is set (and the
//! bitmap made durable on the members) before the first write into it, and cleared lazily
//! once no write has been in flight there for `CLEAR_AFTER`. After a crash only the rows of
//! regions whose bit is set can have data and parity out of step, so a restart resyncs those
//! rows only, in the background, while serving: each row is locked, its data read and its
//! parity (or the other mirror copies) rewritten from the data.
//!
//! Like md, no bit is cleared while a slot is not in sync (failed, missing or being
//! rebuilt): every region written since a member left stays set until the slot is whole
//! again, and `cleared_events` records when a bit was last cleared. A device that left its
//! slot in sync at or after that event missed only the writes of set regions, so `ctl
//! re-add` rebuilds only those onto it (`ctrl::readd`).

use crate::sync::Instant;
use std::time::Duration;

use raidlab::array::Level;
use raidlab::disk::Class;

use super::column::BLOCK;
use super::{Controller, IoFail};
use crate::member::timed;
use crate::parity;

/// Bits in the bitmap at most (a 4 KiB bit array).
pub const REGIONS_MAX: u64 = 32768;
/// A dirty region with no write in flight is cleared after this long.
pub const CLEAR_AFTER: Duration = Duration::from_secs(2);

#[derive(Default)]
pub struct Resync {
    pub rows_per_region: u64,
    pub dirty: Vec<bool>,
    inflight: Vec<u32>,
    last_write: Vec<Option<Instant>>,
    /// Rows still to resync after an unclean start (a queue of regions, lowest first).
    pub todo: Vec<u64>,
    pub resynced_rows: u64,
    pub repaired_rows: u64,
    /// Bitmap writes made (each one write and sync of every member's bitmap): to set bits
    /// before a write, and to clear idle ones.
    pub set_writes: u64,
    pub clear_writes: u64,
    /// The event count when a bit was last cleared (or the bitmap started empty); `None`
    /// when unknown (a bitmap unreadable at assembly): no re-add is then partial.
    pub cleared_events: Option<u64>,
    /// Versions of the bitmap: `version` counts the changes that must reach the members,
    /// `durable` is the newest the members hold, and `set_at[g]` the version that set
    /// region `g`'s bit. A writer into `g` waits until `durable >= set_at[g]`.
    version: u64,
    durable: u64,
    set_at: Vec<u64>,
    /// A bitmap write is in flight (one at a time, each of the newest version when it
    /// starts, so the last to land is the newest), and whether the changes since the last
    /// write set a bit (counted as a set write) or only cleared some.
    writing: bool,
    pending_set: bool,
}

/// Member bytes a bitmap region covers unless `array create --bitmap-chunk` says otherwise:
/// md's default for an internal bitmap. A region's bit is written (every member's bitmap,
/// synced) when a write first dirties it, and cleared once it has been idle: with one row
/// per region (what 1 GiB members gave before this default), a random workload wrote a
/// bitmap before nearly every destage, 1.9 member operations per destage beside the
/// destage's own 7.8 under STOW's ramp on disk-timed members. The price of larger regions
/// is a longer resync after a crash (whole regions) and a coarser `ctl re-add`.
pub const REGION_BYTES_DEFAULT: u64 = 64 << 20;

/// Rows per bitmap region for an array of `rows` rows at least (the bitmap holds at most
/// `REGIONS_MAX` bits).
pub fn rows_per_region(rows: u64) -> u64 {
    rows.div_ceil(REGIONS_MAX).max(1)
}

/// Rows per region for regions of `region_bytes` of each member (whole chunks of
/// `chunk_bytes`), raised to what fits the bitmap and capped at the array's rows.
pub fn rows_per_region_of(rows: u64, chunk_bytes: u64, region_bytes: u64) -> u64 {
    (region_bytes / chunk_bytes.max(1))
        .max(rows_per_region(rows))
        .min(rows.max(1))
}

/// Whether a bitmap of `rows_per_region` rows per region and `regions` regions is one an
/// array of `rows` rows may carry.
pub fn regions_fit(rows: u64, rows_per_region: u64, regions: usize) -> bool {
    rows_per_region >= 1
        && rows_per_region <= rows.max(1)
        && rows.div_ceil(rows_per_region) == regions as u64
        && regions as u64 <= REGIONS_MAX
}

/// What `check` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub rows: u64,
    /// Rows whose parity (or mirror copies) disagree with their data.
    pub mismatches: u64,
    /// Rows that could not be checked (a member lost in that row leaves no redundancy to
    /// compare, or RAID-0).
    pub skipped: u64,
}

impl Controller {
    pub(crate) fn resync_lock(&self) -> crate::sync::MutexGuard<'_, Resync> {
        self.resync.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Set up the bitmap; `dirty_on_disk` holds the regions a previous unclean run left set
    /// (they are queued for resync).
    pub fn init_intent(&self, dirty_on_disk: Option<Vec<bool>>) {
        self.init_intent_regions(rows_per_region(self.shape.rows()), dirty_on_disk)
    }

    /// `init_intent` with regions of `rpr` rows (what the array's bitmaps record).
    pub fn init_intent_regions(&self, rpr: u64, dirty_on_disk: Option<Vec<bool>>) {
        debug_assert!(rpr >= 1 && rpr <= self.shape.rows().max(1));
        let regions = self.shape.rows().div_ceil(rpr) as usize;
        let mut r = self.resync_lock();
        r.rows_per_region = rpr;
        r.dirty = vec![false; regions];
        r.inflight = vec![0; regions];
        r.last_write = vec![None; regions];
        r.set_at = vec![0; regions];
        r.cleared_events = Some(self.read_state().events());
        if let Some(d) = dirty_on_disk {
            for (i, &bit) in d.iter().enumerate().take(regions) {
                if bit {
                    r.dirty[i] = true;
                    r.todo.push(i as u64);
                }
            }
            r.todo.reverse();
        }
    }

    /// Take the bits the members' bitmaps hold (set while a slot was not in sync, kept for
    /// `ctl re-add`) and when they were last cleared, as assembly found them. The bits are
    /// not queued for resync (`init_intent` queues those of an unclean stop).
    pub fn init_kept(&self, kept: &[bool], cleared_events: Option<u64>) {
        let mut r = self.resync_lock();
        for (d, &k) in r.dirty.iter_mut().zip(kept) {
            *d |= k;
        }
        r.cleared_events = cleared_events;
    }

    /// Whether bits may be cleared: every slot in sync and the array alive. Otherwise a
    /// slot's member is missing writes, and the bits of the regions written since it left
    /// are what lets `ctl re-add` resync only those.
    fn clearable(st: &super::State) -> bool {
        st.dead.is_none() && st.array.failed().is_empty()
    }

    /// Before writing rows `r0..=r1`: set their regions' bits, durable before returning.
    pub(crate) fn intent_begin(&self, r0: u64, r1: u64) -> Result<(), IoFail> {
        self.intent_begin_all(&[(r0, r1)])
    }

    /// `intent_begin` for several row ranges at once, with one bitmap write for all the
    /// regions they newly dirty (a destage round's rows: one write and sync of the bitmap
    /// per round rather than per row). Each range is ended with `intent_end`.
    ///
    /// The bitmap's lock is not held through the write: a writer into regions already set
    /// and durable goes on at once, and one whose regions a write in flight is setting
    /// waits for that write alone. Held through it, every destage waited for every bitmap
    /// write: on STOW's ramp with CSCAN (disk-timed members, seed 1, 750 IOPS) a set write
    /// waited 35-58 ms in the members' destage queues, and the store's mean response at
    /// 750 IOPS was 25.6 ms, against 12.2 ms with one region (a single set write); 12.6 ms
    /// with this and the first class (`bitmap_durable`).
    pub(crate) fn intent_begin_all(&self, ranges: &[(u64, u64)]) -> Result<(), IoFail> {
        let mut r = self.resync_lock();
        if r.rows_per_region == 0 {
            return Ok(());
        }
        let mut changed = false;
        let mut need = 0;
        let next = r.version + 1;
        for &(r0, r1) in ranges {
            for g in r0 / r.rows_per_region..=r1 / r.rows_per_region {
                let g = g as usize;
                r.inflight[g] += 1;
                if !r.dirty[g] {
                    r.dirty[g] = true;
                    r.set_at[g] = next;
                    changed = true;
                }
                need = need.max(r.set_at[g]);
            }
        }
        if changed {
            if self.is_clean() {
                self.set_clean(false);
            }
            r.version = next;
            r.pending_set = true;
        }
        let (r, res) = self.bitmap_durable(r, need);
        drop(r);
        if let Err(f) = res {
            for &(r0, r1) in ranges {
                self.intent_end(r0, r1);
            }
            return Err(f);
        }
        Ok(())
    }

    /// Wait until the members' bitmaps hold version `need` of the bitmap, writing it when no
    /// write is in flight (one writer at a time, so writes land in version order). A write
    /// that fails on some members fails them (md fails a member whose bitmap write fails)
    /// and counts as durable on the others; `Err` when that leaves the array dead.
    fn bitmap_durable<'a>(
        &'a self,
        mut r: crate::sync::MutexGuard<'a, Resync>,
        need: u64,
    ) -> (crate::sync::MutexGuard<'a, Resync>, Result<(), IoFail>) {
        // Bounded: each pass either finds `need` durable, or writes a version >= `need`
        // (the version only grows), or waits for the write in flight, which then ends.
        loop {
            if r.durable >= need {
                return (r, Ok(()));
            }
            if r.writing {
                r = self.resync_cv.wait(r).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            r.writing = true;
            let version = r.version;
            let dirty = r.dirty.clone();
            let cleared = r.cleared_events;
            if std::mem::take(&mut r.pending_set) {
                r.set_writes += 1;
            } else {
                r.clear_writes += 1;
            }
            drop(r);
            // In the members' first class, whoever writes it: every write into a region
            // being set waits for it. In the destager's class a set write waited behind the
            // destages already queued (35-58 ms on STOW's ramp with CSCAN at 750 IOPS).
            let class = timed::thread_class();
            timed::set_thread_class(Class::Foreground);
            let mut res = Ok(());
            if let Err(e) = self.meta.write_intent(&dirty, cleared) {
                res = self.fail_meta_devices(&e);
            }
            timed::set_thread_class(class);
            r = self.resync_lock();
            r.writing = false;
            r.durable = r.durable.max(version);
            self.resync_cv.notify_all();
            if res.is_err() {
                return (r, res);
            }
        }
    }

    pub(crate) fn intent_end(&self, r0: u64, r1: u64) {
        let mut r = self.resync_lock();
        if r.rows_per_region == 0 {
            return;
        }
        let now = Instant::now();
        for g in r0 / r.rows_per_region..=r1 / r.rows_per_region {
            let g = g as usize;
            r.inflight[g] -= 1;
            r.last_write[g] = Some(now);
        }
    }

    /// Clear the bits of regions idle for `CLEAR_AFTER` (all idle ones when `all`), except
    /// those still queued for resync. Returns how many were cleared. Nothing is cleared
    /// while a slot is not in sync (see the module doc).
    ///
    /// The members are synced first: a cleared bit must never be durable while a write of
    /// its region is not, or a crash could leave that row's data and parity out of step
    /// with no bit to resync it (md writes its bitmap with a preflush for the same reason).
    /// A region written after the sync began keeps its bit.
    pub fn intent_clear_idle(&self, all: bool) -> usize {
        let idle = |r: &Resync, g: usize, now: Instant| {
            r.inflight[g] == 0
                && (all || r.last_write[g].is_none_or(|t| now.duration_since(t) >= CLEAR_AFTER))
        };
        if !Self::clearable(&self.read_state()) {
            return 0;
        }
        let candidates: Vec<usize> = {
            let r = self.resync_lock();
            let now = Instant::now();
            (0..r.dirty.len())
                .filter(|&g| r.dirty[g] && idle(&r, g, now) && !r.todo.contains(&(g as u64)))
                .collect()
        };
        if candidates.is_empty() {
            return 0;
        }
        let synced_at = Instant::now();
        // A member that fails its sync is failed; its rows are then degraded, not torn.
        let _ = self.sync_slots(super::SlotSet::all(self.shape.disks));
        let mut r = self.resync_lock();
        // Checked again under the bitmap's lock: a member failing from here on did hold
        // every write of the regions cleared (they all ended before the sync above), and
        // the event recorded is at most the last one it was in sync at.
        let events = {
            let st = self.read_state();
            if !Self::clearable(&st) {
                return 0;
            }
            st.events()
        };
        let mut cleared = 0;
        for g in candidates {
            let untouched = r.inflight[g] == 0 && r.last_write[g].is_none_or(|t| t <= synced_at);
            if r.dirty[g] && untouched && !r.todo.contains(&(g as u64)) {
                r.dirty[g] = false;
                cleared += 1;
            }
        }
        if cleared > 0 {
            r.cleared_events = Some(events);
            r.version += 1;
            let need = r.version;
            // A member its write fails on is failed; the clears are best effort.
            let _ = self.bitmap_durable(r, need);
        }
        cleared
    }

    /// Queue the region of `row` for resync (its redundancy may disagree with its data,
    /// e.g. after a write one member refused for want of space). Its bit stays set.
    pub(crate) fn queue_resync(&self, row: u64) {
        let mut r = self.resync_lock();
        if r.rows_per_region == 0 {
            return;
        }
        let g = row / r.rows_per_region;
        r.dirty[g as usize] = true;
        if !r.todo.contains(&g) {
            r.todo.push(g);
        }
    }

    /// Whether a resync is pending (rows of dirty regions after an unclean stop).
    pub fn resync_pending(&self) -> bool {
        !self.resync_lock().todo.is_empty()
    }

    /// Resync one queued region (all its rows). Returns false when nothing is queued.
    pub fn resync_step(&self) -> bool {
        let (g, rpr) = {
            let r = self.resync_lock();
            match r.todo.last() {
                Some(&g) => (g, r.rows_per_region),
                None => return false,
            }
        };
        let first = g * rpr;
        let last = ((g + 1) * rpr).min(self.shape.rows());
        let mut repaired = 0;
        for row in first..last {
            if self.stopping() {
                return true;
            }
            if let Ok(Some(true)) = self.sync_row(row, true) {
                repaired += 1;
            }
        }
        let mut r = self.resync_lock();
        r.todo.pop();
        r.resynced_rows += last - first;
        r.repaired_rows += repaired;
        true
    }

    /// md's check: compare every row's parity (or copies) with its data; nothing is written.
    pub fn check(&self) -> CheckReport {
        let mut rep = CheckReport::default();
        for row in 0..self.shape.rows() {
            rep.rows += 1;
            match self.sync_row(row, false) {
                Ok(Some(true)) => rep.mismatches += 1,
                Ok(Some(false)) => {}
                Ok(None) | Err(_) => rep.skipped += 1,
            }
        }
        rep
    }

    /// Compare (and with `repair`, rewrite) the redundancy of one row from its data.
    /// `Ok(Some(mismatch))`, `Ok(None)` when the row has no redundancy left to compare.
    pub(crate) fn sync_row(&self, row: u64, repair: bool) -> Result<Option<bool>, IoFail> {
        let _row = self.locks.lock_row(row);
        let st = self.read_state();
        if let Some(d) = &st.dead {
            return Err(IoFail::Failed(d.clone()));
        }
        let n = self.geo.disks();
        let level = self.geo.level();
        let lost: Vec<u32> = (0..n).filter(|&d| st.array.lost(d, row)).collect();
        // A RAID-6 row missing one unit still has one redundant unit to bring in line.
        let one_left = level == Level::Raid6 && lost.len() == 1;
        if level == Level::Raid0 || (!lost.is_empty() && !one_left) {
            return Ok(None);
        }
        let bpu = self.geo.blocks_per_stripe_unit() as usize;
        let block = self.geo.row_block(row);
        let mut units: Vec<Vec<u8>> = vec![vec![0u8; bpu * BLOCK]; n as usize];
        for d in (0..n).filter(|d| !lost.contains(d)) {
            let dev = st.devs[d as usize].clone();
            if let Err(f) = self.member_read(d, dev, block, &mut units[d as usize]) {
                // A read error fails the member, as on any other path; the row is then
                // degraded and has nothing left to compare.
                drop(st);
                self.fail_device(&f, "read error during check or resync")?;
                return Ok(None);
            }
        }
        // What every non-data unit should hold, from the data.
        let mut mismatch = false;
        let mut fixes: Vec<(u32, Vec<u8>)> = Vec::new();
        if one_left {
            // The unit left to check is Q, or P when Q is the lost one. A lost data unit is
            // taken to be what P says (nothing tells which of P and Q a crash left stale);
            // then the checked parity is recomputed from the data and compared.
            let ndata = self.geo.data_disks() as usize;
            let par = self.geo.parity_disks(row);
            let (pd, qd) = (par.p.expect("RAID-6 has P"), par.q.expect("RAID-6 has Q"));
            let order: Vec<u32> = self.geo.parity_order(row).collect();
            debug_assert_eq!(order[ndata..], [pd, qd]);
            let checked = if lost[0] == qd { pd } else { qd };
            let mut missing: Vec<usize> = order
                .iter()
                .enumerate()
                .filter(|(_, &d)| d == lost[0] || d == checked)
                .map(|(i, _)| i)
                .collect();
            missing.sort_unstable();
            let on_disk = units[checked as usize].clone();
            {
                let mut bufs: Vec<Option<&mut [u8]>> =
                    units.iter_mut().map(|u| Some(u.as_mut_slice())).collect();
                let mut refs: Vec<&mut [u8]> = order
                    .iter()
                    .map(|&d| bufs[d as usize].take().expect("row members are distinct"))
                    .collect();
                parity::reconstruct(ndata, &mut refs, &missing);
            }
            if units[checked as usize] != on_disk {
                mismatch = true;
                fixes.push((checked, std::mem::take(&mut units[checked as usize])));
            }
        }
        match level {
            _ if one_left => {}
            Level::Raid1 | Level::Raid10 => {
                for slot in 0..self.geo.data_disks() {
                    let (d0, copies) = self.geo.copies(row, slot);
                    for d in d0 + 1..d0 + copies {
                        if units[d as usize] != units[d0 as usize] {
                            mismatch = true;
                            fixes.push((d, units[d0 as usize].clone()));
                        }
                    }
                }
            }
            Level::Raid5 | Level::Raid6 => {
                let mut p = vec![0u8; bpu * BLOCK];
                let mut q = vec![0u8; bpu * BLOCK];
                // Data in Q's syndrome order (md's): the i-th is weighted by g^i.
                for i in 0..self.geo.data_disks() {
                    let d = self.geo.syndrome_disk(row, i) as usize;
                    parity::xor_into(&mut p, &units[d]);
                    if level == Level::Raid6 {
                        parity::mul_xor_into(&mut q, &units[d], i as usize);
                    }
                }
                let par = self.geo.parity_disks(row);
                if let Some(pd) = par.p {
                    if units[pd as usize] != p {
                        mismatch = true;
                        fixes.push((pd, p));
                    }
                }
                if let Some(qd) = par.q {
                    if units[qd as usize] != q {
                        mismatch = true;
                        fixes.push((qd, q));
                    }
                }
            }
            Level::Raid0 => {}
        }
        if repair {
            let mut failed = Vec::new();
            for (d, unit) in &fixes {
                if let Err(f) = self.member_write(*d, st.devs[*d as usize].as_ref(), block, unit) {
                    failed.push(f);
                }
            }
            drop(st);
            for f in failed {
                self.fail_device(&f, "write error during resync")?;
            }
        }
        Ok(Some(mismatch))
    }
}
