//! Tests of `ctl re-add`: partial resync of the bitmap's dirty regions when the device is
//! recent enough, a full rebuild otherwise, and the bits kept while degraded.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use raidlab::array::Level;

use super::super::tests::{mem_members, pattern, shape, CHUNK};
use super::super::{Controller, Options};
use crate::format::create::tests::spec;
use crate::format::create::{create, CreateSpec};
use crate::format::sink::SuperblockSink;
use crate::format::testutil::TempDir;
use crate::member::{MemMember, Member};

const ROWS: u64 = 64;

/// A RAID-5 of 4 (or `level` of `disks`) on memory members whose superblocks and bitmaps
/// are written by the real sink (array UUID `uuid`), filled with a pattern, its bits
/// cleared. Returns the controller, its members and the reference bytes.
fn rig(
    level: Level,
    disks: u32,
    uuid: u8,
    tag: &str,
) -> (Controller, Vec<Arc<MemMember>>, Vec<u8>) {
    let sh = shape(level, disks, ROWS);
    let m = mem_members(&sh, tag, disks);
    let devs = m
        .iter()
        .map(|d| Some(d.clone() as Arc<dyn Member>))
        .collect();
    let sink = SuperblockSink::new("t", [uuid; 16], sh.clone(), 1);
    let c = Controller::new(
        sh,
        devs,
        Vec::new(),
        None,
        1,
        Box::new(sink),
        Options::default(),
    )
    .unwrap();
    c.init_intent(None);
    c.checkpoint();
    let data = pattern(u64::from(uuid), c.size_bytes() as usize);
    c.write(0, &data, false).unwrap();
    assert_eq!(
        c.intent_clear_idle(true),
        ROWS as usize,
        "every region cleared"
    );
    (c, m, data)
}

/// Logical bytes of one row (all its data units).
fn row_bytes(c: &Controller) -> u64 {
    c.shape().data_disks() * CHUNK
}

/// Write 4 KiB into each of `rows` (and into `reference`).
fn write_rows(c: &Controller, reference: &mut [u8], rows: &[u64], seed: u64) {
    for (i, &row) in rows.iter().enumerate() {
        let at = row * row_bytes(c) + 4096 * (i as u64 % 3);
        let bytes = pattern(seed + i as u64, 4096);
        c.write(at, &bytes, false).unwrap();
        reference[at as usize..at as usize + 4096].copy_from_slice(&bytes);
    }
}

fn rebuild_all(c: &Controller) {
    for _ in 0..100_000 {
        if c.rebuild_step(16).is_none() && !c.rebuild_active() {
            return;
        }
    }
    panic!("the rebuild does not end");
}

fn assert_whole_and_right(c: &Controller, reference: &[u8]) {
    assert!(c
        .slot_states()
        .iter()
        .all(|s| *s == super::super::SlotState::InSync));
    let mut back = vec![0u8; reference.len()];
    c.read(0, &mut back).unwrap();
    assert!(
        back == reference,
        "data differs from the reference after the rebuild"
    );
    let rep = c.check();
    assert_eq!((rep.mismatches, rep.skipped), (0, 0), "{rep:?}");
}

