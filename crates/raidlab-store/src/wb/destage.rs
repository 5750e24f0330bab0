//! A destage round: the groups the cache's order picks (as many as the rate allows, up to
//! `max_destages`, or fewer when the caller asks), their in-flight pages written through
//! the array's planner (the groups of a round in parallel when the members are slow,
//! `ctrl::fanout`), the members synced (in parallel too), and only then their backup
//! records released and their frames freed. Who runs rounds, one at a time or several at
//! once, is `destage_pool.rs`.
//!
//! Every round is complete in itself: it protects its own rows (images, partial parities,
//! one commit), begins and ends its own rows' write intents, syncs the members after its
//! own writes and releases only its own records, so rounds of different threads may run at
//! once. They never share a page: a group in flight is out of the cache's order until its
//! round calls `finish_destage`, so a page rewritten meanwhile goes out in a later round of
//! that group, which starts only after this one has landed.

use crate::sync::Ordering;

use raidlab::cache::write::Destage;

use super::{dead, warn, Mode, WriteBack, BLOCK};
use crate::ctrl::{fanout, IoFail};

/// What one round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Round {
    /// Nothing to destage (or no destaging in this state).
    Idle,
    /// Destaged; `limited` when the rate allowed fewer than its maximum in flight.
    Ran { limited: bool },
}

/// A group being destaged: the cache's destage and where its pages are in the round buffer.
struct InFlight {
    d: Destage,
    /// Runs of consecutive pages: (first page, pages, byte offset in the round buffer).
    runs: Vec<(u64, u64, usize)>,
}

/// One round's state, reused from round to round by the thread that runs them: the copy
/// of its groups' pages (the buffer bounds the groups a round takes), and what its writes
/// left for the release.
pub(crate) struct Batch {
    buf: Vec<u8>,
    groups: Vec<InFlight>,
    /// Backup records protecting the rows (images, partial parities), released at the end.
    images: Vec<super::Handle>,
    result: Result<(), IoFail>,
    limited: bool,
    t_write: std::time::Instant,
    /// The rows' write intents, when begun by the caller for several rounds at once
    /// (`destage_pool.rs`): `Ok` when begun (ended after the writes, as always), `Err` when
    /// the bitmap write failed (nothing begun). `None`: the round begins its own.
    pub(super) intent: Option<Result<(), IoFail>>,
}

impl Batch {
    /// A round buffer of `bytes` (at least one group's).
    pub(super) fn new(bytes: usize) -> Batch {
        Batch {
            buf: vec![0u8; bytes],
            groups: Vec::new(),
            images: Vec::new(),
            result: Ok(()),
            limited: false,
            t_write: std::time::Instant::now(),
            intent: None,
        }
    }

    /// The rows the round writes, as write-intent ranges.
    pub(super) fn rows(&self, per_row: u64) -> Vec<(u64, u64)> {
        self.groups
            .iter()
            .map(|f| (f.d.first / per_row, f.d.first / per_row))
            .collect()
    }
}

impl WriteBack {
    /// Bytes of one group's pages (a stripe row's).
    pub(super) fn group_bytes(&self) -> usize {
        self.ctl.geo.blocks_per_stripe() as usize * BLOCK
    }

    /// One destage round run by the caller (tests drive the cache deterministically this
    /// way, with no destager thread): at the rate's allowance, or at its maximum with
    /// `force`. `false` when nothing was destaged.
    pub fn destage_step(&self, force: bool) -> bool {
        let mut b = Batch::new(self.group_bytes() * self.spec.max_destages.max(1) as usize);
        self.destage_round(&mut b, usize::MAX, force, false) != Round::Idle
    }

    /// A round of one group started and written, not yet synced nor released: tests hold
    /// several such destages in flight at once, in an order they choose, and end each with
    /// [`WriteBack::destage_end`].
    #[cfg(test)]
    pub(crate) fn destage_begin(&self, force: bool) -> Option<Batch> {
        let mut b = Batch::new(self.group_bytes());
        if !self.take(&mut b, 1, force, false) {
            return None;
        }
        self.write_batch(&mut b);
        Some(b)
    }

    /// Sync, release and free a round from [`WriteBack::destage_begin`].
    #[cfg(test)]
    pub(crate) fn destage_end(&self, mut b: Batch) {
        self.settle(&mut b);
    }

