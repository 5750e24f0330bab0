//! Cache failures on random streams: after any single failure (primary, backup memory, cache
//! disk, one data disk of a logical cache disk) at a random point and the recovery, no acknowledged write is lost and the backup's
//! invariants hold; and a worked example of a recovery during garbage collection.

use std::collections::HashSet;

use proptest::prelude::*;

use super::tests::{cache, spec, step, write_all, Step};
use super::{BackupSpec, CacheFailure, Rapid, SegState};
use crate::cache::write::{Backup, BackupIo, OrderKind, WriteCache};

const PAGES: u64 = 96;

/// The write cache and what a correct cache must still hold: pages written since the last
/// completed destage that carried their latest version.
struct Harness {
    c: WriteCache,
    flights: Vec<(u32, u64)>,
    log: Vec<BackupIo>,
    pending: HashSet<u64>,
    /// A failed member of a logical cache disk, and the members: no transfer may go to it.
    dead: Option<(u32, u32)>,
}

impl Harness {
    fn step(&mut self, s: &Step) {
        match *s {
            Step::Write(lba) => {
                if self.c.backup().can_accept(lba) && self.c.write(lba).is_some() {
                    self.pending.insert(lba);
                }
            }
            Step::Destage => {
                if let Some(d) = self.c.start_destage() {
                    self.flights.push((d.slot, d.first));
                }
            }
            Step::Finish(i) => {
                if self.flights.is_empty() {
                    return;
                }
                let (slot, first) = self.flights.remove(i % self.flights.len());
                let bits = self.c.flight_bits(slot).to_vec();
                self.c.finish_destage(slot);
                for i in 0..self.c.group_pages() {
                    let lba = first + i;
                    // On disk with its latest version unless rewritten meanwhile.
                    if bits[(i / 64) as usize] >> (i % 64) & 1 != 0 && !self.c.page_state(lba).0 {
                        self.pending.remove(&lba);
                    }
                }
            }
            Step::LogDone(i) => {
                self.take_ios();
                if !self.log.is_empty() {
                    let w = self.log.remove(i % self.log.len());
                    self.c.backup_mut().io_done(w);
                }
            }
            Step::Idle(b) => self.c.set_idle(b),
        }
    }

    fn take_ios(&mut self) {
        while let Some(w) = self.c.backup_mut().next_io() {
            if let Some((m, n)) = self.dead {
                assert_ne!(w.segment % n, m, "a log transfer to the failed member");
            }
            self.log.push(w);
        }
    }

    /// Member `m` of `n` fails: its transfers in flight are lost, its segments retired.
    fn fail_member(&mut self, m: u32, n: u32) -> u64 {
        self.take_ios();
        self.log.retain(|w| w.segment % n != m);
        self.dead = Some((m, n));
        self.c.backup_mut().log_member_failed(m, n, true).pages
    }

    /// Every acknowledged page is still in the cache, and the backup is consistent with it
    /// (pages in `lost` lost their newest version and keep at most an older one in flight,
    /// whose copy was superseded).
    fn check(&self, mirrored: bool, lost: &[u64]) -> Result<(), TestCaseError> {
        for &lba in &self.pending {
            prop_assert!(self.c.holds(lba), "acknowledged page {} lost", lba);
        }
        for lba in 0..PAGES {
            let want = u32::from(mirrored && self.c.holds(lba) && !lost.contains(&lba));
            prop_assert_eq!(self.c.backup().copies(lba), want, "page {}", lba);
        }
        prop_assert_eq!(self.c.backup().check(), Ok(()));
        Ok(())
    }
}

