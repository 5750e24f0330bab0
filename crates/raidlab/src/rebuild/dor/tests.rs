//! Worked examples and a property test of the DOR state machine (`dor.rs`).

use super::super::rate::{RateSpec, Throttle};
use super::super::{Order, OrderSpec, Survivors};
use super::*;

/// RAID-5-like: every disk but `failed` is read.
pub struct AllBut {
    pub disks: u32,
    pub failed: u32,
}

impl Survivors for AllBut {
    fn disks(&self) -> u32 {
        self.disks
    }
    fn reads(&self, _unit: u64, disk: u32) -> bool {
        disk != self.failed
    }
}

fn pump(dor: &mut Dor, order: &mut Order, throttle: &mut Throttle, out: &mut Vec<Action>) {
    let s = AllBut {
        disks: 3,
        failed: 1,
    };
    pump_with(&s, dor, order, throttle, out);
}

fn pump_with(
    s: &dyn Survivors,
    dor: &mut Dor,
    order: &mut Order,
    throttle: &mut Throttle,
    out: &mut Vec<Action>,
) {
    let mut ctx = Ctx {
        now_ns: 0,
        busy: false,
        order,
        survivors: s,
        throttle,
        unit_bytes: 65536,
    };
    out.clear();
    dor.pump(&mut ctx, out);
}

fn read(disk: u32, unit: u64, count: u32) -> Action {
    Action::Read {
        disk,
        unit,
        count,
        job: unit,
    }
}

#[test]
fn merged_reads_cover_consecutive_jobs_up_to_read_units() {
    // 3 disks, disk 1 failed, 8 buffers, depth 1, up to 4 units per read, 6 units.
    let mut order = OrderSpec::Sequential.build(6);
    let mut th = Throttle::new(RateSpec::Full, 0);
    let mut dor = Dor::new(3, 8, 1, 4);
    let mut out = Vec::new();
    pump(&mut dor, &mut order, &mut th, &mut out);
    // Disk 0 creates jobs 0-3 and reads them at once; disk 1 creates 4 and 5 as it
    // passes; disk 2 reads 0-3. Depth 1: nothing more until a read completes.
    assert_eq!(out, vec![read(0, 0, 4), read(2, 0, 4)]);
    dor.read_done(0, 0, 4);
    pump(&mut dor, &mut order, &mut th, &mut out);
    assert_eq!(out, vec![read(0, 4, 2)], "the order has no seventh unit");
    dor.read_done(2, 0, 4);
    pump(&mut dor, &mut order, &mut th, &mut out);
    let w = Action::Write {
        unit: 0,
        count: 4,
        job: 0,
    };
    assert_eq!(out, vec![w, read(2, 4, 2)]);
    dor.read_done(0, 4, 2);
    dor.read_done(2, 4, 2);
    dor.write_done(0, 4);
    pump(&mut dor, &mut order, &mut th, &mut out);
    dor.write_done(4, 2);
    assert!(dor.is_done() && dor.written() == 6);
}

/// Disk 1 failed; disk 2 holds no source of unit 2.
struct Hole;
impl Survivors for Hole {
    fn disks(&self) -> u32 {
        3
    }
    fn reads(&self, unit: u64, disk: u32) -> bool {
        disk == 0 || (disk == 2 && unit != 2)
    }
}

#[test]
fn a_merged_read_stops_at_a_unit_its_disk_does_not_read() {
    let mut order = OrderSpec::Sequential.build(5);
    let mut th = Throttle::new(RateSpec::Full, 0);
    let mut dor = Dor::new(3, 8, 1, 8);
    let mut out = Vec::new();
    pump_with(&Hole, &mut dor, &mut order, &mut th, &mut out);
    assert_eq!(out, vec![read(0, 0, 5), read(2, 0, 2)]);
    dor.read_done(2, 0, 2);
    pump_with(&Hole, &mut dor, &mut order, &mut th, &mut out);
    // Disk 2 passes unit 2 and reads 3 and 4 together.
    assert_eq!(out, vec![read(2, 3, 2)]);
    dor.read_done(0, 0, 5);
    pump_with(&Hole, &mut dor, &mut order, &mut th, &mut out);
    // Units 0-2 have every source read: one write (3 and 4 wait for disk 2).
    let w = Action::Write {
        unit: 0,
        count: 3,
        job: 0,
    };
    assert_eq!(out, vec![w]);
}

