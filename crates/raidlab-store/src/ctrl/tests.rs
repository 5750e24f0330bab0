//! Worked examples of the controller on in-memory members: every level round-trips data,
//! serves degraded, rebuilds onto a spare and passes `check`.

use std::sync::{Arc, Mutex};

use raidlab::array::{Layout, Level};

use super::*;
use crate::member::{MemMember, Member};
use std::sync::atomic::Ordering;

pub(crate) const CHUNK: u64 = 16 * 1024;
pub(crate) const OFFSET: u64 = 64 * 1024;

/// A metadata sink that keeps the last snapshot (a restart builds from it).
#[derive(Default)]
pub(crate) struct Recorder {
    pub last: Mutex<Option<Snapshot>>,
    pub intent: Mutex<Vec<bool>>,
}

impl MetaSink for Arc<Recorder> {
    fn persist(&self, snap: &Snapshot) -> Result<(), MetaError> {
        *self.last.lock().unwrap() = Some(snap.clone());
        Ok(())
    }
    fn write_intent(&self, dirty: &[bool], _cleared: Option<u64>) -> Result<(), MetaError> {
        *self.intent.lock().unwrap() = dirty.to_vec();
        Ok(())
    }
}

pub(crate) fn shape(level: Level, disks: u32, rows: u64) -> Shape {
    Shape {
        level,
        layout: Layout::LeftSymmetric,
        disks,
        chunk_bytes: CHUNK,
        data_offset_bytes: OFFSET,
        member_data_bytes: rows * CHUNK,
    }
}

pub(crate) fn mem_members(shape: &Shape, prefix: &str, n: u32) -> Vec<Arc<MemMember>> {
    (0..n)
        .map(|i| {
            Arc::new(MemMember::new(
                &format!("{prefix}{i}"),
                shape.data_offset_bytes + shape.member_data_bytes,
            ))
        })
        .collect()
}

pub(crate) fn controller(
    shape: &Shape,
    members: &[Arc<MemMember>],
    opts: Options,
) -> (Controller, Arc<Recorder>) {
    let devs = members.iter().map(|m| m.clone() as Arc<dyn Member>);
    controller_of(shape, devs.collect(), opts)
}

/// A controller over any members (a memory member wrapped in a timing model, say).
pub(crate) fn controller_of(
    shape: &Shape,
    members: Vec<Arc<dyn Member>>,
    opts: Options,
) -> (Controller, Arc<Recorder>) {
    let rec = Arc::new(Recorder::default());
    let devs = members.into_iter().map(Some).collect();
    let c = Controller::new(
        shape.clone(),
        devs,
        Vec::new(),
        None,
        1,
        Box::new(rec.clone()),
        opts,
    )
    .unwrap();
    c.init_intent(None);
    (c, rec)
}

pub(crate) use super::tests_pattern::pattern;

pub(crate) fn read_all(c: &Controller) -> Vec<u8> {
    let mut buf = vec![0u8; c.size_bytes() as usize];
    c.read(0, &mut buf).unwrap();
    buf
}

/// Run the rebuild to the end (bounded).
pub(crate) fn rebuild_to_end(c: &Controller) {
    for _ in 0..100_000 {
        if c.rebuild_step(64).is_none() && !c.rebuild_active() {
            return;
        }
    }
    panic!("rebuild did not finish");
}

const LEVELS: [(Level, u32); 5] = [
    (Level::Raid0, 4),
    (Level::Raid1, 3),
    (Level::Raid10, 4),
    (Level::Raid5, 5),
    (Level::Raid6, 6),
];

/// Writes of assorted sizes and offsets (sub-unit, unit-crossing, row-crossing, full row).
fn scribble(c: &Controller, model: &mut [u8], seed: u64) {
    let size = c.size_bytes();
    let per_row = c.geo.blocks_per_stripe() * BLOCK as u64;
    let shapes = [
        (0, BLOCK as u64),
        (3 * BLOCK as u64, 5 * BLOCK as u64),
        (CHUNK - BLOCK as u64, 3 * BLOCK as u64),
        (per_row, per_row),
        (per_row - 2 * BLOCK as u64, per_row),
        (size - 2 * BLOCK as u64, 2 * BLOCK as u64),
    ];
    for (i, &(off, len)) in shapes.iter().enumerate() {
        let data = pattern(seed * 100 + i as u64, len as usize);
        c.write(off, &data, i % 2 == 0).unwrap();
        model[off as usize..(off + len) as usize].copy_from_slice(&data);
    }
}

