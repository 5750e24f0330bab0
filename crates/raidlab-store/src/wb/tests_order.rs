//! Ordering rules of the write cache's backups and recovery (issue 28, bugs 2-4), each
//! shown on the smallest history that breaks it.

use std::sync::{Arc, Condvar as StdCondvar, Mutex as StdMutex};
use std::time::Duration;

use raidlab::array::Level;
use raidlab::cache::write::OrderKind;

use super::backup::{Backup, LiveData};
use super::format::{RecKind, RecMeta};
use super::mirror::{mirror_bytes, MirrorBackup};
use super::recover::replay;
use super::{BackupKind, WbSpec, WriteBack, BLOCK};
use crate::crash::{self, RecordingMember};
use crate::ctrl::tests::{controller, mem_members, pattern, shape};
use crate::ctrl::Options;
use crate::member::{MemMember, Member};

const UUID: [u8; 16] = [9; 16];

struct NoLive;
impl LiveData for NoLive {
    fn newest(&self, _lba: u64) -> Option<(u64, &[u8])> {
        None
    }
}

fn rec(lba: u64, seq: u64, kind: RecKind) -> RecMeta {
    RecMeta { lba, seq, kind }
}

/// Bug 2: an image of a lost unit is taken (and given a fresh sequence number) while a
/// write of that page is acknowledged; recovery must not replay the image over it. Before
/// the fix the newest record of a page won whatever its kind, and the page came back with
/// the image's stale bytes.
#[test]
fn a_page_image_never_outranks_a_data_record() {
    let sh = shape(Level::Raid5, 4, 8);
    let members = mem_members(&sh, "m", 4);
    let (c, _) = controller(&sh, &members, Options::default());
    let dev = Arc::new(MemMember::new("mirror", mirror_bytes(64)));
    let m = MirrorBackup::create(dev, UUID, 64, 0).unwrap();
    let written = pattern(1, BLOCK);
    let stale = pattern(2, BLOCK);
    // The write (sequence 5) is committed first; the image (sequence 9) after it.
    m.put(rec(3, 5, RecKind::Data), &written, &NoLive).unwrap();
    m.commit().unwrap();
    m.put(rec(3, 9, RecKind::Image), &stale, &NoLive).unwrap();
    m.commit().unwrap();
    let r = replay(&c, &m, "mirror", None).unwrap();
    assert_eq!((r.pages, r.images), (1, 1));
    let mut back = vec![0u8; BLOCK];
    c.read(3 * BLOCK as u64, &mut back).unwrap();
    assert!(
        back == written,
        "the acknowledged write was replaced by its page's image"
    );
}

/// Bug 3: two versions of a page are released by two destage rounds; their slot-header
/// clears must become durable in version order. Every crash state of the history is
/// scanned: the older version may never be found without the newer one. Before the fix
/// both clears went out with no sync between them.
#[test]
fn mirror_clears_of_two_versions_become_durable_in_order() {
    let j = crash::journal();
    let slots = 16;
    let base = Arc::new(MemMember::new("mirror", mirror_bytes(slots)));
    j.lock().unwrap().paused = true;
    let dev = RecordingMember::wrap(base.clone(), 0, &j);
    let m = MirrorBackup::create(dev, UUID, slots, 0).unwrap();
    let initial = vec![base.contents()];
    j.lock().unwrap().paused = false;
    let v1 = m
        .put(rec(7, 1, RecKind::Data), &pattern(1, BLOCK), &NoLive)
        .unwrap();
    m.commit().unwrap();
    let v2 = m
        .put(rec(7, 2, RecKind::Data), &pattern(2, BLOCK), &NoLive)
        .unwrap();
    m.commit().unwrap();
    // From here version 2 is durable: version 1 may no longer be the newest found.
    let v2_durable = crash::position(&j);
    // Round 1 destaged v1 (v2 was written meanwhile); round 2 destages v2.
    m.release_destaged(&[v1]);
    m.release_destaged(&[v2]);
    let events = crash::snapshot(&j);
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let mut rng = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let states = crash::crash_states(&events, 30, &mut rng);
    assert!(states.len() > 50, "{} states", states.len());
    for s in &states {
        let img = crash::images(&initial, &events, s);
        let mem = Arc::new(MemMember::new("state", img[0].len() as u64));
        mem.write_at(&img[0], 0).unwrap();
        let opened = MirrorBackup::open(mem, UUID).unwrap().expect("a mirror");
        let seqs: Vec<u64> = opened
            .scan()
            .unwrap()
            .records
            .iter()
            .map(|r| r.meta.seq)
            .collect();
        assert!(
            s.cut < v2_durable || !seqs.contains(&1) || seqs.contains(&2),
            "crash state at {} ({}): version 1 survives alone and would be replayed: {seqs:?}",
            s.cut,
            s.kind
        );
    }
}

/// A member whose `sync` blocks until the test opens its gate.
#[derive(Debug)]
struct GatedMember {
    inner: Arc<MemMember>,
    gate: Arc<(StdMutex<(bool, u32)>, StdCondvar)>,
}

