//! The dual-copy baseline: a second copy of every dirty page in an NVRAM-like file (the
//! paper's "dual NVRAM" write cache; here a file made durable with fdatasync before the
//! reply, since this machine has no persistent memory to map).
//!
//! Layout (after the two backup superblocks, `format.rs`): `slots` 64-byte slot headers, 64
//! to a 4 KiB page, then `slots` data blocks. A record is its data block and its header,
//! written without order between them and made durable by one group-committed fdatasync;
//! the header's data CRC tells a torn pair (never acknowledged) from a whole one.
//!
//! **Never an old version without the newer one.** A released slot gets a zeroed header,
//! written lazily. A superseded record is released after its successor is durable; a
//! destaged record is released after the members are synced. The one ordering that matters
//! is that a superseded record's clear is durable before its successor's clear can be: so a
//! destage release syncs first while a superseded clear written before it may not be
//! durable yet (counted, so a clear written while a commit's sync runs is not taken as
//! covered by it). The cache releases a superseded record under its lock and has it synced
//! at once when its successor has already left for a destage (`wb/io.rs`).

use crate::sync::{Arc, Mutex, MutexGuard};
use std::io;

use super::backup::{
    bad, read_supers, write_super, Backup, BackupStats, Found, Handle, LiveData, Scan,
};
use super::commit::GroupCommit;
use super::format::{
    data_crc, decode_slot_header, newest_super, slot_header, RecMeta, Super, BLOCK, KIND_MIRROR,
    SLOT_HEADER_BYTES, SUPERS_BYTES,
};
use crate::member::Member;

mod slots;
use slots::FreeSlots;

const HEADERS_PER_PAGE: u64 = (BLOCK / SLOT_HEADER_BYTES) as u64;

/// Bytes a mirror of `slots` records needs.
pub fn mirror_bytes(slots: u64) -> u64 {
    SUPERS_BYTES + slots.div_ceil(HEADERS_PER_PAGE) * BLOCK as u64 + slots * BLOCK as u64
}

#[derive(Debug)]
struct State {
    epoch: u64,
    generation: u64,
    free: FreeSlots,
    /// Slot-header clears written, and how many of them a finished sync covers. Clears of
    /// two versions of one page must become durable in version order (else a crash could
    /// keep the older record alone and replay it over the newer data), so a clear of a
    /// destaged record waits for a sync whenever earlier clears are not yet durable.
    clears_written: u64,
    clears_synced: u64,
    /// A write or sync failed: the backup is lost (sticky until reset).
    failed: Option<String>,
    stats: BackupStats,
}

/// A mirror file of `slots` records.
pub struct MirrorBackup {
    dev: Arc<dyn Member>,
    uuid: [u8; 16],
    slots: u64,
    st: Mutex<State>,
    gc: GroupCommit,
}

impl std::fmt::Debug for MirrorBackup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MirrorBackup({}, {} slots)", self.dev.path(), self.slots)
    }
}

impl MirrorBackup {
    fn header_at(&self, slot: u64) -> u64 {
        SUPERS_BYTES
            + (slot / HEADERS_PER_PAGE) * BLOCK as u64
            + (slot % HEADERS_PER_PAGE) * SLOT_HEADER_BYTES as u64
    }

