//! Online rebuild onto a hot spare (sans-IO): the order in which units of the failed disk
//! are rebuilt (`order/`: sequential, PRO), the executors that turn units into disk I/O
//! (`dor.rs`, `sor.rs`), rate control (`rate.rs`) and the progress bitmap (`map.rs`).
//!
//! A *unit* is one stripe unit of the failed disk; unit `u` is row `u` of the array (disk
//! blocks `u * bpu ..` on every member). Rebuilding it reads the row's surviving units that
//! the level needs ([`reads_for`]), combines them (XOR, not modelled: no data is moved) and
//! writes the result to the replacement.
//!
//! Executors are state machines driven by the engine: `pump` answers the I/O to start now
//! ([`Action`]), `read_done` / `write_done` tell them what completed. They read no clock.

pub mod dor;
pub mod map;
pub mod order;
pub mod rate;
pub mod sor;

pub use dor::Dor;
pub use map::{SharedUnitMap, UnitMap};
pub use order::{Order, OrderSpec, ProSpec};
pub use rate::{Gate, RateSpec, Throttle};
pub use sor::Sor;

use crate::array::{Geometry, Level, Role};

/// How units become I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecutorSpec {
    /// Disk-oriented reconstruction (Holland et al.): one reader per surviving disk keeping
    /// `depth` rebuild reads at its disk, a pool of `buffers` unit buffers, the replacement
    /// written as units complete. A reader merges up to `read_units` consecutive units it
    /// reads into one operation (1: a read per unit, as Holland's; 16: md's resync reads
    /// after the block layer merged them, and the store's rebuild runs).
    Dor {
        buffers: u32,
        depth: u32,
        read_units: u32,
    },
    /// Stripe-oriented reconstruction: `stripes` units at a time, each reading its survivors
    /// in parallel and then writing the replacement.
    Sor { stripes: u32 },
}

impl ExecutorSpec {
    pub const NAMES: &'static [&'static str] = &["dor", "sor"];

    pub fn name(&self) -> &'static str {
        match self {
            ExecutorSpec::Dor { .. } => "dor",
            ExecutorSpec::Sor { .. } => "sor",
        }
    }
}

/// The `[rebuild]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct RebuildSpec {
    /// Dedicated hot spares (devices after the array's members).
    pub spares: u32,
    pub order: OrderSpec,
    pub executor: ExecutorSpec,
    pub rate: RateSpec,
    /// Reads of rebuilt units go to the replacement (otherwise they keep reconstructing).
    pub redirect: bool,
    /// A user read that reconstructs a unit not yet rebuilt reads the whole unit and writes
    /// it to the replacement, which then counts as rebuilt.
    pub piggyback: bool,
    /// Bytes of each member the array uses (and the rebuild copies); `None`: the whole disk.
    pub extent_bytes: Option<u64>,
    /// Disk mean time to failure for the MTTDL estimate, hours.
    pub mttf_hours: f64,
    /// Rebuild I/O queues in the user class, sorted with user I/O in one elevator (Linux md:
    /// its resync requests go through the same block-layer queue as users'); otherwise in the
    /// `rebuild` class, below users.
    pub as_user: bool,
}

/// I/O an executor wants started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Read `count` units from `unit` (the rows) from member `disk` for jobs
    /// `job..job + count`.
    Read {
        disk: u32,
        unit: u64,
        count: u32,
        job: u64,
    },
    /// Write `count` rebuilt units from `unit` (jobs `job..job + count`) to the replacement.
    Write { unit: u64, count: u32, job: u64 },
    /// Nothing may start before this time (rate control): call `pump` then.
    WakeAt(u64),
}

/// Which surviving disks each unit is rebuilt from.
pub trait Survivors {
    /// Member disks (the failed one included).
    fn disks(&self) -> u32;
    /// Whether member `disk` is read to rebuild `unit`.
    fn reads(&self, unit: u64, disk: u32) -> bool;
}

/// What the engine passes to `pump`.
pub struct Ctx<'a> {
    pub now_ns: u64,
    /// User I/O is in flight (for md's rate rule).
    pub busy: bool,
    pub order: &'a mut Order,
    pub survivors: &'a dyn Survivors,
    pub throttle: &'a mut Throttle,
    pub unit_bytes: u64,
}

impl Ctx<'_> {
    /// The next unit to start, if rate control allows one now (`started` units so far);
    /// `Err(t)` asks to be woken at `t`, `Ok(None)` means every unit has been handed out.
    pub fn next_unit(&mut self, started: u64) -> Result<Option<u64>, u64> {
        match self
            .throttle
            .gate(self.now_ns, started * self.unit_bytes, self.busy)
        {
            Gate::Go => Ok(self.order.next_unit()),
            Gate::WaitUntil(t) => Err(t),
        }
    }
}

