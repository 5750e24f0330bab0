//! Membership: member failures (charged to the device), spares, removal, and the
//! metadata every change persists (a device whose superblock or bitmap write fails is failed,
//! as md does).

use super::{Controller, Fault, IoFail, MetaError, SlotState, Snapshot, State};
use crate::member::Member;
use crate::sync::Arc;

impl Controller {
    /// Persist the current state (event counter bumped); called with the write lock held.
    pub(crate) fn persist(&self, st: &mut State) {
        self.persist_at(st, 0);
    }

    fn persist_at(&self, st: &mut State, depth: usize) {
        let snap = self.next_snapshot(st);
        let r = {
            let _order = self.persisting.lock().unwrap_or_else(|e| e.into_inner());
            self.meta.persist(&snap)
        };
        if let Err(e) = r {
            self.persist_failed(st, snap.events, &e, depth);
        }
    }

    /// Persist the state holding it only shared, for an update that records progress (the
    /// rebuild's checkpoint): requests go on during the writes. Held for writing, every
    /// request waited for the update and, before it, for the slowest row write in flight.
    pub(crate) fn persist_progress(&self) {
        self.persist_letting_go(self.read_state());
    }

    /// Write the next superblock update from `st` (the state held shared or exclusively),
    /// letting the state go during the writes.
    fn persist_letting_go(&self, st: impl std::ops::Deref<Target = State>) {
        // Taken under the state lock and before the number: updates are written in the
        // order of their numbers.
        let order = self.persisting.lock().unwrap_or_else(|e| e.into_inner());
        let snap = self.next_snapshot(&st);
        drop(st);
        let r = self.meta.persist(&snap);
        drop(order);
        if let Err(e) = r {
            let mut st = self.write_state();
            self.persist_failed(&mut st, snap.events, &e, 0);
        }
    }

    /// The state as the next superblock update records it (its event number taken: under
    /// the write lock, or holding `persisting`).
    fn next_snapshot(&self, st: &State) -> Snapshot {
        let events = st.events.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let slots = (0..self.shape.disks)
            .map(|s| {
                let state = if !st.array.is_failed(s) {
                    SlotState::InSync
                } else if let Some(map) = st.array.rebuilding(s) {
                    SlotState::Recovering {
                        checkpoint: map.next_clear(0).unwrap_or(map.len()),
                    }
                } else {
                    SlotState::Failed
                };
                (st.devs[s as usize].clone(), state)
            })
            .collect();
        Snapshot {
            events,
            clean: st.clean,
            slots,
            spares: st.spares.clone(),
            faulty: st.faulty.clone(),
            failed: st.dead.is_some(),
        }
    }

    /// The superblock update of event `events` failed with `e`.
    fn persist_failed(&self, st: &mut State, events: u64, e: &MetaError, depth: usize) {
        if e.nothing_written && st.events() == events {
            // Written nowhere: the next update reuses the number (assembly allows a member
            // one event behind, for a crash between members' writes, and no more).
            st.events
                .store(events - 1, std::sync::atomic::Ordering::SeqCst);
        }
        if let Some(m) = &e.other {
            crate::warn!({ "error": m }, "writing superblocks failed: {m}");
        }
        // md fails a member whose superblock write fails: its metadata no longer follows
        // the array's. The new state is persisted again (bounded: each round takes out at
        // least one device, or stops).
        let mut changed = false;
        for (dev, why) in &e.devices {
            changed |= self.drop_device_locked(st, dev, &format!("superblock: {why}"));
        }
        if changed && depth < self.shape.disks as usize + 4 {
            self.persist_at(st, depth + 1);
        }
    }

    /// Take `dev` out after a metadata I/O error: a slot member is failed, a spare becomes
    /// faulty. `true` when the state changed.
    fn drop_device_locked(&self, st: &mut State, dev: &Arc<dyn Member>, why: &str) -> bool {
        if let Some(slot) = st
            .devs
            .iter()
            .position(|d| d.as_ref().is_some_and(|d| Arc::ptr_eq(d, dev)))
        {
            return self.fail_locked(st, slot as u32, why).0;
        }
        if let Some(i) = st.spares.iter().position(|d| Arc::ptr_eq(d, dev)) {
            let d = st.spares.remove(i);
            if super::missing::is_away(&d) {
                // A remote spare whose host is away: reconnected, and a spare again when
                // it returns (its superblock says spare).
                self.park_missing(st, d, u32::MAX);
                return true;
            }
            crate::warn!(
                { "device": d.path(), "error": why },
                "spare {} failed ({why}); no longer a spare",
                d.path()
            );
            st.faulty.push(d);
            st.faulty_slots.push(u32::MAX);
            return true;
        }
        false
    }