    /// Start, write and finish one round of at most `groups_max` destages. `Idle` when
    /// there was nothing to do (after waiting a little for work when `wait`).
    pub(super) fn destage_round(
        &self,
        b: &mut Batch,
        groups_max: usize,
        force: bool,
        wait: bool,
    ) -> Round {
        if !self.take(b, groups_max, force, wait) {
            return Round::Idle;
        }
        self.write_batch(b);
        self.settle(b);
        Round::Ran { limited: b.limited }
    }

    /// Start the round's destages while the rate allows (and `groups_max`, and the buffer):
    /// their dirty pages become in flight and are copied out. `false` when none started.
    pub(super) fn take(&self, b: &mut Batch, groups_max: usize, force: bool, wait: bool) -> bool {
        b.groups.clear();
        b.images.clear();
        b.result = Ok(());
        b.intent = None;
        let buf = &mut b.buf;
        let mut used = 0usize;
        let mut g = self.lock();
        if g.failed.is_some() {
            if wait {
                drop(self.wait(&self.work, g));
            }
            return false;
        }
        let allowed = if force || g.flushing > 0 || g.mode != Mode::Backed {
            g.cache.rate().max()
        } else {
            g.cache.allowed()
        };
        b.limited = allowed < g.cache.rate().max();
        let group_bytes = g.cache.group_pages() as usize * BLOCK;
        // Bounded: each pass starts a destage, and the cache holds at most `allowed`.
        while g.cache.inflight() < allowed
            && b.groups.len() < groups_max
            && used + group_bytes <= buf.len()
        {
            let Some(d) = g.cache.start_destage() else {
                break;
            };
            let mut runs: Vec<(u64, u64, usize)> = Vec::new();
            let bits = g.cache.flight_bits(d.slot).to_vec();
            for (w, &word) in bits.iter().enumerate() {
                let mut word = word;
                while word != 0 {
                    let i = w as u64 * 64 + u64::from(word.trailing_zeros());
                    word &= word - 1;
                    let lba = d.first + i;
                    let p = g
                        .pages
                        .get_mut(&lba)
                        .expect("an in-flight page has a frame");
                    debug_assert!(p.flight.is_none(), "page {lba} in flight twice");
                    p.flight = p.dirty.take();
                    let v = p.flight.expect("a destaged page was dirty");
                    let at = v.frame as usize * BLOCK;
                    buf[used..used + BLOCK].copy_from_slice(&g.frames[at..at + BLOCK]);
                    match runs.last_mut() {
                        Some((f, n, _)) if *f + *n == lba => *n += 1,
                        _ => runs.push((lba, 1, used)),
                    }
                    used += BLOCK;
                }
            }
            debug_assert_eq!(runs.iter().map(|r| r.1).sum::<u64>(), u64::from(d.pages));
            b.groups.push(InFlight { d, runs });
        }
        if b.groups.is_empty() {
            if wait {
                drop(self.wait(&self.work, g));
            }
            return false;
        }
        self.counters
            .destages_in_flight_max
            .fetch_max(u64::from(g.cache.inflight()), Ordering::Relaxed);
        true
    }

