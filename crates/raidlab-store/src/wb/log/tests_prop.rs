//! Property tests: random put/commit/destage sequences against a model of the cache, and
//! random bytes where the log expects its own.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;

use super::super::backup::{Backup, Scan};
use super::super::format::{decode_batch, SUPERS_BYTES};
use super::tests::{mem, page, Cache, SEG, UUID};
use super::*;
use crate::member::Member;

/// The model of the cache's protocol: every put is staged, committed, then older versions
/// released as superseded; a destage releases all of a page's records.
#[derive(Debug, Clone)]
enum Op {
    Put(u64),
    Commit,
    Destage(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..6u64).prop_map(Op::Put),
        2 => Just(Op::Commit),
        1 => (0..6u64).prop_map(Op::Destage),
    ]
}

/// Newest (seq, data) per page among the records of a scan.
fn newest(scan: &Scan) -> BTreeMap<u64, (u64, Vec<u8>)> {
    let mut m: BTreeMap<u64, (u64, Vec<u8>)> = BTreeMap::new();
    for f in &scan.records {
        if m.get(&f.meta.lba).is_none_or(|(s, _)| f.meta.seq > *s) {
            m.insert(f.meta.lba, (f.meta.seq, f.data.clone()));
        }
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn scans_match_the_model(nlegs in 1..=3u64, ops in proptest::collection::vec(op(), 1..120)) {
        let region = SUPERS_BYTES + 8u64.div_ceil(nlegs) * SEG;
        let legs: Vec<Leg> = (0..nlegs).map(|i| (mem(&format!("m{i}"), region).1, 0, region)).collect();
        let log = LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
        let mut cache = Cache::default();
        // Per page: its records (seq, handle) not yet released.
        let mut recs: HashMap<u64, Vec<(u64, Handle)>> = HashMap::new();
        let mut destaged: HashMap<u64, u64> = HashMap::new();
        let (mut seq, mut pending) = (0u64, 0);
        for op in ops {
            let op = if pending >= 4 { Op::Commit } else { op };
            match op {
                Op::Put(lba) => {
                    seq += 1;
                    let h = cache.write(&log, lba, seq).unwrap();
                    recs.entry(lba).or_default().push((seq, h));
                    pending += 1;
                }
                Op::Destage(lba) if pending == 0 && cache.0.contains_key(&lba) => {
                    let rs = recs.remove(&lba).unwrap_or_default();
                    for (i, (_, h)) in rs.iter().enumerate() {
                        log.release(*h, i + 1 < rs.len());
                    }
                    destaged.insert(lba, cache.0.remove(&lba).unwrap().0);
                }
                Op::Destage(_) => {}
                Op::Commit => {
                    log.commit().unwrap();
                    pending = 0;
                    for rs in recs.values_mut() {
                        let keep = rs.pop().unwrap();
                        for (_, h) in rs.drain(..) {
                            log.release(h, true);
                        }
                        rs.push(keep);
                    }
                    let live: u64 = recs.values().map(|r| r.len() as u64).sum();
                    prop_assert_eq!(log.stats().live, live);
                    for scan in [log.scan().unwrap(), LogBackup::open(legs.clone(), UUID).unwrap().scan().unwrap()] {
                        prop_assert_eq!(scan.torn, 0);
                        let got = newest(&scan);
                        for (lba, v) in &cache.0 {
                            prop_assert_eq!(got.get(lba), Some(v), "dirty page {}", lba);
                        }
                        for (lba, (s, d)) in &got {
                            prop_assert_eq!(d, &page(*lba, *s));
                            if !cache.0.contains_key(lba) {
                                prop_assert_eq!(destaged.get(lba), Some(s), "released page {}", lba);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn random_bytes_never_panic(
        block in proptest::collection::vec(any::<u8>(), BLOCK),
        epoch in any::<u64>(),
        pos in any::<u64>(),
        seed in any::<u64>(),
        segs in 1..6u64,
    ) {
        // A header that decodes encodes back (its releases after its records) to one that
        // decodes equal (the fuzz target's check).
        if let Some(b) = decode_batch(&block, epoch, pos) {
            let mut entries = b.records.clone();
            entries.extend(b.released.iter().map(|&p| format::release_entry(p)));
            let mut again = vec![0u8; BLOCK];
            format::encode_batch(epoch, pos, b.next, &entries, &mut again);
            prop_assert_eq!(decode_batch(&again, epoch, pos), Some(b));
        }
        // A valid superblock over random segments: open and scan stay bounded.
        let region = SUPERS_BYTES + segs * SEG;
        let (m, d) = mem("r", region);
        let mut x = seed | 1;
        let junk: Vec<u8> = (0..region).map(|_| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 }).collect();
        m.write_at(&junk, 0).unwrap();
        let geo = Geometry::new(vec![(d.clone(), 0, region)], SEG).unwrap();
        let s = geo.super_for(0, 1, epoch, (seed % segs) * SEG, UUID);
        backup::write_super(&d, 0, &s).unwrap();
        // A header of this epoch at the tail with a random `next`.
        let mut h = vec![0u8; BLOCK];
        format::encode_batch(epoch, s.tail, s.tail + BLOCK64 * (1 + seed % 8), &[], &mut h);
        m.write_at(&h, SUPERS_BYTES + s.tail).unwrap();
        let log = LogBackup::open(vec![(d.clone(), 0, region)], UUID).unwrap();
        let scan = log.scan().unwrap();
        prop_assert!(scan.records.len() as u64 <= segs * SEG / BLOCK64);
        m.write_at(&junk[..SUPER_BYTES], 0).unwrap();
        m.write_at(&junk[SUPER_BYTES..2 * SUPER_BYTES], SUPER_BYTES as u64).unwrap();
        prop_assert!(LogBackup::open(vec![(d, 0, region)], UUID).is_err());
    }
}
