//! Worked examples of the write-back cache on in-memory members: reads see the newest data,
//! destages reach the members (full rows as full-stripe writes), FLUSH drains a volatile
//! cache, recovery replays a mirror after an abandoned controller, a member failure keeps
//! dirty data safe, and a lost backup drains and writes through.

use std::sync::Arc;

use raidlab::array::Level;
use raidlab::cache::write::OrderKind;

use super::mirror::{mirror_bytes, MirrorBackup};
use super::recover::replay;
use super::*;
use crate::ctrl::tests::{controller, mem_members, pattern, read_all, shape};
use crate::ctrl::Options;
use crate::member::{FaultMember, MemMember, Member};

const UUID: [u8; 16] = [7; 16];

fn spec(order: OrderKind, pages: u64) -> WbSpec {
    WbSpec {
        capacity_pages: pages,
        order,
        high_pct: 80.0,
        low_pct: 20.0,
        max_destages: 4,
    }
}

struct Rig {
    members: Vec<Arc<MemMember>>,
    mirror: Arc<MemMember>,
    wb: Arc<WriteBack>,
}

fn rig(level: Level, disks: u32, kind: BackupKind, order: OrderKind, pages: u64) -> Rig {
    let sh = shape(level, disks, 16);
    let members = mem_members(&sh, "m", disks);
    let (c, _) = controller(&sh, &members, Options::default());
    let mirror = Arc::new(MemMember::new("mirror", mirror_bytes(2 * pages + 64)));
    let backup: Option<Box<dyn Backup>> = match kind {
        BackupKind::None => None,
        _ => Some(Box::new(
            MirrorBackup::create(mirror.clone(), UUID, 2 * pages + 64, 0).unwrap(),
        )),
    };
    let wb = Arc::new(WriteBack::new(Arc::new(c), spec(order, pages), kind, backup).unwrap());
    Rig {
        members,
        mirror,
        wb,
    }
}

fn read_wb(wb: &WriteBack) -> Vec<u8> {
    let mut buf = vec![0u8; wb.controller().size_bytes() as usize];
    wb.read(0, &mut buf).unwrap();
    buf
}

/// Random 4-16 KiB writes into a flat model.
fn scribble(wb: &WriteBack, model: &mut [u8], seed: u64, n: usize) {
    let blocks = model.len() as u64 / BLOCK as u64;
    let mut x = seed | 1;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = 1 + (x >> 40) % 4;
        let at = (x >> 8) % (blocks - len);
        let data = pattern(seed * 1000 + i as u64, (len as usize) * BLOCK);
        wb.write(at * BLOCK as u64, &data, false).unwrap();
        let o = at as usize * BLOCK;
        model[o..o + data.len()].copy_from_slice(&data);
    }
}

#[test]
fn reads_see_cached_writes_before_and_after_destage() {
    let r = rig(Level::Raid5, 5, BackupKind::Mirror, OrderKind::Stow, 256);
    let size = r.wb.controller().size_bytes() as usize;
    let mut model = vec![0u8; size];
    scribble(&r.wb, &mut model, 3, 300);
    assert!(read_wb(&r.wb) == model, "cached reads");
    let t = r.wb.spawn_destager();
    r.wb.drain_all().unwrap();
    assert_eq!(r.wb.occupied(), 0);
    assert!(
        read_all(r.wb.controller()) == model,
        "the members hold everything"
    );
    assert_eq!(r.wb.controller().check().mismatches, 0);
    r.wb.stop();
    t.join().unwrap();
    let s = r.wb.status();
    assert!(s["destages"].as_u64().unwrap() > 0);
}

#[test]
fn a_full_row_is_destaged_as_a_full_stripe() {
    // RAID-5 of 5: a row holds 4 x 16 KiB = 16 pages.
    let r = rig(Level::Raid5, 5, BackupKind::Mirror, OrderKind::Lrw, 64);
    let data = pattern(1, 16 * BLOCK);
    r.wb.write(0, &data, false).unwrap();
    r.wb.write(16 * BLOCK as u64, &data[..4 * BLOCK], false)
        .unwrap();
    let t = r.wb.spawn_destager();
    r.wb.drain_all().unwrap();
    r.wb.stop();
    t.join().unwrap();
    let s = r.wb.status();
    assert_eq!(s["destages"], 2);
    assert_eq!(s["full_stripe_destages"], 1);
    assert_eq!(s["destaged_pages"], 20);
}

