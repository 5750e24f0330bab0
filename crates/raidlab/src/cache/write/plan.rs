//! The destage planner: the dirty pages of one write group become per-disk operations.
//!
//! A group is one or more whole stripe rows. Row by row:
//! - every page present: the array planner's full-stripe write (no reads);
//! - RAID-5/6 with no failed disk: one parity update for all the row's pages, whatever their
//!   gaps, by read-modify-write or reconstruct-write, whichever reads fewer blocks (RMW on a
//!   tie, the array planner's rule); [`sparse_parity_row`] below;
//! - otherwise (mirrors, RAID-0, degraded parity rows): the array planner for each contiguous
//!   run of pages. For mirrors and RAID-0 that is exact (every copy written, no reads); for a
//!   degraded parity row two runs sharing unit offsets each bring the parity up to date, a
//!   correct plan that may read more than a sparse one would (a documented simplification).
//!
//! The plan is normalized at the end, so contiguous pages on one disk are one operation and
//! pages with a gap between them are separate operations.

use crate::array::{Array, DiskOp, Level, Plan};
use crate::workload::Op;

/// How the rows of a destage were written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowKinds {
    pub full: u32,
    pub rmw: u32,
    pub rcw: u32,
    /// Rows planned run by run (mirrors, RAID-0, degraded parity rows).
    pub runs: u32,
}

#[inline]
fn bit(bits: &[u64], i: u64) -> bool {
    bits[(i / 64) as usize] >> (i % 64) & 1 != 0
}

/// Plan the destage of the pages set in `bits` (bit `i` = logical page `first + i`) of a group
/// of `group_pages` pages into `out`. Without an array the device's block is the page.
pub fn plan_destage(
    array: Option<&Array>,
    first: u64,
    group_pages: u64,
    bits: &[u64],
    scratch: &mut Plan,
    out: &mut Plan,
) -> RowKinds {
    out.ops.clear();
    let mut kinds = RowKinds::default();
    let Some(array) = array else {
        for_runs(bits, 0, group_pages, |a, n| {
            out.ops.push(DiskOp {
                disk: 0,
                op: Op::Write,
                block: first + a,
                count: n as u32,
            });
        });
        return kinds;
    };
    let per_row = array.blocks_per_stripe();
    debug_assert!(first.is_multiple_of(per_row) && group_pages.is_multiple_of(per_row));
    let parity = matches!(array.spec().level, Level::Raid5 | Level::Raid6);
    let healthy = array.failed().is_empty();
    for r in 0..group_pages / per_row {
        let lo = r * per_row;
        let present = (lo..lo + per_row).filter(|&i| bit(bits, i)).count() as u64;
        if present == 0 {
            continue;
        }
        if present == per_row {
            kinds.full += 1;
            array.plan_write(first + lo, per_row, scratch);
            out.ops.extend_from_slice(&scratch.ops);
        } else if parity && healthy {
            if sparse_parity_row(array, first + lo, &|i| bit(bits, lo + i), out) {
                kinds.rcw += 1;
            } else {
                kinds.rmw += 1;
            }
        } else {
            kinds.runs += 1;
            for_runs(bits, lo, lo + per_row, |a, n| {
                array.plan_write(first + a, n, scratch);
                out.ops.extend_from_slice(&scratch.ops);
            });
        }
    }
    out.normalize();
    kinds
}

/// Call `f(start, len)` for each run of set bits in `lo..hi`.
fn for_runs(bits: &[u64], lo: u64, hi: u64, mut f: impl FnMut(u64, u64)) {
    let mut i = lo;
    while i < hi {
        if !bit(bits, i) {
            i += 1;
            continue;
        }
        let start = i;
        while i < hi && bit(bits, i) {
            i += 1;
        }
        f(start, i - start);
    }
}

