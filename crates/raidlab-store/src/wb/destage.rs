//! The destager: one thread that asks the `WriteCache` for groups while the rate allows
//! (up to `max_destages`), writes their in-flight pages through the array's planner (the
//! groups of a round in parallel when the members are slow, `ctrl::fanout`), syncs the
//! members (in parallel too), and only then frees the frames and releases the backup
//! records. It also carries a lost backup
//! through its states (drain, void, write through, probe).

use crate::sync::Instant;
use crate::sync::{thread, Arc, Ordering};
use std::time::Duration;

use raidlab::cache::write::Destage;

use super::{dead, warn, Mode, WriteBack, BLOCK};
use crate::ctrl::{fanout, IoFail};

/// Bytes of page data one destage round copies out of the cache at most.
const ROUND_BYTES_MAX: usize = 16 << 20;
/// How often a write-through controller tries to bring its backup back.
const PROBE_EVERY: Duration = Duration::from_secs(5);

/// The least time between the starts of two rounds the rate holds below its maximum.
const ROUND_GAP: Duration = Duration::from_millis(10);
/// Bound on the waits of one `pace` (each wakes at a notification or the deadline).
const PACE_WAITS_MAX: u32 = 1_000;

/// What one round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
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

impl WriteBack {
    /// Start the destager thread; it ends after `stop`.
    pub fn spawn_destager(self: &Arc<Self>) -> thread::JoinHandle<()> {
        let me = Arc::clone(self);
        thread::Builder::new()
            .name("raidlab-destage".into())
            .spawn(move || me.destage_loop())
            .expect("spawning a thread")
    }

    fn destage_loop(&self) {
        // Destage I/O queues behind user I/O on disk-timed members.
        crate::member::timed::set_thread_class(raidlab::disk::Class::Destage);
        let group_bytes = self.ctl.geo.blocks_per_stripe() as usize * BLOCK;
        let mut buf = vec![0u8; ROUND_BYTES_MAX.max(group_bytes)];
        let mut round: Vec<InFlight> = Vec::new();
        let mut last_probe = Instant::now();
        while !self.stop.load(Ordering::SeqCst) {
            let t0 = Instant::now();
            match self.destage_round(&mut buf, &mut round, false, true) {
                Round::Idle => self.lost_backup_step(&mut last_probe),
                // Slow members (a disk's, a disk-timed member's) make a round long anyway.
                Round::Ran { limited: true } if !self.ctl.fan_out(0..self.ctl.shape().disks) => {
                    self.pace(ROUND_GAP.saturating_sub(t0.elapsed()))
                }
                Round::Ran { .. } => {}
            }
        }
    }

    /// After a round the rate held below its maximum: wait out the rest of `gap` unless
    /// the rate rises to its maximum, a FLUSH or drain wants everything, or the cache stops.
    /// On fast members a round takes well under `ROUND_GAP` and is mostly its fixed costs
    /// (a backup commit for its partial parities, a sync of every member it wrote, the
    /// release): started back to back at a low rate, rounds of one small group each paid
    /// them ~1,600 times a second at depth 1 and took the disk's flushes from the writers.
    /// Not called when the members are slow (their mean operation at or above
    /// `fanout::SLOW_NS_MIN`, as for disk-timed members): a round is then long anyway.
    fn pace(&self, gap: Duration) {
        if gap.is_zero() {
            return;
        }
        let start = Instant::now();
        let mut g = self.lock();
        for _ in 0..PACE_WAITS_MAX {
            let spent = start.elapsed();
            if spent >= gap
                || self.stop.load(Ordering::SeqCst)
                || g.flushing > 0
                || g.mode != Mode::Backed
                || g.cache.allowed() >= g.cache.rate().max()
            {
                return;
            }
            g = crate::sync::wait_timeout(&self.work, &self.inner, g, gap - spent);
        }
    }

    /// One destage round run by the caller (tests drive the cache deterministically this
    /// way, with no destager thread): at the rate's allowance, or at its maximum with
    /// `force`. `false` when nothing was destaged.
    pub fn destage_step(&self, force: bool) -> bool {
        let group_bytes = self.ctl.geo.blocks_per_stripe() as usize * BLOCK;
        let mut buf = vec![0u8; group_bytes * self.spec.max_destages.max(1) as usize];
        self.destage_round(&mut buf, &mut Vec::new(), force, false) != Round::Idle
    }