#[test]
fn writers_wait_for_room_and_the_destager_makes_it() {
    let r = rig(Level::Raid6, 6, BackupKind::Mirror, OrderKind::Wow, 40);
    let t = r.wb.spawn_destager();
    let size = r.wb.controller().size_bytes() as usize;
    let mut model = vec![0u8; size];
    scribble(&r.wb, &mut model, 9, 400);
    assert!(r.wb.counters.room_waits.load(Ordering::Relaxed) > 0);
    r.wb.drain_all().unwrap();
    assert!(read_all(r.wb.controller()) == model);
    r.wb.stop();
    t.join().unwrap();
}

#[test]
fn an_abandoned_cache_is_recovered_from_its_mirror() {
    let r = rig(Level::Raid5, 4, BackupKind::Mirror, OrderKind::Stow, 128);
    let size = r.wb.controller().size_bytes() as usize;
    let mut model = vec![0u8; size];
    let t = r.wb.spawn_destager();
    scribble(&r.wb, &mut model, 5, 200);
    // Crash: the controller and its cache vanish, whatever was destaging or not.
    r.wb.stop();
    t.join().unwrap();
    let held = r.wb.occupied();
    assert!(held > 0, "something was left dirty");
    let sh = r.wb.controller().shape().clone();
    drop(r.wb);
    let (c, _) = controller(&sh, &r.members, Options::default());
    let m = MirrorBackup::open(r.mirror.clone(), UUID).unwrap().unwrap();
    let got = replay(&c, &m, "mirror", None).unwrap();
    assert!(got.pages >= held.min(1) && got.torn == 0, "{got:?}");
    assert!(read_all(&c) == model, "every acknowledged write is back");
    // A second replay (a crash during recovery) writes the same bytes.
    replay(&c, &m, "mirror", None).unwrap();
    assert!(read_all(&c) == model);
    m.reset().unwrap();
    assert_eq!(replay(&c, &m, "mirror", None).unwrap().records, 0);
}

#[test]
fn flush_drains_a_volatile_cache_and_fua_writes_through() {
    let r = rig(Level::Raid10, 4, BackupKind::None, OrderKind::Cscan, 64);
    let t = r.wb.spawn_destager();
    let a = pattern(2, 2 * BLOCK);
    r.wb.write(8 * BLOCK as u64, &a, false).unwrap();
    r.wb.flush().unwrap();
    assert_eq!(r.wb.occupied(), 0);
    let mut got = vec![0u8; 2 * BLOCK];
    r.wb.controller().read(8 * BLOCK as u64, &mut got).unwrap();
    assert_eq!(got, a);
    let b = pattern(3, BLOCK);
    r.wb.write(40 * BLOCK as u64, &b, true).unwrap();
    assert_eq!(
        r.wb.occupied(),
        0,
        "a FUA write without a backup goes to the members"
    );
    let mut got = vec![0u8; BLOCK];
    r.wb.controller().read(40 * BLOCK as u64, &mut got).unwrap();
    assert_eq!(got, b);
    r.wb.stop();
    t.join().unwrap();
}

#[test]
fn dirty_data_survives_a_member_failure_and_is_destaged_degraded() {
    let r = rig(Level::Raid5, 5, BackupKind::Mirror, OrderKind::Stow, 256);
    let size = r.wb.controller().size_bytes() as usize;
    let mut model = vec![0u8; size];
    scribble(&r.wb, &mut model, 11, 150);
    r.wb.controller().fail_member(2, "test").unwrap();
    scribble(&r.wb, &mut model, 12, 50);
    assert!(read_wb(&r.wb) == model);
    let t = r.wb.spawn_destager();
    r.wb.drain_all().unwrap();
    assert!(
        read_all(r.wb.controller()) == model,
        "destaged onto the degraded array"
    );
    r.wb.stop();
    t.join().unwrap();
}

