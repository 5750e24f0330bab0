//! `SuperblockSink`: the controller's metadata writer (superblocks and write-intent bitmap).

use crate::sync::{Arc, Mutex};
use std::collections::{HashMap, HashSet};

use super::assemble::Assembled;
use super::bitmap::encode_bitmap_kept;
use super::superblock::{decode, DevRole, Superblock};
use super::{new_uuid, BITMAP_OFFSET, SUPERBLOCK_BYTES, SUPERBLOCK_OFFSET};
use crate::ctrl::sync::{rows_per_region, REGIONS_MAX};
use crate::ctrl::{MetaError, MetaSink, Shape, SlotState, Snapshot};
use crate::member::{DevId, Member};

/// Writes every snapshot to each device's superblock and the bitmap to every slot device.
pub struct SuperblockSink {
    name: String,
    uuid: [u8; 16],
    shape: Shape,
    rows_per_region: u64,
    inner: Mutex<Inner>,
}

struct Inner {
    events: u64,
    /// The slot devices of the last snapshot: where `write_intent` writes.
    slot_devs: Vec<Option<Arc<dyn Member>>>,
    /// The last bitmap asked for.
    dirty: Vec<bool>,
    /// Slot devices (by path) whose on-disk bitmap covers `dirty`. A device entering a slot
    /// (a spare taken for a rebuild) gets the bitmap at the next persist, so every slot
    /// device's bitmap stays usable for assembly.
    current: HashSet<String>,
    /// Each device's own UUID, kept across rewrites of its superblock.
    dev_uuids: HashMap<String, [u8; 16]>,
    /// The slot each device last held: a faulty device's superblock records it.
    slot_of: HashMap<DevId, u32>,
    /// The slot states of the last snapshot: a device that leaves a slot recorded in sync
    /// was the slot's in-sync member up to `events`.
    states: Vec<SlotState>,
    /// Per faulty device: the last event it was in sync in its slot (its superblock records
    /// it for `ctl re-add`), `None` when it was not.
    left: HashMap<DevId, Option<u64>>,
    /// When a bitmap bit was last cleared (`None`: unknown), written in every bitmap.
    cleared: Option<u64>,
}

impl SuperblockSink {
    /// A sink for a just-created array: no bitmap bit is set on disk, and the first persist
    /// writes a clear bitmap to every slot device.
    pub fn new(name: &str, uuid: [u8; 16], shape: Shape, events: u64) -> SuperblockSink {
        let rpr = rows_per_region(shape.rows());
        SuperblockSink::with_regions(name, uuid, shape, events, rpr)
    }

    /// `new` for bitmap regions of `rpr` rows (what the array's bitmaps record).
    pub fn with_regions(
        name: &str,
        uuid: [u8; 16],
        shape: Shape,
        events: u64,
        rpr: u64,
    ) -> SuperblockSink {
        let regions = shape.rows().div_ceil(rpr) as usize;
        SuperblockSink {
            name: name.to_string(),
            uuid,
            rows_per_region: rpr,
            inner: Mutex::new(Inner {
                events,
                slot_devs: vec![None; shape.disks as usize],
                dirty: vec![false; regions],
                current: HashSet::new(),
                dev_uuids: HashMap::new(),
                slot_of: HashMap::new(),
                states: vec![SlotState::InSync; shape.disks as usize],
                left: HashMap::new(),
                cleared: Some(events),
            }),
            shape,
        }
    }

    /// A sink for an assembled array. Its slot devices' bitmaps are taken as current, so the
    /// dirty bits they hold stay on disk until the controller clears them.
    pub fn from_assembled(a: &Assembled) -> SuperblockSink {
        let s = SuperblockSink::with_regions(
            &a.name,
            a.uuid,
            a.shape.clone(),
            a.events,
            a.rows_per_region,
        );
        {
            let mut inner = s.lock();
            if a.kept_regions.len() == inner.dirty.len() {
                inner.dirty = a.kept_regions.clone();
            }
            inner.cleared = a.cleared_events;
            inner.states = (0..a.shape.disks)
                .map(|k| match (&a.devs[k as usize], a.recovering) {
                    (Some(_), Some((r, cp))) if r == k => SlotState::Recovering { checkpoint: cp },
                    (Some(_), _) => SlotState::InSync,
                    (None, _) => SlotState::Failed,
                })
                .collect();
            inner.slot_devs = a.devs.clone();
            for (s, d) in a.devs.iter().enumerate() {
                if let Some(d) = d {
                    inner.slot_of.insert(d.identity(), s as u32);
                }
            }
            for (d, slot) in &a.faulty {
                if *slot != u32::MAX {
                    inner.slot_of.insert(d.identity(), *slot);
                }
                let left = s.left_in_sync_of(d.as_ref());
                inner.left.insert(d.identity(), left);
            }
            inner.current = a
                .devs
                .iter()
                .flatten()
                .map(|d| d.path().to_string())
                .collect();
        }
        s
    }

