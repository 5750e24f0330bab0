//! The request paths of the write-back cache: read (cache first), write (absorb, stage in
//! the backup, group commit, then answer), write-through, zeroes, FLUSH and the drain.

use crate::sync::{MutexGuard, Ordering};
use std::cell::RefCell;

use super::backup::Handle;
use super::format::{RecKind, RecMeta};
use super::{
    BackupKind, Inner, Live, Mode, PageBufs, Ver, WriteBack, BLOCK, ROOM_WAITS_MAX, WAIT_SLICE,
};
use crate::ctrl::IoFail;

crate::sync::thread_local! {
    /// Per worker thread, reused by every request (no allocation per request): the runs of
    /// a read the cache does not hold, and the records a write supersedes.
    static RUNS: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
    static SUPERSEDED: RefCell<Vec<Superseded>> = const { RefCell::new(Vec::new()) };
}

/// A record a write superseded: its handle, and the page and sequence number of the version
/// that replaced it.
type Superseded = (Handle, u64, u64);

/// Run `f` with the thread's scratch list `key`, emptied first and kept for the next call.
fn with_scratch<T: 'static, R>(
    key: &'static crate::sync::thread::LocalKey<RefCell<Vec<T>>>,
    f: impl FnOnce(&mut Vec<T>) -> R,
) -> R {
    let mut v = key.with(|c| std::mem::take(&mut *c.borrow_mut()));
    v.clear();
    let r = f(&mut v);
    key.with(|c| *c.borrow_mut() = v);
    r
}