    /// Fail every device of `e` (a write-intent bitmap write or sync failed on it): its
    /// bitmap no longer says which rows to resync. `Err` when the array cannot survive it.
    pub(crate) fn fail_meta_devices(&self, e: &MetaError) -> Result<(), IoFail> {
        if let Some(m) = &e.other {
            crate::warn!({ "error": m }, "writing the write-intent bitmap failed: {m}");
        }
        let mut st = self.write_state();
        let mut changed = false;
        for (dev, why) in &e.devices {
            changed |=
                self.drop_device_locked(&mut st, dev, &format!("write-intent bitmap: {why}"));
        }
        if changed {
            self.persist(&mut st);
        }
        match &st.dead {
            Some(d) => Err(IoFail::Failed(d.clone())),
            None => Ok(()),
        }
    }

    /// Mark the array dirty (before the first write after a clean state) or clean (at a
    /// graceful stop, with nothing in flight).
    pub fn set_clean(&self, clean: bool) {
        if !clean {
            return self.mark_dirty();
        }
        let mut st = self.write_state();
        if !st.clean {
            st.clean = true;
            self.persist(&mut st);
        }
    }

    /// Mark the array dirty; returns once the superblocks say so. Only the caller (the
    /// write about to be made) waits for them, as md's `md_write_start` makes only writes
    /// wait: the state lock is let go during the writes, so reads, and writes that do not
    /// need the mark, go on. Holding it, the first destage of a 16-disk array on
    /// disk-timed members stopped every read for 150 ms. The writes are ordered with any
    /// other superblock update by `persisting`, taken before the state lock is let go.
    fn mark_dirty(&self) {
        let mut st = self.write_state();
        if !st.clean {
            // Marked already, maybe by an update still being written: it took
            // `persisting` before letting the state go, so waiting for `persisting` waits
            // for it.
            drop(st);
            drop(self.persisting.lock().unwrap_or_else(|e| e.into_inner()));
            return;
        }
        st.clean = false;
        self.persist_letting_go(st);
    }

    /// Take the clean flag the superblocks recorded at assembly; nothing is written. The
    /// first write into a clean array then marks it dirty on the members before any data
    /// moves, and a crash leaves it dirty.
    pub fn assume_clean(&self, clean: bool) {
        self.write_state().clean = clean;
    }

    /// Write the superblocks now (the rebuild checkpoint, at a graceful stop).
    pub fn checkpoint(&self) {
        let mut st = self.write_state();
        self.persist(&mut st);
    }

    pub fn is_clean(&self) -> bool {
        self.read_state().clean
    }

    /// Fail the device an I/O error came from, if it is still in its slot: a late error
    /// from a device that has already left (a replacement failed and replaced) fails
    /// nothing. `what` says what the I/O was; the OS error is in the message.
    pub(crate) fn fail_device(&self, f: &Fault, what: &str) -> Result<(), IoFail> {
        let why = format!("{what}: {}", f.why);
        let Some(dev) = &f.dev else {
            return self.fail_member(f.slot, &why);
        };
        let mut st = self.write_state();
        let present = st.devs[f.slot as usize]
            .as_ref()
            .is_some_and(|d| Arc::ptr_eq(d, dev));
        if !present {
            return match &st.dead {
                Some(d) => Err(IoFail::Failed(d.clone())),
                None => Ok(()),
            };
        }
        let (changed, r) = self.fail_locked(&mut st, f.slot, &why);
        if changed {
            self.persist(&mut st);
        }
        r
    }

    /// Fail the member in `slot` (an I/O error, or `ctl fail`). `Ok` while the level still
    /// serves every block; `Err` when the array is now dead.
    pub fn fail_member(&self, slot: u32, why: &str) -> Result<(), IoFail> {
        let mut st = self.write_state();
        let (changed, r) = self.fail_locked(&mut st, slot, why);
        if changed {
            self.persist(&mut st);
        }
        r
    }

