//! Worked examples of the rebuilding state: per-row planning while a disk rebuilds.

use super::tests::spec;
use super::*;
use crate::workload::Op;

fn ops(plan: &Plan) -> Vec<(u32, Op, u64)> {
    plan.ops.iter().map(|o| (o.disk, o.op, o.block)).collect()
}

/// RAID-5 of 4 disks, one-block units, left-symmetric: row 0 = [0 1 2 P], row 1 =
/// [4 5 P 3], ..., row 5 = row 1's layout = [16 17 P 15]. Disk 1 fails and rebuilds; rows 0-2
/// are rebuilt.
fn rebuilding(redirect: bool) -> Array {
    let mut a = Array::new(&spec(Level::Raid5, 4, Layout::LeftSymmetric, 1, &[])).unwrap();
    assert_eq!(a.state(), ArrayState::Normal);
    a.fail(1).unwrap();
    assert_eq!(a.state(), ArrayState::Degraded);
    a.start_rebuild(1, 10, redirect, "events[1].rebuild")
        .unwrap();
    assert_eq!(a.state(), ArrayState::Rebuilding);
    for row in 0..3 {
        a.mark_rebuilt(1, row);
    }
    a
}

#[test]
fn reads_redirect_to_rebuilt_rows_and_reconstruct_the_rest() {
    let a = rebuilding(true);
    let mut p = Plan::default();
    assert_eq!(a.locate(1), Location { disk: 1, block: 0 });
    a.plan_read(1, &mut p);
    assert_eq!(ops(&p), vec![(1, Op::Read, 0)]);
    assert_eq!(a.locate(17), Location { disk: 1, block: 5 });
    a.plan_read(17, &mut p);
    assert_eq!(
        ops(&p),
        vec![(0, Op::Read, 5), (2, Op::Read, 5), (3, Op::Read, 5)]
    );
    // Without redirection a rebuilt row still reconstructs.
    let a = rebuilding(false);
    a.plan_read(1, &mut p);
    assert_eq!(
        ops(&p),
        vec![(0, Op::Read, 0), (2, Op::Read, 0), (3, Op::Read, 0)]
    );
}

#[test]
fn writes_follow_the_state_of_their_row() {
    for redirect in [true, false] {
        let a = rebuilding(redirect);
        let mut p = Plan::default();
        // Row 0 is rebuilt: a healthy read-modify-write that keeps the replacement current.
        a.plan_write(1, 1, &mut p);
        assert_eq!(
            ops(&p),
            vec![
                (1, Op::Read, 0),
                (3, Op::Read, 0),
                (1, Op::Write, 0),
                (3, Op::Write, 0)
            ]
        );
        // Row 5 is not: block 17's disk is lost, so reconstruct-write (read the other data,
        // write parity only).
        a.plan_write(17, 1, &mut p);
        assert_eq!(
            ops(&p),
            vec![(0, Op::Read, 5), (3, Op::Read, 5), (2, Op::Write, 5)]
        );
    }
}

#[test]
fn finishing_makes_the_member_normal() {
    let mut a = rebuilding(true);
    assert_eq!(a.rebuilding(1).map(|m| m.count()), Some(3));
    assert!(a.lost(1, 3) && !a.lost(1, 2) && !a.lost(0, 3));
    for row in 3..10 {
        a.mark_rebuilt(1, row);
    }
    a.finish_rebuild(1);
    assert_eq!(a.state(), ArrayState::Normal);
    assert!(a.failed().is_empty() && a.spec().failed.is_empty());
    assert!(!a.is_failed(1) && a.rebuilding(1).is_none());
    assert_eq!(crate::cache::read::MissCost::penalty(&a, 1), 1);
    // The disk may fail again later.
    a.fail(1).unwrap();
}