    fn lock(&self) -> crate::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A device's own superblock, when it is readable and this array's (same UUID and
    /// shape); `Err` says why not.
    fn own_superblock(&self, dev: &dyn Member) -> Result<Superblock, String> {
        let mut b = [0u8; SUPERBLOCK_BYTES];
        dev.read_at(&mut b, SUPERBLOCK_OFFSET)
            .map_err(|e| format!("its superblock cannot be read ({e})"))?;
        let sb = decode(&b, dev.path()).map_err(|e| e.to_string())?;
        if sb.array_uuid != self.uuid {
            return Err(format!(
                "it belongs to another array (uuid {})",
                super::uuid_string(&sb.array_uuid)
            ));
        }
        if sb.shape() != self.shape {
            return Err("its superblock describes another shape of array".into());
        }
        Ok(sb)
    }

    /// What a device's superblock says of the slot it left in sync and when: a faulty
    /// device's recorded `left_in_sync`, or, for one still claiming its slot (its superblock
    /// missed the updates since), its own events when its own table has the slot in sync.
    fn left_in_sync_of(&self, dev: &dyn Member) -> Option<u64> {
        readd_record(self.own_superblock(dev).ok()?)
            .ok()
            .map(|(_, e)| e)
    }

    /// The device's UUID: remembered, or read from its superblock when it is this array's,
    /// or a new one (a spare joining).
    fn dev_uuid(&self, inner: &mut Inner, dev: &dyn Member) -> [u8; 16] {
        if let Some(u) = inner.dev_uuids.get(dev.path()) {
            return *u;
        }
        let mut b = [0u8; SUPERBLOCK_BYTES];
        let u = match dev.read_at(&mut b, SUPERBLOCK_OFFSET) {
            Ok(()) => match decode(&b, dev.path()) {
                Ok(sb) if sb.array_uuid == self.uuid => sb.device_uuid,
                _ => new_uuid(),
            },
            Err(_) => new_uuid(),
        };
        inner.dev_uuids.insert(dev.path().to_string(), u);
        u
    }

    fn superblock(
        &self,
        snap: &Snapshot,
        role: DevRole,
        device_uuid: [u8; 16],
        former_slot: Option<u32>,
    ) -> Superblock {
        Superblock {
            array_uuid: self.uuid,
            device_uuid,
            name: self.name.clone(),
            level: self.shape.level,
            layout: self.shape.layout,
            disks: self.shape.disks,
            role,
            chunk_bytes: self.shape.chunk_bytes,
            data_offset_bytes: self.shape.data_offset_bytes,
            member_data_bytes: self.shape.member_data_bytes,
            events: snap.events,
            clean: snap.clean,
            failed: snap.failed,
            former_slot,
            left_in_sync: None,
            slots: snap
                .slots
                .iter()
                .map(|(_, st)| *st)
                .collect::<Vec<SlotState>>(),
        }
    }
}

impl MetaSink for SuperblockSink {
    fn persist(&self, snap: &Snapshot) -> Result<(), MetaError> {
        if snap.slots.len() != self.shape.disks as usize {
            return Err(MetaError {
                devices: Vec::new(),
                other: Some(format!(
                    "snapshot has {} slots, the array {}",
                    snap.slots.len(),
                    self.shape.disks
                )),
                nothing_written: true,
            });
        }
        let mut err = MetaError::default();
        // Preflush (md writes superblocks with REQ_PREFLUSH): every data write made before
        // this update is durable before the new superblocks can be, so a rebuild checkpoint
        // or a state change never lands ahead of the data it describes. A device that fails
        // its sync has lost writes the kernel will not report again: it is failed.
        let slot_devs: Vec<&Arc<dyn Member>> =
            snap.slots.iter().filter_map(|(d, _)| d.as_ref()).collect();
        let synced = each_device(&slot_devs, |d| d.as_ref(), |d| d.sync());
        for (d, r) in slot_devs.iter().zip(synced) {
            if let Err(e) = r {
                err.devices.push(((*d).clone(), format!("preflush: {e}")));
            }
        }
        if !err.devices.is_empty() {
            // The snapshot describes data some member could not make durable (a replacement
            // recorded in sync, or a checkpoint past its synced rows): no superblock may say
            // so. The caller fails those devices and persists the state that follows.
            err.nothing_written = true;
            return Err(err);
        }
        let mut inner = self.lock();
        // A device newly faulty that held a slot recorded in sync at the last update was
        // that slot's in-sync member up to then (a replacement being rebuilt was not).
        for d in &snap.faulty {
            let id = d.identity();
            if inner.left.contains_key(&id) {
                continue;
            }
            let held = inner.slot_devs.iter().position(|s| {
                s.as_ref()
                    .is_some_and(|s| Arc::ptr_eq(s, d) || s.identity() == id)
            });
            let left = held
                .filter(|&s| inner.states.get(s) == Some(&SlotState::InSync))
                .map(|_| inner.events);
            inner.left.insert(id, left);
        }
        for d in snap
            .slots
            .iter()
            .filter_map(|(d, _)| d.as_ref())
            .chain(&snap.spares)
        {
            inner.left.remove(&d.identity());
        }
        inner.events = snap.events;
        inner.states = snap.slots.iter().map(|(_, st)| *st).collect();
        inner.slot_devs = snap.slots.iter().map(|(d, _)| d.clone()).collect();
        for (s, (d, _)) in snap.slots.iter().enumerate() {
            if let Some(d) = d {
                inner.slot_of.insert(d.identity(), s as u32);
            }
        }
        let bitmap = encode_bitmap_kept(
            snap.events,
            self.rows_per_region,
            &inner.dirty,
            inner.cleared,
        );
        let mut current = HashSet::new();
        let roles = snap
            .slots
            .iter()
            .enumerate()
            .filter_map(|(s, (d, _))| d.as_ref().map(|d| (d, DevRole::Slot(s as u32))))
            .chain(snap.spares.iter().map(|d| (d, DevRole::Spare)))
            .chain(snap.faulty.iter().map(|d| (d, DevRole::Faulty)));
        // Each device's superblock, and whether its bitmap is written with it (a slot device
        // whose bitmap is not current). Then the writes and their syncs, every device at
        // once on slow members: md issues a superblock update to all its members together.
        let mut updates: Vec<Update<'_>> = Vec::new();
        for (dev, role) in roles {
            let faulty = role == DevRole::Faulty;
            let u = self.dev_uuid(&mut inner, dev.as_ref());
            let (former, left) = if faulty {
                let id = dev.identity();
                (
                    inner.slot_of.get(&id).copied(),
                    inner.left.get(&id).copied().flatten(),
                )
            } else {
                (None, None)
            };
            let mut sb = self.superblock(snap, role, u, former);
            sb.left_in_sync = left;
            let with_bitmap =
                matches!(role, DevRole::Slot(_)) && !inner.current.contains(dev.path());
            updates.push(Update {
                dev,
                role,
                sb: sb.encode(),
                with_bitmap,
            });
        }
        let results = each_device(
            &updates,
            |u| u.dev.as_ref(),
            |u| {
                u.dev
                    .write_at(&u.sb, SUPERBLOCK_OFFSET)
                    .map_err(|e| format!("writing the superblock: {e}"))?;
                if u.with_bitmap {
                    u.dev
                        .write_at(&bitmap, BITMAP_OFFSET)
                        .map_err(|e| format!("writing the bitmap: {e}"))?;
                }
                u.dev
                    .sync()
                    .map_err(|e| format!("syncing the superblock: {e}"))
            },
        );
        for (u, r) in updates.iter().zip(results) {
            match r {
                // A slot device's bitmap is current: it was, or it was written now.
                Ok(()) if matches!(u.role, DevRole::Slot(_)) => {
                    current.insert(u.dev.path().to_string());
                }
                Ok(()) => {}
                Err(e) if u.role != DevRole::Faulty => err.devices.push((u.dev.clone(), e)),
                // A faulty device is expected to fail: its record is best effort.
                Err(_) => {}
            }
        }
        inner.current = current;
        if err.devices.is_empty() && err.other.is_none() {
            Ok(())
        } else {
            Err(err)
        }
    }