impl WriteBack {
    /// Read `buf.len()` bytes at `offset`: cached pages from the cache, the rest from the
    /// array.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoFail> {
        self.ctl.check_range(offset, buf.len() as u64)?;
        with_scratch(&RUNS, |runs| self.read_with(offset, buf, runs))
    }

    /// `read`, with `runs` to collect the runs of pages the cache does not hold, as (first
    /// page index, pages).
    fn read_with(
        &self,
        offset: u64,
        buf: &mut [u8],
        runs: &mut Vec<(u64, u64)>,
    ) -> Result<(), IoFail> {
        let first = offset / BLOCK as u64;
        let count = (buf.len() / BLOCK) as u64;
        self.counters.read_pages.fetch_add(count, Ordering::Relaxed);
        {
            let mut g = self.lock();
            if g.cache.occupied() == 0 {
                runs.push((0, count));
            } else {
                let Inner {
                    cache,
                    pages,
                    frames,
                    ..
                } = &mut *g;
                let mut hits = 0;
                for i in 0..count {
                    let lba = first + i;
                    let v = pages.get(&lba).and_then(|p| p.dirty.or(p.flight));
                    let hit = cache.read(lba);
                    debug_assert_eq!(hit, v.is_some(), "cache and frames agree on page {lba}");
                    match v {
                        Some(v) => {
                            let at = v.frame as usize * BLOCK;
                            buf[i as usize * BLOCK..(i as usize + 1) * BLOCK]
                                .copy_from_slice(&frames[at..at + BLOCK]);
                            hits += 1;
                        }
                        None => match runs.last_mut() {
                            Some((s, n)) if *s + *n == i => *n += 1,
                            _ => runs.push((i, 1)),
                        },
                    }
                }
                self.counters
                    .read_hit_pages
                    .fetch_add(hits, Ordering::Relaxed);
            }
        }
        for &(s, n) in runs.iter() {
            let b = &mut buf[s as usize * BLOCK..(s + n) as usize * BLOCK];
            self.ctl.read(offset + s * BLOCK as u64, b)?;
        }
        Ok(())
    }

    /// Write `data` at `offset`. Answered once the pages are as durable as the backup
    /// promises: in the backup (`mirror`, `log`), or on the members (written through, or
    /// FUA without a backup).
    pub fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoFail> {
        self.ctl.check_range(offset, data.len() as u64)?;
        if data.is_empty() {
            return Ok(());
        }
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        let first = offset / BLOCK as u64;
        let count = (data.len() / BLOCK) as u64;
        self.counters
            .write_pages
            .fetch_add(count, Ordering::Relaxed);
        if self.kind == BackupKind::None && fua {
            return self.write_through(first, data, true);
        }
        with_scratch(&SUPERSEDED, |superseded| {
            self.write_cached(first, count, data, fua, superseded)
        })
    }

    /// `write` through the cache; `superseded` collects the older records to release.
    fn write_cached(
        &self,
        first: u64,
        count: u64,
        data: &[u8],
        fua: bool,
        superseded: &mut Vec<Superseded>,
    ) -> Result<(), IoFail> {
        let mut done = 0u64;
        let mut lost = false;
        {
            let mut g = self.lock();
            let mut waits = 0u32;
            // Woken for room and not yet given a frame since (see below).
            let mut owed = false;
            while done < count {
                if let Some(f) = &g.failed {
                    return Err(IoFail::Failed(f.clone()));
                }
                if g.mode != Mode::Backed {
                    break;
                }
                if g.flushing > 0 {
                    g = self.wait_room(g, &mut waits)?;
                    continue;
                }
                let lba = first + done;
                match g.cache.write(lba) {
                    None => {
                        self.counters.room_waits.fetch_add(1, Ordering::Relaxed);
                        self.work.notify_one();
                        g = self.wait_counted(g, &mut waits, |g| &mut g.room_waiters)?;
                        owed = true;
                        continue;
                    }
                    Some(raidlab::cache::write::Absorbed::Overwrite) => {}
                    Some(_) => owed = false,
                }
                let src = &data[done as usize * BLOCK..(done as usize + 1) * BLOCK];
                match self.stage(&mut g, lba, src) {
                    Ok(Some(old)) => superseded.push((old, lba, g.seq)),
                    Ok(None) => {}
                    Err(e) => {
                        // The page is cached but has no durable copy: drain it below.
                        self.lose_backup(&mut g, &format!("backup write failed: {e}"));
                        lost = true;
                        done += 1;
                        break;
                    }
                }
                done += 1;
            }
            if g.cache.wants_destage() {
                self.work.notify_one();
            }
            // Woken for room, took no frame after all (its pages turned out cached, or the
            // mode changed) and room is left: the wake-up was meant for a writer that needs
            // a frame, so it is passed on (a destage wakes one writer per page it frees).
            if owed && g.cache.occupied() < g.cache.capacity() {
                self.room.notify_one();
            }
        }
        if done > 0 && !lost {
            if let Some(b) = &self.backup {
                match b.commit() {
                    Ok(()) => {
                        self.counters
                            .committed_writes
                            .fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        let mut g = self.lock();
                        self.lose_backup(&mut g, &format!("backup commit failed: {e}"));
                        lost = true;
                    }
                }
            }
        }
        if !lost && !superseded.is_empty() {
            lost = !self.release_superseded(superseded);
        }
        if lost {
            // What this write put in the cache is durable only once it is on the members,
            // and only once the backup is reset or voided: its older records of these pages
            // would otherwise be replayed over them after a crash.
            self.drain_all()?;
            self.wait_write_through()?;
        }
        if done < count {
            let rest = &data[done as usize * BLOCK..];
            self.wait_write_through()?;
            // A write the backup failed under was taken with the backup's promise: the rest
            // of it is made durable before the reply too.
            return self.write_through(first + done, rest, fua || lost);
        }
        Ok(())
    }

    /// Release the records this write's pages superseded, now that the new versions are
    /// durable. Under the cache lock, so a destage of a new version cannot release it first
    /// unseen; when one already went (it is no longer the page's dirty version), the older
    /// record's release is made durable before the reply, or a crash could keep the older
    /// record without the newer one. `false` when the backup failed (it is then lost).
    fn release_superseded(&self, superseded: &[Superseded]) -> bool {
        let Some(b) = &self.backup else {
            return true;
        };
        let mut sync = false;
        {
            let g = self.lock();
            for &(h, lba, seq) in superseded {
                let still_dirty = g
                    .pages
                    .get(&lba)
                    .and_then(|p| p.dirty)
                    .is_some_and(|v| v.seq == seq);
                sync |= !still_dirty;
                b.release(h, true);
            }
        }
        if sync {
            if let Err(e) = b.commit() {
                let mut g = self.lock();
                self.lose_backup(&mut g, &format!("backup commit failed: {e}"));
                return false;
            }
        }
        true
    }

    /// Put one page into its frame and the backup; the older version's record, if the page
    /// was dirty, to release once this one is durable. The cache has accepted the page.
    fn stage(&self, g: &mut Inner, lba: u64, src: &[u8]) -> std::io::Result<Option<Handle>> {
        let p = g.pages.get(&lba).copied().unwrap_or_default();
        let (frame, old) = match p.dirty {
            Some(v) => (v.frame, v.handle),
            None => (
                g.free
                    .pop()
                    .expect("the write cache never holds more pages than frames"),
                None,
            ),
        };
        let at = frame as usize * BLOCK;
        g.frames[at..at + BLOCK].copy_from_slice(src);
        g.seq += 1;
        let seq = g.seq;
        let mut ver = Ver {
            frame,
            seq,
            handle: None,
        };
        g.pages.insert(
            lba,
            PageBufs {
                dirty: Some(ver),
                flight: p.flight,
            },
        );
        if let Some(b) = &self.backup {
            let live = Live {
                pages: &g.pages,
                frames: &g.frames,
            };
            let h = b.put(
                RecMeta {
                    lba,
                    seq,
                    kind: RecKind::Data,
                },
                &g.frames[at..at + BLOCK],
                &live,
            )?;
            ver.handle = Some(h);
            g.pages.get_mut(&lba).expect("just inserted").dirty = Some(ver);
        }
        Ok(old)
    }

    fn wait_room<'a>(
        &'a self,
        g: MutexGuard<'a, Inner>,
        waits: &mut u32,
    ) -> Result<MutexGuard<'a, Inner>, IoFail> {
        *waits += 1;
        if *waits > ROOM_WAITS_MAX || self.stop.load(Ordering::Relaxed) && *waits > 100 {
            return Err(IoFail::Failed(
                "the write cache made no room (destage stalled)".into(),
            ));
        }
        let (g, woken) = crate::sync::wait_timeout_woken(&self.room, &self.inner, g, WAIT_SLICE);
        if woken {
            self.counters.room_wakeups.fetch_add(1, Ordering::Relaxed);
        }
        Ok(g)
    }

    /// [`WriteBack::wait_room`], counted while it waits in the count `of` picks (the
    /// destager wakes waiters by what they wait for).
    fn wait_counted<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inner>,
        waits: &mut u32,
        of: fn(&mut Inner) -> &mut u32,
    ) -> Result<MutexGuard<'a, Inner>, IoFail> {
        *of(&mut g) += 1;
        match self.wait_room(g, waits) {
            Ok(mut g) => {
                *of(&mut g) -= 1;
                Ok(g)
            }
            Err(e) => {
                *of(&mut self.lock()) -= 1;
                Err(e)
            }
        }
    }

    /// Wait until a lost backup's drain is over (writes then go to the array directly).
    fn wait_write_through(&self) -> Result<(), IoFail> {
        let mut g = self.lock();
        let mut waits = 0;
        while matches!(g.mode, Mode::Draining(_)) {
            if let Some(f) = &g.failed {
                return Err(IoFail::Failed(f.clone()));
            }
            // The destager ends the drain (resets or voids the backup) when it next runs.
            self.work.notify_one();
            g = self.wait_room(g, &mut waits)?;
        }
        Ok(())
    }

    /// Write pages straight to the array: no version of them may be in flight (an older
    /// destage could land after this write), and cached dirty versions take the new bytes
    /// so a later destage writes them again rather than older ones.
    fn write_through(&self, first: u64, data: &[u8], fua: bool) -> Result<(), IoFail> {
        let count = (data.len() / BLOCK) as u64;
        {
            let mut g = self.lock();
            let mut waits = 0;
            loop {
                if let Some(f) = &g.failed {
                    return Err(IoFail::Failed(f.clone()));
                }
                let busy = g.cache.occupied() > 0
                    && (first..first + count)
                        .any(|l| g.pages.get(&l).is_some_and(|p| p.flight.is_some()));
                if !busy {
                    break;
                }
                g = self.wait_counted(g, &mut waits, |g| &mut g.landing_waiters)?;
            }
            if g.cache.occupied() > 0 {
                let Inner { pages, frames, .. } = &mut *g;
                for i in 0..count {
                    if let Some(v) = pages.get(&(first + i)).and_then(|p| p.dirty) {
                        let at = v.frame as usize * BLOCK;
                        frames[at..at + BLOCK]
                            .copy_from_slice(&data[i as usize * BLOCK..(i as usize + 1) * BLOCK]);
                    }
                }
            }
        }
        self.counters
            .write_through_pages
            .fetch_add(count, Ordering::Relaxed);
        self.ctl.write(first * BLOCK as u64, data, fua)?;
        if !fua {
            // Completed, not yet durable: the next FLUSH syncs the members.
            self.through.wrote();
        }
        Ok(())
    }

    /// TRIM and WRITE_ZEROES: zeros written like any data (through the cache, so a backup
    /// never replays older bytes over them), in bounded pieces.
    pub fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> Result<(), IoFail> {
        self.ctl.check_range(offset, len)?;
        if self.kind == BackupKind::None {
            // No backup to replay anything: zero the members directly.
            return crate::ctrl::write::zero_pieces(offset, len, |at, zeros| {
                self.write_through(at / BLOCK as u64, zeros, fua)
            });
        }
        crate::ctrl::write::zero_pieces(offset, len, |at, zeros| self.write(at, zeros, fua))
    }

    /// NBD FLUSH: every write answered before it is durable. With a backup they already are
    /// (unless writes went through, which a member sync covers); without one everything
    /// cached is destaged first.
    pub fn flush(&self) -> Result<(), IoFail> {
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        let backed = {
            let g = self.lock();
            if let Some(f) = &g.failed {
                return Err(IoFail::Failed(f.clone()));
            }
            g.mode == Mode::Backed
        };
        if self.kind == BackupKind::None || !backed {
            // A destage round syncs the members before it frees its pages.
            self.drain_all()?;
        }
        // A write answered with a backup is durable already, and a destaged page was synced
        // before it left the cache: only pages written straight to the array since the last
        // FLUSH need the members synced.
        self.through.flush(|| self.ctl.flush())
    }

    /// Destage everything now and wait until the cache is empty (new cached writes wait).
    pub fn drain_all(&self) -> Result<(), IoFail> {
        let mut g = self.lock();
        g.flushing += 1;
        self.work.notify_all();
        let mut waits = 0u32;
        let r = loop {
            if let Some(f) = &g.failed {
                break Err(IoFail::Failed(f.clone()));
            }
            if g.cache.occupied() == 0 {
                break Ok(());
            }
            waits += 1;
            if waits > ROOM_WAITS_MAX {
                break Err(IoFail::Failed(
                    "the write cache could not be drained".into(),
                ));
            }
            g = self.wait(&self.room, g);
        };
        g.flushing -= 1;
        self.room.notify_all();
        r
    }
}