#[test]
fn zeroes_go_through_the_cache() {
    let r = rig(Level::Raid5, 5, BackupKind::Mirror, OrderKind::Lrw, 128);
    let d = pattern(4, 8 * BLOCK);
    r.wb.write(0, &d, false).unwrap();
    r.wb.write_zeroes(2 * BLOCK as u64, 3 * BLOCK as u64, false)
        .unwrap();
    let mut want = d.clone();
    want[2 * BLOCK..5 * BLOCK].fill(0);
    let mut got = vec![0u8; 8 * BLOCK];
    r.wb.read(0, &mut got).unwrap();
    assert_eq!(got, want);
}

#[test]
fn a_lost_mirror_drains_voids_and_writes_through_then_comes_back() {
    let sh = shape(Level::Raid5, 5, 16);
    let members = mem_members(&sh, "m", 5);
    let (c, _) = controller(&sh, &members, Options::default());
    let inner: Arc<dyn Member> = Arc::new(MemMember::new("mirror", mirror_bytes(600)));
    let fault = Arc::new(FaultMember::new(inner));
    let m = MirrorBackup::create(fault.clone(), UUID, 600, 0).unwrap();
    let voided = Arc::new(std::sync::Mutex::new(None));
    let voided2 = voided.clone();
    let wb = Arc::new(
        WriteBack::new(
            Arc::new(c),
            spec(OrderKind::Stow, 256),
            BackupKind::Mirror,
            Some(Box::new(m)),
        )
        .unwrap()
        .with_void_hook(Box::new(move |epoch| {
            *voided2.lock().unwrap() = Some(epoch);
            Ok(())
        })),
    );
    let t = wb.spawn_destager();
    let size = wb.controller().size_bytes() as usize;
    let mut model = vec![0u8; size];
    scribble(&wb, &mut model, 21, 50);
    fault.fail_now();
    // The next writes find the backup gone: answered only once on the members.
    scribble(&wb, &mut model, 22, 30);
    assert_eq!(wb.status()["mode"]["state"], "write-through");
    assert_eq!(
        *voided.lock().unwrap(),
        Some(1),
        "the failed backup's epoch was voided"
    );
    assert!(wb.counters.write_through_pages.load(Ordering::Relaxed) > 0);
    assert!(
        read_all(wb.controller()) == model,
        "every write answered is on the members"
    );
    assert!(read_wb(&wb) == model);
    fault.heal();
    // The probe (every 5 s) brings the backup back; bounded wait.
    let mut back = false;
    for _ in 0..80 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if wb.status()["mode"]["state"] == "backed" {
            back = true;
            break;
        }
    }
    assert!(back, "{}", wb.status());
    scribble(&wb, &mut model, 23, 20);
    wb.drain_all().unwrap();
    assert!(read_all(wb.controller()) == model);
    wb.stop();
    t.join().unwrap();
}

#[test]
fn a_too_small_cache_is_a_config_error() {
    let sh = shape(Level::Raid5, 5, 16);
    let members = mem_members(&sh, "m", 5);
    let (c, _) = controller(&sh, &members, Options::default());
    let e = WriteBack::new(
        Arc::new(c),
        spec(OrderKind::Lrw, 16),
        BackupKind::None,
        None,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("--write-cache-mib") && e.contains("two stripe rows"),
        "{e}"
    );
}