#[test]
fn readers_keep_depth_buffers_bound_and_writes_follow() {
    // 3 disks, disk 1 failed, 2 buffers, depth 2, 4 units.
    let mut order = OrderSpec::Sequential.build(4);
    let mut th = Throttle::new(RateSpec::Full, 0);
    let mut dor = Dor::new(3, 2, 2, 1);
    let mut out = Vec::new();
    pump(&mut dor, &mut order, &mut th, &mut out);
    // Disk 0 creates jobs 0 and 1 (both buffers) and reads both; disk 1 skips them;
    // disk 2 reads both. No third job: the pool is full.
    let r = |disk, unit| Action::Read {
        disk,
        unit,
        count: 1,
        job: unit,
    };
    let w = |unit, count| Action::Write {
        unit,
        count,
        job: unit,
    };
    assert_eq!(out, vec![r(0, 0), r(0, 1), r(2, 0), r(2, 1)]);
    dor.read_done(0, 0, 1);
    pump(&mut dor, &mut order, &mut th, &mut out);
    assert!(
        out.is_empty(),
        "unit 0 still waits for disk 2; no buffer free"
    );
    dor.read_done(2, 0, 1);
    pump(&mut dor, &mut order, &mut th, &mut out);
    assert_eq!(out, vec![w(0, 1)]);
    dor.write_done(0, 1);
    pump(&mut dor, &mut order, &mut th, &mut out);
    // The freed buffer lets disk 0 create job 2; disk 2 has 1 read in flight, reads it.
    assert_eq!(out, vec![r(0, 2), r(2, 2)]);
    for (d, j) in [(0, 1), (2, 1), (0, 2), (2, 2)] {
        dor.read_done(d, j, 1);
    }
    pump(&mut dor, &mut order, &mut th, &mut out);
    // Units 1 and 2 are consecutive: one write.
    assert_eq!(out, vec![w(1, 2)]);
    dor.write_done(1, 2);
    pump(&mut dor, &mut order, &mut th, &mut out);
    assert_eq!(out, vec![r(0, 3), r(2, 3)]);
    dor.read_done(0, 3, 1);
    dor.read_done(2, 3, 1);
    pump(&mut dor, &mut order, &mut th, &mut out);
    assert_eq!(out, vec![w(3, 1)]);
    assert!(!dor.is_done());
    dor.write_done(3, 1);
    pump(&mut dor, &mut order, &mut th, &mut out);
    assert!(out.is_empty() && dor.is_done() && dor.written() == 4);
}

/// Disks `0..disks`, `failed` lost; disk `odd` holds no source of odd units.
struct Sparse {
    disks: u32,
    failed: u32,
    odd: Option<u32>,
}
impl Survivors for Sparse {
    fn disks(&self) -> u32 {
        self.disks
    }
    fn reads(&self, unit: u64, disk: u32) -> bool {
        disk != self.failed && !(Some(disk) == self.odd && unit % 2 == 1)
    }
}

proptest::proptest! {
    /// Whatever the completion order: every source of every unit is read exactly once,
    /// no disk ever has more than `depth` reads in flight, a unit is written once and only
    /// after all its sources were read, and the rebuild ends with every unit written.
    #[test]
    fn every_unit_read_from_each_source_once_and_written_once(
        disks in 3u32..7, buffers in 1u32..24, depth in 1u32..4, read_units in 1u32..20,
        units in 1u64..120, odd in proptest::bool::ANY,
        picks in proptest::collection::vec(0usize..1000, 2000),
    ) {
        let s = Sparse { disks, failed: 0, odd: odd.then_some(disks - 1) };
        let mut order = OrderSpec::Sequential.build(units);
        let mut th = Throttle::new(RateSpec::Full, 0);
        let mut dor = Dor::new(disks, buffers, depth, read_units);
        let mut out = Vec::new();
        let mut reads = vec![vec![0u32; disks as usize]; units as usize];
        let mut written = vec![0u32; units as usize];
        let mut pending: Vec<Action> = Vec::new();
        let mut in_flight = vec![0u32; disks as usize];
        // Each step completes one operation; every unit needs at most `disks` of them.
        let steps_max = picks.len();
        let mut step = 0;
        loop {
            pump_with(&s, &mut dor, &mut order, &mut th, &mut out);
            for &a in &out {
                match a {
                    Action::Read { disk, unit, count, .. } => {
                        proptest::prop_assert!(count >= 1 && count <= read_units);
                        in_flight[disk as usize] += 1;
                        proptest::prop_assert!(in_flight[disk as usize] <= depth);
                        for u in unit..unit + u64::from(count) {
                            proptest::prop_assert!(s.reads(u, disk));
                            reads[u as usize][disk as usize] += 1;
                        }
                    }
                    Action::Write { unit, count, .. } => {
                        for u in unit..unit + u64::from(count) {
                            for d in 0..disks {
                                let want = u32::from(s.reads(u, d));
                                proptest::prop_assert_eq!(reads[u as usize][d as usize], want);
                            }
                            written[u as usize] += 1;
                        }
                    }
                    Action::WakeAt(_) => proptest::prop_assert!(false, "full rate waits"),
                }
                pending.push(a);
            }
            if pending.is_empty() {
                break;
            }
            proptest::prop_assert!(step < steps_max, "no end after {} completions", step);
            let a = pending.swap_remove(picks[step] % pending.len());
            step += 1;
            match a {
                Action::Read { disk, count, job, .. } => {
                    in_flight[disk as usize] -= 1;
                    dor.read_done(disk, job, count);
                }
                Action::Write { count, job, .. } => dor.write_done(job, count),
                Action::WakeAt(_) => {}
            }
        }
        proptest::prop_assert!(dor.is_done());
        proptest::prop_assert_eq!(dor.written(), units);
        proptest::prop_assert!(written.iter().all(|&w| w == 1));
    }
}