/// The units an executor takes from the order: how many it started and finished, whether the
/// order is spent, and the rate-control wake-up it waits for.
#[derive(Debug, Clone, Default)]
pub struct Feed {
    exhausted: bool,
    created: u64,
    written: u64,
    wake_ns: Option<u64>,
}

impl Feed {
    /// Forget a wake-up that is due (call at the start of every `pump`).
    pub fn wake(&mut self, now_ns: u64) {
        if self.wake_ns.is_some_and(|t| t <= now_ns) {
            self.wake_ns = None;
        }
    }

    /// The next unit and its job number, if the order has one and rate control allows it
    /// now; asks for one wake-up (in `out`) when it does not.
    pub fn next(&mut self, ctx: &mut Ctx<'_>, out: &mut Vec<Action>) -> Option<(u64, u64)> {
        if self.exhausted || self.wake_ns.is_some() {
            return None;
        }
        match ctx.next_unit(self.created) {
            Ok(Some(u)) => {
                self.created += 1;
                Some((u, self.created - 1))
            }
            Ok(None) => {
                self.exhausted = true;
                None
            }
            Err(t) => {
                self.wake_ns = Some(t);
                out.push(Action::WakeAt(t));
                None
            }
        }
    }

    /// `n` more units are written.
    pub fn written(&mut self, n: u64) {
        self.written += n;
        debug_assert!(self.written <= self.created);
    }

    /// Units written so far.
    pub fn units_written(&self) -> u64 {
        self.written
    }

    /// Every unit the order handed out is written and it has no more.
    pub fn is_done(&self) -> bool {
        self.exhausted && self.written == self.created
    }
}

/// Whether member `disk` is read to rebuild unit (row) `unit` of `failed`, `lost(d)` telling
/// which members cannot be read in that row (failed and not rebuilt).
pub fn reads_for(
    geo: &Geometry,
    lost: impl Fn(u32) -> bool,
    failed: u32,
    unit: u64,
    disk: u32,
) -> bool {
    let n = geo.disks();
    if disk == failed || disk >= n || lost(disk) {
        return false;
    }
    match geo.level() {
        Level::Raid0 => false,
        // The first readable copy after the failed one, cyclically (as a degraded read).
        Level::Raid1 => (1..n)
            .map(|i| (failed + i) % n)
            .find(|&d| !lost(d))
            .is_some_and(|d| d == disk),
        Level::Raid10 => disk == failed ^ 1,
        Level::Raid5 => true,
        Level::Raid6 => {
            let others_lost = (0..n).any(|d| d != failed && lost(d));
            if others_lost {
                return true;
            }
            // One loss: n - 2 reads suffice. Data or P is rebuilt without Q; Q needs the
            // data only.
            let skip = match geo.role(unit, failed) {
                Role::Q => Role::P,
                _ => Role::Q,
            };
            geo.role(unit, disk) != skip
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::Layout;

    fn geo(level: Level, disks: u32) -> Geometry {
        Geometry::new(level, Layout::LeftSymmetric, disks, 65536, 4096).unwrap()
    }

    fn readers(g: &Geometry, lost: &[u32], failed: u32, unit: u64) -> Vec<u32> {
        (0..g.disks())
            .filter(|&d| reads_for(g, |x| lost.contains(&x), failed, unit, d))
            .collect()
    }

    #[test]
    fn survivors_each_level_needs() {
        let g = geo(Level::Raid5, 4);
        assert_eq!(readers(&g, &[1], 1, 7), vec![0, 2, 3]);
        let g = geo(Level::Raid1, 3);
        assert_eq!(readers(&g, &[1], 1, 0), vec![2]);
        assert_eq!(readers(&g, &[1, 2], 1, 0), vec![0]);
        let g = geo(Level::Raid10, 4);
        assert_eq!(readers(&g, &[2], 2, 5), vec![3]);
        // RAID-6, 5 disks, left-symmetric: row 0 has P on disk 4 and Q on disk 0.
        let g = geo(Level::Raid6, 5);
        assert_eq!(g.role(0, 4), Role::P);
        assert_eq!(g.role(0, 0), Role::Q);
        assert_eq!(readers(&g, &[2], 2, 0), vec![1, 3, 4]); // data: skip Q
        assert_eq!(readers(&g, &[4], 4, 0), vec![1, 2, 3]); // P: skip Q
        assert_eq!(readers(&g, &[0], 0, 0), vec![1, 2, 3]); // Q: skip P
        assert_eq!(readers(&g, &[0, 2], 2, 0), vec![1, 3, 4]); // two lost: all survivors
        assert!(readers(&geo(Level::Raid0, 3), &[1], 1, 0).is_empty());
    }
}