proptest! {
    #[test]
    fn no_acknowledged_write_is_lost_after_one_cache_failure(
        before in proptest::collection::vec(step(), 1..300),
        after in proptest::collection::vec(step(), 0..200),
        rapid in any::<bool>(),
        lru in any::<bool>(),
        kind in 0u8..4,
        member in 0u32..4,
        members in 2u32..5,
    ) {
        let backup = if rapid {
            BackupSpec::Rapid(spec(2, 40, 4))
        } else {
            BackupSpec::Dual
        };
        // Kind 3: data disk `member` of `members` under a logical cache disk (RAPID only).
        let member_lost = kind == 3 && rapid;
        let failure = match kind {
            0 => CacheFailure::Primary,
            1 => CacheFailure::Backup,
            2 if rapid => CacheFailure::CacheDisk,
            _ => CacheFailure::Primary,
        };
        let member = member % members;
        let order = if lru { OrderKind::Lrw } else { OrderKind::Wow };
        let mut h = Harness {
            c: cache(&backup, order),
            flights: Vec::new(),
            log: Vec::new(),
            pending: HashSet::new(),
            dead: None,
        };
        for s in &before {
            h.step(s);
        }
        h.take_ios();
        let mut dirty_before = Vec::new();
        h.c.dirty_pages(&mut dirty_before);
        let held = (0..PAGES).filter(|&l| h.c.holds(l)).count() as u64;
        match failure {
            _ if member_lost => {
                let exposed = h.fail_member(member, members);
                prop_assert!(h.c.backup().unprotected() <= exposed);
            }
            CacheFailure::Primary => {
                prop_assert_eq!(h.c.discard_lost(), 0);
                let r = h.c.backup_mut().primary_failed();
                prop_assert_eq!(r.memory_pages + r.disk_pages, held);
                // The recovery reads, one per segment, complete.
                let mut reads = 0;
                while let Some(w) = h.c.backup_mut().next_io() {
                    prop_assert!(w.read);
                    h.c.backup_mut().io_done(w);
                    reads += 1;
                }
                prop_assert_eq!(reads, r.segment_reads);
            }
            CacheFailure::Backup => {
                let e = h.c.backup_mut().backup_failed(failure, true);
                h.c.lend(e.borrowed_pages);
            }
            CacheFailure::CacheDisk => {
                // Transfers on the lost disk never complete.
                h.log.clear();
                h.c.backup_mut().backup_failed(failure, true);
            }
        }
        let mut dirty_after = Vec::new();
        h.c.dirty_pages(&mut dirty_after);
        prop_assert_eq!(&dirty_after, &dirty_before);
        let mirrored = rapid || failure != CacheFailure::Backup;
        h.check(mirrored, &[])?;
        for s in &after {
            h.step(s);
            h.check(mirrored, &[])?;
        }
        // Completing the log re-protects every page that lost its copy with the cache disk.
        for _ in 0..10_000 {
            h.take_ios();
            let Some(w) = h.log.pop() else { break };
            h.c.backup_mut().io_done(w);
        }
        if rapid {
            prop_assert_eq!(h.c.backup().unprotected(), 0);
        }
        h.check(mirrored, &[])?;
    }

    /// A cache-disk (or logical cache disk member) failure, then a primary failure at a random
    /// point: exactly the dirty pages whose only other copy was on the lost disk and not yet
    /// re-protected are lost.
    #[test]
    fn a_primary_failure_after_a_cache_disk_failure_loses_only_exposed_pages(
        before in proptest::collection::vec(step(), 1..300),
        after in proptest::collection::vec(step(), 0..100),
        member_lost in any::<bool>(),
        member in 0u32..4,
    ) {
        let mut h = Harness {
            c: cache(&BackupSpec::Rapid(spec(2, 40, 4)), OrderKind::Lrw),
            flights: Vec::new(),
            log: Vec::new(),
            pending: HashSet::new(),
            dead: None,
        };
        for s in &before {
            h.step(s);
        }
        if member_lost {
            // Or one data disk (of 4) under a logical cache disk.
            h.fail_member(member, 4);
        } else {
            h.take_ios();
            h.log.clear();
            h.c.backup_mut().backup_failed(CacheFailure::CacheDisk, true);
        }
        for s in &after {
            h.step(s);
        }
        let mut dirty = Vec::new();
        h.c.dirty_pages(&mut dirty);
        let exposed: Vec<u64> = dirty
            .iter()
            .copied()
            .filter(|&l| !h.c.backup().survives_primary(l))
            .collect();
        prop_assert!(exposed.len() as u64 <= h.c.backup().unprotected());
        prop_assert_eq!(h.c.discard_lost(), exposed.len() as u64);
        for l in &exposed {
            prop_assert!(!h.c.page_state(*l).0);
            h.pending.remove(l);
        }
        h.c.backup_mut().primary_failed();
        h.take_ios();
        h.check(true, &exposed)?;
    }
}

