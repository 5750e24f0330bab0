//! Worked examples of the superblock sink: roles, the first bitmap, a failed preflush,
//! and slow members written at once.

use super::*;
use crate::member::MemMember;

fn shape() -> Shape {
    Shape {
        level: raidlab::array::Level::Raid1,
        layout: raidlab::array::Layout::LeftSymmetric,
        disks: 2,
        chunk_bytes: 4096,
        data_offset_bytes: 1 << 20,
        member_data_bytes: 8 * 4096,
    }
}

/// Found by the scheduled runs (RAID-6 rebuilding, run 4616 of seed 21): the preflush
/// of a just-rebuilt replacement failed, yet the other members' superblocks recorded it
/// in sync; a crash then assembled the replacement, whose rebuilt rows were never
/// durable, and read zeros.
#[test]
fn a_failed_preflush_writes_no_superblock() {
    let sink = SuperblockSink::new("m", [7; 16], shape(), 1);
    let len = (1 << 20) + 8 * 4096;
    let a: Arc<dyn Member> = Arc::new(MemMember::new("a", len));
    let bad = Arc::new(crate::member::FaultMember::new(Arc::new(MemMember::new(
        "b", len,
    ))));
    bad.fail_now();
    let b: Arc<dyn Member> = bad;
    let snap = Snapshot {
        events: 5,
        clean: false,
        slots: vec![
            (Some(Arc::clone(&a)), SlotState::InSync),
            (Some(Arc::clone(&b)), SlotState::InSync),
        ],
        spares: Vec::new(),
        faulty: Vec::new(),
        failed: false,
    };
    let e = sink.persist(&snap).unwrap_err();
    assert_eq!(e.devices.len(), 1);
    assert!(e.nothing_written, "the caller reuses the event number");
    assert!(Arc::ptr_eq(&e.devices[0].0, &b) && e.devices[0].1.contains("preflush"));
    let mut buf = [0u8; 4096];
    a.read_at(&mut buf, 4096).unwrap();
    assert!(
        buf.iter().all(|&x| x == 0),
        "a superblock recording the failed device in sync was written"
    );
}

#[test]
fn persist_writes_roles_and_a_first_bitmap() {
    let sink = SuperblockSink::new("m", [7; 16], shape(), 1);
    let len = (1 << 20) + 8 * 4096;
    let a: Arc<dyn Member> = Arc::new(MemMember::new("a", len));
    let b = Arc::new(MemMember::new("b", len));
    let sp: Arc<dyn Member> = Arc::new(MemMember::new("sp", len));
    let snap = Snapshot {
        events: 5,
        clean: false,
        slots: vec![
            (Some(Arc::clone(&a)), SlotState::InSync),
            (None, SlotState::Failed),
        ],
        spares: vec![Arc::clone(&sp)],
        faulty: vec![b.clone() as Arc<dyn Member>],
        failed: false,
    };
    sink.persist(&snap).unwrap();
    let sb_of = |m: &dyn Member| {
        let mut buf = [0u8; 4096];
        m.read_at(&mut buf, 4096).unwrap();
        decode(&buf, m.path()).unwrap()
    };
    let sa = sb_of(a.as_ref());
    assert_eq!((sa.role, sa.events, sa.clean), (DevRole::Slot(0), 5, false));
    assert_eq!(sa.slots, vec![SlotState::InSync, SlotState::Failed]);
    assert_eq!(sb_of(sp.as_ref()).role, DevRole::Spare);
    assert_eq!(sb_of(b.as_ref()).role, DevRole::Faulty);
    let mut bm = vec![0u8; super::super::BITMAP_BYTES];
    a.read_at(&mut bm, BITMAP_OFFSET).unwrap();
    assert_eq!(
        super::super::decode_bitmap(&bm, "a").unwrap().dirty,
        vec![false; 8]
    );
    // The device UUID is kept across persists; the spare's bitmap is not maintained.
    sink.write_intent(&[true; 8], Some(5)).unwrap();
    a.read_at(&mut bm, BITMAP_OFFSET).unwrap();
    assert_eq!(
        super::super::decode_bitmap(&bm, "a").unwrap().dirty,
        vec![true; 8]
    );
    sink.persist(&Snapshot {
        events: 6,
        ..snap.clone()
    })
    .unwrap();
    assert_eq!(sb_of(a.as_ref()).device_uuid, sa.device_uuid);
    assert!(sink.write_intent(&vec![false; 40000], None).is_err());
}

/// A member whose superblock write waits (a bounded time) until `n` devices are writing
/// theirs: an update that wrote its devices one after another would find nobody there.
#[derive(Debug)]
struct Meeting {
    inner: Arc<dyn Member>,
    room: Arc<(std::sync::Mutex<usize>, std::sync::Condvar)>,
    n: usize,
    met: std::sync::atomic::AtomicBool,
}

impl Member for Meeting {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        if offset == SUPERBLOCK_OFFSET {
            let (m, cv) = &*self.room;
            let mut here = m.lock().unwrap();
            *here += 1;
            cv.notify_all();
            let (here, _) = cv
                .wait_timeout_while(here, std::time::Duration::from_secs(5), |h| *h < self.n)
                .unwrap();
            self.met
                .store(*here >= self.n, std::sync::atomic::Ordering::SeqCst);
        }
        self.inner.write_at(buf, offset)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }
    crate::member::forward_identity!(inner);
    fn timing(&self) -> Option<crate::member::timed::TimingStatus> {
        self.inner.timing()
    }
}

/// md writes a superblock update to all its members at once; one after another, an
/// update of a 16-disk array on disk-timed members took 16 writes' time, and every
/// request waited for it.
#[test]
fn an_update_writes_slow_members_at_once() {
    let sink = SuperblockSink::new("m", [7; 16], shape(), 1);
    let len = (1 << 20) + 8 * 4096;
    let room = Arc::new(Default::default());
    let timing = crate::member::timed::TimingSpec::constant(100_000, 100_000);
    let devs: Vec<Arc<Meeting>> = ["a", "b"]
        .iter()
        .map(|name| {
            Arc::new(Meeting {
                inner: timing.wrap(Arc::new(MemMember::new(name, len))).unwrap(),
                room: Arc::clone(&room),
                n: 2,
                met: Default::default(),
            })
        })
        .collect();
    let snap = Snapshot {
        events: 5,
        clean: false,
        slots: devs
            .iter()
            .map(|d| (Some(d.clone() as Arc<dyn Member>), SlotState::InSync))
            .collect(),
        spares: Vec::new(),
        faulty: Vec::new(),
        failed: false,
    };
    sink.persist(&snap).unwrap();
    for d in &devs {
        assert!(
            d.met.load(std::sync::atomic::Ordering::SeqCst),
            "{}: written alone",
            d.path()
        );
    }
}