    fn data_at(&self, slot: u64) -> u64 {
        SUPERS_BYTES + self.slots.div_ceil(HEADERS_PER_PAGE) * BLOCK as u64 + slot * BLOCK as u64
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A mirror of `slots` records in `epoch`, every slot free.
    fn with_state(
        dev: Arc<dyn Member>,
        uuid: [u8; 16],
        slots: u64,
        epoch: u64,
        generation: u64,
    ) -> MirrorBackup {
        MirrorBackup {
            dev,
            uuid,
            slots,
            st: Mutex::new(State {
                epoch,
                generation,
                free: FreeSlots::all(slots),
                clears_written: 0,
                clears_synced: 0,
                failed: None,
                stats: BackupStats {
                    capacity: slots,
                    ..Default::default()
                },
            }),
            gc: GroupCommit::default(),
        }
    }

    /// Lay out a fresh mirror of `slots` records on `dev` for the array `uuid`. The epoch
    /// continues after `after_epoch` (the previous backup's, if any), so no record written
    /// before can be taken as this epoch's. Durable on return.
    pub fn create(
        dev: Arc<dyn Member>,
        uuid: [u8; 16],
        slots: u64,
        after_epoch: u64,
    ) -> raidlab::Result<MirrorBackup> {
        assert!(slots >= 1 && slots < u64::from(u32::MAX));
        let need = mirror_bytes(slots);
        if dev.len_bytes() < need {
            return Err(bad(
                dev.path(),
                format!(
                    "{} bytes is too small for a mirror of {slots} pages (needs {need} bytes)",
                    dev.len_bytes()
                ),
            ));
        }
        let epoch = after_epoch + 1;
        let mut s = Super {
            kind: KIND_MIRROR,
            uuid,
            generation: 1,
            epoch,
            capacity: slots,
            segment_bytes: 0,
            tail: 0,
            members: Vec::new(),
        };
        // Both copies, so a torn write of either later leaves a valid one.
        for generation in [1, 2] {
            s.generation = generation;
            write_super(&dev, 0, &s).map_err(|e| bad(dev.path(), e))?;
        }
        Ok(MirrorBackup::with_state(dev, uuid, slots, epoch, 2))
    }

    /// Open an existing mirror of the array `uuid` for recovery. `Ok(None)` when the device
    /// holds no backup superblock at all (a new file: nothing to recover).
    pub fn open(dev: Arc<dyn Member>, uuid: [u8; 16]) -> raidlab::Result<Option<MirrorBackup>> {
        let (a, b) = read_supers(&dev, 0).map_err(|e| bad(dev.path(), e))?;
        if a.iter().chain(b.iter()).all(|&x| x == 0) {
            return Ok(None);
        }
        let s = newest_super(&a, &b).map_err(|e| {
            bad(
                dev.path(),
                format!("not a readable write-cache backup: {e}"),
            )
        })?;
        if s.kind != KIND_MIRROR {
            return Err(bad(dev.path(), "holds a log backup, not a mirror (use --backup log, or --backup-discard after a clean stop)"));
        }
        if s.uuid != uuid {
            return Err(bad(
                dev.path(),
                "is the write-cache backup of another array (its UUID differs); refusing to replay it",
            ));
        }
        let slots = s.capacity;
        if slots == 0 || slots >= u64::from(u32::MAX) || dev.len_bytes() < mirror_bytes(slots) {
            return Err(bad(
                dev.path(),
                format!(
                    "its superblock says {slots} slots but the file holds {} bytes (needs {}): truncated?",
                    dev.len_bytes(),
                    mirror_bytes(slots.min(u64::from(u32::MAX)))
                ),
            ));
        }
        Ok(Some(MirrorBackup::with_state(
            dev,
            uuid,
            slots,
            s.epoch,
            s.generation,
        )))
    }

    fn fail(&self, st: &mut State, e: &io::Error) -> io::Error {
        let msg = format!("mirror {}: {e}", self.dev.path());
        st.failed.get_or_insert(msg.clone());
        io::Error::other(msg)
    }

    /// Clear record `h` and free its slot (the clear is not synced).
    fn release_locked(&self, st: &mut State, h: Handle) {
        assert!(h < self.slots, "handle {h} out of range");
        self.clear(st, h);
        st.clears_written += 1;
        st.free.give(h);
        st.stats.live -= 1;
    }

    fn clear(&self, st: &mut State, slot: u64) {
        if let Err(e) = self
            .dev
            .write_at(&[0u8; SLOT_HEADER_BYTES], self.header_at(slot))
        {
            self.fail(st, &e);
        }
    }

    /// fdatasync with the lock held: every write issued before is durable after it.
    fn sync_locked(&self, st: &mut State) {
        match self.dev.sync() {
            Ok(()) => st.clears_synced = st.clears_written,
            Err(e) => {
                self.fail(st, &e);
            }
        }
    }
}

impl Backup for MirrorBackup {
    fn name(&self) -> &'static str {
        "mirror"
    }

    fn put(&self, meta: RecMeta, data: &[u8], _live: &dyn LiveData) -> io::Result<Handle> {
        assert_eq!(data.len(), BLOCK);
        let mut st = self.lock();
        if let Some(e) = &st.failed {
            return Err(io::Error::other(e.clone()));
        }
        let Some(slot) = st.free.take() else {
            // The cache holds at most half the slots; running out is a bug, not a full cache.
            return Err(io::Error::other(format!(
                "mirror {}: all {} slots in use",
                self.dev.path(),
                self.slots
            )));
        };
        let hdr = slot_header(meta, st.epoch, data_crc(data));
        let r = self
            .dev
            .write_at(data, self.data_at(slot))
            .and_then(|()| self.dev.write_at(&hdr, self.header_at(slot)));
        if let Err(e) = r {
            st.free.give(slot);
            return Err(self.fail(&mut st, &e));
        }
        st.stats.records += 1;
        st.stats.bytes_written += (BLOCK + SLOT_HEADER_BYTES) as u64;
        st.stats.live += 1;
        Ok(slot)
    }