/// The log's cleaner copies a live record forward from the cache, so a record must never
/// be live after the cache has forgotten its page. The destager once removed destaged pages
/// and released their records in two steps, and a writer's cleaning in between found a
/// live record with no page: the backup was lost under plain random writes at depth 32.
/// Here writers keep a log at its smallest size cleaning while the destager runs.
#[cfg(not(feature = "shuttle"))]
#[test]
fn the_log_cleaner_never_finds_a_live_record_the_cache_forgot() {
    use super::format::SUPERS_BYTES;
    use super::log::{LogBackup, SPARE_SEGMENTS};
    let pages = 64u64;
    let seg = 64 << 10;
    let sh = shape(Level::Raid5, 5, 16);
    let members = mem_members(&sh, "m", 5);
    let (c, _) = controller(&sh, &members, Options::default());
    let segs = (pages * 2 * BLOCK as u64).div_ceil(seg) + SPARE_SEGMENTS;
    let dev: Arc<dyn Member> = Arc::new(MemMember::new("log", SUPERS_BYTES + segs * seg));
    let log =
        LogBackup::create(vec![(dev, 0, SUPERS_BYTES + segs * seg)], UUID, seg, pages).unwrap();
    let mut s = spec(OrderKind::Stow, pages);
    s.max_destages = 8;
    let wb = Arc::new(
        WriteBack::new(
            Arc::new(c),
            s,
            BackupKind::Log { logical: false },
            Some(Box::new(log)),
        )
        .unwrap(),
    );
    let destager = wb.spawn_destager();
    let blocks = wb.controller().size_bytes() / BLOCK as u64;
    let writers: Vec<_> = (0..4u64)
        .map(|t| {
            let wb = wb.clone();
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1);
                for i in 0..3_000u64 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let at = x % blocks;
                    wb.write(at * BLOCK as u64, &pattern(t * 100_000 + i, BLOCK), false)
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let st = wb.status();
    assert!(
        st["backup_stats"]["gc_segments"].as_u64().unwrap() > 0,
        "the cleaner ran: {st}"
    );
    assert_eq!(st["mode"]["state"], "backed", "{}", st["mode"]);
    assert!(super::setup::stop(&wb, destager));
}

#[test]
fn a_destage_wakes_one_waiting_writer_per_page_it_frees() {
    // RAID-5 of 3 with 16 KiB chunks: a group (row) is 8 pages; the cache holds 2 groups.
    let r = rig(Level::Raid5, 3, BackupKind::Mirror, OrderKind::Lrw, 16);
    let page = pattern(5, BLOCK);
    for lba in 0..16u64 {
        r.wb.write(lba * BLOCK as u64, &page, false).unwrap();
    }
    assert_eq!(r.wb.occupied(), 16);
    // 32 writers of one new page each (rows 2-5): all wait for room.
    const WRITERS: u64 = 32;
    let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|i| {
            let (wb, done) = (r.wb.clone(), done.clone());
            std::thread::spawn(move || {
                let lba = 16 + i;
                wb.write(lba * BLOCK as u64, &pattern(100 + i, BLOCK), false)
                    .unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let c = &r.wb.counters;
    for _ in 0..5_000 {
        if c.room_waits.load(Ordering::SeqCst) >= WRITERS {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(
        c.room_waits.load(Ordering::SeqCst),
        WRITERS,
        "all wait once"
    );
    let woken = c.room_wakeups.load(Ordering::SeqCst);
    // One destage of the oldest group frees its 8 pages: 8 writers go on.
    let b = r.wb.destage_begin(true).expect("a group to destage");
    r.wb.destage_end(b);
    for _ in 0..5_000 {
        if done.load(Ordering::SeqCst) >= 8 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(done.load(Ordering::SeqCst), 8);
    // Woken: about the 8 that had room (waking every writer woke all 32).
    let wakeups = c.room_wakeups.load(Ordering::SeqCst) - woken;
    assert!(
        (8..=12).contains(&wakeups),
        "{wakeups} writers woken for 8 pages"
    );
    // The rest go on as further destages make room (bounded: one group each).
    for _ in 0..10_000 {
        if done.load(Ordering::SeqCst) == WRITERS {
            break;
        }
        if !r.wb.destage_step(true) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    for w in writers {
        w.join().unwrap();
    }
    for _ in 0..64 {
        if !r.wb.destage_step(true) {
            break;
        }
    }
    assert_eq!(r.wb.occupied(), 0);
}