    /// Start, write and finish one round of destages. `Idle` when there was nothing to do
    /// (after waiting a little for work when `wait`).
    fn destage_round(
        &self,
        buf: &mut [u8],
        round: &mut Vec<InFlight>,
        force: bool,
        wait: bool,
    ) -> Round {
        round.clear();
        let mut used = 0usize;
        let limited;
        {
            let mut g = self.lock();
            if g.failed.is_some() {
                if wait {
                    drop(self.wait(&self.work, g));
                }
                return Round::Idle;
            }
            let allowed = if force || g.flushing > 0 || g.mode != Mode::Backed {
                g.cache.rate().max()
            } else {
                g.cache.allowed()
            };
            limited = allowed < g.cache.rate().max();
            let group_bytes = g.cache.group_pages() as usize * BLOCK;
            while g.cache.inflight() < allowed && used + group_bytes <= buf.len() {
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
                round.push(InFlight { d, runs });
            }
            if round.is_empty() {
                if wait {
                    drop(self.wait(&self.work, g));
                }
                return Round::Idle;
            }
        }
        let mut result: Result<(), IoFail>;
        let t_write = std::time::Instant::now();
        let lost_before = self.lost_slots();
        let mut images = match self.protect_rows(round) {
            Ok(h) => h,
            Err(e) => {
                let mut g = self.lock();
                self.lose_backup(&mut g, &format!("backup write failed: {e}"));
                Vec::new()
            }
        };
        // The round's groups are rows of their own: written all at once when the members
        // are slow, so `max_destages` destages are in flight on the members together.
        let parallel = round.len() > 1 && self.ctl.fan_out(0..self.ctl.shape().disks);
        let buf = &*buf;
        // The rows' write-intent bits, all set by one bitmap write: a random workload
        // dirties a new region with nearly every group, and a bitmap write syncs every
        // member. Each group's own write then finds its bit set.
        let per_row = self.ctl.geo.blocks_per_stripe();
        let rows: Vec<(u64, u64)> = round
            .iter()
            .map(|f| (f.d.first / per_row, f.d.first / per_row))
            .collect();
        result = self.ctl.intent_begin_all(&rows);
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
                        self.ctl
                            .write_row_pages(row_pieces[0].0 / per_row, row_pieces)
                    })
            });
            if let Some(e) = done.into_iter().find_map(Result::err) {
                result = Err(e);
            }
            for &(r0, r1) in &rows {
                self.ctl.intent_end(r0, r1);
            }
        }
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
                    images.extend(h);
                }
                Err(e) => {
                    let mut g = self.lock();
                    self.lose_backup(&mut g, &format!("backup write failed: {e}"));
                }
            }
        }
        let t_sync = std::time::Instant::now();
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
            return Round::Ran { limited };
        }
        // The members hold the round durably: its records go first, and only then do its
        // pages leave the cache. The other order left a moment in which the log's cleaner
        // (run by any writer's put) found a live record whose page the cache no longer had,
        // and lost the backup.
        if let Some(b) = &self.backup {
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
            b.release_destaged(&released);
            if !images.is_empty() {
                if let Err(e) = b.release_images(&images) {
                    let mut g = self.lock();
                    self.lose_backup(&mut g, &format!("backup write failed: {e}"));
                }
            }
        }
        {
            let mut g = self.lock();
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
            self.room.notify_all();
        }
        let c = &self.counters;
        let ns = |d: std::time::Duration| d.as_nanos() as u64;
        c.destage_rounds.fetch_add(1, Ordering::Relaxed);
        c.destage_write_ns
            .fetch_add(ns(t_sync - t_write), Ordering::Relaxed);
        c.destage_sync_ns
            .fetch_add(ns(t_release - t_sync), Ordering::Relaxed);
        c.destage_release_ns
            .fetch_add(ns(t_release.elapsed()), Ordering::Relaxed);
        Round::Ran { limited }
    }

    /// Before a round's writes: the images of its rows' lost units and the partial
    /// parities of the rows it rewrites in part, committed together. Their handles, to
    /// release once the round is on the members.
    fn protect_rows(&self, round: &[InFlight]) -> std::io::Result<Vec<super::Handle>> {
        let mut h = self.image_lost_units(round)?;
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

    /// A lost backup: once the drain is over, void the backup and write through; while
    /// writing through, try now and then to bring the backup back (a fresh epoch).
    fn lost_backup_step(&self, last_probe: &mut Instant) {
        let Some(b) = &self.backup else {
            return;
        };
        let mut g = self.lock();
        match g.mode.clone() {
            Mode::Backed => {}
            Mode::Draining(why) => {
                if g.cache.occupied() > 0 {
                    return;
                }
                // Everything is on the members: the backup's records must never be replayed
                // over what is now written straight to the array.
                if let Err(e) = b.reset() {
                    let epoch = b.epoch();
                    let voided = match &self.void_hook {
                        Some(h) => h(epoch).map_err(|e2| e2.to_string()),
                        None => Err("no place to record it".to_string()),
                    };
                    if let Err(e2) = voided {
                        // Neither worked: refuse writes rather than risk a stale replay.
                        g.failed = Some(format!(
                            "the write-cache backup failed ({why}) and could be neither reset ({e}) nor voided ({e2})"
                        ));
                        self.room.notify_all();
                        return;
                    }
                }
                warn(&format!("write cache drained; writing through ({why})"));
                g.mode = Mode::WriteThrough(why);
                *last_probe = Instant::now();
                self.room.notify_all();
            }
            Mode::WriteThrough(_) => {
                if last_probe.elapsed() < PROBE_EVERY {
                    return;
                }
                *last_probe = Instant::now();
                if b.reset().is_ok() {
                    warn("write-cache backup is writable again; write-back resumed");
                    g.mode = Mode::Backed;
                    self.room.notify_all();
                }
            }
        }
    }
}