    fn commit(&self) -> io::Result<()> {
        self.gc.commit(&|| {
            // Only the clears written before the sync starts are covered by it.
            let before = self.lock().clears_written;
            let r = self.dev.sync();
            let mut st = self.lock();
            match r {
                Ok(()) => {
                    st.clears_synced = st.clears_synced.max(before);
                    st.stats.commits += 1;
                    Ok(())
                }
                Err(e) => Err(self.fail(&mut st, &e)),
            }
        })
    }

    fn release(&self, h: Handle, superseded: bool) {
        if superseded {
            // A newer version of the page is durable: this clear may land in any order.
            let mut st = self.lock();
            self.release_locked(&mut st, h);
        } else {
            self.release_destaged(&[h]);
        }
    }

    fn release_destaged(&self, hs: &[Handle]) {
        if hs.is_empty() {
            return;
        }
        let mut st = self.lock();
        if st.clears_written > st.clears_synced {
            // An older version's clear must not be undone by a crash once this one's is not.
            self.sync_locked(&mut st);
        }
        for &h in hs {
            self.release_locked(&mut st, h);
        }
    }

    /// The clears are synced by the next commit (the next round's, before it writes the
    /// members) or the next `release_destaged`, whichever comes first.
    fn release_images(&self, hs: &[Handle]) -> io::Result<()> {
        let mut st = self.lock();
        for &h in hs {
            self.release_locked(&mut st, h);
        }
        match &st.failed {
            Some(e) => Err(io::Error::other(e.clone())),
            None => Ok(()),
        }
    }

    fn scan(&self) -> io::Result<Scan> {
        let epoch = self.lock().epoch;
        let mut out = Scan::default();
        let mut page = vec![0u8; BLOCK];
        let mut data = vec![0u8; BLOCK];
        let pages = self.slots.div_ceil(HEADERS_PER_PAGE);
        for p in 0..pages {
            self.dev
                .read_at(&mut page, SUPERS_BYTES + p * BLOCK as u64)?;
            for i in 0..HEADERS_PER_PAGE {
                let slot = p * HEADERS_PER_PAGE + i;
                if slot >= self.slots {
                    break;
                }
                let at = (i as usize) * SLOT_HEADER_BYTES;
                let Some((meta, crc)) =
                    decode_slot_header(&page[at..at + SLOT_HEADER_BYTES], epoch)
                else {
                    continue;
                };
                self.dev.read_at(&mut data, self.data_at(slot))?;
                if data_crc(&data) != crc {
                    out.torn += 1;
                    continue;
                }
                out.records.push(Found {
                    meta,
                    data: data.clone(),
                });
            }
        }
        Ok(out)
    }

    fn reset(&self) -> io::Result<()> {
        let mut st = self.lock();
        let s = Super {
            kind: KIND_MIRROR,
            uuid: self.uuid,
            generation: st.generation + 1,
            epoch: st.epoch + 1,
            capacity: self.slots,
            segment_bytes: 0,
            tail: 0,
            members: Vec::new(),
        };
        write_super(&self.dev, 0, &s).map_err(|e| self.fail(&mut st, &e))?;
        st.generation = s.generation;
        st.epoch = s.epoch;
        st.free = FreeSlots::all(self.slots);
        st.clears_synced = st.clears_written;
        st.failed = None;
        st.stats.live = 0;
        self.gc.reset();
        Ok(())
    }

    fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    fn stats(&self) -> BackupStats {
        BackupStats {
            commit_calls: self.gc.calls(),
            ..self.lock().stats.clone()
        }
    }

