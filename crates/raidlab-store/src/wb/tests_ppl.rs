//! Worked examples of the partial parities (`ppl.rs`): a destage of one page of a RAID-5
//! row is cut after its data write and before its parity write, a member holding another
//! unit of the row then fails, and the array restarts. With the row's partial parity in the
//! backup, replay rebuilds that unit; without it, the unit reads wrong. A second replay (a
//! crash during recovery) uses the pages kept in the side file, not the rewritten members.

use std::sync::Arc;

use raidlab::array::Level;
use raidlab::cache::write::OrderKind;

use super::mirror::{mirror_bytes, MirrorBackup};
use super::ppl::{self, Plan};
use super::recover::replay;
use super::*;
use crate::ctrl::tests::{controller, mem_members, pattern, read_all, shape, CHUNK};
use crate::ctrl::{Controller, NoMeta, Options, Shape};
use crate::format::testutil::TempDir;
use crate::member::{MemMember, Member};

const UUID: [u8; 16] = [9; 16];
const SLOTS: u64 = 2 * 64 + 256;
/// The row the destage is cut in.
const ROW: u64 = 2;

fn spec() -> WbSpec {
    WbSpec {
        capacity_pages: 64,
        order: OrderKind::Lrw,
        high_pct: 80.0,
        low_pct: 20.0,
        max_destages: 4,
    }
}

struct Cut {
    members: Vec<Arc<MemMember>>,
    mirror: Arc<MemMember>,
    shape: Shape,
    /// The array as every acknowledged write left it.
    model: Vec<u8>,
    /// The slot of the member that fails after the cut.
    failed: usize,
}

/// Fill a RAID-5 of 4, write page `column` of the row's first unit through a mirrored
/// write cache (and, with `later`, a page of the third unit in the same column, acknowledged
/// after the destage began); put the row's partial parity when `protect`; then land the
/// destage's data write on its member and not its parity write.
fn cut_destage(protect: bool, later: bool) -> Cut {
    let sh = shape(Level::Raid5, 4, 8);
    let members = mem_members(&sh, "m", 4);
    let (c, _) = controller(&sh, &members, Options::default());
    let size = c.size_bytes() as usize;
    let model_fill = pattern(1, size);
    c.write(0, &model_fill, false).unwrap();
    c.flush().unwrap();
    let mut model = model_fill;
    let c = Arc::new(c);
    let bpu = u64::from(c.geo.blocks_per_stripe_unit());
    let per_row = c.geo.blocks_per_stripe();
    let column = 1u64;
    let row_first = ROW * per_row;
    let lba = row_first + column;
    let mirror = Arc::new(MemMember::new("mirror", mirror_bytes(SLOTS)));
    let backup = MirrorBackup::create(mirror.clone(), UUID, SLOTS, 0).unwrap();
    let wb = WriteBack::new(
        c.clone(),
        spec(),
        BackupKind::Mirror,
        Some(Box::new(backup)),
    )
    .unwrap();
    let new = pattern(2, BLOCK);
    wb.write(lba * BLOCK as u64, &new, false).unwrap();
    model[lba as usize * BLOCK..(lba as usize + 1) * BLOCK].copy_from_slice(&new);
    if protect {
        let h = wb.partial_parity(&[(ROW, vec![(lba, 1)])]).unwrap();
        assert_eq!(h.len(), 2, "one column's partial parity and the plan");
        wb.backup.as_ref().unwrap().commit().unwrap();
    }
    if later {
        let other = row_first + 2 * bpu + column;
        let data = pattern(3, BLOCK);
        wb.write(other * BLOCK as u64, &data, false).unwrap();
        model[other as usize * BLOCK..(other as usize + 1) * BLOCK].copy_from_slice(&data);
    }
    // The destage's data write lands; its parity write does not (the crash).
    let d0 = c.geo.data_disk(ROW, 0) as usize;
    members[d0]
        .write_at(
            &new,
            sh.data_offset_bytes + ROW * CHUNK + column * BLOCK as u64,
        )
        .unwrap();
    let failed = c.geo.data_disk(ROW, 1) as usize;
    drop(wb);
    Cut {
        members,
        mirror,
        shape: sh,
        model,
        failed,
    }
}

