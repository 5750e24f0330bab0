//! Worked examples: layout tables written out by hand, exact plans, validation errors.
//! Property tests live in `props.rs`.

use super::*;
use crate::error::Error;
use crate::workload::Op;

pub(super) fn spec(
    level: Level,
    disks: u32,
    layout: Layout,
    bpu: u64,
    failed: &[u32],
) -> ArraySpec {
    ArraySpec {
        level,
        disks,
        stripe_unit_bytes: bpu * 4096,
        layout,
        failed: failed.to_vec(),
        block_size: 4096,
    }
}

fn array(level: Level, disks: u32, layout: Layout, bpu: u64, failed: &[u32]) -> Array {
    Array::new(&spec(level, disks, layout, bpu, failed)).expect("valid spec")
}

/// Rows `0..rows` of a one-block-unit array as text: each cell is the logical chunk number it
/// holds, or P / Q.
fn table(a: &Array, rows: u64) -> Vec<String> {
    (0..rows)
        .map(|row| {
            (0..a.spec().disks)
                .map(|d| match a.role(row, d) {
                    Role::P => "P".to_string(),
                    Role::Q => "Q".to_string(),
                    Role::Data(slot) => {
                        (row * u64::from(a.data_disks()) + u64::from(slot)).to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Check the table both ways: `role` gives it, and `locate` puts every chunk where it says.
fn assert_table(level: Level, layout: Layout, disks: u32, expected: &[&str]) {
    let a = array(level, disks, layout, 1, &[]);
    assert_eq!(
        table(&a, expected.len() as u64),
        expected,
        "{level:?} {layout:?}"
    );
    for (row, line) in expected.iter().enumerate() {
        for (disk, cell) in line.split(' ').enumerate() {
            if let Ok(lba) = cell.parse::<u64>() {
                let want = Location {
                    disk: disk as u32,
                    block: row as u64,
                };
                assert_eq!(a.locate(lba), want, "{layout:?} chunk {lba}");
            }
        }
    }
}

#[test]
#[rustfmt::skip] // hand-written tables: one row per line
fn raid5_layout_tables_5_disks() {
    use Layout::*;
    // Left-symmetric (md default): parity walks left from the last disk; data starts just
    // after parity and wraps.
    assert_table(Level::Raid5, LeftSymmetric, 5, &[
        "0 1 2 3 P",
        "5 6 7 P 4",
        "10 11 P 8 9",
        "15 P 12 13 14",
        "P 16 17 18 19",
        "20 21 22 23 P",
    ]);
    // Left-asymmetric: same parity walk; data in plain disk order around it.
    assert_table(Level::Raid5, LeftAsymmetric, 5, &[
        "0 1 2 3 P",
        "4 5 6 P 7",
        "8 9 P 10 11",
        "12 P 13 14 15",
        "P 16 17 18 19",
    ]);
    // Right-symmetric: parity walks right from disk 0; data starts after it and wraps.
    assert_table(Level::Raid5, RightSymmetric, 5, &[
        "P 0 1 2 3",
        "7 P 4 5 6",
        "10 11 P 8 9",
        "13 14 15 P 12",
        "16 17 18 19 P",
    ]);
    // Right-asymmetric: parity walks right; data in disk order.
    assert_table(Level::Raid5, RightAsymmetric, 5, &[
        "P 0 1 2 3",
        "4 P 5 6 7",
        "8 9 P 10 11",
        "12 13 14 P 15",
        "16 17 18 19 P",
    ]);
}

#[test]
#[rustfmt::skip] // hand-written tables: one row per line
fn raid5_left_symmetric_4_disks() {
    assert_table(Level::Raid5, Layout::LeftSymmetric, 4, &[
        "0 1 2 P",
        "4 5 P 3",
        "8 P 6 7",
        "P 9 10 11",
    ]);
}

#[test]
#[rustfmt::skip] // hand-written tables: one row per line
fn raid6_p_and_q_positions_5_disks() {
    use Layout::*;
    // Q right after P (wrapping); symmetric data starts right after Q.
    assert_table(Level::Raid6, LeftSymmetric, 5, &[
        "Q 0 1 2 P",
        "3 4 5 P Q",
        "7 8 P Q 6",
        "11 P Q 9 10",
        "P Q 12 13 14",
    ]);
    // Asymmetric: data in disk order; with P on the last disk Q wraps to disk 0.
    assert_table(Level::Raid6, LeftAsymmetric, 5, &[
        "Q 0 1 2 P",
        "3 4 5 P Q",
        "6 7 P Q 8",
        "9 P Q 10 11",
        "P Q 12 13 14",
    ]);
    assert_table(Level::Raid6, RightSymmetric, 5, &[
        "P Q 0 1 2",
        "5 P Q 3 4",
        "7 8 P Q 6",
        "9 10 11 P Q",
        "Q 12 13 14 P",
    ]);
    assert_table(Level::Raid6, RightAsymmetric, 5, &[
        "P Q 0 1 2",
        "3 P Q 4 5",
        "6 7 P Q 8",
        "9 10 11 P Q",
        "Q 12 13 14 P",
    ]);
    let a = array(Level::Raid6, 5, LeftSymmetric, 1, &[]);
    assert_eq!(a.parity_disks(0), ParityDisks { p: Some(4), q: Some(0) });
    assert_eq!(a.parity_disks(3), ParityDisks { p: Some(1), q: Some(2) });
}

#[test]
fn raid10_pairs_and_raid0_raid1() {
    // Six disks = pairs (0,1) (2,3) (4,5); chunks go round the pairs; reads alternate copy
    // per row.
    let a = array(Level::Raid10, 6, Layout::LeftSymmetric, 1, &[]);
    let got: Vec<_> = (0..7)
        .map(|l| (a.locate(l).disk, a.locate(l).block))
        .collect();
    assert_eq!(
        got,
        [(0, 0), (2, 0), (4, 0), (1, 1), (3, 1), (5, 1), (0, 2)]
    );
    assert_eq!(a.role(0, 3), Role::Data(1));
    assert_eq!(a.data_disks(), 3);

    let a = array(Level::Raid0, 3, Layout::LeftSymmetric, 2, &[]);
    let got: Vec<_> = (0..7)
        .map(|l| (a.locate(l).disk, a.locate(l).block))
        .collect();
    assert_eq!(
        got,
        [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (0, 2)]
    );

    // RAID-1: every copy at block = lba; the preferred copy rotates per stripe unit.
    let a = array(Level::Raid1, 3, Layout::LeftSymmetric, 2, &[]);
    let got: Vec<_> = (0..7)
        .map(|l| (a.locate(l).disk, a.locate(l).block))
        .collect();
    assert_eq!(
        got,
        [(0, 0), (0, 1), (1, 2), (1, 3), (2, 4), (2, 5), (0, 6)]
    );
}

fn op(disk: u32, op: Op, block: u64, count: u32) -> DiskOp {
    DiskOp {
        disk,
        op,
        block,
        count,
    }
}
fn r(disk: u32, block: u64) -> DiskOp {
    op(disk, Op::Read, block, 1)
}
fn w(disk: u32, block: u64) -> DiskOp {
    op(disk, Op::Write, block, 1)
}

fn read(a: &Array, lba: u64) -> Vec<DiskOp> {
    let mut p = Plan::default();
    a.plan_read(lba, &mut p);
    p.ops
}
fn write(a: &Array, first: u64, count: u64) -> Vec<DiskOp> {
    let mut p = Plan::default();
    a.plan_write(first, count, &mut p);
    p.ops
}

#[test]
fn reads_normal_and_degraded() {
    use Layout::LeftSymmetric as LS;
    // Chunk 5 of a 5-disk left-symmetric RAID-5 sits on disk 0, row 1 (table above).
    let a = array(Level::Raid5, 5, LS, 1, &[]);
    assert_eq!(read(&a, 5), [r(0, 1)]);
    // Disk 0 failed: the other four blocks of row 1 rebuild it.
    let a = array(Level::Raid5, 5, LS, 1, &[0]);
    assert_eq!(read(&a, 5), [r(1, 1), r(2, 1), r(3, 1), r(4, 1)]);
    assert_eq!(read(&a, 6), [r(1, 1)]);
    assert_eq!(a.penalty(0), 4);
    assert_eq!(a.penalty(1), 1);

    // Six-disk RAID-6 left-symmetric, row 0: Q on 0, data on 1..4, P on 5.
    let a = array(Level::Raid6, 6, LS, 1, &[1]);
    assert_eq!(
        read(&a, 0),
        [r(2, 0), r(3, 0), r(4, 0), r(5, 0)],
        "P-based, Q skipped"
    );
    let a = array(Level::Raid6, 6, LS, 1, &[1, 2]);
    assert_eq!(
        read(&a, 0),
        [r(0, 0), r(3, 0), r(4, 0), r(5, 0)],
        "needs P and Q"
    );
    assert_eq!(read(&a, 1), [r(0, 0), r(3, 0), r(4, 0), r(5, 0)]);
    assert_eq!((a.penalty(1), a.penalty(2), a.penalty(0)), (4, 4, 1));

    // Mirrors read a surviving copy.
    let a = array(Level::Raid10, 4, LS, 1, &[0]);
    assert_eq!(read(&a, 0), [r(1, 0)]);
    assert_eq!(a.penalty(0), 1);
    let a = array(Level::Raid1, 3, LS, 1, &[1, 2]);
    assert_eq!(read(&a, 1), [r(0, 1)]);
    assert_eq!(read(&a, 2), [r(0, 2)]);
}

#[test]
fn writes_healthy_raid5() {
    use Layout::LeftSymmetric as LS;
    // Six disks, row 0: data on 0..4, parity on 5. One block: RMW = 2 reads + 2 writes.
    let a = array(Level::Raid5, 6, LS, 1, &[]);
    assert_eq!(write(&a, 0, 1), [r(0, 0), r(5, 0), w(0, 0), w(5, 0)]);
    // Two blocks: RMW reads 3, RCW reads 3 -> tie goes to RMW.
    assert_eq!(
        write(&a, 0, 2),
        [r(0, 0), r(1, 0), r(5, 0), w(0, 0), w(1, 0), w(5, 0)]
    );
    // Four of five: RCW reads the one unwritten block instead of 5.
    assert_eq!(
        write(&a, 0, 4),
        [r(4, 0), w(0, 0), w(1, 0), w(2, 0), w(3, 0), w(5, 0)]
    );
    // Three disks: one block is cheaper by RCW (read the other data block).
    let a = array(Level::Raid5, 3, LS, 1, &[]);
    assert_eq!(write(&a, 0, 1), [r(1, 0), w(0, 0), w(2, 0)]);

    // Full stripe of 4-block units on five disks: five writes, no reads. Two full rows merge
    // per disk into one 8-block write.
    let a = array(Level::Raid5, 5, LS, 4, &[]);
    let full: Vec<_> = (0..5).map(|d| op(d, Op::Write, 0, 4)).collect();
    assert_eq!(write(&a, 0, 16), full);
    let two: Vec<_> = (0..5).map(|d| op(d, Op::Write, 0, 8)).collect();
    assert_eq!(write(&a, 0, 32), two);

    // Blocks 2..6: offsets 2-3 of slot 0 (disk 0) and 0-1 of slot 1 (disk 1); parity covers
    // offsets 0-3. RMW reads 4 + 4 = 8 beats RCW's 3 * 4 + 4 - 4 = 12.
    assert_eq!(
        write(&a, 2, 4),
        [
            op(0, Op::Read, 2, 2),
            op(1, Op::Read, 0, 2),
            op(4, Op::Read, 0, 4),
            op(0, Op::Write, 2, 2),
            op(1, Op::Write, 0, 2),
            op(4, Op::Write, 0, 4),
        ]
    );
}

#[test]
fn writes_degraded() {
    use Layout::LeftSymmetric as LS;
    // Five-disk RAID-5, row 0: data on 0..3, parity on 4.
    // Data disk failed and written: reconstruct-write of the parity from the n-2 unwritten
    // survivors + 1 write. (The VDF paper's section 6.5 counts n-1 reads here, one more than
    // the parity update needs: the old parity is of no use to a reconstruct-write.)
    let a = array(Level::Raid5, 5, LS, 1, &[0]);
    assert_eq!(write(&a, 0, 1), [r(1, 0), r(2, 0), r(3, 0), w(4, 0)]);
    // Parity disk failed: data only.
    let a = array(Level::Raid5, 5, LS, 1, &[4]);
    assert_eq!(write(&a, 0, 1), [w(0, 0)]);
    // Another disk failed: plain RMW (2 reads, 2 writes).
    let a = array(Level::Raid5, 5, LS, 1, &[3]);
    assert_eq!(write(&a, 0, 1), [r(0, 0), r(4, 0), w(0, 0), w(4, 0)]);
    // Three of four written, the unwritten one lost: RCW would be cheaper but needs the lost
    // block, so RMW is forced.
    assert_eq!(
        write(&a, 0, 3),
        [
            r(0, 0),
            r(1, 0),
            r(2, 0),
            r(4, 0),
            w(0, 0),
            w(1, 0),
            w(2, 0),
            w(4, 0)
        ]
    );

    // Six-disk RAID-6, row 0: Q on 0, data on 1..4, P on 5.
    // Two data disks lost, one of them written: read every survivor, write P and Q.
    let a = array(Level::Raid6, 6, LS, 1, &[1, 2]);
    assert_eq!(
        write(&a, 0, 1),
        [r(0, 0), r(3, 0), r(4, 0), r(5, 0), w(0, 0), w(5, 0)]
    );
    // Both lost blocks written: RCW from the other data.
    assert_eq!(write(&a, 0, 2), [r(3, 0), r(4, 0), w(0, 0), w(5, 0)]);
    // Neither written: RMW with P and Q.
    assert_eq!(
        write(&a, 2, 1),
        [r(0, 0), r(3, 0), r(5, 0), w(0, 0), w(3, 0), w(5, 0)]
    );
    // Healthy RAID-6 one-block write: RMW updates P and Q, 3 reads + 3 writes.
    let a = array(Level::Raid6, 6, LS, 1, &[]);
    assert_eq!(
        write(&a, 0, 1),
        [r(0, 0), r(1, 0), r(5, 0), w(0, 0), w(1, 0), w(5, 0)]
    );
    // P and Q lost: data only.
    let a = array(Level::Raid6, 6, LS, 1, &[0, 5]);
    assert_eq!(write(&a, 0, 1), [w(1, 0)]);

    // Mirrors write every healthy copy; contiguous blocks merge.
    let a = array(Level::Raid1, 3, LS, 1, &[1]);
    assert_eq!(
        write(&a, 0, 2),
        [op(0, Op::Write, 0, 2), op(2, Op::Write, 0, 2)]
    );
    let a = array(Level::Raid10, 4, LS, 1, &[0]);
    assert_eq!(write(&a, 0, 1), [w(1, 0)]);
    assert_eq!(write(&a, 1, 1), [w(2, 0), w(3, 0)]);
}

fn err_key(s: ArraySpec) -> String {
    match Array::new(&s) {
        Err(Error::Config { key, .. }) => key,
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn validation_names_the_key() {
    use Layout::LeftSymmetric as LS;
    assert_eq!(err_key(spec(Level::Raid5, 2, LS, 1, &[])), "array.disks");
    assert_eq!(err_key(spec(Level::Raid6, 3, LS, 1, &[])), "array.disks");
    assert_eq!(err_key(spec(Level::Raid1, 1, LS, 1, &[])), "array.disks");
    assert_eq!(err_key(spec(Level::Raid10, 5, LS, 1, &[])), "array.disks");
    assert_eq!(err_key(spec(Level::Raid10, 2, LS, 1, &[])), "array.disks");
    assert_eq!(err_key(spec(Level::Raid0, 0, LS, 1, &[])), "array.disks");
    assert_eq!(
        err_key(spec(Level::Raid5, 4, LS, 0, &[])),
        "array.stripe_unit"
    );
    let mut s = spec(Level::Raid5, 4, LS, 1, &[]);
    s.stripe_unit_bytes = 6000;
    assert_eq!(err_key(s), "array.stripe_unit");
    assert_eq!(
        err_key(spec(Level::Raid5, 4, LS, 1, &[4])),
        "array.failed[0]"
    );
    assert_eq!(
        err_key(spec(Level::Raid6, 5, LS, 1, &[1, 1])),
        "array.failed[1]"
    );
    assert_eq!(
        err_key(spec(Level::Raid5, 4, LS, 1, &[0, 1])),
        "array.failed[1]"
    );
    assert_eq!(
        err_key(spec(Level::Raid6, 5, LS, 1, &[0, 1, 2])),
        "array.failed[2]"
    );
    assert_eq!(
        err_key(spec(Level::Raid0, 4, LS, 1, &[0])),
        "array.failed[0]"
    );
    assert_eq!(
        err_key(spec(Level::Raid10, 4, LS, 1, &[2, 3])),
        "array.failed[1]"
    );
    assert!(Array::new(&spec(Level::Raid10, 4, LS, 1, &[0, 3])).is_ok());
    assert!(Array::new(&spec(Level::Raid1, 3, LS, 1, &[0, 1])).is_ok());

    // Run-time failures: same checks, array unchanged on error.
    let mut a = array(Level::Raid5, 4, LS, 1, &[]);
    assert!(!a.degraded());
    a.fail(2).unwrap();
    assert!(a.degraded());
    assert_eq!(a.spec().failed, [2]);
    assert_eq!(a.penalty(2), 3);
    assert!(a.fail(1).is_err());
    assert!(a.fail(9).is_err());
    assert_eq!(a.failed(), [2]);
}

#[test]
fn names_round_trip() {
    for &n in Level::NAMES {
        assert_eq!(Level::from_name(n).map(Level::name), Some(n));
    }
    for &n in Layout::NAMES {
        assert_eq!(Layout::from_name(n).map(Layout::name), Some(n));
    }
    assert_eq!(Layout::from_name("ls"), Some(Layout::LeftSymmetric));
    assert_eq!(Level::from_name("raid4"), None);
}

#[test]
fn extreme_addresses_do_not_panic() {
    let a = array(Level::Raid6, 7, Layout::RightAsymmetric, 3, &[2, 5]);
    let mut p = Plan::default();
    a.plan_read(u64::MAX, &mut p);
    assert_eq!(p.read_blocks(), u64::from(a.penalty(a.disk_of(u64::MAX))));
    a.plan_write(u64::MAX - 40, 1000, &mut p);
    assert!(p.write_blocks() > 0);
    a.plan_write(u64::MAX, 1, &mut p);
    assert!(p.ops.is_empty(), "the range is clipped at u64::MAX");
    assert_eq!(a.logical_of(0, u64::MAX), None);
}

#[test]
fn raid6_syndrome_order_follows_md_walk() {
    use super::layout::{Geometry, Layout, Level};
    // Symmetric layouts: the syndrome order is the data-slot order.
    let g = Geometry::new(Level::Raid6, Layout::LeftSymmetric, 6, 65536, 4096).unwrap();
    for row in 0..12 {
        for i in 0..4 {
            assert_eq!(g.syndrome_disk(row, i), g.data_disk(row, i));
        }
    }
    // Left-asymmetric, 6 disks, row 2: P on disk 3, Q on 4; data slots on disks 0, 1, 2, 5;
    // md's walk starts after Q at disk 5, so Q weights disk 5 by g^0 and disk 0 by g^1.
    let g = Geometry::new(Level::Raid6, Layout::LeftAsymmetric, 6, 65536, 4096).unwrap();
    let logical: Vec<u32> = (0..4).map(|k| g.data_disk(2, k)).collect();
    let syndrome: Vec<u32> = (0..4).map(|i| g.syndrome_disk(2, i)).collect();
    assert_eq!(logical, [0, 1, 2, 5]);
    assert_eq!(syndrome, [5, 0, 1, 2]);
    // Then P (disk 3) and Q (disk 4).
    assert_eq!(g.parity_order(2).collect::<Vec<_>>(), [5, 0, 1, 2, 3, 4]);
    // Row 0 (P last, Q wrapped to disk 0) and row 1 (Q last): the walk is the slot order.
    assert_eq!(
        (0..4).map(|i| g.syndrome_disk(0, i)).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_eq!(
        (0..4).map(|i| g.syndrome_disk(1, i)).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
}

#[test]
fn raid5_parity_order_is_the_data_slots_then_p() {
    use super::layout::{Geometry, Layout, Level};
    let g = Geometry::new(Level::Raid5, Layout::LeftSymmetric, 4, 65536, 4096).unwrap();
    // Left-symmetric, 4 disks: row 0 has P on disk 3 and data on 0, 1, 2; row 1 has P on
    // disk 2 and data starting after it (3, 0, 1).
    assert_eq!(g.parity_order(0).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert_eq!(g.parity_order(1).collect::<Vec<_>>(), [3, 0, 1, 2]);
    let m = Geometry::new(Level::Raid1, Layout::LeftSymmetric, 2, 65536, 4096).unwrap();
    assert_eq!(m.parity_order(0).count(), 0);
}
