//! The destager's pool on slow members (`destage_pool.rs`): a destage lands, frees its
//! pages and its slot while another is still held up on the members.

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Condvar as StdCondvar, Mutex as StdMutex};
use std::time::{Duration, Instant};

use raidlab::array::Level;
use raidlab::cache::write::OrderKind;

use super::mirror::{mirror_bytes, MirrorBackup};
use super::*;
use crate::ctrl::tests::{mem_members, pattern, read_all, shape, CHUNK, OFFSET};
use crate::ctrl::{NoMeta, Options};
use crate::member::{MemMember, Member};

/// Writes to member bytes `range` wait while the gate is closed (bounded: a test that never
/// opens it fails instead of hanging).
#[derive(Debug)]
struct Gate {
    closed: StdMutex<bool>,
    opened: StdCondvar,
    range: std::ops::Range<u64>,
    /// Writes waiting at the gate now.
    held: AtomicU32,
}

impl Gate {
    fn pass(&self, offset: u64) {
        if !self.range.contains(&offset) {
            return;
        }
        let mut closed = self.closed.lock().unwrap();
        self.held.fetch_add(1, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(60);
        while *closed && Instant::now() < deadline {
            closed = self
                .opened
                .wait_timeout(closed, Duration::from_millis(100))
                .unwrap()
                .0;
        }
        self.held.fetch_sub(1, Ordering::SeqCst);
    }

    fn open(&self) {
        *self.closed.lock().unwrap() = false;
        self.opened.notify_all();
    }
}

/// An in-memory member that takes 200 µs per operation (slow enough for the controller to
/// fan out, and the destager to run its pool) and holds writes at its gate.
#[derive(Debug)]
struct Slow {
    inner: Arc<MemMember>,
    gate: Arc<Gate>,
}

impl Member for Slow {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        std::thread::sleep(Duration::from_micros(200));
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        std::thread::sleep(Duration::from_micros(200));
        self.gate.pass(offset);
        self.inner.write_at(buf, offset)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }
    crate::member::forward_identity!(inner);
}

/// Poll `f` for up to 20 s.
fn eventually(f: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// Row 0's destage is held at the members' gate; row 2's, started beside it, lands, frees
/// its pages and its slot, and its bytes are on the members, while row 0's is still in
/// flight. (In one round, row 2's pages stayed in the cache until row 0's had landed.)
#[test]
fn a_destage_lands_while_another_is_held_up() {
    // RAID-5 of 5, 16 KiB units: a row is 16 pages; row r is at member bytes OFFSET + r x CHUNK.
    let sh = shape(Level::Raid5, 5, 16);
    let gate = Arc::new(Gate {
        closed: StdMutex::new(false),
        opened: StdCondvar::new(),
        range: OFFSET..OFFSET + CHUNK,
        held: AtomicU32::new(0),
    });
    let mems = mem_members(&sh, "pool", 5);
    let devs = mems
        .iter()
        .map(|m| {
            Some(Arc::new(Slow {
                inner: m.clone(),
                gate: gate.clone(),
            }) as Arc<dyn Member>)
        })
        .collect();
    let c = Controller::new(
        sh,
        devs,
        Vec::new(),
        None,
        1,
        Box::new(NoMeta),
        Options::default(),
    )
    .unwrap();
    let c = Arc::new(c);
    // One read teaches the controller that the members are slow.
    let mut scratch = vec![0u8; BLOCK];
    c.read(3 * 16 * BLOCK as u64, &mut scratch).unwrap();
    let pages = 64;
    let mirror = Arc::new(MemMember::new("pool-mirror", mirror_bytes(2 * pages + 64)));
    let backup = MirrorBackup::create(mirror, [7; 16], 2 * pages + 64, 0).unwrap();
    let spec = WbSpec {
        capacity_pages: pages,
        order: OrderKind::Lrw,
        high_pct: 80.0,
        low_pct: 20.0,
        max_destages: 4,
    };
    let wb = Arc::new(
        WriteBack::new(c.clone(), spec, BackupKind::Mirror, Some(Box::new(backup))).unwrap(),
    );
    let mut model = read_all(&c);
    // Row 0 whole (LRW's first victim), then three pages of row 2.
    let a = pattern(1, 16 * BLOCK);
    let b = pattern(2, 3 * BLOCK);
    let b_at = (2 * 16 + 5) * BLOCK;
    wb.write(0, &a, false).unwrap();
    wb.write(b_at as u64, &b, false).unwrap();
    model[..a.len()].copy_from_slice(&a);
    model[b_at..b_at + b.len()].copy_from_slice(&b);
    *gate.closed.lock().unwrap() = true;
    let destager = wb.spawn_destager();
    // A drain asks for every destage at once (the rate's maximum).
    let drainer = {
        let wb = wb.clone();
        std::thread::spawn(move || wb.drain_all())
    };
    let landed = eventually(|| gate.held.load(Ordering::SeqCst) > 0 && wb.occupied() == 16);
    let st = wb.status();
    gate.open();
    assert!(
        landed,
        "row 2's destage did not land while row 0's was held: {st}"
    );
    assert_eq!(st["destages_in_flight"], 1, "{st}");
    let mut got = vec![0u8; b.len()];
    c.read(b_at as u64, &mut got).unwrap();
    assert!(got == b, "row 2's pages are on the members");
    drainer.join().unwrap().unwrap();
    assert_eq!(wb.occupied(), 0);
    assert!(read_all(&c) == model, "every page is on the members");
    assert_eq!(c.check().mismatches, 0);
    assert!(super::setup::stop(&wb, destager));
}