/// The array restarted with the member at `cut.failed` gone.
fn restart(cut: &Cut) -> Controller {
    let devs = cut
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| (i != cut.failed).then(|| m.clone() as Arc<dyn Member>))
        .collect();
    let c = Controller::new(
        cut.shape.clone(),
        devs,
        vec![],
        None,
        5,
        Box::new(NoMeta),
        Options::default(),
    )
    .unwrap();
    c.init_intent(None);
    c
}

fn mirror_of(cut: &Cut) -> MirrorBackup {
    MirrorBackup::open(cut.mirror.clone(), UUID)
        .unwrap()
        .unwrap()
}

#[test]
fn a_unit_lost_during_a_destage_is_rebuilt_from_its_partial_parity() {
    let cut = cut_destage(true, false);
    let c = restart(&cut);
    let side = TempDir::new("ppl");
    let got = replay(
        &c,
        &mirror_of(&cut),
        "mirror",
        Some(&side.path().join("side")),
    )
    .unwrap();
    assert_eq!((got.synthesized, got.unrecovered), (1, 0), "{got:?}");
    assert_eq!(got.pages, 1);
    assert!(
        read_all(&c) == cut.model,
        "every page reads what was acknowledged"
    );
}

#[test]
fn without_the_partial_parity_the_lost_unit_reads_wrong() {
    // The control: the same cut with no partial parity is the write hole.
    let cut = cut_destage(false, false);
    let c = restart(&cut);
    let got = replay(&c, &mirror_of(&cut), "mirror", None).unwrap();
    assert_eq!(got.synthesized, 0);
    let now = read_all(&c);
    let bad: Vec<usize> = (0..now.len() / BLOCK)
        .filter(|&p| now[p * BLOCK..(p + 1) * BLOCK] != cut.model[p * BLOCK..(p + 1) * BLOCK])
        .collect();
    let per_row = c.geo.blocks_per_stripe() as usize;
    let bpu = c.geo.blocks_per_stripe_unit() as usize;
    assert_eq!(
        bad,
        vec![ROW as usize * per_row + bpu + 1],
        "the failed member's page in the torn column"
    );
}

#[test]
fn a_second_replay_uses_the_kept_pages_not_the_rewritten_members() {
    let cut = cut_destage(true, true);
    let dir = TempDir::new("ppl");
    let side = dir.path().join("side");
    let c = restart(&cut);
    let m = mirror_of(&cut);
    assert_eq!(
        replay(&c, &m, "mirror", Some(&side)).unwrap().synthesized,
        1
    );
    assert!(read_all(&c) == cut.model);
    // A crash before the backup is reset: the next start replays again. The page written
    // after the destage began is on its member now, so computing again would rebuild the
    // lost page wrong; the side file keeps what the first replay computed.
    let kept = ppl::load_side(&side, m.epoch()).expect("the side file is whole");
    assert_eq!(kept.len(), 1);
    assert_eq!(
        replay(&c, &m, "mirror", Some(&side)).unwrap().synthesized,
        1
    );
    assert!(read_all(&c) == cut.model, "a second replay changes nothing");
    // Without the side file the second replay would rebuild from the rewritten page.
    let c2 = restart(&cut);
    replay(&c2, &m, "mirror", None).unwrap();
    assert!(read_all(&c2) != cut.model);
}