impl Member for GatedMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn sync(&self) -> std::io::Result<()> {
        let (m, cv) = &*self.gate;
        let mut g = m.lock().unwrap();
        g.1 += 1;
        cv.notify_all();
        // Bounded: the test opens the gate within seconds.
        for _ in 0..200 {
            if g.0 {
                break;
            }
            g = cv.wait_timeout(g, Duration::from_millis(50)).unwrap().0;
        }
        Ok(())
    }
    crate::member::forward_identity!(inner);
}

/// Bug 4: with `--backup none` (and in the write-through fallback), a second FLUSH must not
/// answer while the first one's member sync, which covers the writes before both, is still
/// running. Before the fix the first FLUSH cleared the "written through" flag before its
/// sync, and the second returned at once.
#[test]
fn a_second_flush_waits_for_the_sync_in_progress() {
    let sh = shape(Level::Raid1, 2, 8);
    let mems = mem_members(&sh, "m", 2);
    let gate = Arc::new((StdMutex::new((false, 0u32)), StdCondvar::new()));
    let gated: Vec<Arc<dyn Member>> = mems
        .iter()
        .map(|m| {
            Arc::new(GatedMember {
                inner: m.clone(),
                gate: gate.clone(),
            }) as Arc<dyn Member>
        })
        .collect();
    let c = crate::ctrl::Controller::new(
        sh.clone(),
        gated.into_iter().map(Some).collect(),
        Vec::new(),
        None,
        1,
        Box::new(crate::ctrl::NoMeta),
        Options::default(),
    )
    .unwrap();
    let spec = WbSpec {
        capacity_pages: 64,
        order: OrderKind::Lrw,
        high_pct: 80.0,
        low_pct: 20.0,
        max_destages: 2,
    };
    let wb = Arc::new(WriteBack::new(Arc::new(c), spec, BackupKind::None, None).unwrap());
    // TRIM without FUA goes straight to the members: durable at the next FLUSH.
    wb.write_zeroes(0, 4 * BLOCK as u64, false).unwrap();
    {
        let mut g = gate.0.lock().unwrap();
        g.1 = 0;
    }
    let first = {
        let wb = wb.clone();
        std::thread::spawn(move || wb.flush())
    };
    // Wait until the first FLUSH is inside a member sync.
    {
        let (m, cv) = &*gate;
        let mut g = m.lock().unwrap();
        for _ in 0..200 {
            if g.1 > 0 {
                break;
            }
            g = cv.wait_timeout(g, Duration::from_millis(50)).unwrap().0;
        }
        assert!(g.1 > 0, "the first FLUSH never reached a member sync");
    }
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let second = {
        let (wb, done) = (wb.clone(), done.clone());
        std::thread::spawn(move || {
            let r = wb.flush();
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            r
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let early = done.load(std::sync::atomic::Ordering::SeqCst);
    {
        let (m, cv) = &*gate;
        m.lock().unwrap().0 = true;
        cv.notify_all();
    }
    first.join().unwrap().unwrap();
    second.join().unwrap().unwrap();
    assert!(
        !early,
        "the second FLUSH answered while the sync covering the TRIM was still running"
    );
}

/// Found by the scheduled runs (RAID-1, log backup, seed 2): a write whose backup write
/// fails is drained to the members and answered, but the backup still holds an older
/// record of its page until the destager voids it. A crash in between replayed the older
/// record over the answered write. The reply now waits for the void.
#[test]
fn a_write_drained_after_the_backup_fails_is_answered_after_the_void() {
    let sh = shape(Level::Raid5, 4, 8);
    let members = mem_members(&sh, "m", 4);
    let (c, _) = controller(&sh, &members, Options::default());
    let inner: Arc<dyn Member> = Arc::new(MemMember::new("mirror", mirror_bytes(64)));
    let fault = Arc::new(crate::member::FaultMember::new(inner));
    let m = MirrorBackup::create(fault.clone(), UUID, 64, 0).unwrap();
    let voided = Arc::new(StdMutex::new(false));
    let v2 = voided.clone();
    let spec = WbSpec {
        capacity_pages: 32,
        order: OrderKind::Lrw,
        high_pct: 50.0,
        low_pct: 10.0,
        max_destages: 2,
    };
    let wb = Arc::new(
        WriteBack::new(Arc::new(c), spec, BackupKind::Mirror, Some(Box::new(m)))
            .unwrap()
            .with_void_hook(Box::new(move |_| {
                // A slow marker write: the window the bug answered in.
                std::thread::sleep(Duration::from_millis(300));
                *v2.lock().unwrap() = true;
                Ok(())
            })),
    );
    let t = wb.spawn_destager();
    wb.write(3 * BLOCK as u64, &pattern(1, BLOCK), false)
        .unwrap();
    wb.drain_all().unwrap();
    fault.fail_now();
    wb.write(3 * BLOCK as u64, &pattern(2, BLOCK), false)
        .unwrap();
    assert!(
        *voided.lock().unwrap(),
        "answered before the backup's older record of the page was voided"
    );
    wb.stop();
    t.join().unwrap();
}
