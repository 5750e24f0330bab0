//! Worked examples of the log with exact positions, and a model-based proptest.
//!
//! Most tests use 16 KiB segments (4 blocks): a batch holds at most 3 records, and one
//! record per commit gives two batches per segment (at +0 and +8 KiB).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::super::backup::{read_supers, Backup, LiveData, Scan};
use super::super::format::{decode_batch, newest_super, RecKind, RecMeta, Super, SUPERS_BYTES};
use super::*;
use crate::member::{FaultMember, MemMember, Member};

const KIB: u64 = 1024;
pub(super) const SEG: u64 = 16 * KIB;
pub(super) const UUID: [u8; 16] = [7; 16];

pub(super) fn page(lba: u64, seq: u64) -> Vec<u8> {
    let mut b = vec![(lba as u8) ^ (seq as u8); BLOCK];
    b[..8].copy_from_slice(&lba.to_le_bytes());
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b
}

pub(super) fn data(lba: u64, seq: u64) -> RecMeta {
    RecMeta {
        lba,
        seq,
        kind: RecKind::Data,
    }
}

/// A destage's image of `lba` (the old contents of a lost unit it protects).
pub(super) fn image(lba: u64, seq: u64) -> RecMeta {
    RecMeta {
        lba,
        seq,
        kind: RecKind::Image,
    }
}

/// The primary cache: each dirty page's newest version.
#[derive(Default)]
pub(super) struct Cache(pub(super) BTreeMap<u64, (u64, Vec<u8>)>);

impl LiveData for Cache {
    fn newest(&self, lba: u64) -> Option<(u64, &[u8])> {
        self.0.get(&lba).map(|(s, d)| (*s, d.as_slice()))
    }
}

impl Cache {
    /// Dirty `lba` with version `seq` and put it in the log.
    pub(super) fn write(&mut self, log: &LogBackup, lba: u64, seq: u64) -> io::Result<Handle> {
        self.0.insert(lba, (seq, page(lba, seq)));
        log.put(data(lba, seq), &page(lba, seq), self)
    }
}

pub(super) fn mem(name: &str, len: u64) -> (Arc<MemMember>, Arc<dyn Member>) {
    let m = Arc::new(MemMember::new(name, len));
    let d: Arc<dyn Member> = m.clone();
    (m, d)
}

/// A physical log of `segs` segments of 16 KiB at offset 0 of one member.
pub(super) fn physical(segs: u64) -> (Arc<MemMember>, Vec<Leg>) {
    let region = SUPERS_BYTES + segs * SEG;
    let (m, d) = mem("log0", region);
    (m, vec![(d, 0, region)])
}

pub(super) fn seqs(scan: &Scan) -> Vec<(u64, u64)> {
    scan.records
        .iter()
        .map(|f| (f.meta.lba, f.meta.seq))
        .collect()
}

pub(super) fn the_super(leg: &Leg) -> Super {
    let (a, b) = read_supers(&leg.0, leg.1).unwrap();
    newest_super(&a, &b).unwrap()
}

/// The batch header at virtual position `pos`, read from its leg.
pub(super) fn header_at(log: &LogBackup, leg: usize, off: u64, pos: u64) -> Option<format::Batch> {
    let mut b = vec![0u8; BLOCK];
    log.geo.legs[leg].0.read_at(&mut b, off).unwrap();
    decode_batch(&b, the_super(&log.geo.legs[0]).epoch, pos)
}

#[test]
fn round_trip_positions_and_next_pointers() {
    let (_, legs) = physical(8);
    let log = LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    cache.write(&log, 5, 1).unwrap();
    cache.write(&log, 9, 2).unwrap();
    log.commit().unwrap();
    // Header + 2 data blocks end at 12 KiB: one block left, too small, so next skips.
    let b = header_at(&log, 0, SUPERS_BYTES, 0).unwrap();
    assert_eq!((b.pos, b.next, b.records.len()), (0, 16384, 2));
    cache.write(&log, 5, 3).unwrap();
    log.commit().unwrap();
    let b = header_at(&log, 0, SUPERS_BYTES + 16384, 16384).unwrap();
    assert_eq!((b.next, b.records.len()), (24576, 1));
    let scan = log.scan().unwrap();
    assert_eq!(seqs(&scan), vec![(5, 1), (9, 2), (5, 3)]);
    assert_eq!(scan.records[2].data, page(5, 3));
    assert_eq!(scan.torn, 0);
    let st = log.stats();
    assert_eq!((st.records, st.commits, st.live), (3, 2, 3));
    assert_eq!(st.bytes_written, 4096 + 3 * 4096 + 2 * 4096);
    // Capacity: 6 segments (8 less the cleaner's 2) of 3 records.
    assert_eq!(st.capacity, 18);
    assert_eq!(
        log.describe(),
        "log (physical, 1 leg, 128 KiB, 8 segments of 16 KiB; 6 free)"
    );
    let again = LogBackup::open(legs, UUID).unwrap();
    assert_eq!(seqs(&again.scan().unwrap()), vec![(5, 1), (9, 2), (5, 3)]);
}