#[test]
fn partial_re_add_resyncs_only_the_regions_written_while_degraded() {
    for (level, disks) in [(Level::Raid5, 4), (Level::Raid6, 5), (Level::Raid1, 2)] {
        let (c, m, mut reference) = rig(level, disks, 7, &format!("p{}", level.name()));
        let slot = disks - 2;
        c.fail_member(slot, "test").unwrap();
        c.remove(&slot.to_string()).unwrap();
        write_rows(&c, &mut reference, &[5, 17, 40, 17], 100);
        assert_eq!(
            c.intent_clear_idle(true),
            0,
            "no bit is cleared while degraded"
        );
        let r = c.re_add_device(m[slot as usize].clone()).unwrap();
        assert_eq!(r.full_because, None, "{r:?}");
        assert_eq!((r.slot, r.regions, r.rows), (Some(slot), 3, 3));
        assert_eq!((r.bytes, r.member_bytes), (3 * CHUNK, ROWS * CHUNK));
        let st = c.status();
        assert_eq!(st["rebuild"]["kind"], "partial");
        assert_eq!(st["rebuild"]["units"], 3);
        c.rebuild_step(1);
        assert_eq!(
            c.intent_clear_idle(true),
            0,
            "no bit is cleared while the slot is being resynced"
        );
        rebuild_all(&c);
        let last = c.last_rebuild().unwrap();
        assert_eq!(
            (last.slot, last.partial_regions, last.rows),
            (slot, Some(3), 3)
        );
        assert_eq!(last.bytes, 3 * CHUNK);
        let written = c.counters()[slot as usize]
            .write_blocks
            .load(Ordering::Relaxed);
        assert_eq!(
            written,
            3 * CHUNK / 4096,
            "only the dirty rows were written to it"
        );
        assert_whole_and_right(&c, &reference);
        // Whole again: the bits may be cleared.
        assert_eq!(c.intent_clear_idle(true), 3);
    }
}

#[test]
fn writes_during_the_partial_resync_land() {
    let (c, m, mut reference) = rig(Level::Raid5, 4, 8, "w");
    c.fail_member(1, "test").unwrap();
    write_rows(&c, &mut reference, &[2, 3, 60], 200);
    // Still listed as faulty: re-added by its slot number.
    let r = c.re_add("1").unwrap();
    assert_eq!((r.regions, r.rows, r.path.as_str()), (3, 3, m[1].path()));
    c.rebuild_step(1);
    // A trusted row (written through the re-added member) and a dirty one.
    write_rows(&c, &mut reference, &[10, 60], 300);
    rebuild_all(&c);
    assert_eq!(c.last_rebuild().unwrap().rows, 3);
    assert_whole_and_right(&c, &reference);
}

#[test]
fn a_member_failing_during_the_partial_resync_stops_it() {
    let (c, m, mut reference) = rig(Level::Raid6, 5, 9, "f");
    c.fail_member(3, "test").unwrap();
    write_rows(&c, &mut reference, &[1, 2, 3, 4], 400);
    c.re_add_device(m[3].clone()).unwrap();
    c.rebuild_step(1);
    // The re-added member fails: as any replacement, it is dropped with its rebuild.
    c.fail_member(3, "test").unwrap();
    assert!(!c.rebuild_active());
    assert_eq!(c.state_word(), "degraded");
    // It was not in sync when it left this time: a second re-add is a full rebuild.
    let r = c.re_add("3").unwrap();
    let why = r.full_because.expect("full");
    assert!(why.contains("not the in-sync member"), "{why}");
    rebuild_all(&c);
    assert_eq!(c.last_rebuild().unwrap().rows, ROWS);
    assert_whole_and_right(&c, &reference);
}