#[test]
fn every_level_round_trips_and_checks_clean() {
    for (level, disks) in LEVELS {
        let sh = shape(level, disks, 8);
        let m = mem_members(&sh, "d", disks);
        let (c, _) = controller(&sh, &m, Options::default());
        let mut model = vec![0u8; c.size_bytes() as usize];
        scribble(&c, &mut model, 1);
        assert_eq!(read_all(&c), model, "{level:?}");
        let rep = c.check();
        assert_eq!(
            (rep.rows, rep.mismatches, rep.skipped),
            (8, 0, if level == Level::Raid0 { 8 } else { 0 }),
            "{level:?}"
        );
    }
}

#[test]
fn degraded_reads_and_writes_then_rebuild_onto_a_spare() {
    for (level, disks) in LEVELS.into_iter().filter(|(l, _)| *l != Level::Raid0) {
        let sh = shape(level, disks, 8);
        let m = mem_members(&sh, "d", disks);
        let (c, rec) = controller(&sh, &m, Options::default());
        let mut model = vec![0u8; c.size_bytes() as usize];
        scribble(&c, &mut model, 1);
        assert_eq!(read_all(&c), model, "{level:?} healthy read");
        let old_reads = c.counters()[1].read_blocks.load(Ordering::Relaxed);
        assert!(old_reads > 0, "{level:?}: slot 1 served reads");
        c.fail_member(1, "test").unwrap();
        assert_eq!(read_all(&c), model, "{level:?} degraded read");
        scribble(&c, &mut model, 2);
        assert_eq!(read_all(&c), model, "{level:?} degraded write");
        let spare = Arc::new(MemMember::new(
            "s0",
            sh.data_offset_bytes + sh.member_data_bytes,
        ));
        c.add_spare(spare.clone()).unwrap();
        assert!(c.rebuild_active(), "{level:?}: a spare starts a rebuild");
        rebuild_to_end(&c);
        assert_eq!(
            c.array_state(),
            raidlab::array::ArrayState::Normal,
            "{level:?}"
        );
        assert_eq!(
            c.counters()[1].read_blocks.load(Ordering::Relaxed),
            0,
            "{level:?}: the replacement's counters are its own, not the failed member's"
        );
        assert_eq!(read_all(&c), model, "{level:?} after rebuild");
        assert_eq!(c.check().mismatches, 0, "{level:?}");
        // The replacement holds real data: losing another member still reads right.
        c.fail_member(0, "test").unwrap();
        assert_eq!(
            read_all(&c),
            model,
            "{level:?} rebuilt member carries the data"
        );
        let snap = rec.last.lock().unwrap().clone().unwrap();
        assert_eq!(snap.slots[0].1, SlotState::Failed);
        assert!(snap.slots[1].0.as_ref().is_some_and(|d| d.path() == "s0"));
    }
}

#[test]
fn raid6_survives_two_failures_and_rebuilds_both() {
    let sh = shape(Level::Raid6, 6, 8);
    let m = mem_members(&sh, "d", 6);
    let (c, _) = controller(&sh, &m, Options::default());
    let mut model = vec![0u8; c.size_bytes() as usize];
    scribble(&c, &mut model, 3);
    c.fail_member(2, "test").unwrap();
    c.fail_member(5, "test").unwrap();
    assert_eq!(read_all(&c), model);
    scribble(&c, &mut model, 4);
    assert_eq!(read_all(&c), model);
    assert!(
        c.fail_member(0, "test").is_err(),
        "a third failure kills RAID-6"
    );
    assert!(c.read(0, &mut [0u8; BLOCK]).is_err());
}

#[test]
fn the_last_failure_a_level_survives_is_not_a_client_error() {
    let sh = shape(Level::Raid5, 4, 4);
    let m = mem_members(&sh, "d", 4);
    let (c, _) = controller(&sh, &m, Options::default());
    assert!(c.fail_member(3, "test").is_ok());
    assert!(c.write(0, &pattern(9, BLOCK), false).is_ok());
    let err = c.fail_member(0, "test").unwrap_err();
    assert!(
        matches!(err, IoFail::Failed(ref m) if m.contains("cannot survive")),
        "{err}"
    );
}

#[test]
fn bad_ranges_are_invalid_not_failures() {
    let sh = shape(Level::Raid5, 4, 4);
    let m = mem_members(&sh, "d", 4);
    let (c, _) = controller(&sh, &m, Options::default());
    let size = c.size_bytes();
    let mut b = vec![0u8; BLOCK];
    assert!(matches!(c.read(size, &mut b), Err(IoFail::Invalid(_))));
    assert!(matches!(c.read(1, &mut b), Err(IoFail::Invalid(_))));
    assert!(matches!(
        c.write(u64::MAX - 4095, &b, false),
        Err(IoFail::Invalid(_))
    ));
    assert!(c.read(size - BLOCK as u64, &mut b).is_ok());
}

