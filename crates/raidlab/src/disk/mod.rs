//! Disks: timing models of one device (`model/`), the drives raidlab ships as presets
//! (`presets.rs`), and the per-disk queue scheduler with priority classes (`queue.rs`).
//!
//! Everything here is sans-IO: a model is a timing function of (operation, head state) that is
//! told the current simulated time; a queue is told what arrived and asked what to serve next.
//! The engine owns the clock and the events.
//!
//! Units: disks are addressed in 512-byte sectors ([`SECTOR_BYTES`]); times are integer
//! nanoseconds.

pub mod device;
pub mod files;
pub mod model;
pub mod presets;
pub mod queue;

pub use device::{Device, DeviceStats};
pub use model::{DiskModel, DiskSpec, Service};
pub use queue::{Class, Discipline, DiskQueue, QueueSpec, Queued};

use crate::workload::Op;

/// Bytes of one disk sector, the unit every disk model addresses.
pub const SECTOR_BYTES: u64 = 512;

/// One operation as a disk sees it: `sectors` contiguous sectors from `sector`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DiskIo {
    pub op: Op,
    pub sector: u64,
    pub sectors: u32,
}

/// Nanoseconds in a millisecond, for converting configured and preset times.
pub const NS_PER_MS: f64 = 1e6;

/// Milliseconds (as configs and data sheets give them) to integer nanoseconds, rounded.
#[inline]
pub fn ms_to_ns(ms: f64) -> u64 {
    debug_assert!(ms >= 0.0 && ms.is_finite());
    (ms * NS_PER_MS).round() as u64
}