#[test]
fn re_add_falls_back_to_a_full_rebuild() {
    // Never a member: no superblock.
    let (c, m, reference) = rig(Level::Raid5, 4, 10, "n");
    c.fail_member(0, "test").unwrap();
    c.remove("0").unwrap();
    let len = m[0].len_bytes();
    let blank: Arc<dyn Member> = Arc::new(MemMember::new("blank", len));
    let r = c.re_add_device(blank).unwrap();
    let why = r.full_because.clone().expect("full");
    assert!(why.contains("not a raidlab member"), "{why}");
    assert_eq!((r.slot, r.regions, r.bytes), (None, 0, 0));
    rebuild_all(&c);
    let last = c.last_rebuild().unwrap();
    assert_eq!((last.partial_regions, last.rows), (None, ROWS));
    assert_whole_and_right(&c, &reference);

    // Another array's member.
    let (other, om, _) = rig(Level::Raid5, 4, 11, "o");
    other.fail_member(2, "test").unwrap();
    c.fail_member(2, "test").unwrap();
    c.remove("2").unwrap();
    let why = c
        .re_add_device(om[2].clone())
        .unwrap()
        .full_because
        .unwrap();
    assert!(why.contains("another array"), "{why}");
    rebuild_all(&c);
    assert_whole_and_right(&c, &reference);

    // Bits cleared since it left: slot 1 was rebuilt onto a spare, made whole, and failed
    // again; the original member missed writes no bit records any more.
    let (c, m, mut reference) = rig(Level::Raid5, 4, 12, "c");
    c.fail_member(1, "test").unwrap();
    c.remove("1").unwrap();
    write_rows(&c, &mut reference, &[7], 500);
    c.add_spare(Arc::new(MemMember::new("spare", len))).unwrap();
    rebuild_all(&c);
    assert_eq!(c.intent_clear_idle(true), 1);
    write_rows(&c, &mut reference, &[8], 600);
    c.intent_clear_idle(true);
    c.fail_member(1, "test").unwrap();
    c.remove("1").unwrap();
    let why = c.re_add_device(m[1].clone()).unwrap().full_because.unwrap();
    assert!(why.contains("bitmap bits were cleared at event"), "{why}");
    rebuild_all(&c);
    assert_eq!(c.last_rebuild().unwrap().rows, ROWS);
    assert_whole_and_right(&c, &reference);

    // A bitmap that does not say since when its bits are kept.
    let (c, m, reference) = rig(Level::Raid5, 4, 13, "u");
    c.fail_member(3, "test").unwrap();
    c.init_kept(&[], None);
    let why = c.re_add_device(m[3].clone()).unwrap().full_because.unwrap();
    assert!(why.contains("since when"), "{why}");
    rebuild_all(&c);
    assert_whole_and_right(&c, &reference);

    // The slot taken: rebuilt in full onto a spare and in sync. The old member becomes a
    // spare, with nothing to rebuild.
    let (c, m, reference) = rig(Level::Raid5, 4, 15, "t");
    c.fail_member(2, "test").unwrap();
    c.remove("2").unwrap();
    c.add_spare(Arc::new(MemMember::new("sp2", len))).unwrap();
    rebuild_all(&c);
    let r = c.re_add_device(m[2].clone()).unwrap();
    let why = r.full_because.expect("full");
    assert!(
        why.contains("slot 2 is in sync with another device"),
        "{why}"
    );
    assert_eq!(c.status()["spares"][0], m[2].path());
    assert!(!c.rebuild_active());
    assert_whole_and_right(&c, &reference);

    // A spare that never held the slot, and a slot in sync: nothing partial.
    let (c, m, _) = rig(Level::Raid5, 4, 14, "s");
    assert!(c.re_add_device(m[0].clone()).is_err(), "an in-sync member");
    c.fail_member(0, "test").unwrap();
    c.add_spare(Arc::new(MemMember::new("sp", len))).unwrap();
    assert!(
        c.rebuild_active(),
        "the slot is being rebuilt onto the spare"
    );
    let why = c.re_add("0").unwrap().full_because.unwrap();
    assert!(why.contains("being rebuilt onto another device"), "{why}");
}