/// One healthy RAID-5/6 row starting at logical page `row_lba` whose present pages are those
/// `present(i)` says (`i` = page within the row): push its ops (unmerged) and say whether it
/// chose reconstruct-write.
pub fn sparse_parity_row(
    array: &Array,
    row_lba: u64,
    present: &dyn Fn(u64) -> bool,
    out: &mut Plan,
) -> bool {
    let bpu = u64::from(array.blocks_per_stripe_unit());
    let data = u64::from(array.data_disks());
    let row = array.stripe_of(row_lba);
    let base = row * bpu;
    let par = array.parity_disks(row);
    let parity_disks = [par.p, par.q];
    let live_parity = parity_disks.iter().flatten().count() as u64;
    let written_at = |o: u64| (0..data).filter(|&s| present(s * bpu + o)).count() as u64;
    let (mut rmw, mut rcw) = (0u64, 0u64);
    for o in 0..bpu {
        let w = written_at(o);
        if w > 0 {
            rmw += w + live_parity;
            rcw += data - w;
        }
    }
    let use_rcw = rcw < rmw;
    let mut push = |disk: u32, op: Op, block: u64| {
        out.ops.push(DiskOp {
            disk,
            op,
            block,
            count: 1,
        })
    };
    for o in 0..bpu {
        if written_at(o) == 0 {
            continue;
        }
        for s in 0..data {
            let disk = array.data_disk(row, s as u32);
            let written = present(s * bpu + o);
            if written {
                push(disk, Op::Write, base + o);
            }
            if written != use_rcw {
                push(disk, Op::Read, base + o);
            }
        }
        for &d in parity_disks.iter().flatten() {
            if !use_rcw {
                push(d, Op::Read, base + o);
            }
            push(d, Op::Write, base + o);
        }
    }
    use_rcw
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{ArraySpec, Layout};

    fn raid(level: Level, disks: u32, failed: Vec<u32>) -> Array {
        // 16 KiB units of 4 KiB pages: 4 pages per unit.
        Array::new(&ArraySpec {
            level,
            disks,
            stripe_unit_bytes: 16384,
            layout: Layout::LeftSymmetric,
            failed,
            block_size: 4096,
        })
        .unwrap()
    }

    fn bits_of(pages: &[u64]) -> Vec<u64> {
        let mut b = vec![0u64; 2];
        for &p in pages {
            b[(p / 64) as usize] |= 1 << (p % 64);
        }
        b
    }

    fn plan(a: &Array, first: u64, gp: u64, pages: &[u64]) -> (Plan, RowKinds) {
        let (mut s, mut out) = (Plan::default(), Plan::default());
        let k = plan_destage(Some(a), first, gp, &bits_of(pages), &mut s, &mut out);
        (out, k)
    }

    fn ops(p: &Plan) -> Vec<(u32, Op, u64, u32)> {
        p.ops
            .iter()
            .map(|o| (o.disk, o.op, o.block, o.count))
            .collect()
    }

    #[test]
    fn full_row_is_a_full_stripe_write() {
        // RAID-5 4+P, 4 pages per unit: a row is 16 pages; row 1 starts at page 16.
        let a = raid(Level::Raid5, 5, vec![]);
        let all: Vec<u64> = (0..16).collect();
        let (p, k) = plan(&a, 16, 16, &all);
        assert_eq!(k.full, 1);
        assert_eq!(p.read_blocks(), 0);
        assert_eq!(p.write_blocks(), 20);
        assert_eq!(p.ops.len(), 5);
    }

    #[test]
    fn two_pages_in_different_units_share_one_parity_update() {
        // Row 0 (parity on disk 4 for left-symmetric row 0): pages 1 (unit 0, offset 1) and 5
        // (unit 1, offset 1). RMW reads 2 data + 1 parity = 3 blocks; RCW reads 2 = the other
        // two units at offset 1: RCW is cheaper.
        let a = raid(Level::Raid5, 5, vec![]);
        let (p, k) = plan(&a, 0, 16, &[1, 5]);
        assert_eq!(k.rcw, 1);
        let d = |slot| a.data_disk(0, slot);
        let pd = a.parity_disks(0).p.unwrap();
        let mut want = vec![
            (d(2), Op::Read, 1, 1),
            (d(3), Op::Read, 1, 1),
            (d(0), Op::Write, 1, 1),
            (d(1), Op::Write, 1, 1),
            (pd, Op::Write, 1, 1),
        ];
        want.sort_by_key(|&(disk, op, b, _)| (op == Op::Write, disk, b));
        assert_eq!(ops(&p), want);
    }

    #[test]
    fn gapped_pages_of_one_unit_are_separate_operations() {
        // Pages 0 and 2 of unit 0: RMW reads 2 + 2 parity = 4, RCW reads 3 x 2 = 6: RMW.
        let a = raid(Level::Raid5, 5, vec![]);
        let (p, k) = plan(&a, 0, 16, &[0, 2]);
        assert_eq!(k.rmw, 1);
        let d0 = a.data_disk(0, 0);
        let pd = a.parity_disks(0).p.unwrap();
        let writes: Vec<_> = ops(&p).into_iter().filter(|o| o.1 == Op::Write).collect();
        let mut want = vec![
            (d0, Op::Write, 0, 1),
            (d0, Op::Write, 2, 1),
            (pd, Op::Write, 0, 1),
            (pd, Op::Write, 2, 1),
        ];
        want.sort_by_key(|&(disk, _, b, _)| (disk, b));
        assert_eq!(writes, want);
        assert_eq!(p.read_blocks(), 4);
    }

    #[test]
    fn raid10_writes_both_copies() {
        let a = raid(Level::Raid10, 4, vec![]);
        // 2 data units per row: 8 pages. Pages 0-1 and 5 of row 0.
        let (p, k) = plan(&a, 0, 8, &[0, 1, 5]);
        assert_eq!(k.runs, 1);
        assert_eq!(p.read_blocks(), 0);
        assert_eq!(p.write_blocks(), 6);
        // Pages 0-1 on disks 0 and 1 as one op each; page 5 on disks 2 and 3.
        assert_eq!(
            ops(&p),
            vec![
                (0, Op::Write, 0, 2),
                (1, Op::Write, 0, 2),
                (2, Op::Write, 1, 1),
                (3, Op::Write, 1, 1)
            ]
        );
    }

    #[test]
    fn without_an_array_runs_are_device_writes() {
        let (mut s, mut out) = (Plan::default(), Plan::default());
        plan_destage(None, 64, 64, &bits_of(&[0, 1, 2, 9]), &mut s, &mut out);
        assert_eq!(
            ops(&out),
            vec![(0, Op::Write, 64, 3), (0, Op::Write, 73, 1)]
        );
    }

    proptest::proptest! {
        /// A single contiguous run planned sparsely equals the array planner's plan.
        #[test]
        fn one_run_matches_the_array_planner(
            level6 in proptest::bool::ANY,
            disks in 4u32..8,
            row in 0u64..20,
            a in 0u64..64,
            len in 1u64..64,
        ) {
            let level = if level6 { Level::Raid6 } else { Level::Raid5 };
            let arr = raid(level, disks, vec![]);
            let per_row = arr.blocks_per_stripe();
            let a = a % per_row;
            let len = len.min(per_row - a);
            proptest::prop_assume!(len < per_row);
            let row_lba = row * per_row;
            let mut sparse = Plan::default();
            sparse_parity_row(&arr, row_lba, &|i| i >= a && i < a + len, &mut sparse);
            sparse.normalize();
            let mut want = Plan::default();
            arr.plan_write(row_lba + a, len, &mut want);
            proptest::prop_assert_eq!(sparse.ops, want.ops);
        }

        /// Any set of pages: every present page is written once on its data disk, nothing
        /// else is written except parity, and the parity is written at exactly the touched
        /// offsets.
        #[test]
        fn sparse_rows_write_exactly_the_present_pages(mask in 1u64..(1 << 16)) {
            let arr = raid(Level::Raid5, 5, vec![]);
            let pages: Vec<u64> = (0..16).filter(|i| mask >> i & 1 != 0).collect();
            let (p, _) = plan(&arr, 32, 16, &pages);
            let pd = arr.parity_disks(2).p.unwrap();
            let mut data_written = 0;
            for o in p.ops.iter().filter(|o| o.op == Op::Write && o.disk != pd) {
                for b in o.block..o.block + u64::from(o.count) {
                    let lba = arr.logical_of(o.disk, b).unwrap();
                    proptest::prop_assert!(pages.contains(&(lba - 32)));
                    data_written += 1;
                }
            }
            proptest::prop_assert_eq!(data_written, pages.len());
            let touched: std::collections::BTreeSet<u64> = pages.iter().map(|p| p % 4).collect();
            let parity: std::collections::BTreeSet<u64> = p.ops.iter()
                .filter(|o| o.op == Op::Write && o.disk == pd)
                .flat_map(|o| o.block..o.block + u64::from(o.count))
                .map(|b| b - 8)
                .collect();
            proptest::prop_assert_eq!(parity, touched);
        }
    }
}
