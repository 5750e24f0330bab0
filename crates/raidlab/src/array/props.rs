//! Property tests: the layout is a bijection onto data positions, plans touch exactly the
//! right disks, and the miss cost agrees with the read planner.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use proptest::prelude::*;

use super::tests::spec;
use super::*;
use crate::workload::Op;

/// Any valid array: level, disk count, layout, 1..=4 blocks per unit, and a survivable set of
/// failed disks (drawn from candidates, keeping those `fail` accepts).
fn any_array() -> impl Strategy<Value = Array> {
    let level = prop_oneof![
        Just(Level::Raid0),
        Just(Level::Raid1),
        Just(Level::Raid10),
        Just(Level::Raid5),
        Just(Level::Raid6),
    ];
    let layout = prop_oneof![
        Just(Layout::LeftSymmetric),
        Just(Layout::LeftAsymmetric),
        Just(Layout::RightSymmetric),
        Just(Layout::RightAsymmetric),
    ];
    (
        level,
        0u32..7,
        layout,
        1u64..=4,
        proptest::collection::vec(0u32..16, 0..3),
        (
            any::<bool>(),
            any::<bool>(),
            proptest::collection::vec(0u64..64, 0..24),
        ),
    )
        .prop_map(
            |(level, extra, layout, bpu, candidates, (rebuild, redirect, rebuilt))| {
                let disks = match level {
                    Level::Raid0 => 1 + extra,
                    Level::Raid1 => 2 + extra,
                    Level::Raid10 => 4 + 2 * (extra % 3),
                    Level::Raid5 => 3 + extra,
                    Level::Raid6 => 4 + extra,
                };
                let mut a = Array::new(&spec(level, disks, layout, bpu, &[])).expect("valid");
                for d in candidates {
                    let _ = a.fail(d % disks);
                }
                // A rebuild of the first failed disk in progress, some rows already rebuilt
                // (the rows the generated lbas reach, 0..64, at most 4 blocks per unit).
                if rebuild {
                    if let Some(&d) = a.failed().first() {
                        a.start_rebuild(d, 64, redirect, "props")
                            .expect("a failed disk");
                        for row in rebuilt {
                            a.mark_rebuilt(d, row);
                        }
                    }
                }
                a
            },
        )
}

