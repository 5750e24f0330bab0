//! `ctl re-add`: a device that left the array comes back, md's `--re-add`.
//!
//! The rule ("recent enough"): the device's own superblock must name this array and the
//! slot it left in sync, and the last event it was in sync there (`left_in_sync` of a
//! faulty device, or the events of a superblock still claiming the slot); that event must
//! be at least `cleared_events`, the event when a write-intent bit was last cleared. Bits
//! are never cleared while a slot is not in sync (`sync.rs`), so every region written after
//! it left is still set: only those regions' rows are rebuilt onto it, and the rest of its
//! data is trusted. The slot must be failed and free, and no other rebuild running.
//!
//! Otherwise (never a member, another array's, an unreadable superblock, a replacement that
//! left before its rebuild ended, bits cleared since it left, a bitmap that does not say
//! since when its bits are kept) it becomes a spare and is rebuilt in full, as before; the
//! reply and the log say why.

use serde_json::{json, Value};

use super::{Controller, IoFail, State};
use crate::member::{DevId, Member};
use crate::sync::Arc;

/// What `re_add` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReAdded {
    pub path: String,
    /// The slot it went back into (a partial re-add), `None` when it became a spare.
    pub slot: Option<u32>,
    /// Dirty regions and their rows to resync (partial), or 0.
    pub regions: u64,
    pub rows: u64,
    pub bytes: u64,
    pub member_bytes: u64,
    /// Why the re-add is a full rebuild (`None`: partial).
    pub full_because: Option<String>,
}

impl ReAdded {
    /// A device that became a spare, to be rebuilt in full, and why.
    fn full(path: String, member_bytes: u64, why: String) -> ReAdded {
        ReAdded {
            path,
            slot: None,
            regions: 0,
            rows: 0,
            bytes: 0,
            member_bytes,
            full_because: Some(why),
        }
    }

    pub fn is_partial(&self) -> bool {
        self.full_because.is_none()
    }

    /// The reply fields of `ctl re-add`.
    pub fn json(&self) -> Value {
        json!({
            "re_added": self.path,
            "resync": if self.is_partial() { "partial" } else { "full" },
            "slot": self.slot,
            "regions": self.regions,
            "rows": self.rows,
            "bytes": self.bytes,
            "member_bytes": self.member_bytes,
            "full_because": self.full_because,
        })
    }
}

impl Controller {
    /// Whether `target` (a path, compared by device identity, or the slot it was taken out
    /// of) names one of the faulty devices the array holds.
    pub fn knows_faulty(&self, target: &str) -> bool {
        faulty_index(&self.read_state(), target).is_some()
    }

    /// `ctl re-add K|PATH` of a faulty device the array holds (`knows_faulty`).
    pub fn re_add(&self, target: &str) -> Result<ReAdded, IoFail> {
        let dev = {
            let st = self.read_state();
            let Some(i) = faulty_index(&st, target) else {
                return Err(IoFail::Invalid(format!(
                    "{target} is not a faulty device of this array (`ctl status` lists them)"
                )));
            };
            Arc::clone(&st.faulty[i])
        };
        self.re_add_device(dev)
    }

    /// Re-add `dev`: one of the faulty devices, or a device the array no longer lists (taken
    /// out with `ctl remove`, or left out at the start). Partial when its superblock says it
    /// is recent enough (module doc), otherwise a spare and a full rebuild.
    pub fn re_add_device(&self, dev: Arc<dyn Member>) -> Result<ReAdded, IoFail> {
        self.re_add_inner(dev, None)
    }