    fn write_intent(&self, dirty: &[bool], cleared: Option<u64>) -> Result<(), MetaError> {
        if dirty.len() as u64 > REGIONS_MAX {
            return Err(MetaError {
                devices: Vec::new(),
                other: Some(format!(
                    "{} bitmap regions, at most {REGIONS_MAX} fit",
                    dirty.len()
                )),
                nothing_written: true,
            });
        }
        let mut inner = self.lock();
        inner.dirty = dirty.to_vec();
        inner.cleared = cleared;
        let bytes = encode_bitmap_kept(inner.events, self.rows_per_region, dirty, cleared);
        let devs: Vec<Arc<dyn Member>> = inner.slot_devs.iter().flatten().cloned().collect();
        let mut err = MetaError::default();
        let mut current = HashSet::new();
        // Every bitmap is durable before this returns (the controller writes data only
        // after).
        let results = each_device(&devs, |d| d.as_ref(), |d| write_bitmap(d.as_ref(), &bytes));
        for (d, r) in devs.iter().zip(results) {
            match r {
                Ok(()) => {
                    current.insert(d.path().to_string());
                }
                Err(why) => err.devices.push((d.clone(), why)),
            }
        }
        inner.current = current;
        if err.devices.is_empty() {
            Ok(())
        } else {
            Err(err)
        }
    }

