//! The cleaner against the write path's races: a superseded record whose page already left
//! the cache is dropped, not an error, and a destaged record stays strict; and the tail's
//! persistence against a commit's unlocked sync.

use std::sync::Arc;

use super::super::backup::Backup;
use super::super::format::SUPERS_BYTES;
use super::tests::{physical, rewrite_hot, seqs, Cache, SEG, UUID};
use super::*;
use crate::member::{MemMember, Member};

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

/// A log leg that keeps track of which batch writes a finished sync covers, and can hold
/// one sync back until the test lets it go.
#[derive(Debug)]
struct Ordered {
    inner: Arc<MemMember>,
    st: std::sync::Mutex<OrderState>,
    cv: std::sync::Condvar,
}

#[derive(Debug, Default)]
struct OrderState {
    /// Batch writes so far, and how many of the first of them a finished sync covers.
    writes: usize,
    durable: usize,
    /// The first sync after `hold` is set (`taken`) waits until it is cleared; `held` while
    /// it waits. Other syncs pass.
    hold: bool,
    taken: bool,
    held: bool,
    /// A superblock write found batch writes no finished sync covered: (writes, durable).
    early_super: Option<(usize, usize)>,
}

impl Member for Ordered {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut st = self.st.lock().unwrap();
        if offset < SUPERS_BYTES {
            if st.durable < st.writes && st.early_super.is_none() {
                st.early_super = Some((st.writes, st.durable));
            }
        } else {
            st.writes += 1;
        }
        self.inner.write_at(buf, offset)
    }
    fn sync(&self) -> io::Result<()> {
        let mut st = self.st.lock().unwrap();
        let covers = st.writes;
        if st.hold && !st.taken {
            st.taken = true;
            st.held = true;
            self.cv.notify_all();
            while st.hold {
                st = self.cv.wait(st).unwrap();
            }
            st.held = false;
        }
        st.durable = st.durable.max(covers);
        Ok(())
    }
    fn len_bytes(&self) -> u64 {
        self.inner.len_bytes()
    }
    fn path(&self) -> &str {
        self.inner.path()
    }
    fn identity(&self) -> crate::member::DevId {
        self.inner.identity()
    }
}

#[test]
fn the_tail_is_persisted_only_after_every_batch_written_is_synced() {
    // A commit's leader writes its batch and takes the legs to sync, then syncs them
    // without the lock. If the head laps the superblock's tail meanwhile, the new tail must
    // still wait for that batch to be durable: it may hold the cleaner's copies of records
    // whose originals the new tail gives up.
    let (m, legs) = physical(8);
    let leg = Arc::new(Ordered {
        inner: m,
        st: Default::default(),
        cv: Default::default(),
    });
    let region = legs[0].2;
    let dev: Arc<dyn Member> = leg.clone();
    let log = Arc::new(LogBackup::create(vec![(dev, 0, region)], UUID, SEG, 8).unwrap());
    let mut cache = Cache::default();
    // Up to the second half of the last segment of the first lap: a batch of one record
    // there ends the segment, and the next segment the head enters persists the tail.
    let mut prev = None;
    let mut seq = 1;
    for _ in 0..200 {
        let st = log.lock();
        let next_seg = st.head - st.head % SEG + SEG;
        if st.head % SEG == SEG / 2 && st.super_tail + log.geo.log_bytes() < next_seg + SEG {
            break;
        }
        drop(st);
        let h = cache.write(&log, 10, seq).unwrap();
        seq += 1;
        log.commit().unwrap();
        if let Some(p) = prev.replace(h) {
            log.release(p, true);
        }
    }
    let tail_before = log.lock().super_tail;
    // A leader writes a staged record's batch and holds in its sync.
    let h = cache.write(&log, 11, seq).unwrap();
    seq += 1;
    leg.st.lock().unwrap().hold = true;
    let leader = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || log.commit())
    };
    {
        let mut st = leg.st.lock().unwrap();
        while !st.held {
            st = leg.cv.wait(st).unwrap();
        }
    }
    // Meanwhile writers fill the segment and the head enters the next one.
    for _ in 0..50 {
        if log.lock().super_tail != tail_before {
            break;
        }
        let h = cache.write(&log, 10, seq).unwrap();
        seq += 1;
        if let Some(p) = prev.replace(h) {
            log.release(p, true);
        }
    }
    assert_ne!(log.lock().super_tail, tail_before, "the tail was persisted");
    {
        let mut st = leg.st.lock().unwrap();
        st.hold = false;
        leg.cv.notify_all();
    }
    leader.join().unwrap().unwrap();
    log.release(h, true);
    let st = leg.st.lock().unwrap();
    assert_eq!(
        st.early_super, None,
        "a superblock was written before the batches it follows were synced (batch writes, synced)"
    );
}