#[test]
fn a_full_batch_is_written_without_a_commit() {
    let (_, legs) = physical(8);
    let log = LogBackup::create(legs, UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    for lba in 0..3 {
        cache.write(&log, lba, lba + 1).unwrap();
    }
    // Three records fill the first segment's batch: written (not synced) at once.
    let b = header_at(&log, 0, SUPERS_BYTES, 0).unwrap();
    assert_eq!((b.next, b.records.len()), (16384, 3));
    assert_eq!(log.stats().commits, 0);
    cache.write(&log, 7, 4).unwrap();
    assert!(header_at(&log, 0, SUPERS_BYTES + 16384, 16384).is_none());
    log.commit().unwrap();
    assert_eq!(
        seqs(&log.scan().unwrap()),
        vec![(0, 1), (1, 2), (2, 3), (7, 4)]
    );
}

#[test]
fn newest_version_wins_after_re_puts() {
    let (_, legs) = physical(8);
    let log = LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    let mut prev = None;
    for seq in 1..=5 {
        let h = cache.write(&log, 3, seq).unwrap();
        cache.write(&log, 100 + seq, 10 + seq).unwrap();
        log.commit().unwrap();
        if let Some(p) = prev.replace(h) {
            log.release(p, true);
        }
    }
    let scan = LogBackup::open(legs, UUID).unwrap().scan().unwrap();
    let newest = scan
        .records
        .iter()
        .filter(|f| f.meta.lba == 3)
        .max_by_key(|f| f.meta.seq)
        .unwrap();
    assert_eq!((newest.meta.seq, &newest.data), (5, &page(3, 5)));
}

#[test]
fn a_torn_last_batch_is_ignored_and_counted() {
    let (m, legs) = physical(8);
    let log = LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    cache.write(&log, 1, 1).unwrap();
    log.commit().unwrap();
    cache.write(&log, 2, 2).unwrap();
    log.commit().unwrap();
    // Batch 1 at 0 (next 8 KiB), batch 2 at 8 KiB: its data block is at 12 KiB.
    let b = header_at(&log, 0, SUPERS_BYTES + 8192, 8192).unwrap();
    assert_eq!(b.next, 16384);
    m.write_at(&[0xee; 512], SUPERS_BYTES + 12288).unwrap();
    let scan = LogBackup::open(legs.clone(), UUID).unwrap().scan().unwrap();
    assert_eq!((seqs(&scan), scan.torn), (vec![(1, 1)], 1));
    // A torn header ends the chain there.
    m.write_at(&[0xee; 512], SUPERS_BYTES + 8192).unwrap();
    let scan = LogBackup::open(legs, UUID).unwrap().scan().unwrap();
    assert_eq!((seqs(&scan), scan.torn), (vec![(1, 1)], 0));
}

#[test]
fn a_batch_of_the_previous_lap_is_not_replayed() {
    let (_, legs) = physical(8);
    let log = LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    let mut prev = None;
    // Commit i puts version i of page 0 at (i - 1) * 8 KiB: 20 commits pass the 128 KiB
    // lap, and each releases the version before.
    for seq in 1..=20 {
        let h = cache.write(&log, 0, seq).unwrap();
        log.commit().unwrap();
        if let Some(p) = prev.replace(h) {
            log.release(p, true);
        }
    }
    // The tail followed the live version to 144 KiB (segment 9's start); the head is at
    // 160 KiB, where the lap-0 batch of position 32 KiB still sits.
    let st = log.lock();
    assert_eq!((st.tail, st.head, st.super_tail), (147456, 163840, 114688));
    drop(st);
    assert_eq!(seqs(&log.scan().unwrap()), vec![(0, 19), (0, 20)]);
    assert!(header_at(&log, 0, SUPERS_BYTES + 32768, 32768).is_some());
    // Recovery starts at the tail the superblock holds (written once, before the head
    // entered segment 8 and wrapped onto segment 0): 112 KiB.
    assert_eq!(the_super(&legs[0]).tail, 114688);
    let scan = LogBackup::open(legs, UUID).unwrap().scan().unwrap();
    let want: Vec<_> = (15..=20).map(|s| (0, s)).collect();
    assert_eq!(seqs(&scan), want);
    assert_eq!(log.stats().gc_segments, 0);
}

#[test]
fn a_batch_of_the_previous_epoch_is_not_replayed_and_reset_hides_everything() {
    let (_, legs) = physical(8);
    let log = LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    for lba in 1..=3 {
        cache.write(&log, lba, lba).unwrap();
        log.commit().unwrap();
    }
    let epoch = the_super(&legs[0]).epoch;
    drop(log);
    // Recovery: open, scan, reset. The new epoch starts at the old tail (0).
    let log = LogBackup::open(legs.clone(), UUID).unwrap();
    assert_eq!(seqs(&log.scan().unwrap()), vec![(1, 1), (2, 2), (3, 3)]);
    let e = cache.write(&log, 9, 9).unwrap_err();
    assert!(e.to_string().contains("reset"), "{e}");
    log.reset().unwrap();
    assert_eq!(the_super(&legs[0]).epoch, epoch + 1);
    assert!(log.scan().unwrap().records.is_empty());
    assert!(LogBackup::open(legs.clone(), UUID)
        .unwrap()
        .scan()
        .unwrap()
        .records
        .is_empty());
    // One new batch at 0, next 8 KiB: the old epoch's batch there does not decode.
    cache.write(&log, 7, 10).unwrap();
    log.commit().unwrap();
    assert!(header_at(&log, 0, SUPERS_BYTES + 8192, 8192).is_none());
    let scan = LogBackup::open(legs, UUID).unwrap().scan().unwrap();
    assert_eq!((seqs(&scan), scan.torn), (vec![(7, 10)], 0));
}

#[test]
fn gc_copies_live_records_from_the_cache_and_frees_segments() {
    let (_, legs) = physical(8);
    let log = LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    // Four cold pages, one a commit: segments 0 and 1.
    for lba in 0..4 {
        cache.write(&log, lba, lba + 1).unwrap();
        log.commit().unwrap();
    }
    // A hot page rewritten, each version releasing the one before: hot i (seq 5 + i) at
    // 32 KiB + i * 8 KiB. Hot 9 finds 1 free segment (head at 104 KiB in segment 6).
    let mut prev = None;
    for i in 0..10 {
        let h = cache.write(&log, 10, 5 + i).unwrap();
        log.commit().unwrap();
        if let Some(p) = prev.replace(h) {
            log.release(p, true);
        }
    }
    // The cleaner copied page 0 into 104 KiB's batch and pages 1-3 into 112 KiB's, freed
    // segments 0 and 1, and the tail moved over the hot garbage to segment 6 (96 KiB).
    let st = log.stats();
    assert_eq!((st.gc_segments, st.gc_records, st.live), (2, 4, 5));
    let s = log.lock();
    assert_eq!((s.tail, s.super_tail, s.head), (98304, 98304, 139264));
    drop(s);
    assert_eq!(
        header_at(&log, 0, SUPERS_BYTES + 106496, 106496)
            .unwrap()
            .records
            .len(),
        1
    );
    assert_eq!(
        header_at(&log, 0, SUPERS_BYTES + 114688, 114688)
            .unwrap()
            .next,
        131072
    );
    let want = vec![(10, 13), (0, 1), (1, 2), (2, 3), (3, 4), (10, 14)];
    assert_eq!(seqs(&log.scan().unwrap()), want);
    let scan = LogBackup::open(legs, UUID).unwrap().scan().unwrap();
    assert_eq!(seqs(&scan), want);
    for f in &scan.records {
        assert_eq!(f.data, page(f.meta.lba, f.meta.seq));
    }
    assert_eq!(
        log.describe(),
        "log (physical, 1 leg, 128 KiB, 8 segments of 16 KiB; 5 free)"
    );
}

/// Page 10 rewritten `n` times (versions 5..), each commit releasing the version before:
/// hot garbage that moves the head on until the cleaner runs.
pub(super) fn rewrite_hot(log: &LogBackup, cache: &mut Cache, n: u64) {
    let mut prev = None;
    for i in 0..n {
        let h = cache.write(log, 10, 5 + i).unwrap();
        log.commit().unwrap();
        if let Some(p) = prev.replace(h) {
            log.release(p, true);
        }
    }
}

#[test]
fn gc_copies_carry_the_cache_s_newest_version() {
    let (_, legs) = physical(8);
    let log = LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    let cold = cache.write(&log, 0, 1).unwrap();
    log.commit().unwrap();
    // Page 0's version 2 is in the cache but not yet in the log when the cleaner runs.
    cache.0.insert(0, (2, page(0, 2)));
    rewrite_hot(&log, &mut cache, 13);
    assert_eq!(log.stats().gc_records, 1);
    let scan = log.scan().unwrap();
    let zero: Vec<_> = scan.records.iter().filter(|f| f.meta.lba == 0).collect();
    assert_eq!(zero.len(), 1);
    assert_eq!((zero[0].meta.seq, &zero[0].data), (2, &page(0, 2)));
    // The handle now names the copy.
    log.release(cold, true);
    assert_eq!(log.stats().live, 1);
}

#[test]
fn logical_mode_stripes_segments_round_robin_over_three_legs() {
    let base = 64 * KIB;
    let region = SUPERS_BYTES + 4 * SEG;
    let mems: Vec<_> = (0..3)
        .map(|i| mem(&format!("m{i}"), base + region))
        .collect();
    let legs: Vec<Leg> = mems
        .iter()
        .map(|(_, d)| (d.clone(), base, region))
        .collect();
    let log = LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    assert_eq!(
        log.describe(),
        "log (logical, 3 legs, 192 KiB, 12 segments of 16 KiB; 12 free)"
    );
    let mut cache = Cache::default();
    // Three records fill a segment's batch: batch k is segment k.
    for k in 0..4u64 {
        for j in 0..3 {
            cache.write(&log, 10 * k + j, 3 * k + j + 1).unwrap();
        }
    }
    log.commit().unwrap();
    for k in 0..4u64 {
        let (leg, off) = ((k % 3) as usize, base + SUPERS_BYTES + (k / 3) * SEG);
        let b = header_at(&log, leg, off, k * SEG).unwrap();
        assert_eq!((b.next, b.records[0].0.lba), ((k + 1) * SEG, 10 * k));
        let other = (leg + 1) % 3;
        assert!(header_at(&log, other, off, k * SEG).is_none());
    }
    assert_eq!(the_super(&legs[1]).members, vec![1, 2, 0]);
    assert_eq!(the_super(&legs[2]).members, vec![2, 0, 1]);
    let scan = LogBackup::open(legs.clone(), UUID).unwrap().scan().unwrap();
    assert_eq!(scan.records.len(), 12);
    // Legs in another order are refused.
    let swapped = vec![legs[1].clone(), legs[0].clone(), legs[2].clone()];
    let e = LogBackup::open(swapped, UUID).err().unwrap().to_string();
    assert!(e.starts_with("m1: ") && e.contains("leg 0 of 3"), "{e}");
}

#[test]
fn a_failing_leg_fails_commit_and_every_later_put() {
    let (_, inner) = mem("bad", SUPERS_BYTES + 8 * SEG);
    let fault = Arc::new(FaultMember::new(inner));
    let d: Arc<dyn Member> = fault.clone();
    let log = LogBackup::create(vec![(d, 0, SUPERS_BYTES + 8 * SEG)], UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    cache.write(&log, 1, 1).unwrap();
    log.commit().unwrap();
    // The put fills its batch (one record fits at 8 KiB) and writes it; the commit's
    // fdatasync fails.
    cache.write(&log, 2, 2).unwrap();
    let ops = fault.ops();
    fault.fail_after_ops(0);
    let e = log.commit().unwrap_err();
    assert_eq!(fault.ops(), ops + 1, "one sync, no write");
    assert!(e.to_string().contains("bad"), "{e}");
    fault.heal();
    let e = cache.write(&log, 3, 3).unwrap_err();
    assert!(e.to_string().contains("lost"), "{e}");
    assert!(log.commit().is_err());

    // A write failure in a logical log: leg 1 holds segment 1.
    let (_, good) = mem("m0", SUPERS_BYTES + 4 * SEG);
    let (_, inner) = mem("m1", SUPERS_BYTES + 4 * SEG);
    let fault = Arc::new(FaultMember::new(inner));
    let d1: Arc<dyn Member> = fault.clone();
    let r = SUPERS_BYTES + 4 * SEG;
    let log = LogBackup::create(vec![(good, 0, r), (d1, 0, r)], UUID, SEG, 8).unwrap();
    for lba in 0..3 {
        cache.write(&log, lba, lba + 10).unwrap();
    }
    fault.fail_now();
    cache.write(&log, 5, 20).unwrap();
    assert!(log.commit().is_err());
    assert!(cache.write(&log, 6, 21).is_err());
}

#[test]
fn open_and_create_reject_what_is_not_this_log() {
    let (m, legs) = physical(8);
    LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let e = LogBackup::open(legs.clone(), [9; 16])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with("log0: ") && e.contains("another array"),
        "{e}"
    );
    // A region too small for its superblocks and a segment.
    let small = vec![(legs[0].0.clone(), 0, 3 * 4096)];
    let e = LogBackup::open(small, UUID).err().unwrap().to_string();
    assert!(e.starts_with("log0: ") && e.contains("too small"), "{e}");
    // A region that changed size.
    let fewer = vec![(legs[0].0.clone(), 0, SUPERS_BYTES + 6 * SEG)];
    let e = LogBackup::open(fewer, UUID).err().unwrap().to_string();
    assert!(e.contains("log area changed"), "{e}");
    // Both copies torn.
    m.write_at(&[1; 64], 100).unwrap();
    m.write_at(&[1; 64], 4096 + 100).unwrap();
    let e = LogBackup::open(legs, UUID).err().unwrap().to_string();
    assert!(
        e.starts_with("log0: ") && e.contains("no valid log superblock"),
        "{e}"
    );
    // Garbage.
    let (g, d) = mem("junk", SUPERS_BYTES + 8 * SEG);
    let junk: Vec<u8> = (0..g.len_bytes()).map(|i| (i * 131 % 251) as u8).collect();
    g.write_at(&junk, 0).unwrap();
    let e = LogBackup::open(vec![(d, 0, g.len_bytes())], UUID)
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("junk: ") && e.contains("bad magic"), "{e}");
    // Too small for the cache: 16 pages need 8 + 4 segments of 16 KiB.
    let (_, legs) = physical(8);
    let e = LogBackup::create(legs, UUID, SEG, 16)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with("log0: ") && e.contains("need 12") && e.contains("at least 204800 bytes"),
        "{e}"
    );
}