    fn readd_record(&self, dev: &dyn Member) -> Result<(u32, u64), String> {
        readd_record(self.own_superblock(dev)?)
    }

    fn is_own(&self, dev: &dyn Member) -> bool {
        self.own_superblock(dev).is_ok()
    }
}

/// One device's part of a superblock update.
struct Update<'a> {
    dev: &'a Arc<dyn Member>,
    role: DevRole,
    sb: [u8; SUPERBLOCK_BYTES],
    /// A slot device whose bitmap is not current gets it with its superblock.
    with_bitmap: bool,
}

/// Write the bitmap `bytes` to one device and make it durable.
fn write_bitmap(d: &dyn Member, bytes: &[u8]) -> Result<(), String> {
    d.write_at(bytes, BITMAP_OFFSET)
        .map_err(|e| format!("writing the bitmap: {e}"))?;
    d.sync().map_err(|e| format!("syncing the bitmap: {e}"))
}

/// Run `f` for every item of a metadata update, all at once when a device it goes to is
/// slow: a remote member (each write and flush a network round trip) or a disk-timed one
/// (each write its model time). One after another, a superblock update of a 16-disk array
/// on disk-timed members took 16 member writes' time, all of it under the controller's
/// state lock, so every request waited that long. Members in memory time are written one
/// after another (a thread costs more than their write).
pub(crate) fn each_device<'a, T: Sync, R: Send>(
    items: &'a [T],
    dev: impl Fn(&'a T) -> &'a dyn Member,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let slow = cfg!(feature = "shuttle")
        || items.iter().any(|t| {
            let d = dev(t);
            d.link().is_some() || d.timing().is_some()
        });
    crate::ctrl::fanout::each(slow, items.iter().collect(), f)
}

/// The slot a device left in sync and the last event it was in sync there, from its own
/// superblock: a faulty device's former slot and `left_in_sync`, or a device whose
/// superblock still claims a slot its own table records in sync (it missed the updates
/// that took it out: its data holds every write up to its events).
fn readd_record(sb: Superblock) -> Result<(u32, u64), String> {
    match sb.role {
        DevRole::Faulty => match (sb.former_slot, sb.left_in_sync) {
            (Some(s), Some(e)) => Ok((s, e)),
            (None, _) => Err("its superblock does not record the slot it was taken out of".into()),
            (Some(s), None) => Err(format!(
                "it was not the in-sync member of slot {s} when it left (a replacement being rebuilt, or a device whose superblock was unusable)"
            )),
        },
        DevRole::Slot(s) if sb.slots.get(s as usize) == Some(&SlotState::InSync) => {
            Ok((s, sb.events))
        }
        DevRole::Slot(s) => Err(format!(
            "its superblock has slot {s} not in sync (a replacement being rebuilt)"
        )),
        DevRole::Spare => Err("it was a spare, never a member".into()),
    }
}

#[cfg(test)]
#[path = "sink_tests.rs"]
mod tests;
