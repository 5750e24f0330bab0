//! The cleaner against the write path's races: a superseded record whose page already left
//! the cache is dropped, not an error, and a destaged record stays strict.

use super::super::backup::Backup;
use super::tests::{physical, rewrite_hot, seqs, Cache, SEG, UUID};
use super::*;

#[test]
fn gc_drops_a_superseded_record_whose_page_left_the_cache() {
    let (_, legs) = physical(8);
    let log = LogBackup::create(legs.clone(), UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    // Page 0, version 1, superseded by version 2; version 2 is destaged (released) and the
    // page leaves the cache, while the writer has yet to release version 1.
    let old = cache.write(&log, 0, 1).unwrap();
    log.commit().unwrap();
    let newer = cache.write(&log, 0, 2).unwrap();
    log.commit().unwrap();
    log.release_destaged(&[newer]);
    cache.0.remove(&0);
    // A hot page fills the log until the cleaner reaches version 1's segment.
    rewrite_hot(&log, &mut cache, 12);
    let st = log.stats();
    assert!(st.gc_segments >= 1, "{st:?}");
    assert!(!log.lock().table.is_live(old), "the cleaner dropped it");
    assert!(seqs(&log.scan().unwrap()).iter().all(|&(lba, _)| lba == 10));
    // The writer's late release of it is a no-op, not a double release.
    log.release(old, true);
    assert_eq!(log.stats().live, 1);
}

#[test]
#[should_panic(expected = "is not live")]
fn a_destaged_record_released_twice_is_a_caller_bug() {
    let (_, legs) = physical(8);
    let log = LogBackup::create(legs, UUID, SEG, 8).unwrap();
    let mut cache = Cache::default();
    let h = cache.write(&log, 0, 1).unwrap();
    log.commit().unwrap();
    log.release_destaged(&[h]);
    log.release_destaged(&[h]);
}