#[test]
fn rebuild_needs_a_failed_disk_not_yet_rebuilding() {
    let mut a = Array::new(&spec(Level::Raid6, 5, Layout::LeftSymmetric, 1, &[2])).unwrap();
    let key = |e: crate::error::Error| match e {
        crate::error::Error::Config { key, msg } => (key, msg),
        other => panic!("{other:?}"),
    };
    let (k, m) = key(a
        .start_rebuild(3, 8, true, "events[0].rebuild")
        .unwrap_err());
    assert_eq!(k, "events[0].rebuild");
    assert!(m.contains("not failed"), "{m}");
    a.start_rebuild(2, 8, true, "k").unwrap();
    let (_, m) = key(a.start_rebuild(2, 8, true, "k").unwrap_err());
    assert!(m.contains("already rebuilding"), "{m}");
    // A second failure while rebuilding: RAID-6 survives it; the rows of disk 2 not rebuilt
    // and disk 4 are both lost there.
    a.fail(4).unwrap();
    a.mark_rebuilt(2, 0);
    let mut p = Plan::default();
    // Row 1 of 5-disk left-symmetric RAID-6: P on disk 3, Q on disk 4; data 0,1,2 =
    // slots 0,1,2 -> lba 3..5 on disks 0,1,2. Lba 5 (disk 2, row 1) with disks 2 and 4
    // lost: the survivors 0, 1, 3.
    assert_eq!(a.locate(5), Location { disk: 2, block: 1 });
    a.plan_read(5, &mut p);
    assert_eq!(
        ops(&p),
        vec![(0, Op::Read, 1), (1, Op::Read, 1), (3, Op::Read, 1)]
    );
}

/// The miss-cost oracle while a disk rebuilds is the planner's answer, block by block: a
/// rebuilt row of the failed disk costs 1 again (redirected) or keeps its penalty (not).
#[test]
fn the_oracle_charges_what_the_planner_reads_row_by_row() {
    use crate::cache::read::MissCost;
    let mut plan = Plan::default();
    // RAID-5 of 4, rows 0-2 of disk 1 rebuilt: block 1 (disk 1, row 0) and block 5 (disk 1,
    // row 1) are rebuilt, block 13 (disk 1, row 4) is not.
    for (redirect, want) in [(true, [1, 1, 3]), (false, [3, 3, 3])] {
        let a = rebuilding(redirect);
        for (lba, cost) in [1u64, 5, 13].into_iter().zip(want) {
            assert_eq!(a.disk_of(lba), 1, "block {lba}");
            a.plan_read(lba, &mut plan);
            assert_eq!(
                (a.cost_of(lba), plan.read_blocks()),
                (cost, u64::from(cost)),
                "block {lba}"
            );
        }
        assert_eq!(a.penalty(1), 3);
    }
    // RAID-6 of 6 left-symmetric (row 0 = [Q 0 1 2 3 P]), disks 1 and 2 failed, disk 1
    // rebuilding with row 0 rebuilt: block 0 (disk 1) is read from the replacement (1);
    // block 1 (disk 2) is the row's only loss, solved from P and the other data (4 = n - 2,
    // Q skipped); in row 1 both are lost and every read needs 4 survivors.
    let mut a = Array::new(&spec(Level::Raid6, 6, Layout::LeftSymmetric, 1, &[1, 2])).unwrap();
    a.start_rebuild(1, 8, true, "events[0].rebuild").unwrap();
    a.mark_rebuilt(1, 0);
    for (lba, disk, cost) in [(0u64, 1u32, 1u32), (1, 2, 4), (2, 3, 1)] {
        assert_eq!(a.disk_of(lba), disk, "block {lba}");
        a.plan_read(lba, &mut plan);
        assert_eq!(
            (a.cost_of(lba), plan.read_blocks()),
            (cost, u64::from(cost)),
            "block {lba}"
        );
    }
    a.plan_read(1, &mut plan);
    assert!(
        ops(&plan).iter().all(|&(d, _, _)| d != 0),
        "Q (disk 0) skipped: {:?}",
        ops(&plan)
    );
    for lba in 4..8 {
        a.plan_read(lba, &mut plan);
        let loc = a.locate(lba);
        let want = if a.is_failed(loc.disk) { 4 } else { 1 };
        assert_eq!(
            (a.cost_of(lba), plan.read_blocks()),
            (want, u64::from(want)),
            "block {lba}"
        );
    }
}