    fn describe(&self) -> String {
        let st = self.lock();
        format!(
            "mirror {} ({} slots, {} live{})",
            self.dev.path(),
            self.slots,
            st.stats.live,
            if st.failed.is_some() { ", FAILED" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::RecKind;
    use super::*;
    use crate::member::{FaultMember, MemMember};

    struct NoLive;
    impl LiveData for NoLive {
        fn newest(&self, _lba: u64) -> Option<(u64, &[u8])> {
            None
        }
    }

    fn rec(lba: u64, seq: u64) -> RecMeta {
        RecMeta {
            lba,
            seq,
            kind: RecKind::Data,
        }
    }

    fn dev(slots: u64) -> Arc<dyn Member> {
        Arc::new(MemMember::new("mirror", mirror_bytes(slots)))
    }

    #[test]
    fn layout_sizes() {
        // 2 supers + 1 header page + 64 data blocks.
        assert_eq!(mirror_bytes(64), 8192 + 4096 + 64 * 4096);
        assert_eq!(mirror_bytes(65), 8192 + 2 * 4096 + 65 * 4096);
    }

    #[test]
    fn records_round_trip_and_release_clears() {
        let d = dev(8);
        let m = MirrorBackup::create(d.clone(), [1; 16], 8, 0).unwrap();
        let h1 = m.put(rec(5, 1), &[0xaa; BLOCK], &NoLive).unwrap();
        let h2 = m.put(rec(9, 2), &[0xbb; BLOCK], &NoLive).unwrap();
        assert_eq!((h1, h2), (0, 1));
        m.commit().unwrap();
        let s = m.scan().unwrap();
        assert_eq!(s.records.len(), 2);
        assert_eq!(s.records[0].meta, rec(5, 1));
        assert_eq!(s.records[1].data, vec![0xbb; BLOCK]);
        m.release(h1, false);
        let s = m.scan().unwrap();
        assert_eq!(s.records.len(), 1);
        assert_eq!(m.stats().live, 1);
        // Slots are taken in address order from where the last one was: the freed slot 0
        // only once the cursor wraps.
        assert_eq!(m.put(rec(6, 3), &[1; BLOCK], &NoLive).unwrap(), 2);
    }

    #[test]
    fn torn_data_is_counted_and_ignored() {
        let d = Arc::new(MemMember::new("mirror", mirror_bytes(4)));
        let m = MirrorBackup::create(d.clone(), [1; 16], 4, 0).unwrap();
        let h = m.put(rec(5, 1), &[0xaa; BLOCK], &NoLive).unwrap();
        m.commit().unwrap();
        d.write_at(&[0x55; 512], m.data_at(h) + 512).unwrap();
        let s = m.scan().unwrap();
        assert_eq!((s.records.len(), s.torn), (0, 1));
    }

    #[test]
    fn reset_and_recreate_hide_old_records() {
        let d = dev(4);
        let m = MirrorBackup::create(d.clone(), [1; 16], 4, 0).unwrap();
        m.put(rec(5, 1), &[0xaa; BLOCK], &NoLive).unwrap();
        m.commit().unwrap();
        m.reset().unwrap();
        assert!(m.scan().unwrap().records.is_empty());
        let m = MirrorBackup::open(d.clone(), [1; 16]).unwrap().unwrap();
        assert_eq!(m.epoch(), 2);
        m.put(rec(7, 2), &[0xcc; BLOCK], &NoLive).unwrap();
        m.commit().unwrap();
        let m2 = MirrorBackup::create(d.clone(), [1; 16], 4, m.epoch()).unwrap();
        assert!(m2.scan().unwrap().records.is_empty());
    }

    #[test]
    fn open_rejects_foreign_corrupt_and_truncated() {
        let d = dev(4);
        assert!(MirrorBackup::open(d.clone(), [1; 16]).unwrap().is_none());
        MirrorBackup::create(d.clone(), [1; 16], 4, 0).unwrap();
        let e = MirrorBackup::open(d.clone(), [2; 16])
            .unwrap_err()
            .to_string();
        assert!(e.contains("another array") && e.contains("mirror"), "{e}");
        d.write_at(&[9; 100], 0).unwrap();
        d.write_at(&[9; 100], 4096).unwrap();
        let e = MirrorBackup::open(d.clone(), [1; 16])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a readable write-cache backup"), "{e}");
        let small: Arc<dyn Member> = Arc::new(MemMember::new("small", 10_000));
        let e = MirrorBackup::create(small, [1; 16], 4, 0)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("too small") && e.contains("small"), "{e}");
    }

    #[test]
    fn a_failed_sync_loses_the_backup_until_reset() {
        let inner: Arc<dyn Member> = Arc::new(MemMember::new("m", mirror_bytes(4)));
        let f = Arc::new(FaultMember::new(inner));
        let m = MirrorBackup::create(f.clone(), [1; 16], 4, 0).unwrap();
        m.put(rec(1, 1), &[1; BLOCK], &NoLive).unwrap();
        f.fail_now();
        assert!(m.commit().is_err());
        assert!(m.put(rec(2, 2), &[2; BLOCK], &NoLive).is_err());
        assert!(m.describe().contains("FAILED"));
        f.heal();
        m.reset().unwrap();
        assert!(m.put(rec(2, 3), &[2; BLOCK], &NoLive).is_ok());
    }
}
