//! The log backup: RAPID-Cache's cache disk, a circular log of the write cache's records.
//!
//! The log lives on one leg (physical: a dedicated file) or on N legs (logical: a small
//! partition at the tail of each member). Each leg starts with both superblock copies; then
//! come its segments. Segments are numbered globally and striped round robin: segment i is
//! on leg i % n at `base + SUPERS_BYTES + (i / n) * segment_bytes`.
//!
//! Positions are virtual bytes that only grow; position p is in segment (p / seg) % segments.
//! A batch (one group commit, or one full buffer) is a header block and its data blocks and
//! never crosses a segment end; its header names the next batch's position, which skips to
//! the next segment when fewer than two blocks remain. Recovery follows `next` from the
//! superblock's tail while headers decode for (epoch, position).
//!
//! Safety rules:
//! - the tail only advances over segments with no live record, in log order, so a scan that
//!   sees a released version also sees everything written after it (every newer version
//!   of the page: versions are put in sequence order and the cleaner's copies carry the
//!   cache's newest sequence number);
//! - the head never enters a segment until the tail persisted in the superblock is past
//!   that segment's previous lap (written lazily, just before the wrap), and that superblock
//!   is written only after every batch written so far is synced (the cleaner's copies must be
//!   durable before their originals can go);
//! - a released image is named by a release entry staged before `release_images` returns
//!   (or voided in place when free segments are short), durably at the next commit (see it
//!   and `Backup::release_images`).
//!
//! With an NVRAM (`--log-nvram`, `nvram.rs`) the head's segment is written to an NVRAM slot
//! instead of its leg and reaches the leg in the background; "synced" above then means
//! synced in the NVRAM or on the leg, because recovery writes every staged slot onto its
//! leg before the log is opened (`nvram::replay`).

use crate::sync::{Mutex, MutexGuard};
use std::io;

use super::backup::{self, BackupStats, Handle};
use super::commit::GroupCommit;
use super::format::{self, RecMeta, Super, BATCH_RECORDS_MAX, BLOCK, LOG_MEMBERS_MAX, SUPER_BYTES};

mod clean;
mod geometry;
mod nvram;
mod open;
mod release;
mod scan;
mod segments;
pub mod slot;
mod surface;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_crash;
#[cfg(test)]
mod tests_gc;
#[cfg(test)]
mod tests_nvram;
#[cfg(test)]
mod tests_nvram_crash;
#[cfg(test)]
mod tests_prop;
#[cfg(test)]
mod tests_release;

pub use geometry::Leg;
use geometry::{size, Geometry};
use nvram::Nvram;
pub use nvram::{
    nvram_bytes, replay as replay_nvram, Drain, NvramReplay, NvramStats, NVRAM_SLOTS_DEFAULT,
    NVRAM_SLOTS_MAX,
};
use segments::Table;
pub use slot::decode_slot;

/// The default segment size (the cleaning unit).
pub const SEGMENT_BYTES_DEFAULT: u64 = 128 << 10;
/// The cleaner runs when fewer free segments than this remain before a put.
pub const GC_MIN_FREE: u64 = 2;
/// Segments `create` asks for beyond twice the cache's pages (cleaning headroom).
pub const SPARE_SEGMENTS: u64 = 4;
pub(super) const BLOCK64: u64 = BLOCK as u64;
/// What a released image's data block is overwritten with (a recognisable void, so a scan
/// skips it without counting it torn); the second variant serves when the image's own
/// bytes were exactly the first.
const VOID_MAGIC: &[u8; 8] = b"RLLBVOID";

struct State {
    epoch: u64,
    generation: u64,
    /// Start of the oldest segment in use (in DRAM), and the one the superblock holds.
    tail: u64,
    super_tail: u64,
    /// Position of the batch being staged.
    head: u64,
    /// The batch being staged: its header's entries, and its data blocks (one per entry but
    /// a release) in `buf` after the header block.
    staged: Vec<(RecMeta, u32)>,
    staged_blocks: usize,
    buf: Vec<u8>,
    table: Table,
    /// Legs written since their last sync (a bit per leg).
    dirty: [u64; LOG_MEMBERS_MAX / 64],
    /// A failed write or sync: the backup is lost, every later put and commit says so.
    failed: Option<String>,
    /// Opened on existing records: scan, then `reset`, before new records.
    needs_reset: bool,
    stats: BackupStats,
}