#[test]
fn write_intent_marks_regions_and_resync_repairs_a_torn_stripe() {
    let sh = shape(Level::Raid5, 4, 8);
    let m = mem_members(&sh, "d", 4);
    let (c, rec) = controller(&sh, &m, Options::default());
    let mut model = vec![0u8; c.size_bytes() as usize];
    scribble(&c, &mut model, 5);
    assert!(
        rec.intent.lock().unwrap().iter().any(|&b| b),
        "a write dirties its region"
    );
    // Tear row 2: change one data unit behind the controller's back, as a crash between the
    // data and the parity write would.
    let row = 2u64;
    let d = c.geo.data_disk(row, 0) as usize;
    let at = sh.data_offset_bytes + row * CHUNK;
    m[d].write_at(&pattern(77, BLOCK), at).unwrap();
    assert_eq!(c.check().mismatches, 1);
    // A restart with every region dirty resyncs and repairs it.
    let devs = m
        .iter()
        .map(|x| Some(x.clone() as Arc<dyn Member>))
        .collect();
    let c2 = Controller::new(
        sh.clone(),
        devs,
        vec![],
        None,
        5,
        Box::new(NoMeta),
        Options::default(),
    )
    .unwrap();
    c2.init_intent(Some(vec![true; 8]));
    assert!(c2.resync_pending());
    while c2.resync_step() {}
    assert_eq!(c2.check().mismatches, 0);
    // Cleared once idle.
    assert!(c.intent_clear_idle(true) > 0);
    assert!(rec.intent.lock().unwrap().iter().all(|&b| !b));
}

#[test]
fn read_cache_serves_hits_and_never_returns_stale_data() {
    let sh = shape(Level::Raid5, 4, 8);
    let m = mem_members(&sh, "d", 4);
    let spec = raidlab::cache::read::PolicySpec::from_name("lru").unwrap();
    let opts = Options {
        cache: Some((spec, 16)),
        ..Options::default()
    };
    let (c, _) = controller(&sh, &m, opts);
    let data = pattern(1, 4 * BLOCK);
    c.write(0, &data, false).unwrap();
    let mut b = vec![0u8; 4 * BLOCK];
    c.read(0, &mut b).unwrap();
    c.read(0, &mut b).unwrap();
    let cache = c.cache.as_ref().unwrap();
    assert_eq!(cache.misses.load(Ordering::Relaxed), 4);
    assert_eq!(cache.hits.load(Ordering::Relaxed), 4);
    assert_eq!(b, data);
    let newer = pattern(2, BLOCK);
    c.write(BLOCK as u64, &newer, false).unwrap();
    c.read(0, &mut b).unwrap();
    assert_eq!(&b[BLOCK..2 * BLOCK], &newer[..]);
    assert!(cache.resident_blocks() <= 16);
}

#[test]
fn pro_rebuilds_the_rows_users_read_first() {
    use raidlab::rebuild::{OrderSpec, ProSpec};
    let sh = shape(Level::Raid5, 4, 64);
    let m = mem_members(&sh, "d", 4);
    let opts = Options {
        rebuild_order: OrderSpec::Pro(ProSpec {
            zone_units: 4,
            zones_max: 8,
            slice_units: 2,
            ..ProSpec::default()
        }),
        ..Options::default()
    };
    let (c, _) = controller(&sh, &m, opts);
    let mut model = vec![0u8; c.size_bytes() as usize];
    scribble(&c, &mut model, 6);
    c.fail_member(2, "test").unwrap();
    let spare = Arc::new(MemMember::new(
        "s0",
        sh.data_offset_bytes + sh.member_data_bytes,
    ));
    c.add_spare(spare).unwrap();
    // Users read the failed member's units in rows 40..44 (where it holds data), again and
    // again: PRO's access monitor sees them through the reconstruction path.
    let per_row = c.geo.blocks_per_stripe();
    let hot: Vec<u64> = (40..44u64)
        .filter(|&r| matches!(c.geo.role(r, 2), raidlab::array::Role::Data(_)))
        .collect();
    assert_eq!(hot.len(), 3);
    for _ in 0..3 {
        for &row in &hot {
            let lba = (0..per_row)
                .map(|b| row * per_row + b)
                .find(|&lba| c.geo.locate(lba).disk == 2)
                .unwrap();
            let mut b = vec![0u8; BLOCK];
            c.read(lba * BLOCK as u64, &mut b).unwrap();
            assert_eq!(b, model[lba as usize * BLOCK..(lba as usize + 1) * BLOCK]);
        }
    }
    assert_eq!(c.rebuild_step(4), Some(std::time::Duration::ZERO));
    let st = c.read_state();
    let map = st.array.rebuilding(2).unwrap();
    let done: Vec<u64> = (0..64).filter(|&r| map.get(r)).collect();
    // PRO gives the popular zone its slices at once (here after one 2-unit slice of the
    // zone it started in); the sequential order would have done rows 0..4.
    assert_eq!(done.len(), 4);
    assert!(
        done.iter().filter(|r| (40..48).contains(*r)).count() >= 2,
        "hot zone early: {done:?}"
    );
    drop(st);
    rebuild_to_end(&c);
    assert_eq!(read_all(&c), model);
}

