//! Disk timing models. Each is a sans-IO timing function of (operation, head state): the
//! engine tells it the current simulated time and the operation it starts, the model answers
//! how long the operation takes and moves its head state (arm position, rotational phase,
//! read-ahead buffer, busy dies) to where the operation leaves it.
//!
//! - `constant`: a fixed service time per operation (X-RAY's 10 ms disk);
//! - `mechanical`: an HDD with cylinders, surfaces, zones, rotation tracked in time, a seek
//!   curve, head switch, write settle, per-zone media rate and an optional read-ahead segment;
//! - `ssd`: channels x dies with per-page read and program latency and no seek.

pub mod constant;
pub mod mechanical;
pub mod seek;
pub mod ssd;
mod zones;

pub use constant::ConstantSpec;
pub use mechanical::{MechanicalSpec, Zone};
pub use seek::SeekSpec;
pub use ssd::SsdSpec;

use super::DiskIo;
use crate::error::Result;

/// What serving one operation costs, in nanoseconds. `total_ns` is the time from the start
/// of service to completion; the parts are for reporting and need not add up for models that
/// overlap them (an SSD spreading pages over dies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Service {
    pub total_ns: u64,
    pub seek_ns: u64,
    pub rotation_ns: u64,
    pub transfer_ns: u64,
    /// Cylinders the arm moved (0 for models without an arm).
    pub seek_cylinders: u64,
    /// Served from the drive's read-ahead buffer without touching the media.
    pub buffer_hit: bool,
}

/// A disk's timing model.
///
/// Caller's obligations (the engine's `Device`): `io.sector + io.sectors <=
/// capacity_sectors()` and `io.sectors > 0`; `now_ns` never decreases between calls; a model
/// whose [`DiskModel::parallelism`] is 1 is given the next operation only after the previous
/// one's `total_ns` has elapsed.
///
/// Model's obligations: deterministic (the same calls give the same answers; no clock, no
/// randomness unless seeded at construction); no allocation per call; `total_ns > 0`.
pub trait DiskModel: Send + std::fmt::Debug {
    /// Capacity in 512-byte sectors.
    fn capacity_sectors(&self) -> u64;

    /// Operations the device can serve at the same time (1 for a disk arm; the dies of an
    /// SSD). The device may hold more queued (NCQ) but serves at most this many.
    fn parallelism(&self) -> u32;

    /// The scheduling position of `sector` that SSTF and C-LOOK order by: the cylinder for
    /// an HDD, the sector itself for models without an arm.
    fn position_of(&self, sector: u64) -> u64;

    /// Where the head is now, in the units of [`DiskModel::position_of`].
    fn head_position(&self) -> u64;

    /// Positioning time (seek + rotational latency, or 0) `io` would need if started at
    /// `now_ns`, without changing any state. Drives with a deep command queue (NCQ) use it to
    /// pick the shortest-positioning-time command.
    fn positioning_ns(&self, io: &DiskIo, now_ns: u64) -> u64;

    /// Serve `io` starting at `now_ns`: return its cost and move the head state to where the
    /// operation leaves it.
    fn service(&mut self, io: &DiskIo, now_ns: u64) -> Service;
}

/// A validated description of a disk model, from a preset and/or the `[disk]` table.
#[derive(Debug, Clone, PartialEq)]
pub enum DiskSpec {
    Constant(ConstantSpec),
    Mechanical(MechanicalSpec),
    Ssd(SsdSpec),
}

impl DiskSpec {
    /// Build the model. Errors (`Error::Config` naming `disk.<key>`) for inconsistent
    /// parameters: zero or negative times, zone tables that overlap or leave the cylinder
    /// range, seek tables that are not increasing in distance.
    pub fn build(&self) -> Result<Box<dyn DiskModel>> {
        Ok(match self {
            DiskSpec::Constant(s) => Box::new(s.build()?),
            DiskSpec::Mechanical(s) => Box::new(s.build()?),
            DiskSpec::Ssd(s) => Box::new(s.build()?),
        })
    }

    /// The model's name as configs spell it.
    pub fn kind(&self) -> &'static str {
        match self {
            DiskSpec::Constant(_) => "constant",
            DiskSpec::Mechanical(_) => "mechanical",
            DiskSpec::Ssd(_) => "ssd",
        }
    }
}