/// The log backup. See the module docs.
pub struct LogBackup {
    geo: Geometry,
    uuid: [u8; 16],
    state: Mutex<State>,
    group: GroupCommit,
    /// The two void blocks and their CRCs.
    voids: [(Vec<u8>, u32); 2],
    /// RAPID's segment buffers, if the log has them.
    nv: Option<Nvram>,
}

fn lost(msg: &str) -> io::Error {
    io::Error::other(format!("log backup lost: {msg}"))
}

impl LogBackup {
    fn new(geo: Geometry, uuid: [u8; 16], sup: &Super, needs_reset: bool) -> LogBackup {
        let per_seg = geo.blocks_per_seg() as usize - 1;
        let batch_blocks = (BATCH_RECORDS_MAX + 1).min(geo.blocks_per_seg() as usize);
        let voids = [0u8, 1].map(|v| {
            let mut b = vec![0u8; BLOCK];
            b[..8].copy_from_slice(VOID_MAGIC);
            b[8] = v;
            let crc = format::data_crc(&b);
            (b, crc)
        });
        let state = State {
            epoch: sup.epoch,
            generation: sup.generation,
            tail: sup.tail,
            super_tail: sup.tail,
            head: sup.tail,
            staged: Vec::with_capacity(BATCH_RECORDS_MAX),
            staged_blocks: 0,
            buf: vec![0u8; batch_blocks * BLOCK],
            table: Table::new(geo.segments as usize, per_seg),
            dirty: [0; LOG_MEMBERS_MAX / 64],
            failed: None,
            needs_reset,
            stats: BackupStats {
                capacity: geo.segments.saturating_sub(GC_MIN_FREE) * geo.records_per_seg(),
                ..BackupStats::default()
            },
        };
        LogBackup {
            geo,
            uuid,
            state: Mutex::new(state),
            group: GroupCommit::default(),
            voids,
            nv: None,
        }
    }

    /// Put the NVRAM `dev` of `slots` segment buffers in front of the legs (before the
    /// first put; its slots are marked free).
    pub fn with_nvram(
        self,
        dev: std::sync::Arc<dyn crate::member::Member>,
        slots: u32,
    ) -> Result<LogBackup, raidlab::Error> {
        self.with_nvram_drain(dev, slots, Drain::Threads)
    }

    /// [`LogBackup::with_nvram`], with the slots drained as `drain` says.
    pub fn with_nvram_drain(
        mut self,
        dev: std::sync::Arc<dyn crate::member::Member>,
        slots: u32,
        drain: Drain,
    ) -> Result<LogBackup, raidlab::Error> {
        let nv = Nvram::create(dev, &self.geo.legs, self.geo.seg, self.uuid, slots, drain)?;
        self.nv = Some(nv);
        Ok(self)
    }

    /// Drain one sealed NVRAM slot now (`Drain::Inline`); false when none is sealed or
    /// there is no NVRAM.
    #[cfg(test)]
    pub(crate) fn nvram_drain_step(&self) -> bool {
        self.nv.as_ref().is_some_and(Nvram::drain_step)
    }

    /// The NVRAM's counters (`None` without one).
    pub fn nvram_stats(&self) -> Option<NvramStats> {
        self.nv.as_ref().map(Nvram::stats)
    }