/// Issue 28, bug 6: `add-spare` of a device the array is already using (a live member, a
/// spare, a faulty device) is refused, whatever path names it. Before device identity the
/// controller checked only the size, and a later rebuild wrote over the live member
/// (512 of 512 rows wrong in the reproduction).
#[test]
fn add_spare_refuses_a_device_the_array_already_uses() {
    let sh = shape(Level::Raid5, 4, 8);
    let m = mem_members(&sh, "d", 4);
    let (c, _) = controller(&sh, &m, Options::default());
    let live: Arc<dyn Member> = m[1].clone();
    let e = c.add_spare(live.clone()).unwrap_err();
    assert!(
        e.to_string().contains("already the member in slot 1"),
        "{e}"
    );
    let spare: Arc<dyn Member> = Arc::new(MemMember::new(
        "s0",
        sh.data_offset_bytes + sh.member_data_bytes,
    ));
    c.add_spare(spare.clone()).unwrap();
    let e = c.add_spare(spare).unwrap_err();
    assert!(e.to_string().contains("already a spare"), "{e}");
    c.fail_member(3, "test").unwrap();
    // The spare took slot 3; the failed device is faulty, and stays refused.
    let e = c.add_spare(m[3].clone()).unwrap_err();
    assert!(e.to_string().contains("a faulty device"), "{e}");
}

