//! The log as a [`Backup`]: what the write cache calls (put, commit, release, scan, reset),
//! on top of the log's batches, segments and superblocks (`log.rs`).

use std::io;

use super::super::backup::{Backup, BackupStats, Handle, LiveData, Scan};
use super::super::format::{RecKind, RecMeta, BLOCK, LOG_MEMBERS_MAX};
use super::{lost, scan, size, LogBackup, GC_MIN_FREE};

impl Backup for LogBackup {
    fn name(&self) -> &'static str {
        "log"
    }

    fn put(&self, meta: RecMeta, data: &[u8], live: &dyn LiveData) -> io::Result<Handle> {
        assert!(
            data.len() == BLOCK,
            "a record is one block, not {} bytes",
            data.len()
        );
        let mut st = self.lock();
        self.check(&st)?;
        if st.needs_reset {
            return Err(io::Error::other(
                "log backup opened on old records: scan and reset it first",
            ));
        }
        if self.free_segments(&st) < GC_MIN_FREE {
            self.gc(&mut st, live)?;
        }
        let h = self.stage(&mut st, None, meta, data)?;
        st.stats.records += 1;
        Ok(h)
    }

    fn commit(&self) -> io::Result<()> {
        self.group.commit(&|| self.commit_once())
    }

    /// Both kinds of release just drop the record: the tail moves in log order, so a
    /// superseded version leaves the scan range before the newer one (written after it).
    ///
    /// A superseded record may be gone already: the cleaner drops one whose page left the
    /// cache, and a reset drops every record (a writer that lost the race with either
    /// releases nothing). A destaged record is always live: its page stays cached until then.
    fn release(&self, h: Handle, superseded: bool) {
        let mut st = self.lock();
        if superseded && !st.table.is_live(h) {
            return;
        }
        st.table.release(h);
        self.advance_tail(&mut st);
    }

    /// A released image may sit in the scan range for a lap, and a newer version of its
    /// page may be older in sequence (a dirty page imaged before its destage) and leave the
    /// log first: sequence order does not hide it. So the release is written into the log:
    /// a release entry in the staged batch's header (no data block) per image (or plan, or
    /// partial parity), durable with the next commit; a scan skips what a release entry in
    /// its range names. The entry comes after what it names, and the tail leaves the log
    /// in order, so it stays in the scan range as long as that does.
    ///
    /// An image still in the staged batch is voided in the buffer instead (its header entry
    /// keeps the image's CRC; a scan skips a void block without counting it torn). When the
    /// log is short of free segments, the images are voided in place instead (each one a
    /// write of its block, on its leg or in its NVRAM slot), so a release never takes the
    /// room the cleaner keeps for puts.
    fn release_images(&self, hs: &[Handle]) -> io::Result<()> {
        if hs.is_empty() {
            return Ok(());
        }
        let mut st = self.lock();
        self.check(&st)?;
        let mut written = Vec::with_capacity(hs.len());
        for &h in hs {
            let e = st.table.entry(h);
            assert!(
                e.meta.kind != RecKind::Data,
                "release_images on a data record"
            );
            if !st.staged.is_empty() && e.pos > st.head {
                let void = usize::from(self.voids[0].1 == e.crc);
                let at = (e.pos - st.head) as usize;
                st.buf[at..at + BLOCK].copy_from_slice(&self.voids[void].0);
            } else {
                written.push((e.pos, e.crc));
            }
        }
        st.stats.images_released += hs.len() as u64;
        if !written.is_empty() {
            if self.free_segments(&st) > GC_MIN_FREE {
                self.stage_releases(&mut st, &written)?;
            } else {
                drop(st);
                self.void_in_place(&written)?;
                st = self.lock();
            }
        }
        // The release entries (or voids) are durable by the next commit, and the tail
        // cannot pass what they name durably before: `persist_tail` runs with nothing
        // staged and syncs every leg written first.
        for &h in hs {
            st.table.release(h);
        }
        self.advance_tail(&mut st);
        Ok(())
    }

    fn scan(&self) -> io::Result<Scan> {
        // The lock keeps writers off the log while the chain is read.
        let st = self.lock();
        scan::scan_from(&self.geo, self.nv.as_ref(), &self.voids, st.epoch, st.tail)
    }

    /// The new epoch starts at the next segment start past the head (the tail must be at a
    /// segment start); its superblock is durable on every leg before this returns.
    fn reset(&self) -> io::Result<()> {
        let mut st = self.lock();
        let start = st.head.div_ceil(self.geo.seg) * self.geo.seg;
        if let Some(nv) = &self.nv {
            // A drainer that failed is gone: the backup cannot come back in this run.
            if let Some(m) = nv.failed() {
                return Err(lost(&m));
            }
            // The head leaves its segment: its slot drains like any other.
            nv.seal();
        }
        st.staged.clear();
        st.staged_blocks = 0;
        st.table.clear();
        st.dirty = [0; LOG_MEMBERS_MAX / 64];
        st.epoch += 1;
        st.head = start;
        st.tail = start;
        st.failed = None;
        self.write_supers(&mut st).map_err(|(_, e)| e)?;
        st.needs_reset = false;
        self.group.reset();
        Ok(())
    }

    fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    fn stats(&self) -> BackupStats {
        let st = self.lock();
        let nv = self.nvram_stats().unwrap_or_default();
        BackupStats {
            live: st.table.live(),
            commit_calls: self.group.calls(),
            nvram_slots: nv.slots,
            nvram_stalls: nv.stalls,
            nvram_drained: nv.drained,
            image_void_leg_writes: st.stats.image_void_leg_writes + nv.redo_writes,
            ..st.stats.clone()
        }
    }

    fn describe(&self) -> String {
        let st = self.lock();
        let n = self.geo.legs.len();
        let nv = match &self.nv {
            Some(nv) => format!("; NVRAM of {} slots", nv.stats().slots),
            None => String::new(),
        };
        format!(
            "log ({}, {n} leg{}, {}, {} segments of {}; {} free{nv})",
            if n == 1 { "physical" } else { "logical" },
            if n == 1 { "" } else { "s" },
            size(self.geo.log_bytes()),
            self.geo.segments,
            size(self.geo.seg),
            self.free_segments(&st)
        )
    }
}