    /// Note an NVRAM write or sync failure: the backup is lost from now on.
    fn fail_nv(&self, st: &mut State, e: io::Error) -> io::Error {
        let path = self.nv.as_ref().map_or("nvram", |n| n.path());
        let msg = format!("{path}: {e}");
        st.failed.get_or_insert(msg.clone());
        io::Error::new(e.kind(), format!("log backup: {msg}"))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Note a write or sync failure: the backup is lost from now on.
    fn fail(&self, st: &mut State, leg: usize, e: io::Error) -> io::Error {
        let msg = format!("{}: {e}", self.geo.legs[leg].0.path());
        st.failed.get_or_insert(msg.clone());
        io::Error::new(e.kind(), format!("log backup: {msg}"))
    }

    fn check(&self, st: &State) -> io::Result<()> {
        match &st.failed {
            Some(m) => Err(lost(m)),
            None => match self.nv.as_ref().and_then(Nvram::failed) {
                Some(m) => Err(lost(&m)),
                None => Ok(()),
            },
        }
    }

    fn full(&self, st: &State, why: &str) -> io::Error {
        io::Error::other(format!(
            "log backup cannot make room ({why}): {} live records, the log holds about {}; live data exceeds what the log can hold",
            st.table.live(),
            st.stats.capacity
        ))
    }

    /// Segments in use: from the tail's to the one the staged batch is in.
    fn used(&self, st: &State) -> u64 {
        let end = if st.staged.is_empty() {
            st.head
        } else {
            st.head + (st.staged_blocks as u64 + 1) * BLOCK64
        };
        (end - st.tail).div_ceil(self.geo.seg)
    }

    fn free_segments(&self, st: &State) -> u64 {
        self.geo.segments - self.used(st)
    }

    /// Data blocks the batch at `head` may hold: the header's entries, and the segment's room.
    fn batch_cap(&self, head: u64) -> usize {
        let room = ((self.geo.seg_end(head) - head) / BLOCK64) as usize;
        BATCH_RECORDS_MAX.min(room - 1)
    }

    /// Move the tail over segments with no live record (never into the head's segment).
    fn advance_tail(&self, st: &mut State) {
        for _ in 0..self.geo.segments {
            let s = self.geo.seg_index(st.tail);
            if st.tail + self.geo.seg > st.head || st.table.seg_live(s) > 0 {
                return;
            }
            st.table.free_seg(s);
            st.tail += self.geo.seg;
        }
    }

    /// The head enters a new segment: it must be free, and the superblock's tail past the
    /// segment's previous lap before anything is written there.
    fn acquire(&self, st: &mut State) -> io::Result<()> {
        assert!(st.staged.is_empty() && st.head.is_multiple_of(self.geo.seg));
        if self.used(st) >= self.geo.segments {
            return Err(self.full(st, "no free segment"));
        }
        let s = self.geo.seg_index(st.head);
        assert!(
            st.table.seg_len(s) == 0 && st.table.seg_live(s) == 0,
            "segment {s} not free"
        );
        if st.super_tail + self.geo.log_bytes() < st.head + self.geo.seg {
            self.persist_tail(st)?;
        }
        if let Some(nv) = &self.nv {
            // May wait for a drain: RAPID's stall when no segment buffer is free.
            let (leg, off) = self.geo.locate(st.head);
            nv.enter(st.head, leg, off)
                .map_err(|e| self.fail_nv(st, e))?;
        }
        Ok(())
    }

    /// Sync every leg (under the state lock: the caller needs every batch written so far
    /// durable before it writes the superblock). Every leg, not only those marked written
    /// since their last sync: a commit's leader takes those marks and syncs its legs
    /// without the lock, so a batch it wrote may be marked nowhere and not yet durable.
    fn sync_all(&self, st: &mut State) -> io::Result<()> {
        if let Some(nv) = &self.nv {
            nv.sync().map_err(|e| self.fail_nv(st, e))?;
        }
        let all = self.geo.all_legs();
        self.geo
            .each_leg(&all, |leg| self.geo.legs[leg].0.sync())
            .map_err(|(leg, e)| self.fail(st, leg, e))?;
        st.dirty = [0; LOG_MEMBERS_MAX / 64];
        Ok(())
    }

    /// Write the in-DRAM tail to the superblock. Every batch written so far is synced
    /// first: the cleaner's copies must be durable before their originals may be lost.
    /// (Rare: once per lap of the log.)
    fn persist_tail(&self, st: &mut State) -> io::Result<()> {
        self.sync_all(st)?;
        self.write_supers(st).map_err(|(_, e)| e)
    }

    /// A new superblock generation (epoch and tail from `st`) on every leg, each synced.
    fn write_supers(&self, st: &mut State) -> Result<(), (String, io::Error)> {
        st.generation += 1;
        let (generation, epoch, tail) = (st.generation, st.epoch, st.tail);
        let all = self.geo.all_legs();
        let written = self.geo.each_leg(&all, |i| {
            let (dev, base, _) = &self.geo.legs[i];
            let s = self.geo.super_for(i, generation, epoch, tail, self.uuid);
            backup::write_super(dev, *base, &s)
        });
        if let Err((i, e)) = written {
            return Err((self.geo.legs[i].0.path().to_string(), self.fail(st, i, e)));
        }
        st.stats.bytes_written += (SUPER_BYTES * all.len()) as u64;
        st.super_tail = st.tail;
        Ok(())
    }

    /// Write the staged batch (pwrite only) and start the next one.
    fn flush(&self, st: &mut State) -> io::Result<()> {
        let k = st.staged_blocks;
        assert!(!st.staged.is_empty() && k <= self.batch_cap(st.head));
        let end = st.head + (k as u64 + 1) * BLOCK64;
        let seg_end = self.geo.seg_end(st.head);
        // Too little room for a header and a record: the next batch starts a segment.
        let next = if seg_end - end < 2 * BLOCK64 {
            seg_end
        } else {
            end
        };
        let (epoch, head) = (st.epoch, st.head);
        let State { buf, staged, .. } = &mut *st;
        format::encode_batch(epoch, head, next, staged, &mut buf[..BLOCK]);
        let (leg, off) = self.geo.locate(st.head);
        let bytes = (k + 1) * BLOCK;
        if let Some(nv) = &self.nv {
            if let Err(e) = nv.write(st.head, &st.buf[..bytes]) {
                return Err(self.fail_nv(st, e));
            }
        } else {
            if let Err(e) = self.geo.legs[leg].0.write_at(&st.buf[..bytes], off) {
                return Err(self.fail(st, leg, e));
            }
            st.dirty[leg / 64] |= 1 << (leg % 64);
        }
        st.stats.bytes_written += bytes as u64;
        st.staged.clear();
        st.staged_blocks = 0;
        st.head = next;
        Ok(())
    }

    /// Add a record to the staged batch (a new one, or the cleaner moving `moving`).
    fn stage(
        &self,
        st: &mut State,
        moving: Option<Handle>,
        meta: RecMeta,
        data: &[u8],
    ) -> io::Result<Handle> {
        assert!(
            data.len() == BLOCK,
            "a record is one block, not {} bytes",
            data.len()
        );
        self.open_batch(st)?;
        let k = st.staged_blocks;
        let pos = st.head + (k as u64 + 1) * BLOCK64;
        let seg = self.geo.seg_index(st.head);
        let crc = format::data_crc(data);
        let h = match moving {
            Some(h) => {
                st.table.relocate(h, meta.seq, crc, pos, seg);
                h
            }
            None => match st.table.alloc(meta, crc, pos, seg) {
                Some(h) => h,
                None => return Err(self.full(st, "every record slot is live")),
            },
        };
        st.buf[(k + 1) * BLOCK..(k + 2) * BLOCK].copy_from_slice(data);
        st.staged.push((meta, crc));
        st.staged_blocks += 1;
        self.flush_if_full(st)?;
        Ok(h)
    }

    /// Before the first entry of a batch: the head may be entering a new segment.
    fn open_batch(&self, st: &mut State) -> io::Result<()> {
        if st.staged.is_empty() && st.head.is_multiple_of(self.geo.seg) {
            self.acquire(st)?;
        }
        Ok(())
    }

    /// Write the batch once its header's entries or its segment's room are used up.
    fn flush_if_full(&self, st: &mut State) -> io::Result<()> {
        if st.staged_blocks == self.batch_cap(st.head) || st.staged.len() == BATCH_RECORDS_MAX {
            self.flush(st)?;
        }
        Ok(())
    }

    /// The leader's part of a group commit: write the staged batch, sync every leg written
    /// since its last sync (the syncs run without the state lock).
    fn commit_once(&self) -> io::Result<()> {
        let dirty = {
            let mut st = self.lock();
            self.check(&st)?;
            if !st.staged.is_empty() {
                self.flush(&mut st)?;
            }
            st.stats.commits += 1;
            std::mem::take(&mut st.dirty)
        };
        if let Some(nv) = &self.nv {
            // One NVRAM sync: the batches are in slots, or on legs their drainers synced.
            if let Err(e) = nv.sync() {
                let mut st = self.lock();
                return Err(self.fail_nv(&mut st, e));
            }
        }
        let legs = Geometry::dirty_legs(&dirty, self.geo.legs.len());
        if let Err((leg, e)) = self.geo.each_leg(&legs, |leg| self.geo.legs[leg].0.sync()) {
            let mut st = self.lock();
            return Err(self.fail(&mut st, leg, e));
        }
        Ok(())
    }
}
