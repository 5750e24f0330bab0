//! The RAID layer: layouts, failed disks, per-disk I/O plans and the miss-cost oracle.
//!
//! PUBLIC CONTRACT (the engine depends on exactly this; the implementation lives in
//! `layout.rs`, `mode.rs`, `plan.rs`, `cost.rs`):
//! - [`ArraySpec`] -> [`Array::new`] validates and builds (errors are `Error::Config` naming
//!   `array.<key>`);
//! - [`Array::locate`] maps a logical block to (disk, disk block);
//! - [`Array::plan_read`] / [`Array::plan_write`] fill a reusable [`Plan`] with per-disk ops;
//! - `impl MissCost for Array`.
//!
//! Addresses are in cache blocks (`block_size` bytes). The array has no capacity of its own:
//! every `u64` logical block maps somewhere, and disk blocks never exceed the logical block.

mod cost;
mod layout;
mod mode;
mod plan;

pub use layout::{Geometry, Layout, Level, Location, ParityDisks, Role, MAX_DISKS};
pub use mode::{ArrayState, Mode};
pub use plan::{DiskOp, Plan};

use crate::cache::read::MissCost;
use crate::error::Result;

/// The `[array]` table, validated for types but not yet for consistency (that is `Array::new`).
#[derive(Debug, Clone, PartialEq)]
pub struct ArraySpec {
    pub level: Level,
    pub disks: u32,
    pub stripe_unit_bytes: u64,
    /// Parity placement of RAID-5 and RAID-6; ignored by the other levels.
    pub layout: Layout,
    pub failed: Vec<u32>,
    /// Cache block size in bytes; the array addresses disks in these blocks.
    pub block_size: u32,
}

/// A RAID array in some mode.
#[derive(Debug, Clone)]
pub struct Array {
    /// The spec as built, with `failed` kept equal to the disks failed so far, in order.
    spec: ArraySpec,
    geo: Geometry,
    mode: Mode,
    /// `penalty[d]` for the current mode (see `cost.rs`).
    penalty: Vec<u32>,
}

impl Array {
    /// Validate `spec` and build the array in the mode its `failed` list describes.
    pub fn new(spec: &ArraySpec) -> Result<Array> {
        let geo = Geometry::new(
            spec.level,
            spec.layout,
            spec.disks,
            spec.stripe_unit_bytes,
            spec.block_size,
        )?;
        let mut mode = Mode::healthy(spec.disks);
        for &d in &spec.failed {
            // `Mode::fail` names the key `array.failed[i]` with i = failures so far, which is
            // this entry's index because every earlier entry was accepted.
            mode.fail(spec.level, d)?;
        }
        let mut penalty = Vec::new();
        cost::penalties(&geo, &mode, &mut penalty);
        Ok(Array {
            spec: spec.clone(),
            geo,
            mode,
            penalty,
        })
    }

    pub fn spec(&self) -> &ArraySpec {
        &self.spec
    }