/// Disk 1 failed; disk 3 is read while `three` holds (a RAID-6 member that stops
/// being a source when, say, it fails too).
struct Changing {
    three: std::cell::Cell<bool>,
}
impl Survivors for Changing {
    fn disks(&self) -> u32 {
        4
    }
    fn reads(&self, _unit: u64, disk: u32) -> bool {
        disk == 0 || disk == 2 || (disk == 3 && self.three.get())
    }
}

/// Disk 3 stops being a source while its reader is still behind job 1, which counted
/// it: the job keeps the sources it was made with, so disk 3 still reads it and it
/// completes (asking the live view, disk 3 skipped it and it waited for ever). Job 2,
/// made after the change, does not read disk 3.
#[test]
fn a_job_keeps_the_sources_it_was_made_with() {
    let s = Changing {
        three: std::cell::Cell::new(true),
    };
    let mut order = OrderSpec::Sequential.build(3);
    let mut th = Throttle::new(RateSpec::Full, 0);
    let mut dor = Dor::new(4, 2, 1, 1);
    let mut out = Vec::new();
    pump_with(&s, &mut dor, &mut order, &mut th, &mut out);
    assert_eq!(out, vec![read(0, 0, 1), read(2, 0, 1), read(3, 0, 1)]);
    dor.read_done(0, 0, 1);
    dor.read_done(2, 0, 1);
    pump_with(&s, &mut dor, &mut order, &mut th, &mut out);
    // Disk 3 still has job 0's read in flight: it has not reached job 1.
    assert_eq!(out, vec![read(0, 1, 1), read(2, 1, 1)]);
    s.three.set(false);
    dor.read_done(3, 0, 1);
    pump_with(&s, &mut dor, &mut order, &mut th, &mut out);
    let w = |unit| Action::Write {
        unit,
        count: 1,
        job: unit,
    };
    assert_eq!(out, vec![w(0), read(3, 1, 1)]);
    dor.write_done(0, 1);
    for d in [0, 2, 3] {
        dor.read_done(d, 1, 1);
    }
    pump_with(&s, &mut dor, &mut order, &mut th, &mut out);
    assert_eq!(out, vec![w(1), read(0, 2, 1), read(2, 2, 1)]);
    dor.write_done(1, 1);
    dor.read_done(0, 2, 1);
    dor.read_done(2, 2, 1);
    pump_with(&s, &mut dor, &mut order, &mut th, &mut out);
    assert_eq!(out, vec![w(2)]);
    dor.write_done(2, 1);
    assert!(dor.is_done() && dor.written() == 3);
}

#[test]
fn rate_control_asks_for_one_wake_up() {
    let mut order = OrderSpec::Sequential.build(100);
    let mut th = Throttle::new(
        RateSpec::Md {
            min_bytes_s: 65536.0,
            max_bytes_s: 65536.0,
        },
        0,
    );
    let mut dor = Dor::new(3, 8, 2, 1);
    let mut out = Vec::new();
    pump(&mut dor, &mut order, &mut th, &mut out);
    // One unit per second: job 0 starts, job 1 must wait until t = 1 s.
    assert_eq!(
        out,
        vec![
            Action::Read {
                disk: 0,
                unit: 0,
                count: 1,
                job: 0
            },
            Action::WakeAt(1_000_000_000),
            Action::Read {
                disk: 2,
                unit: 0,
                count: 1,
                job: 0
            },
        ]
    );
    pump(&mut dor, &mut order, &mut th, &mut out);
    assert!(out.is_empty(), "the wake-up is pending");
}