/// The restart variant on real files: bits written while degraded survive a crash (no clean
/// stop) and a clean stop, and the member left out at the start is re-added partially.
#[test]
fn bits_kept_while_degraded_survive_restarts() {
    let t = TempDir::new("readd-restart");
    let c = create(&CreateSpec {
        member_data_bytes: 64 * 4096,
        ..spec(&t.path().join("a"), Level::Raid5, 4)
    })
    .unwrap();
    let a = crate::format::assemble(&c.dir).unwrap();
    let ctl = crate::serve::controller_from(&a, Options::default()).unwrap();
    let rb = 3 * 4096;
    let mut reference = pattern(21, ctl.size_bytes() as usize);
    ctl.write(0, &reference, false).unwrap();
    ctl.flush().unwrap();
    assert_eq!(ctl.intent_clear_idle(true), 64);
    ctl.fail_member(2, "test").unwrap();
    for (i, row) in [3u64, 9, 30].into_iter().enumerate() {
        let bytes = pattern(50 + i as u64, 4096);
        let at = (row * rb) as usize;
        ctl.write(at as u64, &bytes, false).unwrap();
        reference[at..at + 4096].copy_from_slice(&bytes);
    }
    ctl.flush().unwrap();
    drop(ctl); // a crash: no clean stop

    let a = crate::format::assemble(&c.dir).unwrap();
    assert_eq!(a.kept_regions.iter().filter(|&&b| b).count(), 3);
    assert!(a.cleared_events.is_some());
    assert_eq!(a.faulty.len(), 1, "{:?}", a.warnings);
    let ctl = crate::serve::controller_from(&a, Options::default()).unwrap();
    while ctl.resync_step() {}
    // A clean stop while degraded keeps the bits.
    assert_eq!(ctl.intent_clear_idle(true), 0);
    ctl.set_clean(true);
    drop(ctl);

    let a = crate::format::assemble(&c.dir).unwrap();
    assert!(a.clean && a.dirty_regions.is_none());
    assert_eq!(a.kept_regions.iter().filter(|&&b| b).count(), 3);
    let ctl = crate::serve::controller_from(&a, Options::default()).unwrap();
    let r = ctl.re_add("2").unwrap();
    assert_eq!(r.full_because, None, "{r:?}");
    assert_eq!((r.slot, r.regions, r.bytes), (Some(2), 3, 3 * 4096));
    rebuild_all(&ctl);
    assert_eq!(ctl.last_rebuild().unwrap().bytes, 3 * 4096);
    assert_whole_and_right(&ctl, &reference);
    assert_eq!(ctl.intent_clear_idle(true), 3);
}

/// A member missing at a start (its superblock left behind, still claiming its slot in sync)
/// and listed again at the next start is left out as its slot is recorded failed; re-added,
/// only the regions written while it was missing are rebuilt onto it.
#[test]
fn a_member_left_out_at_the_start_is_re_added_in_part() {
    let t = TempDir::new("readd-stale");
    let c = create(&CreateSpec {
        member_data_bytes: 64 * 4096,
        ..spec(&t.path().join("a"), Level::Raid5, 4)
    })
    .unwrap();
    let a = crate::format::assemble(&c.dir).unwrap();
    let ctl = crate::serve::controller_from(&a, Options::default()).unwrap();
    let mut reference = pattern(31, ctl.size_bytes() as usize);
    ctl.write(0, &reference, false).unwrap();
    ctl.flush().unwrap();
    assert_eq!(ctl.intent_clear_idle(true), 64);
    ctl.set_clean(true);
    drop(ctl);

    // disk1 is missing at the next start: served degraded, written.
    crate::format::remove_from_manifest(&c.dir, &c.members[1]).unwrap();
    let a = crate::format::assemble(&c.dir).unwrap();
    assert!(a.devs[1].is_none());
    let ctl = crate::serve::controller_from(&a, Options::default()).unwrap();
    for (i, row) in [0u64, 33, 63].into_iter().enumerate() {
        let bytes = pattern(60 + i as u64, 8192);
        let at = (row * 3 * 4096) as usize;
        ctl.write(at as u64, &bytes, false).unwrap();
        reference[at..at + 8192].copy_from_slice(&bytes);
    }
    ctl.flush().unwrap();
    drop(ctl);

    // Back in the manifest: its slot is recorded failed, so it is left out.
    crate::format::add_to_manifest(&c.dir, &c.members[1]).unwrap();
    let a = crate::format::assemble(&c.dir).unwrap();
    assert!(
        a.devs[1].is_none() && a.faulty.len() == 1,
        "{:?}",
        a.warnings
    );
    let ctl = crate::serve::controller_from(&a, Options::default()).unwrap();
    while ctl.resync_step() {}
    let r = ctl.re_add("1").unwrap();
    assert_eq!(r.full_because, None, "{r:?}");
    assert_eq!(
        (r.slot, r.regions, r.rows, r.bytes),
        (Some(1), 3, 3, 3 * 4096)
    );
    rebuild_all(&ctl);
    assert_whole_and_right(&ctl, &reference);
}