#[test]
fn a_recovery_during_garbage_collection_reads_the_target_segment() {
    // As in `garbage_collection_merges_the_emptiest_segments_from_the_primary`: segments 2
    // and 3 hold pages 5 and 6, 7; the collection copied pages 1, 3 into segment 5, whose
    // write is in flight; segment 4 fills the buffer (page 8). The primary fails: the LRU
    // (9, 10) and the buffer come back from the NVRAM; segments 2, 3 and the target 5 are read.
    let mut r = Rapid::new(&spec(1, 8, 4), 64);
    write_all(&mut r, 0..10);
    for lba in [0, 2, 4] {
        r.on_destage(lba, &[1], &[0]);
    }
    r.on_write(10, false);
    assert_eq!(r.segments().state(5), SegState::Writing);
    let gc_write = r.next_io().unwrap();
    let restore = r.primary_failed();
    assert_eq!(
        (
            restore.memory_pages,
            restore.disk_pages,
            restore.segment_reads
        ),
        (3, 5, 3)
    );
    let reads: Vec<u32> = std::iter::from_fn(|| r.next_io())
        .map(|w| {
            assert!(w.read);
            w.segment
        })
        .collect();
    assert_eq!(reads, vec![2, 3, 5]);
    r.io_done(gc_write);
    assert_eq!(r.stats().disk_reads, 3);
    assert_eq!(r.check(), Ok(()));
}

#[test]
fn a_failed_member_s_segments_are_retired_and_never_allocated_again() {
    // A 2-page LRU and one 2-page buffer; 8 segments over 4 members. Segment 0 (pages 0, 1)
    // and segment 1 (2, 3) are on disk, 4 and 5 in the LRU. Member 1 fails: segments 1 and
    // 5 are retired, pages 2 and 3 exposed and copied again at once into segment 2.
    // Collections start below 3 free segments.
    let mut r = Rapid::new(&spec(1, 8, 3), 64);
    write_all(&mut r, 0..6);
    assert_eq!(r.location(2), Some(Some(1)));
    let e = r.log_member_failed(1, 4, true);
    assert_eq!((e.pages, r.unprotected(), r.reprotected()), (2, 0, 2));
    assert_eq!(r.retired_segments(), 2);
    assert_eq!(r.segments().state(5), SegState::Retired);
    assert_eq!(r.location(2), Some(Some(2)));
    // From now on no transfer goes to member 1, through wrap-around and collections.
    for lba in 6..200 {
        if !r.can_accept(lba % 12) {
            r.on_destage(lba % 12, &[1], &[0]);
            continue;
        }
        r.on_write(lba % 12, false);
        while let Some(w) = r.next_io() {
            assert_ne!(
                w.segment % 4,
                1,
                "segment {} on the failed member",
                w.segment
            );
            r.io_done(w);
        }
        if lba % 3 == 0 {
            r.on_destage((lba * 7) % 12, &[1], &[0]);
        }
        assert_eq!(r.check(), Ok(()));
    }
    assert_eq!(r.retired_segments(), 2);
    // The log wrapped around the table many times and collections ran.
    assert_eq!((r.stats().log_writes, r.stats().gc_runs), (78, 29));
}