    /// Protect the round's rows, set their write intents, and write their pages (not
    /// synced). Failures are left in `b.result` (or lose the backup).
    pub(super) fn write_batch(&self, b: &mut Batch) {
        b.t_write = std::time::Instant::now();
        let round = &b.groups;
        let lost_before = self.lost_slots();
        // A destage of its own (the pool's, on slow members) takes its rows' partial
        // parities from the reads of their parity updates, committed between those reads
        // and the writes (`ctrl::pages::BeforeRowWrites`): no reads of its own, as md's
        // partial parity log. A round of several groups (fast members) reads them first
        // and commits them for all its rows at once: one backup commit per round.
        // (Mirrors and RAID-0 have no partial parities: nothing to ask for.)
        let in_row = round.len() == 1
            && self.backup.is_some()
            && matches!(
                self.ctl.shape().level,
                raidlab::array::Level::Raid5 | raidlab::array::Level::Raid6
            );
        b.images = match self.protect_rows(round, !in_row) {
            Ok(h) => h,
            Err(e) => {
                let mut g = self.lock();
                self.lose_backup(&mut g, &format!("backup write failed: {e}"));
                Vec::new()
            }
        };
        // The round's groups are rows of their own: written all at once when the members
        // are slow, so the round's destages are in flight on the members together.
        let parallel = round.len() > 1 && self.ctl.fan_out(0..self.ctl.shape().disks);
        let buf = &*b.buf;
        // The rows' write-intent bits, all set by one bitmap write (unless the caller set
        // them for several rounds at once): a random workload dirties a new region with
        // nearly every group, and a bitmap write syncs every member. Each group's own write
        // then finds its bit set.
        let per_row = self.ctl.geo.blocks_per_stripe();
        let rows = b.rows(per_row);
        let mut result = match b.intent.take() {
            Some(begun) => begun,
            None => self.ctl.intent_begin_all(&rows),
        };
        let row_handles = std::sync::Mutex::new(Vec::new());
        let before = |row: u64, pps: Option<&[(u64, Vec<u8>)]>| {
            let runs: Vec<(u64, u64)> = round
                .iter()
                .flat_map(|f| f.runs.iter())
                .filter_map(|&(lba, n, _)| {
                    let (a, z) = (lba.max(row * per_row), (lba + n).min((row + 1) * per_row));
                    (a < z).then_some((a, z - a))
                })
                .collect();
            let put = match pps {
                Some(pps) => self.partial_parity_read(row, &runs, pps),
                None => self.partial_parity(&[(row, runs)]),
            };
            match put.and_then(|h| self.commit_if(h)) {
                Ok(h) => row_handles
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(h),
                Err(e) => {
                    let mut g = self.lock();
                    self.lose_backup(&mut g, &format!("backup write failed: {e}"));
                }
            }
        };
        let before: Option<crate::ctrl::BeforeRowWrites<'_>> = in_row.then_some(&before);
        if result.is_ok() {
            let done = fanout::each(parallel, round.iter().collect(), |f: &InFlight| {
                // Row by row, all of a row's pages in one write (`ctrl/pages.rs`).
                let mut pieces: Vec<(u64, &[u8])> = Vec::new();
                for &(lba, n, at) in &f.runs {
                    let (mut a, mut at) = (lba, at);
                    while a < lba + n {
                        let end = (lba + n).min((a / per_row + 1) * per_row);
                        let bytes = (end - a) as usize * BLOCK;
                        pieces.push((a, &buf[at..at + bytes]));
                        (a, at) = (end, at + bytes);
                    }
                }
                pieces
                    .chunk_by(|x, y| x.0 / per_row == y.0 / per_row)
                    .try_for_each(|row_pieces| {
                        // The row's intent is begun above (or by the caller).
                        self.ctl.write_row_pages_begun(
                            row_pieces[0].0 / per_row,
                            row_pieces,
                            before,
                        )
                    })
            });
            if let Some(e) = done.into_iter().find_map(Result::err) {
                result = Err(e);
            }
            for &(r0, r1) in &rows {
                self.ctl.intent_end(r0, r1);
            }
        }
        b.images
            .extend(row_handles.into_inner().unwrap_or_else(|e| e.into_inner()));
        if result.is_ok() && self.lost_slots().iter().any(|s| !lost_before.contains(s)) {
            // A member failed during the writes: its units in these rows are now read
            // through parity, and a crash before the sync below could leave data and parity
            // half written. The round's writes are complete (not yet durable), so the lost
            // units read right now: image them before the sync, as for a row that was
            // degraded from the start. (A crash between the failure and this commit is
            // covered by the partial parities, `ppl.rs`.)
            match self.image_lost_units(round).and_then(|h| self.commit_if(h)) {
                Ok(h) => {
                    self.counters
                        .late_images
                        .fetch_add(h.len() as u64, Ordering::Relaxed);
                    b.images.extend(h);
                }
                Err(e) => {
                    let mut g = self.lock();
                    self.lose_backup(&mut g, &format!("backup write failed: {e}"));
                }
            }
        }
        b.result = result;
    }

