//! The miss-cost oracle: how many surviving-disk blocks one read of a block costs, per disk.
//!
//! The table is rebuilt whenever the mode changes, so `penalty` is a single indexed load. Its
//! values restate what `plan::plan_read` does, and a property test holds the two together.

use super::layout::{Geometry, Level};
use super::mode::Mode;

/// Blocks read from surviving disks to fetch one block whose home is each disk.
pub fn penalties(geo: &Geometry, mode: &Mode, table: &mut Vec<u32>) {
    let n = geo.disks();
    let lost = match geo.level() {
        // Any surviving copy serves the read.
        Level::Raid0 | Level::Raid1 | Level::Raid10 => 1,
        // Every other block of the row.
        Level::Raid5 => n - 1,
        // n-2 blocks solve for up to two unknowns: with one failure the other data plus P,
        // with two failures all survivors.
        Level::Raid6 => n - 2,
    };
    table.clear();
    table.extend((0..n).map(|d| if mode.is_failed(d) { lost } else { 1 }));
}
