//! The RAID layer: layouts, failed disks, per-disk I/O plans and the miss-cost oracle.
//!
//! PUBLIC CONTRACT (the engine depends on exactly this; the implementation lives in
//! `layout.rs`, `mode.rs`, `plan.rs`, `cost.rs`):
//! - [`ArraySpec`] -> [`Array::new`] validates and builds (errors are `Error::Config` naming
//!   `array.<key>`);
//! - [`Array::locate`] maps a logical block to (disk, disk block);
//! - [`Array::plan_read`] / [`Array::plan_write`] fill a reusable [`Plan`] with per-disk ops;
//! - `impl MissCost for Array`.

use crate::cache::read::MissCost;
use crate::error::{Error, Result};
use crate::workload::Op;

/// RAID level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Raid0,
    Raid1,
    Raid10,
    Raid5,
    Raid6,
}

impl Level {
    pub const NAMES: &'static [&'static str] = &["raid0", "raid1", "raid10", "raid5", "raid6"];
    pub fn from_name(name: &str) -> Option<Level> {
        Some(match name {
            "raid0" => Level::Raid0,
            "raid1" => Level::Raid1,
            "raid10" => Level::Raid10,
            "raid5" => Level::Raid5,
            "raid6" => Level::Raid6,
            _ => return None,
        })
    }
}

/// Parity placement of RAID-5 (md's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    LeftSymmetric,
    LeftAsymmetric,
    RightSymmetric,
    RightAsymmetric,
}

impl Layout {
    pub const NAMES: &'static [&'static str] = &[
        "left-symmetric",
        "left-asymmetric",
        "right-symmetric",
        "right-asymmetric",
    ];
    pub fn from_name(name: &str) -> Option<Layout> {
        Some(match name {
            "left-symmetric" => Layout::LeftSymmetric,
            "left-asymmetric" => Layout::LeftAsymmetric,
            "right-symmetric" => Layout::RightSymmetric,
            "right-asymmetric" => Layout::RightAsymmetric,
            _ => return None,
        })
    }
}

/// The `[array]` table, validated for types but not yet for consistency (that is `Array::new`).
#[derive(Debug, Clone, PartialEq)]
pub struct ArraySpec {
    pub level: Level,
    pub disks: u32,
    pub stripe_unit_bytes: u64,
    pub layout: Layout,
    pub failed: Vec<u32>,
    /// Cache block size in bytes; the array addresses disks in these blocks.
    pub block_size: u32,
}

/// Where a logical block lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub disk: u32,
    /// Block number on that disk, in cache blocks.
    pub block: u64,
}

/// One per-disk operation of a plan: `count` contiguous blocks from `block` on `disk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskOp {
    pub disk: u32,
    pub op: Op,
    pub block: u64,
    pub count: u32,
}

/// A reusable list of per-disk operations (cleared by each `plan_*` call; no allocation once
/// it has grown to the largest plan).
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub ops: Vec<DiskOp>,
}

/// A RAID array in some mode.
#[derive(Debug, Clone)]
pub struct Array {
    spec: ArraySpec,
}

impl Array {
    pub fn new(spec: &ArraySpec) -> Result<Array> {
        let _ = spec;
        Err(Error::config("array", "not implemented yet"))
    }
    pub fn spec(&self) -> &ArraySpec {
        &self.spec
    }
    pub fn locate(&self, lba: u64) -> Location {
        let _ = lba;
        unimplemented!()
    }
    /// Plan the read of one logical block in the current mode (degraded reconstruction when
    /// its disk is failed).
    pub fn plan_read(&self, lba: u64, plan: &mut Plan) {
        let _ = (lba, plan);
        unimplemented!()
    }
    /// Plan the write of `count` logical blocks from `first` (split per stripe; full-stripe
    /// writes where whole stripes are covered, otherwise the cheaper of read-modify-write and
    /// reconstruct-write).
    pub fn plan_write(&self, first: u64, count: u64, plan: &mut Plan) {
        let _ = (first, count, plan);
        unimplemented!()
    }
    /// Mark `disk` failed (mid-run failure events).
    pub fn fail(&mut self, disk: u32) -> Result<()> {
        let _ = disk;
        unimplemented!()
    }
}

impl MissCost for Array {
    fn disks(&self) -> u32 {
        self.spec.disks
    }
    fn disk_of(&self, key: u64) -> u32 {
        self.locate(key).disk
    }
    fn penalty(&self, disk: u32) -> u32 {
        let _ = disk;
        1
    }
    fn degraded(&self) -> bool {
        !self.spec.failed.is_empty()
    }
}