    /// `re_add_device`; `remembered` is the slot and event a returning missing device first
    /// left in sync at, when its own superblock no longer says so (it went away again
    /// during the partial resync of an earlier re-add: `missing.rs`).
    pub(crate) fn re_add_inner(
        &self,
        dev: Arc<dyn Member>,
        remembered: Option<(u32, u64)>,
    ) -> Result<ReAdded, IoFail> {
        let need = self.shape.data_offset_bytes + self.shape.member_data_bytes;
        if dev.len_bytes() < need {
            return Err(IoFail::Invalid(format!(
                "{}: {} bytes is too small for a member of this array (needs {need})",
                dev.path(),
                dev.len_bytes()
            )));
        }
        // Read before the locks: the device is no member, nothing else writes it.
        let record = match (self.meta.readd_record(dev.as_ref()), remembered) {
            (Ok(r), _) => Ok(r),
            // Only for a device of this array: its superblock still names the array.
            (Err(_), Some(r)) if self.meta.is_own(dev.as_ref()) => Ok(r),
            (Err(e), _) => Err(e),
        };
        // Lock order: the bitmap, then the state. Holding the bitmap while the slot is
        // taken means no write sets a bit in between: a region is either dirty here (and
        // resynced) or written after, through the new member.
        let r = self.resync.lock().unwrap_or_else(|e| e.into_inner());
        let mut st = self.write_state();
        if let Some(d) = &st.dead {
            return Err(IoFail::Failed(d.clone()));
        }
        let id = dev.identity();
        let at = st.faulty.iter().position(|d| d.identity() == id);
        if at.is_none() {
            if let Some(role) = st.role_of(id) {
                return Err(IoFail::Invalid(format!(
                    "{}: this device is already {role} of this array",
                    dev.path()
                )));
            }
        }
        let record_left = record.as_ref().ok().map(|&(_, l)| l);
        let verdict = record.and_then(|(slot, left)| {
            self.readd_verdict(&st, r.cleared_events, r.rows_per_region, slot, left)
                .map(|()| slot)
        });
        if let Some(i) = at {
            st.faulty.remove(i);
            st.faulty_slots.remove(i);
        }
        let path = dev.path().to_string();
        let member_bytes = self.shape.member_data_bytes;
        let slot = match verdict {
            Ok(slot) => slot,
            Err(why) => {
                if st
                    .readd_left
                    .as_ref()
                    .is_some_and(|(d, _, _)| Arc::ptr_eq(d, &dev))
                {
                    st.readd_left = None;
                }
                st.spares.push(dev);
                self.persist(&mut st);
                drop(st);
                drop(r);
                crate::warn!(
                    { "event": "ReAdd", "device": path, "resync": "full", "why": why },
                    "re-add of {path}: full rebuild ({why})"
                );
                if self.opts.auto_rebuild {
                    self.maybe_start_rebuild();
                }
                return Ok(ReAdded::full(path, member_bytes, why));
            }
        };
        let (rows, rpr) = (self.shape.rows(), r.rows_per_region);
        let dirty = |row: u64| r.dirty.get((row / rpr) as usize).copied().unwrap_or(true);
        let regions = r.dirty.iter().filter(|&&b| b).count() as u64;
        let job = self.new_partial_job(slot, dirty, regions);
        let resync_rows = job.units;
        if let Err(e) = st.array.start_rebuild(slot, rows, true, "re-add") {
            // Not expected (the verdict checked the slot): a spare, as any full re-add.
            let why = format!("its rebuild cannot start ({e})");
            crate::warn!("re-add of {path}: full rebuild ({why})");
            st.spares.push(dev);
            self.persist(&mut st);
            return Ok(ReAdded::full(path, member_bytes, why));
        }
        for row in (0..rows).filter(|&row| !dirty(row)) {
            st.array.mark_rebuilt(slot, row);
        }
        st.readd_left = record_left.map(|l| (Arc::clone(&dev), slot, l));
        st.devs[slot as usize] = Some(dev);
        self.counters[slot as usize].reset();
        // The job is set before the superblocks are written: a device failing that write
        // is failed as a replacement, which drops the job.
        if let Ok(mut j) = self.rebuild.lock() {
            *j = Some(job);
        }
        self.persist(&mut st);
        drop(st);
        drop(r);
        let bytes = resync_rows * self.shape.chunk_bytes;
        crate::info!(
            { "event": "ReAdd", "device": path, "slot": slot, "resync": "partial",
              "regions": regions, "rows": resync_rows, "bytes": bytes, "member_bytes": member_bytes },
            "re-add of {path}: back in slot {slot}, resyncing {regions} dirty region(s): {resync_rows} rows, {bytes} of {member_bytes} bytes"
        );
        Ok(ReAdded {
            path,
            slot: Some(slot),
            regions,
            rows: resync_rows,
            bytes,
            member_bytes,
            full_because: None,
        })
    }

    /// Whether a device that left `slot` in sync at event `left` may go back into it with
    /// only the bitmap's dirty regions resynced; `Err` says why not.
    fn readd_verdict(
        &self,
        st: &State,
        cleared: Option<u64>,
        rows_per_region: u64,
        slot: u32,
        left: u64,
    ) -> Result<(), String> {
        if slot >= self.shape.disks {
            return Err(format!("its superblock names slot {slot}, out of range"));
        }
        if st.array.rebuilding(slot).is_some() {
            return Err(format!("slot {slot} is being rebuilt onto another device"));
        }
        if !st.array.is_failed(slot) || st.devs[slot as usize].is_some() {
            return Err(format!("slot {slot} is in sync with another device"));
        }
        if self.rebuild_active() {
            return Err("a rebuild of another slot is running".into());
        }
        if rows_per_region == 0 {
            return Err("the array keeps no write-intent bitmap".into());
        }
        let Some(cleared) = cleared else {
            return Err("the write-intent bitmap does not say since when its bits are kept (a member's bitmap was unreadable at the start, or written by an older raidlab)".into());
        };
        if left < cleared {
            return Err(format!(
                "it left slot {slot} at event {left}, and bitmap bits were cleared at event {cleared} since: the writes it missed are no longer all recorded"
            ));
        }
        if left > st.events() {
            return Err(format!(
                "its superblock is newer (event {left}) than the array's (event {})",
                st.events()
            ));
        }
        Ok(())
    }
}

/// The faulty device `target` names: a path (compared by identity) or the slot it left.
fn faulty_index(st: &State, target: &str) -> Option<usize> {
    let by_slot = target.parse::<u32>().ok();
    let by_id = DevId::of_path(std::path::Path::new(target)).ok();
    (0..st.faulty.len()).find(|&i| {
        st.faulty[i].path() == target
            || Some(st.faulty[i].identity()) == by_id
            || Some(st.faulty_slots[i]) == by_slot
    })
}

#[cfg(test)]
#[path = "readd_tests.rs"]
mod tests;