/// The same file opened through two spellings of its path is one device.
#[test]
fn a_file_opened_by_two_paths_is_one_device() {
    use crate::member::{DevId, FileMember};
    let dir = std::env::temp_dir().join(format!("raidlab-devid-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let f = dir.join("disk1");
    std::fs::File::create(&f).unwrap().set_len(4096).unwrap();
    let a = FileMember::open(f.to_str().unwrap()).unwrap();
    let other = dir.join("sub/../disk1");
    let b = FileMember::open(other.to_str().unwrap()).unwrap();
    assert_ne!(a.path(), b.path());
    assert_eq!(a.identity(), b.identity());
    assert_eq!(DevId::of_path(&other).unwrap(), a.identity());
    std::fs::File::create(dir.join("disk2"))
        .unwrap()
        .set_len(4096)
        .unwrap();
    assert_ne!(DevId::of_path(&dir.join("disk2")).unwrap(), a.identity());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Members behind fault injectors, with the real superblock and bitmap writer.
fn faulty_array(level: Level, disks: u32) -> (Controller, Vec<Arc<crate::member::FaultMember>>) {
    use crate::member::FaultMember;
    let sh = shape(level, disks, 8);
    let faults: Vec<Arc<FaultMember>> = mem_members(&sh, "m", disks)
        .into_iter()
        .map(|m| Arc::new(FaultMember::new(m)))
        .collect();
    let devs = faults
        .iter()
        .map(|f| Some(f.clone() as Arc<dyn Member>))
        .collect();
    let sink = crate::format::SuperblockSink::new("t", [7; 16], sh.clone(), 1);
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
    (c, faults)
}

/// Issue 28, bug 5: a write-intent bitmap write that fails on every member must not let the
/// data write through (before: a warning, and the write was acknowledged, even with FUA,
/// with no durable bit to resync its row after a crash). md fails each such member.
#[test]
fn a_bitmap_write_failing_everywhere_fails_the_write() {
    let (c, faults) = faulty_array(Level::Raid5, 4);
    let bitmap = crate::format::BITMAP_OFFSET;
    for f in &faults {
        f.fail_range(bitmap, bitmap + 4096);
    }
    let e = c.write(0, &pattern(1, 4096), true).unwrap_err();
    assert!(matches!(e, IoFail::Failed(_)), "{e}");
    assert!(c.is_dead());
}

/// One member's bitmap write fails: that member is failed before any data is written, the
/// write is served degraded, and its data reads back.
#[test]
fn a_bitmap_write_failing_on_one_member_fails_that_member() {
    let (c, faults) = faulty_array(Level::Raid5, 4);
    let bitmap = crate::format::BITMAP_OFFSET;
    faults[2].fail_range(bitmap, bitmap + 4096);
    let data = pattern(2, 8 * 4096);
    c.write(0, &data, true).unwrap();
    assert_eq!(c.slot_states()[2], SlotState::Failed);
    let mut back = vec![0u8; data.len()];
    c.read(0, &mut back).unwrap();
    assert_eq!(back, data);
}

/// A member whose sync fails in the superblock's preflush has lost writes the kernel will
/// not report again: it is failed (before: the error was discarded).
#[test]
fn a_failed_preflush_fails_the_member() {
    let (c, faults) = faulty_array(Level::Raid6, 5);
    c.write(0, &pattern(3, 4096), false).unwrap();
    // Every operation of member 1 fails from now: its next sync is the preflush below.
    faults[1].fail_now();
    c.checkpoint();
    assert_eq!(c.slot_states()[1], SlotState::Failed);
    assert_eq!(c.slot_states()[0], SlotState::InSync);
}

/// A write to a row another holds waits for it, and `status` counts the wait (`row_locks`).
#[test]
fn a_write_to_a_held_row_waits_and_status_counts_it() {
    let sh = shape(Level::Raid5, 5, 8);
    let m = mem_members(&sh, "d", 5);
    let (c, _) = controller(&sh, &m, Options::default());
    let c = Arc::new(c);
    let before = c.status()["row_locks"].clone();
    assert_eq!(
        (before["waits"].as_u64(), before["wait_ms"].as_f64()),
        (Some(0), Some(0.0))
    );
    let held = c.locks.lock_row(0);
    let (tx, rx) = std::sync::mpsc::channel();
    let w = {
        let c = c.clone();
        std::thread::spawn(move || {
            tx.send(()).unwrap();
            c.write(0, &pattern(7, BLOCK), false).unwrap();
        })
    };
    rx.recv().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    drop(held);
    w.join().unwrap();
    let st = c.status()["row_locks"].clone();
    assert_eq!(
        (st["waits"].as_u64(), st["shared_waits"].as_u64()),
        (Some(1), Some(0)),
        "{st}"
    );
    assert!(st["wait_ms"].as_f64().unwrap() >= 10.0, "{st}");
    let mut got = vec![0u8; BLOCK];
    c.read(0, &mut got).unwrap();
    assert_eq!(got, pattern(7, BLOCK));
}

/// On slow members a write over two rows runs both rows' read-modify-writes at once: every
/// read (of either row) reaches its member before any write completes. Written one row
/// after another, the second row's reads came after the first row's writes.
#[test]
fn a_write_over_two_rows_on_slow_members_runs_the_rows_together() {
    use crate::member::timed::{TimedMember, TimingSpec};
    use raidlab::workload::Op;
    let sh = shape(Level::Raid5, 5, 8);
    let mem = mem_members(&sh, "d", 5);
    let spec = TimingSpec::constant(20_000_000, 20_000_000);
    let timed: Vec<Arc<TimedMember>> = mem
        .iter()
        .map(|m| Arc::new(TimedMember::new(m.clone() as Arc<dyn Member>, &spec).unwrap()))
        .collect();
    let devs = timed.iter().map(|t| t.clone() as Arc<dyn Member>);
    let (c, _) = controller_of(&sh, devs.collect(), Options::default());
    // A first write so the members' moving average says they are slow.
    c.write(0, &pattern(1, BLOCK), false).unwrap();
    let row_bytes = c.geo.blocks_per_stripe() * BLOCK as u64;
    timed.iter().for_each(|t| t.record(64));
    let data = pattern(2, 2 * BLOCK);
    c.write(row_bytes - BLOCK as u64, &data, false).unwrap();
    let ops: Vec<_> = timed.iter().flat_map(|t| t.records()).collect();
    let last_read_arrival = ops
        .iter()
        .filter(|o| o.op == Op::Read)
        .map(|o| o.arrival_ns)
        .max();
    let first_write_done = ops
        .iter()
        .filter(|o| o.op == Op::Write)
        .map(|o| o.complete_ns)
        .min();
    let (Some(r), Some(w)) = (last_read_arrival, first_write_done) else {
        panic!("a read-modify-write on each row: {ops:?}");
    };
    assert!(
        r < w,
        "a read arrived at {r} ns, after a write completed at {w} ns: {ops:?}"
    );
    let mut got = vec![0u8; 2 * BLOCK];
    c.read(row_bytes - BLOCK as u64, &mut got).unwrap();
    assert_eq!(got, data);
}