    /// `fail_member` with the state lock held; the caller persists.
    fn fail_locked(&self, st: &mut State, slot: u32, why: &str) -> (bool, Result<(), IoFail>) {
        if let Some(d) = &st.dead {
            return (false, Err(IoFail::Failed(d.clone())));
        }
        if slot >= self.shape.disks {
            return (
                false,
                Err(IoFail::Invalid(format!(
                    "slot {slot} out of range (the array has {} members)",
                    self.shape.disks
                ))),
            );
        }
        let name = st.devs[slot as usize]
            .as_ref()
            .map(|d| d.path().to_string())
            .unwrap_or_else(|| "(missing)".into());
        if st.array.rebuilding(slot).is_some() {
            // The replacement failed: drop it and its progress; the slot stays failed.
            st.array.abort_rebuild(slot);
            if let Some(dev) = st.devs[slot as usize].take() {
                self.take_out(st, dev, slot);
            }
            if let Ok(mut job) = self.rebuild.lock() {
                *job = None;
            }
            crate::warn!(
                { "slot": slot, "device": name, "error": why },
                "replacement {name} in slot {slot} failed ({why}); rebuild stopped"
            );
            return (true, Ok(()));
        }
        if st.array.is_failed(slot) {
            return (false, Ok(()));
        }
        match st.array.fail(slot) {
            Ok(()) => {
                if let Some(dev) = st.devs[slot as usize].take() {
                    self.take_out(st, dev, slot);
                }
                crate::warn!(
                    { "slot": slot, "device": name, "error": why },
                    "member {name} (slot {slot}) failed: {why}; serving degraded"
                );
                (true, Ok(()))
            }
            Err(_) => {
                let msg = format!(
                    "member {name} (slot {slot}) failed ({why}) and {} cannot survive it: array failed",
                    self.shape.level.name()
                );
                crate::error!("{msg}");
                st.dead = Some(msg.clone());
                (true, Err(IoFail::Failed(msg)))
            }
        }
    }

    /// A device failed out of `slot`: missing when its host is away, else faulty.
    fn take_out(&self, st: &mut State, dev: Arc<dyn Member>, slot: u32) {
        if super::missing::is_away(&dev) {
            self.park_missing(st, dev, slot);
        } else {
            st.faulty.push(dev);
            st.faulty_slots.push(slot);
        }
    }

    /// Add a hot spare; a rebuild starts onto it if a slot is failed (and auto rebuild is on).
    pub fn add_spare(&self, dev: Arc<dyn Member>) -> Result<(), IoFail> {
        let need = self.shape.data_offset_bytes + self.shape.member_data_bytes;
        if dev.len_bytes() < need {
            return Err(IoFail::Invalid(format!(
                "{}: {} bytes is too small for a member of this array (needs {need})",
                dev.path(),
                dev.len_bytes()
            )));
        }
        {
            let mut st = self.write_state();
            // Checked under the lock that adds it: no device can join between the two.
            if let Some(role) = st.role_of(dev.identity()) {
                return Err(IoFail::Invalid(format!(
                    "{}: this device is already {role} of this array",
                    dev.path()
                )));
            }
            st.spares.push(dev);
            self.persist(&mut st);
        }
        if self.opts.auto_rebuild {
            self.maybe_start_rebuild();
        }
        Ok(())
    }

    /// Remove a spare or a failed device from the array's records (`ctl remove`): `target` is
    /// its path (compared by device identity), or the number of the slot a failed device was
    /// taken out of. Returns the removed device's path.
    pub fn remove(&self, target: &str) -> Result<String, IoFail> {
        let mut st = self.write_state();
        let by_slot = target.parse::<u32>().ok();
        let by_id = crate::member::DevId::of_path(std::path::Path::new(target)).ok();
        let named = |d: &Arc<dyn Member>| d.path() == target || Some(d.identity()) == by_id;
        let path = if let Some(i) = st.spares.iter().position(named) {
            st.spares.remove(i).path().to_string()
        } else if let Some(i) = (0..st.faulty.len())
            .find(|&i| named(&st.faulty[i]) || Some(st.faulty_slots[i]) == by_slot)
        {
            st.faulty_slots.remove(i);
            st.faulty.remove(i).path().to_string()
        } else if let Some(i) = (0..st.missing.len())
            .find(|&i| named(&st.missing[i].dev) || Some(st.missing[i].slot) == by_slot)
        {
            // The operator gives up on a host: no re-add when it returns.
            st.missing.remove(i).dev.path().to_string()
        } else {
            return Err(IoFail::Invalid(format!(
                "{target} is neither a spare nor a failed member (in-sync members cannot be removed; fail them first)"
            )));
        };
        self.persist(&mut st);
        Ok(path)
    }
}