#[test]
fn concurrent_commits_share_syncs() {
    let (_, legs) = physical(64);
    let log = Arc::new(LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                let cache = Cache::default();
                let mut hs = Vec::new();
                for i in 0..20u64 {
                    let (lba, seq) = (t, 1 + t + 4 * i);
                    hs.push(log.put(data(lba, seq), &page(lba, seq), &cache).unwrap());
                    log.commit().unwrap();
                    if hs.len() > 1 {
                        log.release(hs.remove(0), true);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let scan = LogBackup::open(legs, UUID).unwrap().scan().unwrap();
    let mut newest = BTreeMap::new();
    for f in &scan.records {
        let e = newest.entry(f.meta.lba).or_insert(0);
        *e = (*e).max(f.meta.seq);
    }
    let want: BTreeMap<u64, u64> = (0..4).map(|t| (t, 1 + t + 76)).collect();
    assert_eq!(newest, want);
    assert!(log.stats().commits <= 80);
}

#[test]
fn a_log_full_of_live_pages_says_so_and_keeps_every_committed_page() {
    let (_, legs) = physical(8);
    let log = LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    let mut err = None;
    for lba in 0..40 {
        match cache.write(&log, lba, lba + 1) {
            Ok(_) => log.commit().unwrap(),
            Err(e) => {
                err = Some((lba, e.to_string()));
                break;
            }
        }
    }
    // Two records a segment (one a commit), copied three a segment by the cleaner: the
    // 22nd page finds no room.
    let (lba, e) = err.unwrap();
    assert!(e.contains("cannot make room"), "{e}");
    assert_eq!(lba, 21, "{:?}", log.stats());
    let scan = LogBackup::open(legs, UUID).unwrap().scan().unwrap();
    let got: std::collections::BTreeSet<u64> = scan.records.iter().map(|f| f.meta.lba).collect();
    assert_eq!(got, (0..lba).collect());
}