    /// Sync the members after the round's writes, then release its backup records, then
    /// free its pages and end its destages in the cache. A failed round stops the cache.
    pub(super) fn settle(&self, b: &mut Batch) {
        let round = &b.groups;
        let t_sync = std::time::Instant::now();
        let mut result = std::mem::replace(&mut b.result, Ok(()));
        if result.is_ok() {
            // The backup's copies may go only once the members hold the pages durably.
            result = self.ctl.flush();
        }
        let t_release = std::time::Instant::now();
        if let Err(e) = result {
            // Only a dead array fails a write: keep the pages (readable from the cache, and
            // in the backup for a recovery once the array is repaired).
            let why = dead(&self.ctl).unwrap_or_else(|| e.to_string());
            warn(&format!(
                "destage failed, the write cache stops destaging: {why}"
            ));
            let mut g = self.lock();
            g.failed = Some(format!("destage failed: {why}"));
            self.room.notify_all();
            return;
        }
        // The members hold the round durably: its records go first, and only then do its
        // pages leave the cache. The other order left a moment in which the log's cleaner
        // (run by any writer's put) found a live record whose page the cache no longer had,
        // and lost the backup.
        if let Some(bk) = &self.backup {
            let released: Vec<super::Handle> = {
                let g = self.lock();
                round
                    .iter()
                    .flat_map(|f| f.runs.iter())
                    .flat_map(|&(first, n, _)| first..first + n)
                    .filter_map(|lba| {
                        let p = g.pages.get(&lba).expect("an in-flight page has a frame");
                        p.flight.expect("the page was in flight").handle
                    })
                    .collect()
            };
            bk.release_destaged(&released);
            if !b.images.is_empty() {
                if let Err(e) = bk.release_images(&b.images) {
                    let mut g = self.lock();
                    self.lose_backup(&mut g, &format!("backup write failed: {e}"));
                }
            }
        }
        {
            let mut g = self.lock();
            let occupied = g.cache.occupied();
            for f in round.iter() {
                for &(first, n, _) in &f.runs {
                    for lba in first..first + n {
                        let p = g
                            .pages
                            .get_mut(&lba)
                            .expect("an in-flight page has a frame");
                        let v = p.flight.take().expect("the page was in flight");
                        let gone = p.dirty.is_none();
                        if gone {
                            g.pages.remove(&lba);
                        }
                        g.free.push(v.frame);
                    }
                }
                g.cache.finish_destage(f.d.slot);
            }
            // One writer woken per page of room made, not every writer waiting: with
            // hundreds waiting on a full cache, each destage woke them all to take the lock
            // in turn and sleep again. A writer woken that takes no frame passes the wake-up
            // on (`write_cached`), and every wait ends within `WAIT_SLICE` regardless. A
            // drain or a write going through waits for other things (an empty cache, a
            // version landed), and room for every waiter wakes them all with one call.
            // The room made is what left the cache: a page rewritten in flight stays.
            let freed = occupied - g.cache.occupied();
            if g.flushing > 0
                || g.landing_waiters > 0
                || g.mode != Mode::Backed
                || freed >= u64::from(g.room_waiters)
            {
                self.room.notify_all();
            } else {
                for _ in 0..freed {
                    self.room.notify_one();
                }
            }
            // A slot is free: the destager may start another destage.
            self.work.notify_one();
        }
        let c = &self.counters;
        let ns = |d: std::time::Duration| d.as_nanos() as u64;
        c.destage_rounds.fetch_add(1, Ordering::Relaxed);
        c.destage_write_ns
            .fetch_add(ns(t_sync - b.t_write), Ordering::Relaxed);
        c.destage_sync_ns
            .fetch_add(ns(t_release - t_sync), Ordering::Relaxed);
        c.destage_release_ns
            .fetch_add(ns(t_release.elapsed()), Ordering::Relaxed);
    }

    /// Before a round's writes: the images of its rows' lost units and (with
    /// `partial_parity`) the partial parities of the rows it rewrites in part, committed
    /// together. Their handles, to
    /// release once the round is on the members.
    fn protect_rows(
        &self,
        round: &[InFlight],
        partial_parity: bool,
    ) -> std::io::Result<Vec<super::Handle>> {
        let mut h = self.image_lost_units(round)?;
        if !partial_parity {
            return self.commit_if(h);
        }
        let per_row = self.ctl.geo.blocks_per_stripe();
        let rows: Vec<(u64, Vec<(u64, u64)>)> = round
            .iter()
            .map(|f| {
                let runs = f.runs.iter().map(|&(s, n, _)| (s, n)).collect();
                (f.d.first / per_row, runs)
            })
            .collect();
        h.extend(self.partial_parity(&rows)?);
        self.commit_if(h)
    }

