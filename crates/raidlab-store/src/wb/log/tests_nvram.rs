//! Worked examples of the NVRAM segment buffers with exact positions (16 KiB segments: one
//! record per commit gives batches at +0 and +8 KiB of each segment), the slot header's
//! decoder, and recovery's refusals.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use proptest::prelude::*;

use super::super::backup::Backup;
use super::super::format::{decode_batch, SUPERS_BYTES};
use super::nvram::nvram_bytes;
use super::slot::{SlotError, SlotHeader, SlotState, SLOT_HEADER_BLOCK};
use super::tests::{image, mem, page, physical, seqs, Cache, SEG, UUID};
use super::*;
use crate::member::{DevId, MemMember, Member};

/// The header of NVRAM slot `i` (slots of 16 KiB segments).
fn slot(nv: &MemMember, i: u64) -> Result<SlotHeader, SlotError> {
    let mut b = vec![0u8; SLOT_HEADER_BLOCK as usize];
    nv.read_at(&mut b, i * (SLOT_HEADER_BLOCK + SEG)).unwrap();
    SlotHeader::decode(&b)
}

/// The batch header at `off` of `dev`, for position `pos`.
fn batch(dev: &dyn Member, epoch: u64, off: u64, pos: u64) -> Option<format::Batch> {
    let mut b = vec![0u8; BLOCK];
    dev.read_at(&mut b, off).unwrap();
    decode_batch(&b, epoch, pos)
}

fn epoch(log: &LogBackup) -> u64 {
    log.epoch()
}

/// A physical log of 8 segments with an NVRAM of `slots` slots.
fn staged_log(slots: u32) -> (Arc<MemMember>, Arc<MemMember>, Vec<Leg>, LogBackup) {
    let (leg, legs) = physical(8);
    let (nv, nvd) = mem("nv", nvram_bytes(slots, SEG));
    let log = LogBackup::create(legs.clone(), UUID, SEG, 8)
        .unwrap()
        .with_nvram(nvd, slots)
        .unwrap();
    (leg, nv, legs, log)
}

#[test]
fn a_committed_write_lands_in_a_slot_not_the_leg() {
    let (leg, nv, legs, log) = staged_log(4);
    let mut cache = Cache::default();
    cache.write(&log, 5, 1).unwrap();
    log.commit().unwrap();
    let e = epoch(&log);
    assert_eq!(
        slot(&nv, 0).unwrap(),
        SlotHeader {
            state: SlotState::Staged,
            uuid: UUID,
            generation: 1,
            leg: 0,
            leg_offset: SUPERS_BYTES,
            pos: 0,
            len: SEG,
        }
    );
    let b = batch(&*nv, e, SLOT_HEADER_BLOCK, 0).unwrap();
    assert_eq!((b.pos, b.next, b.records.len()), (0, 8192, 1));
    // The leg's segment is untouched; the other slots are free.
    assert!(batch(&*leg, e, SUPERS_BYTES, 0).is_none());
    assert_eq!(slot(&nv, 1).unwrap().state, SlotState::Free);
    // Reads of the staged segment come from the slot.
    assert_eq!(seqs(&log.scan().unwrap()), vec![(5, 1)]);
    assert_eq!(
        log.describe(),
        "log (physical, 1 leg, 128 KiB, 8 segments of 16 KiB; 7 free; NVRAM of 4 slots)"
    );
    // The legs alone do not hold it; replayed, they do, and the slot is free again.
    assert!(LogBackup::open(legs.clone(), UUID)
        .unwrap()
        .scan()
        .unwrap()
        .records
        .is_empty());
    drop(log);
    let nvd: Arc<dyn Member> = nv.clone();
    let r = replay_nvram(&nvd, &legs, SEG, UUID, 4).unwrap();
    assert_eq!(
        r,
        NvramReplay {
            replayed: 1,
            ignored: 0
        }
    );
    assert_eq!(slot(&nv, 0).unwrap().state, SlotState::Free);
    let again = LogBackup::open(legs, UUID).unwrap().scan().unwrap();
    assert_eq!(seqs(&again), vec![(5, 1)]);
    assert_eq!(again.records[0].data, page(5, 1));
}