    /// The pure address map (no failure state).
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Map a logical block to its disk and disk block (for mirrors, the copy a healthy read
    /// uses). Independent of the mode.
    #[inline]
    pub fn locate(&self, lba: u64) -> Location {
        self.geo.locate(lba)
    }

    /// Plan the read of one logical block in the current mode (degraded reconstruction when
    /// its disk is failed).
    #[inline]
    pub fn plan_read(&self, lba: u64, plan: &mut Plan) {
        plan::plan_read(&self.geo, &self.mode, lba, plan);
    }

    /// Plan the write of `count` logical blocks from `first` (split per stripe; full-stripe
    /// writes where whole stripes are covered, otherwise the cheaper of read-modify-write and
    /// reconstruct-write).
    pub fn plan_write(&self, first: u64, count: u64, plan: &mut Plan) {
        plan::plan_write(&self.geo, &self.mode, first, count, plan);
    }

    /// Mark `disk` failed (mid-run failure events). Errors, leaving the array unchanged, when
    /// the index is out of range, the disk is already failed, or the level cannot survive it;
    /// the key is `array.failed[i]`, `i` being the number of disks failed before.
    pub fn fail(&mut self, disk: u32) -> Result<()> {
        self.mode.fail(self.spec.level, disk)?;
        self.spec.failed.push(disk);
        cost::penalties(&self.geo, &self.mode, &mut self.penalty);
        Ok(())
    }

    /// Start rebuilding failed `disk` (`units` rows) onto a replacement (see `mode.rs`).
    pub fn start_rebuild(
        &mut self,
        disk: u32,
        units: u64,
        redirect: bool,
        key: &str,
    ) -> Result<()> {
        self.mode.start_rebuild(disk, units, redirect, key)
    }

    /// Row `row` of rebuilding `disk` is on the replacement.
    #[inline]
    pub fn mark_rebuilt(&self, disk: u32, row: u64) {
        self.mode.mark_rebuilt(disk, row);
    }

    /// The replacement of rebuilding `disk` failed: the disk is plainly failed again.
    pub fn abort_rebuild(&mut self, disk: u32) {
        self.mode.abort_rebuild(disk);
        cost::penalties(&self.geo, &self.mode, &mut self.penalty);
    }

    /// The rebuild of `disk` is complete: it is a normal member again.
    pub fn finish_rebuild(&mut self, disk: u32) {
        self.mode.finish_rebuild(disk);
        self.spec.failed.retain(|&d| d != disk);
        cost::penalties(&self.geo, &self.mode, &mut self.penalty);
    }

    /// Normal, degraded or rebuilding.
    pub fn state(&self) -> ArrayState {
        self.mode.state()
    }

    /// Whether `row` of `disk` is lost (failed and not rebuilt).
    #[inline]
    pub fn lost(&self, disk: u32, row: u64) -> bool {
        self.mode.lost(disk, row)
    }

    /// The rebuild progress of `disk`, while it is rebuilding.
    pub fn rebuilding(&self, disk: u32) -> Option<&crate::rebuild::SharedUnitMap> {
        self.mode.rebuilding(disk)
    }

    /// Whether `disk` is failed.
    #[inline]
    pub fn is_failed(&self, disk: u32) -> bool {
        self.mode.is_failed(disk)
    }

    /// Failed disks in the order they failed.
    pub fn failed(&self) -> &[u32] {
        self.mode.failed()
    }

    /// Data units per stripe row.
    pub fn data_disks(&self) -> u32 {
        self.geo.data_disks()
    }

    pub fn blocks_per_stripe_unit(&self) -> u32 {
        self.geo.blocks_per_stripe_unit()
    }

    /// Logical blocks per stripe row.
    pub fn blocks_per_stripe(&self) -> u64 {
        self.geo.blocks_per_stripe()
    }

    /// The stripe row holding `lba`; it occupies disk blocks
    /// `row * blocks_per_stripe_unit()..` on every disk.
    #[inline]
    pub fn stripe_of(&self, lba: u64) -> u64 {
        self.geo.stripe_of(lba)
    }

    /// The parity disk(s) of a stripe row (none for RAID-0/1/10).
    #[inline]
    pub fn parity_disks(&self, row: u64) -> ParityDisks {
        self.geo.parity_disks(row)
    }

    /// The disk of data unit `slot` (`< data_disks()`) of a stripe row; for mirrors, the
    /// copy a healthy read uses.
    #[inline]
    pub fn data_disk(&self, row: u64, slot: u32) -> u32 {
        self.geo.data_disk(row, slot)
    }

    /// What `disk` holds in a stripe row.
    #[inline]
    pub fn role(&self, row: u64, disk: u32) -> Role {
        self.geo.role(row, disk)
    }

    /// The logical block stored at (`disk`, `block`), `None` for parity.
    pub fn logical_of(&self, disk: u32, block: u64) -> Option<u64> {
        self.geo.logical_of(disk, block)
    }
}

impl MissCost for Array {
    fn disks(&self) -> u32 {
        self.spec.disks
    }
    #[inline]
    fn disk_of(&self, key: u64) -> u32 {
        self.locate(key).disk
    }
    #[inline]
    fn penalty(&self, disk: u32) -> u32 {
        // Out-of-range disks cannot hold a block; 1 keeps a misbehaving caller harmless.
        self.penalty.get(disk as usize).copied().unwrap_or(1)
    }
    fn degraded(&self) -> bool {
        self.mode.any_failed()
    }
    /// The planner's answer for this block: a failed disk's block costs its penalty only in
    /// a row the read must reconstruct; a row already rebuilt (and read from the
    /// replacement) costs 1 again.
    #[inline]
    fn cost_of(&self, key: u64) -> u32 {
        let loc = self.locate(key);
        if !self.mode.is_failed(loc.disk) {
            return 1;
        }
        let row = loc.block / u64::from(self.geo.blocks_per_stripe_unit());
        if self.mode.lost_for_read(loc.disk, row) {
            self.penalty(loc.disk)
        } else {
            1
        }
    }
}

#[cfg(test)]
mod props;
#[cfg(test)]
mod rebuild_tests;
#[cfg(test)]
mod tests;