    /// Commit the backup when `h` holds records just put.
    fn commit_if(&self, h: Vec<super::Handle>) -> std::io::Result<Vec<super::Handle>> {
        if let (Some(b), false) = (&self.backup, h.is_empty()) {
            b.commit()?;
        }
        Ok(h)
    }

    /// Close the RAID-5/6 write hole for the rows of `round`: a unit of a row that is lost
    /// (failed, or not rebuilt yet) is read only through its row's parity, so a crash that
    /// lands part of a destage's data and parity writes would make it read wrong. Before
    /// the destage, the current contents of every lost data page of those rows that the
    /// destage does not itself rewrite are put in the backup as page images (the caller
    /// commits them); recovery writes them back first, which makes the row whole again.
    /// Returns the images' handles, to release once the destage is on the members.
    fn image_lost_units(&self, round: &[InFlight]) -> std::io::Result<Vec<super::Handle>> {
        let Some(b) = &self.backup else {
            return Ok(Vec::new());
        };
        let shape = self.ctl.shape();
        if !matches!(
            shape.level,
            raidlab::array::Level::Raid5 | raidlab::array::Level::Raid6
        ) {
            return Ok(Vec::new());
        }
        let per_row = self.ctl.geo.blocks_per_stripe();
        let bpu = u64::from(self.ctl.geo.blocks_per_stripe_unit());
        // Lost data pages per row of the round, from the array's state (taken before the
        // cache lock: the lock order is the array's state, then the cache).
        let mut wanted: Vec<u64> = Vec::new();
        {
            let st = self.ctl.read_state();
            if st.array.failed().is_empty() {
                return Ok(Vec::new());
            }
            for f in round {
                let row = f.d.first / per_row;
                for unit in 0..per_row / bpu {
                    let lba0 = row * per_row + unit * bpu;
                    let loc = self.ctl.geo.locate(lba0);
                    // A rebuilding member counts as lost in every row: a row rebuilt since
                    // the last durable checkpoint is lost again after a crash.
                    let lost = st.array.lost(loc.disk, loc.block / bpu)
                        || st.array.rebuilding(loc.disk).is_some();
                    if !lost {
                        continue;
                    }
                    for lba in lba0..lba0 + bpu {
                        let destaged = f.runs.iter().any(|&(s, n, _)| (s..s + n).contains(&lba));
                        if !destaged {
                            wanted.push(lba);
                        }
                    }
                }
            }
        }
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let mut data = vec![0u8; wanted.len() * BLOCK];
        // One read per run of consecutive pages: each reconstructs its row once.
        let mut i = 0;
        while i < wanted.len() {
            let mut n = 1;
            while i + n < wanted.len() && wanted[i + n] == wanted[i] + n as u64 {
                n += 1;
            }
            let at = wanted[i] * BLOCK as u64;
            if self
                .ctl
                .read(at, &mut data[i * BLOCK..(i + n) * BLOCK])
                .is_err()
            {
                // Only a dead array fails a read (member errors are served degraded): the
                // destage's own writes fail next and stop the destager; the backup is fine.
                return Ok(Vec::new());
            }
            i += n;
        }
        let mut handles = Vec::with_capacity(wanted.len());
        {
            let mut g = self.lock();
            for (i, &lba) in wanted.iter().enumerate() {
                g.seq += 1;
                let meta = super::RecMeta {
                    lba,
                    seq: g.seq,
                    kind: super::RecKind::Image,
                };
                let live = super::Live {
                    pages: &g.pages,
                    frames: &g.frames,
                };
                handles.push(b.put(meta, &data[i * BLOCK..(i + 1) * BLOCK], &live)?);
            }
        }
        self.counters
            .images
            .fetch_add(handles.len() as u64, Ordering::Relaxed);
        Ok(handles)
    }

    /// The slots whose units a destage treats as lost: failed, or being rebuilt.
    fn lost_slots(&self) -> Vec<u32> {
        let st = self.ctl.read_state();
        let mut v = st.array.failed().to_vec();
        for d in 0..self.ctl.shape().disks {
            if st.array.rebuilding(d).is_some() && !v.contains(&d) {
                v.push(d);
            }
        }
        v
    }
}