#[test]
fn a_torn_or_foreign_side_file_is_ignored() {
    let dir = TempDir::new("ppl");
    let p = dir.path().join("side");
    let pages = vec![(5u64, pattern(4, BLOCK)), (9u64, pattern(5, BLOCK))];
    ppl::store_side(&p, 77, &pages).unwrap();
    assert_eq!(ppl::load_side(&p, 77), Some(pages.clone()));
    assert_eq!(ppl::load_side(&p, 78), None, "another epoch's");
    let mut b = std::fs::read(&p).unwrap();
    b[40] ^= 1;
    std::fs::write(&p, &b).unwrap();
    assert_eq!(ppl::load_side(&p, 77), None, "a flipped bit");
    std::fs::write(&p, &b[..100]).unwrap();
    assert_eq!(ppl::load_side(&p, 77), None, "torn");
    assert_eq!(ppl::load_side(&dir.path().join("none"), 77), None);
}

#[test]
fn a_plan_round_trips_and_rejects_another_row_size() {
    let mut rewritten = vec![0u8; 2];
    rewritten[0] = 0b1000_0010;
    rewritten[1] = 0b0000_0100;
    let p = Plan {
        parity_first_seq: 41,
        parity_records: 3,
        row_pages: 12,
        rewritten,
    };
    let b = p.encode();
    assert_eq!(b.len(), BLOCK);
    let d = Plan::decode(&b, 12).unwrap();
    assert_eq!(d, p);
    assert!(d.rewrites(1) && d.rewrites(7) && d.rewrites(10));
    assert!(!d.rewrites(0) && !d.rewrites(11));
    assert_eq!(Plan::decode(&b, 16), None);
    let mut bad = b.clone();
    bad[0] ^= 1;
    assert_eq!(Plan::decode(&bad, 12), None);
}

#[test]
fn a_full_row_destage_needs_no_partial_parity() {
    let sh = shape(Level::Raid5, 4, 8);
    let members = mem_members(&sh, "m", 4);
    let (c, _) = controller(&sh, &members, Options::default());
    let c = Arc::new(c);
    let per_row = c.geo.blocks_per_stripe();
    let bpu = u64::from(c.geo.blocks_per_stripe_unit());
    let mirror = Arc::new(MemMember::new("mirror", mirror_bytes(SLOTS)));
    let backup = MirrorBackup::create(mirror, UUID, SLOTS, 0).unwrap();
    let wb = WriteBack::new(c, spec(), BackupKind::Mirror, Some(Box::new(backup))).unwrap();
    // The whole row, or whole columns of it: nothing is left to lose.
    assert!(wb
        .partial_parity(&[(1, vec![(per_row, per_row)])])
        .unwrap()
        .is_empty());
    let columns: Vec<(u64, u64)> = (0..3).map(|u| (per_row + u * bpu, 2)).collect();
    assert!(wb.partial_parity(&[(1, columns)]).unwrap().is_empty());
    // Two columns of one unit: two partial parities and a plan.
    assert_eq!(
        wb.partial_parity(&[(1, vec![(per_row, 2)])]).unwrap().len(),
        3
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// The fuzz target's stand-in: any bytes decode or are refused, and a decoded plan
    /// encodes back to itself.
    #[test]
    fn any_bytes_decode_or_are_refused(
        data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..5000),
        row_pages in 1u64..64,
        epoch in 0u64..4,
    ) {
        if let Some(p) = Plan::decode(&data, row_pages) {
            proptest::prop_assert_eq!(Plan::decode(&p.encode(), row_pages), Some(p));
        }
        let _ = ppl::decode_side(&data, epoch);
    }

    /// Every plan made from a bitmap decodes to the same bitmap.
    #[test]
    fn a_plan_keeps_its_bitmap(bits in proptest::collection::vec(proptest::prelude::any::<bool>(), 1..200)) {
        let n = bits.len();
        let mut rewritten = vec![0u8; n.div_ceil(8)];
        for (i, &b) in bits.iter().enumerate() {
            if b {
                rewritten[i / 8] |= 1 << (i % 8);
            }
        }
        let p = Plan { parity_first_seq: 7, parity_records: 1, row_pages: n as u32, rewritten };
        let d = Plan::decode(&p.encode(), n as u64).unwrap();
        for (i, &b) in bits.iter().enumerate() {
            proptest::prop_assert_eq!(d.rewrites(i as u64), b);
        }
    }
}