/// Expand a plan into single blocks, checking ops are disjoint, non-empty, on surviving
/// disks, and in canonical order.
fn blocks(a: &Array, plan: &Plan) -> BTreeSet<(bool, u32, u64)> {
    let mut set = BTreeSet::new();
    let mut prev: Option<DiskOp> = None;
    for o in &plan.ops {
        assert!(o.count > 0 && o.disk < a.spec().disks);
        // A rebuilding disk serves the rows already on its replacement.
        let row = o.block / a.blocks_per_stripe_unit() as u64;
        assert!(!a.lost(o.disk, row), "op on a lost unit {o:?}");
        if let Some(p) = prev {
            let key = |x: &DiskOp| (x.op == Op::Write, x.disk, x.block);
            assert!(key(&p) < key(o), "not canonical: {p:?} then {o:?}");
        }
        prev = Some(*o);
        for b in 0..u64::from(o.count) {
            assert!(
                set.insert((o.op == Op::Write, o.disk, o.block + b)),
                "overlap {o:?}"
            );
        }
    }
    set
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `locate` is injective, lands on data positions, and `logical_of` inverts it.
    #[test]
    fn locate_is_a_bijection(a in any_array(), base in 0u64..(1 << 40)) {
        let g = a.geometry();
        let start = base - base % a.blocks_per_stripe();
        // Two full parity rotations cover every row pattern.
        let len = a.blocks_per_stripe() * 2 * u64::from(a.spec().disks);
        let mut seen = HashSet::new();
        for lba in start..start + len {
            let loc = a.locate(lba);
            prop_assert!(loc.disk < a.spec().disks);
            prop_assert!(seen.insert(loc), "two lbas on {loc:?}");
            let row = a.stripe_of(lba);
            prop_assert!(matches!(a.role(row, loc.disk), Role::Data(_)));
            prop_assert_eq!(a.logical_of(loc.disk, loc.block), Some(lba));
            prop_assert_eq!(loc.block / u64::from(a.blocks_per_stripe_unit()), row);
        }
        // Every data position of those rows holds one of those lbas; parity holds none.
        let bpu = u64::from(g.blocks_per_stripe_unit());
        let first_row = start / a.blocks_per_stripe();
        let mut data_positions = 0u64;
        for row in first_row..first_row + 2 * u64::from(a.spec().disks) {
            let par = a.parity_disks(row);
            for d in 0..a.spec().disks {
                for off in 0..bpu {
                    let b = row * bpu + off;
                    match a.logical_of(d, b) {
                        Some(l) => {
                            data_positions += 1;
                            prop_assert!(l >= start && l < start + len);
                            prop_assert!(par.p != Some(d) && par.q != Some(d));
                        }
                        None => prop_assert!(par.p == Some(d) || par.q == Some(d)),
                    }
                }
            }
        }
        let copies = match a.spec().level {
            Level::Raid1 => u64::from(a.spec().disks),
            Level::Raid10 => 2,
            _ => 1,
        };
        prop_assert_eq!(data_positions, len * copies);
    }

    /// Reads touch surviving disks only; degraded RAID-5 reads touch every other disk once;
    /// the oracle's cost of the block equals the blocks read, in every mode, rebuilding
    /// included (a rebuilt row costs 1 again).
    #[test]
    fn reads_and_penalty_agree(a in any_array(), lba in prop_oneof![0u64..256, 0u64..(1 << 48)]) {
        let mut plan = Plan::default();
        a.plan_read(lba, &mut plan);
        let set = blocks(&a, &plan);
        let loc = a.locate(lba);
        prop_assert_eq!(plan.write_blocks(), 0);
        prop_assert_eq!(plan.read_blocks(), u64::from(a.cost_of(lba)));
        if a.rebuilding(a.disk_of(lba)).is_none() {
            prop_assert_eq!(a.cost_of(lba), a.penalty(a.disk_of(lba)));
        }
        prop_assert!(set.iter().all(|&(_, _, b)| b == loc.block));
        if !a.is_failed(loc.disk) {
            prop_assert_eq!(&plan.ops[..], &[DiskOp { disk: loc.disk, op: Op::Read, block: loc.block, count: 1 }]);
        } else if a.spec().level == Level::Raid5 && a.rebuilding(loc.disk).is_none() {
            let disks: Vec<u32> = plan.ops.iter().map(|o| o.disk).collect();
            let want: Vec<u32> = (0..a.spec().disks).filter(|&d| d != loc.disk).collect();
            prop_assert_eq!(disks, want);
        }
        prop_assert_eq!(a.degraded(), !a.failed().is_empty());
    }

    /// Writes touch exactly the surviving homes of the written data and the surviving parity
    /// of every touched (row, offset); reads are exactly one valid parity-update recipe.
    #[test]
    fn writes_touch_exactly_the_right_blocks(
        a in any_array(),
        first in 0u64..(1 << 48),
        count in 0u64..64,
    ) {
        let mut plan = Plan::default();
        a.plan_write(first, count, &mut plan);
        let set = blocks(&a, &plan);
        let g = a.geometry();
        let n = a.spec().disks;
        let level = a.spec().level;
        let mut want_w = BTreeSet::new();
        // (row, block) -> written data slots, for parity levels.
        let mut touched: BTreeMap<(u64, u64), BTreeSet<u32>> = BTreeMap::new();
        for lba in first..first + count {
            let (row, slot, _) = g.split(lba);
            let loc = a.locate(lba);
            let (c0, k) = g.copies(row, slot);
            for d in c0..c0 + k {
                if !a.is_failed(d) {
                    want_w.insert((true, d, loc.block));
                }
            }
            touched.entry((row, loc.block)).or_default().insert(slot);
        }
        for (&(row, b), written) in &touched {
            let par = a.parity_disks(row);
            let live: Vec<u32> = [par.p, par.q].into_iter().flatten().filter(|&d| !a.is_failed(d)).collect();
            for &d in &live {
                want_w.insert((true, d, b));
            }
            // The reads of this (row, block) must be exactly one workable recipe.
            let reads: BTreeSet<u32> = set.iter().filter(|&&(w, _, bb)| !w && bb == b).map(|&(_, d, _)| d).collect();
            if live.is_empty() {
                prop_assert!(reads.is_empty());
                continue;
            }
            let data: Vec<(u32, u32)> = (0..g.data_disks()).map(|s| (s, g.data_disk(row, s))).collect();
            let lost_unwritten = data.iter().any(|&(s, d)| a.is_failed(d) && !written.contains(&s));
            let lost_written = data.iter().any(|&(s, d)| a.is_failed(d) && written.contains(&s));
            let rmw: BTreeSet<u32> = data.iter().filter(|&&(s, _)| written.contains(&s)).map(|&(_, d)| d).chain(live.iter().copied()).collect();
            let rcw: BTreeSet<u32> = data.iter().filter(|&&(s, _)| !written.contains(&s)).map(|&(_, d)| d).collect();
            let full: BTreeSet<u32> = (0..n).filter(|&d| !a.is_failed(d)).collect();
            let ok = (!lost_written && reads == rmw)
                || (!lost_unwritten && reads == rcw)
                || (lost_written && lost_unwritten && level == Level::Raid6 && reads == full);
            prop_assert!(ok, "row {} block {}: reads {:?}, rmw {:?}, rcw {:?}", row, b, reads, rmw, rcw);
        }
        let got_w: BTreeSet<_> = set.iter().filter(|x| x.0).copied().collect();
        prop_assert_eq!(got_w, want_w);
        // Reads only where something is written in the same row block.
        prop_assert!(set.iter().filter(|x| !x.0).all(|&(_, _, b)| touched.keys().any(|&(_, tb)| tb == b)));
        if level.parity_units() == 0 {
            prop_assert_eq!(plan.read_blocks(), 0);
        }
    }

    /// A full-row write of a healthy parity array reads nothing and writes every disk.
    #[test]
    fn full_stripes_read_nothing(a in any_array(), row in 0u64..(1 << 30), rows in 1u64..3) {
        prop_assume!(a.failed().is_empty());
        let per = a.blocks_per_stripe();
        let mut plan = Plan::default();
        a.plan_write(row * per, rows * per, &mut plan);
        prop_assert_eq!(plan.read_blocks(), 0);
        let copies = match a.spec().level {
            Level::Raid1 => u64::from(a.spec().disks),
            Level::Raid10 => 2,
            _ => 1,
        };
        let parity = u64::from(a.spec().level.parity_units()) * rows * u64::from(a.blocks_per_stripe_unit());
        prop_assert_eq!(plan.write_blocks(), rows * per * copies + parity);
        // One merged op per disk.
        prop_assert_eq!(plan.ops.len() as u32, a.spec().disks);
    }
}
