//! What the controller records about itself: the snapshot a superblock update writes, the
//! sink that writes it (`crate::format::SuperblockSink`), and its errors.

use crate::member::Member;
use crate::sync::Arc;

/// How a slot's member stands, for the superblocks and `ctl status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    InSync,
    /// Failed (or missing): its data is reconstructed from the others.
    Failed,
    /// A replacement is being rebuilt; rows below `checkpoint` are known rebuilt.
    Recovering {
        checkpoint: u64,
    },
}

/// What the metadata layer persists after every state change.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub events: u64,
    pub clean: bool,
    /// Per slot: the device there (None when missing) and its state.
    pub slots: Vec<(Option<Arc<dyn Member>>, SlotState)>,
    pub spares: Vec<Arc<dyn Member>>,
    /// Devices that failed and were taken out of their slot (their superblocks say faulty).
    pub faulty: Vec<Arc<dyn Member>>,
    /// The array lost more than its level survives (recorded so a restart knows).
    pub failed: bool,
}

/// What a metadata update could not do: the devices whose superblock or bitmap write (or
/// its sync, or the preflush before it) failed, with the OS error, and an error that is no
/// single device's.
#[derive(Debug, Default)]
pub struct MetaError {
    pub devices: Vec<(Arc<dyn Member>, String)>,
    pub other: Option<String>,
    /// No superblock of the update was written (a preflush failed first): its event number
    /// is free for the next update, so no member falls two events behind.
    pub nothing_written: bool,
}

impl std::fmt::Display for MetaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = self
            .devices
            .iter()
            .map(|(d, why)| format!("{}: {why}", d.path()))
            .collect();
        parts.extend(self.other.clone());
        f.write_str(&parts.join("; "))
    }
}

/// Persists snapshots (superblocks on every member); see `crate::format::SuperblockSink`.
pub trait MetaSink: Send + Sync {
    /// Write `snap` to the members' metadata, durably. Called holding `persisting`, taken
    /// under the state lock's write side, so snapshots are written in event order (most
    /// callers keep the state lock too; `mark_dirty` lets it go). The callee tries every device and
    /// reports each one that failed; the caller fails those devices, as md fails a member
    /// whose superblock write fails, and persists again.
    fn persist(&self, snap: &Snapshot) -> Result<(), MetaError>;

    /// Make the write-intent bitmap durable on every slot device: `dirty[g]` for every
    /// region `g`. Called before the first write into a newly dirty region, and when idle
    /// regions are cleared. A device it fails on is failed by the caller before any data
    /// is written under the new bits.
    /// `cleared` is the event count when a bit was last cleared (`None`: unknown): every
    /// region written since still has its bit set (bits are kept while a slot is not in
    /// sync), so a device that left in sync at or after it missed only those regions.
    fn write_intent(&self, _dirty: &[bool], _cleared: Option<u64>) -> Result<(), MetaError> {
        Ok(())
    }

    /// For `ctl re-add`: the slot `dev` last held in sync and the last event it was in sync
    /// there, read from its own superblock; `Err` says why it cannot be trusted (unreadable,
    /// another array's, never a member, not in sync when it left).
    fn readd_record(&self, _dev: &dyn Member) -> Result<(u32, u64), String> {
        Err("the array keeps no superblocks to vouch for it".into())
    }

    /// Whether `dev`'s own superblock names this array.
    fn is_own(&self, _dev: &dyn Member) -> bool {
        false
    }
}

/// A sink that persists nothing (tests of the data path).
pub struct NoMeta;
impl MetaSink for NoMeta {
    fn persist(&self, _snap: &Snapshot) -> Result<(), MetaError> {
        Ok(())
    }
}