#[test]
fn a_sealed_slot_reaches_the_leg_and_is_freed() {
    let (leg, nv, _, log) = staged_log(4);
    let mut cache = Cache::default();
    for seq in 1..=3 {
        cache.write(&log, seq, seq).unwrap();
        log.commit().unwrap();
    }
    // The third batch entered segment 1 (at 16 KiB): slot 0 was sealed and drained.
    assert!(log.nv.as_ref().unwrap().wait_drained());
    let e = epoch(&log);
    let b = batch(&*leg, e, SUPERS_BYTES + 8192, 8192).unwrap();
    assert_eq!((b.pos, b.next, b.records.len()), (8192, 16384, 1));
    assert_eq!(slot(&nv, 0).unwrap().state, SlotState::Free);
    let s1 = slot(&nv, 1).unwrap();
    assert_eq!(
        (s1.state, s1.generation, s1.pos, s1.leg_offset),
        (SlotState::Staged, 2, 16384, SUPERS_BYTES + SEG)
    );
    assert_eq!(
        log.nvram_stats().unwrap(),
        NvramStats {
            slots: 4,
            stalls: 0,
            drained: 1,
            redo_writes: 0
        }
    );
    assert_eq!(seqs(&log.scan().unwrap()), vec![(1, 1), (2, 2), (3, 3)]);
    // Bytes written: the superblock, then three batches of two blocks (drains not counted).
    assert_eq!(log.stats().bytes_written, 4096 + 3 * 2 * 4096);
}

#[test]
fn a_release_in_a_slot_keeps_the_image_released_after_the_replay() {
    let (_, nv, legs, log) = staged_log(4);
    let cache = Cache::default();
    let h = log.put(image(1000, 1), &page(1000, 1), &cache).unwrap();
    log.commit().unwrap();
    log.release_images(&[h]).unwrap();
    log.commit().unwrap();
    assert!(log.scan().unwrap().records.is_empty());
    let st = log.stats();
    assert_eq!(
        (
            st.images_released,
            st.release_entries,
            st.image_void_leg_writes
        ),
        (1, 1, 0),
        "a release entry in the slot, no leg write"
    );
    drop(log);
    let nvd: Arc<dyn Member> = nv;
    replay_nvram(&nvd, &legs, SEG, UUID, 4).unwrap();
    let scan = LogBackup::open(legs, UUID).unwrap().scan().unwrap();
    assert_eq!((scan.records.len(), scan.torn), (0, 0));
}

/// A member whose writes wait while the gate is shut (a slow disk on demand).
#[derive(Debug)]
struct Gate {
    inner: MemMember,
    shut: Mutex<bool>,
    cv: Condvar,
    id: DevId,
}

impl Gate {
    fn set(&self, shut: bool) {
        *self.shut.lock().unwrap() = shut;
        self.cv.notify_all();
    }
}

impl Member for Gate {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut shut = self.shut.lock().unwrap();
        while *shut {
            shut = self.cv.wait(shut).unwrap();
        }
        drop(shut);
        self.inner.write_at(buf, offset)
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    fn len_bytes(&self) -> u64 {
        self.inner.len_bytes()
    }
    fn path(&self) -> &str {
        "gate"
    }
    fn identity(&self) -> DevId {
        self.id
    }
}

#[test]
fn a_writer_waits_while_every_slot_is_busy_until_one_drains() {
    let region = SUPERS_BYTES + 8 * SEG;
    let gate = Arc::new(Gate {
        inner: MemMember::new("leg", region),
        shut: Mutex::new(false),
        cv: Condvar::new(),
        id: DevId::fresh_mem(),
    });
    let legs: Vec<Leg> = vec![(gate.clone() as Arc<dyn Member>, 0, region)];
    let (_, nvd) = mem("nv", nvram_bytes(2, SEG));
    let log = Arc::new(
        LogBackup::create(legs, UUID, SEG, 8)
            .unwrap()
            .with_nvram(nvd, 2)
            .unwrap(),
    );
    gate.set(true);
    let cache = Arc::new(Mutex::new(Cache::default()));
    // Segments 0 and 1 (two batches each) take both slots; slot 0 is sealed and its
    // drain waits at the gate.
    for seq in 1..=4 {
        cache.lock().unwrap().write(&log, seq, seq).unwrap();
        log.commit().unwrap();
    }
    // The fifth enters segment 2: slot 1 is sealed too, and no slot is free.
    let t = {
        let (log, cache) = (log.clone(), cache.clone());
        std::thread::spawn(move || {
            cache.lock().unwrap().write(&log, 5, 5).unwrap();
            log.commit().unwrap();
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(!t.is_finished(), "the writer did not wait for a slot");
    assert_eq!(log.nvram_stats().unwrap().stalls, 1);
    gate.set(false);
    t.join().unwrap();
    assert!(log.nv.as_ref().unwrap().wait_drained());
    assert_eq!(
        log.nvram_stats().unwrap(),
        NvramStats {
            slots: 2,
            stalls: 1,
            drained: 2,
            redo_writes: 0
        }
    );
    assert_eq!(
        seqs(&log.scan().unwrap()),
        vec![(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]
    );
}

#[test]
fn a_failed_drain_loses_the_backup_and_wakes_the_waiter() {
    let region = SUPERS_BYTES + 8 * SEG;
    let (m, d) = mem("leg", region);
    let fault = Arc::new(crate::member::FaultMember::new(d));
    let legs: Vec<Leg> = vec![(fault.clone() as Arc<dyn Member>, 0, region)];
    let (_, nvd) = mem("nv", nvram_bytes(1, SEG));
    let log = LogBackup::create(legs, UUID, SEG, 8)
        .unwrap()
        .with_nvram(nvd, 1)
        .unwrap();
    fault.fail_now();
    let mut cache = Cache::default();
    cache.write(&log, 1, 1).unwrap();
    log.commit().unwrap();
    cache.write(&log, 2, 2).unwrap();
    log.commit().unwrap();
    // Segment 1 needs the only slot; its drain fails, and the put says the backup is lost.
    let e = cache.write(&log, 3, 3).unwrap_err().to_string();
    assert!(e.contains("writing a segment to its leg"), "{e}");
    assert!(log.commit().is_err());
    // A reset cannot bring it back: the failed drainer is gone.
    fault.heal();
    let e = log.reset().unwrap_err().to_string();
    assert!(e.contains("log backup lost"), "{e}");
    drop(m);
}

fn staged(uuid: [u8; 16], leg: u32, leg_offset: u64) -> SlotHeader {
    SlotHeader {
        state: SlotState::Staged,
        uuid,
        generation: 9,
        leg,
        leg_offset,
        pos: 0,
        len: SEG,
    }
}

#[test]
fn recovery_refuses_a_valid_slot_of_another_array_or_place_and_ignores_a_torn_one() {
    let (_, legs) = physical(8);
    LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let (nv, nvd) = mem("nv", nvram_bytes(2, SEG));
    for (h, want) in [
        (staged([1; 16], 0, SUPERS_BYTES), "another array"),
        (staged(UUID, 3, SUPERS_BYTES), "names leg 3 of a log with 1"),
        (
            staged(UUID, 0, SUPERS_BYTES + 8 * SEG),
            "outside its leg's log area",
        ),
    ] {
        nv.write_at(&h.encode(), 0).unwrap();
        let e = replay_nvram(&nvd, &legs, SEG, UUID, 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("nv") && e.contains(want), "{e}");
    }
    // A torn header (one byte changed): ignored, nothing replayed.
    let mut b = staged(UUID, 0, SUPERS_BYTES).encode();
    b[40] ^= 1;
    nv.write_at(&b, 0).unwrap();
    assert_eq!(
        replay_nvram(&nvd, &legs, SEG, UUID, 2).unwrap(),
        NvramReplay {
            replayed: 0,
            ignored: 1
        }
    );
    // Too small a file for the slots the record names.
    let e = replay_nvram(&nvd, &legs, SEG, UUID, 3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs"), "{e}");
}

#[test]
fn the_newest_generation_wins_when_two_slots_name_one_segment() {
    let (leg, legs) = physical(8);
    LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let (nv, nvd) = mem("nv", nvram_bytes(2, SEG));
    let (old, new) = (staged(UUID, 0, SUPERS_BYTES), staged(UUID, 0, SUPERS_BYTES));
    let new = SlotHeader {
        generation: old.generation + 1,
        ..new
    };
    // The newer one in slot 0, the older in slot 1: order is by generation, not slot.
    nv.write_at(&new.encode(), 0).unwrap();
    nv.write_at(&vec![2u8; SEG as usize], SLOT_HEADER_BLOCK)
        .unwrap();
    nv.write_at(&old.encode(), SLOT_HEADER_BLOCK + SEG).unwrap();
    nv.write_at(&vec![1u8; SEG as usize], 2 * SLOT_HEADER_BLOCK + SEG)
        .unwrap();
    assert_eq!(replay_nvram(&nvd, &legs, SEG, UUID, 2).unwrap().replayed, 2);
    let mut b = vec![0u8; SEG as usize];
    leg.read_at(&mut b, SUPERS_BYTES).unwrap();
    assert!(b.iter().all(|&x| x == 2));
    assert_eq!(slot(&nv, 0).unwrap().state, SlotState::Free);
    assert_eq!(slot(&nv, 1).unwrap().state, SlotState::Free);
}

#[test]
fn slot_headers_decode_or_give_a_typed_error() {
    let h = staged(UUID, 2, 123 * 4096);
    let b = h.encode();
    assert_eq!(b.len(), 4096);
    assert_eq!(&b[..8], b"RLNVSLOT");
    assert_eq!(SlotHeader::decode(&b), Ok(h));
    assert_eq!(SlotHeader::decode(&b[..75]), Err(SlotError::Short(75)));
    assert_eq!(SlotHeader::decode(&[0u8; 4096]), Err(SlotError::Blank));
    let mut x = b.clone();
    x[0] = b'X';
    assert_eq!(SlotHeader::decode(&x), Err(SlotError::BadMagic));
    let mut x = b.clone();
    x[8] = 2;
    assert_eq!(SlotHeader::decode(&x), Err(SlotError::BadVersion(2)));
    let mut x = b.clone();
    x[60] ^= 0x80;
    assert!(matches!(
        SlotHeader::decode(&x),
        Err(SlotError::BadCrc { .. })
    ));
    for (state, len, want) in [
        (7u32, SEG, SlotError::BadState(7)),
        (1, 0, SlotError::BadLength(0)),
        (1, 100, SlotError::BadLength(100)),
    ] {
        let mut x = b.clone();
        x[12..16].copy_from_slice(&state.to_le_bytes());
        x[64..72].copy_from_slice(&len.to_le_bytes());
        let crc = crc32c::crc32c(&x[..72]);
        x[72..76].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(SlotHeader::decode(&x), Err(want));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The fuzz target's stand-in: any bytes decode or are refused, never panic; a decoded
    /// header encodes back to one that decodes equal.
    #[test]
    fn any_bytes_decode_to_a_slot_header_or_are_refused(
        data in proptest::collection::vec(any::<u8>(), 0..200),
        keep_magic in any::<bool>(),
    ) {
        let mut data = data;
        if keep_magic && data.len() >= 12 {
            data[..8].copy_from_slice(b"RLNVSLOT");
            data[8..12].copy_from_slice(&1u32.to_le_bytes());
        }
        if let Ok(h) = decode_slot(&data) {
            prop_assert_eq!(SlotHeader::decode(&h.encode()), Ok(h));
        }
    }

    #[test]
    fn any_header_round_trips(
        staged_ in any::<bool>(),
        uuid in any::<[u8; 16]>(),
        generation in any::<u64>(),
        leg in any::<u32>(),
        leg_offset in any::<u64>(),
        pos in any::<u64>(),
        blocks in 1..4096u64,
    ) {
        let h = SlotHeader {
            state: if staged_ { SlotState::Staged } else { SlotState::Free },
            uuid, generation, leg, leg_offset, pos, len: blocks * 4096,
        };
        prop_assert_eq!(SlotHeader::decode(&h.encode()), Ok(h));
    }
}

/// On a disk-timed leg a commit costs no model disk time (the NVRAM takes it); the drain of
/// a sealed segment is one foreground write of the whole segment.
#[test]
fn on_a_timed_leg_only_the_drain_costs_disk_time() {
    use crate::member::timed::{TimedMember, TimingSpec};
    use raidlab::disk::Class;
    use raidlab::workload::Op;
    let region = SUPERS_BYTES + 8 * SEG;
    let spec = TimingSpec::parse("hp97560_rapid").unwrap();
    let timed = Arc::new(TimedMember::new(mem("leg", region).1, &spec).unwrap());
    let legs: Vec<Leg> = vec![(timed.clone() as Arc<dyn Member>, 0, region)];
    let (_, nvd) = mem("nv", nvram_bytes(4, SEG));
    let log = LogBackup::create(legs, UUID, SEG, 8)
        .unwrap()
        .with_nvram(nvd, 4)
        .unwrap();
    timed.record(100);
    let mut cache = Cache::default();
    for seq in 1..=2 {
        cache.write(&log, seq, seq).unwrap();
        log.commit().unwrap();
    }
    assert!(timed.records().is_empty(), "{:?}", timed.records());
    // The third batch enters segment 1: segment 0 is drained.
    cache.write(&log, 3, 3).unwrap();
    log.commit().unwrap();
    assert!(log.nv.as_ref().unwrap().wait_drained());
    let writes: Vec<_> = timed
        .records()
        .into_iter()
        .filter(|r| r.op == Op::Write)
        .map(|r| (r.sector, r.sectors, r.class))
        .collect();
    assert_eq!(
        writes,
        vec![(SUPERS_BYTES / 512, (SEG / 512) as u32, Class::Foreground)]
    );
}
