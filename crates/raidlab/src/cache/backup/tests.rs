//! Worked examples of the RAPID backup and property tests of the write cache with each backup.

use proptest::prelude::*;

use super::{BackupSpec, CacheDisk, Rapid, RapidSpec, SegState};
use crate::cache::write::{Backend, Backup, BackupIo, OrderKind, RateSpec, WriteCache, WriteSpec};

/// 2 LRU pages + `buffers` buffers of 2 slots, `segments` segments.
pub(super) fn spec(buffers: u32, segments: u32, gc_free: u32) -> RapidSpec {
    RapidSpec {
        nvram_pages: 2 + 2 * u64::from(buffers),
        segment_pages: 2,
        segment_buffers: buffers,
        segments,
        gc_free_segments: gc_free,
        cache_disk: CacheDisk::Physical,
    }
}

pub(super) fn io(seg: u32, blocks: u32, tag: u32) -> BackupIo {
    BackupIo {
        segment: seg,
        blocks,
        read: false,
        tag,
    }
}

/// Write pages `lbas` in turn, completing every transfer at once.
pub(super) fn write_all(r: &mut Rapid, lbas: std::ops::Range<u64>) {
    for lba in lbas {
        r.on_write(lba, false);
        while let Some(w) = r.next_io() {
            r.io_done(w);
        }
    }
}

#[test]
fn evictions_fill_segment_buffers_and_writes_wait_for_a_free_one() {
    let mut r = Rapid::new(&spec(2, 8, 1), 64);
    // Pages 1, 2 fill the LRU; 3 evicts 1 into buffer 0 (segment 0, slot 0); 4 evicts 2 and
    // fills segment 0: one large write of 2 blocks.
    for lba in 1..=4 {
        assert!(r.can_accept(lba));
        r.on_write(lba, false);
    }
    assert_eq!(r.location(1), Some(Some(0)));
    assert_eq!(r.location(4), Some(None));
    assert_eq!(r.next_io(), Some(io(0, 2, 0)));
    // 5 evicts 3 into buffer 1 (segment 1); 6 evicts 4 and fills it.
    r.on_write(5, false);
    r.on_write(6, false);
    assert_eq!(r.next_io(), Some(io(1, 2, 1)));
    assert_eq!(r.next_io(), None);
    // Both buffers are being written and the LRU is full: a new page must wait, but a
    // rewrite of a page in the LRU is absorbed there.
    assert!(!r.can_accept(7));
    assert!(r.can_accept(6));
    r.on_invalidate(6);
    r.on_write(6, true);
    // Segment 0's write completes: its buffer is free again.
    r.io_done(io(0, 2, 0));
    assert_eq!(r.segments().state(0), SegState::OnDisk);
    assert!(r.can_accept(7));
    // Destaging page 1 invalidates its slot; destaging 2 empties segment 0, which is free.
    r.on_destage(1, &[0b1], &[0]);
    assert_eq!(r.segments().valid(0), 1);
    r.on_destage(2, &[0b1], &[0]);
    assert_eq!(r.segments().state(0), SegState::Free);
    let st = r.stats();
    assert_eq!(
        (
            st.page_writes,
            st.evictions,
            st.log_writes,
            st.nvram_hits,
            st.destaged
        ),
        (7, 4, 2, 1, 2)
    );
    assert_eq!(r.check(), Ok(()));
}

#[test]
fn a_page_rewritten_during_its_destage_keeps_its_newer_copy() {
    let mut r = Rapid::new(&spec(2, 8, 1), 64);
    r.on_write(10, false);
    // Destage of page 10 starts; it is written again (superseding the in-flight version).
    r.on_invalidate(10);
    r.on_write(10, false);
    // The destage completes with page 10 dirty again: the backup keeps the new copy.
    r.on_destage(10, &[0b1], &[0b1]);
    assert_eq!(r.copies(10), 1);
    r.on_destage(10, &[0b1], &[0]);
    assert_eq!(r.copies(10), 0);
}

#[test]
fn garbage_collection_merges_the_emptiest_segments_from_the_primary() {
    // 8 segments of 2 slots, collect when fewer than 4 are free.
    let mut r = Rapid::new(&spec(1, 8, 4), 64);
    // Pages 0..10: 8 evictions fill segments 0-3 (pages 0-7), each written at once; pages
    // 8, 9 stay in the LRU; 4 segments are free.
    write_all(&mut r, 0..10);
    assert_eq!(r.stats().gc_runs, 0);
    // Destage pages 0, 2, 4: segments 0, 1, 2 keep one valid slot each.
    for lba in [0, 2, 4] {
        r.on_destage(lba, &[1], &[0]);
    }
    // Page 10 evicts page 8 into a new segment (4), leaving 3 free: the collector merges the
    // two emptiest segments (0 and 1, one valid slot each; a third would not fit in 2 slots)
    // into segment 5, copying pages 1 and 3
    // from the primary cache.
    r.on_write(10, false);
    let st = r.stats();
    assert_eq!((st.gc_runs, st.gc_pages, st.gc_segments_freed), (1, 2, 2));
    assert_eq!(r.segments().state(0), SegState::Reclaiming);
    assert_eq!(r.segments().state(1), SegState::Reclaiming);
    assert_eq!(r.location(1), Some(Some(5)));
    assert_eq!(r.location(3), Some(Some(5)));
    let mut ios = Vec::new();
    while let Some(w) = r.next_io() {
        ios.push(w);
    }
    assert!(ios.iter().all(|w| !w.read), "GC never reads the cache disk");
    assert_eq!(ios, vec![io(5, 2, u32::MAX)]);
    for w in ios {
        r.io_done(w);
    }
    assert_eq!(r.segments().state(0), SegState::Free);
    assert_eq!(r.stats().disk_reads, 0);
    assert_eq!(r.check(), Ok(()));
}

/// A write cache of 32 pages in groups of 4, with `backup`.
pub(super) fn cache(backup: &BackupSpec, order: OrderKind) -> WriteCache {
    let ws = WriteSpec {
        capacity_pages: 32,
        group_pages: 4,
        order,
        rate: RateSpec::Rapid {
            high_pct: 70.0,
            low_pct: 30.0,
            idle: true,
        },
        max_destages: 3,
        seq_pages: 2,
        drain: true,
        read_cache: false,
        unified: false,
        destage_as_user: false,
        stow: Default::default(),
    };
    let mut c = WriteCache::new(
        &ws,
        Backend {
            disks: 4,
            mirrored: false,
        },
    );
    c.set_backup(backup.build(32));
    c
}

#[derive(Debug, Clone)]
pub(super) enum Step {
    Write(u64),
    Destage,
    Finish(usize),
    LogDone(usize),
    Idle(bool),
}

pub(super) fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u64..96).prop_map(Step::Write),
        2 => Just(Step::Destage),
        2 => (0usize..8).prop_map(Step::Finish),
        2 => (0usize..8).prop_map(Step::LogDone),
        1 => any::<bool>().prop_map(Step::Idle),
    ]
}

proptest! {
    #[test]
    fn every_held_page_has_exactly_one_copy_per_backup(
        steps in proptest::collection::vec(step(), 1..400),
        kind in 0u8..3,
        lru in any::<bool>(),
    ) {
        // Copies each held page must have: one, or two with a triple's two backups.
        let (backup, copies) = match kind {
            0 => (BackupSpec::Dual, 1),
            1 => (BackupSpec::Rapid(spec(2, 40, 4)), 1),
            _ => (BackupSpec::Triple(spec(2, 40, 4)), 2),
        };
        let order = if lru { OrderKind::Lrw } else { OrderKind::Wow };
        let mut c = cache(&backup, order);
        let mut flights = Vec::new();
        let mut log = Vec::new();
        for s in steps {
            match s {
                Step::Write(lba) => {
                    if c.backup().can_accept(lba) {
                        c.write(lba);
                    }
                }
                Step::Destage => {
                    if let Some(d) = c.start_destage() {
                        flights.push(d.slot);
                    }
                }
                Step::Finish(i) => {
                    if !flights.is_empty() {
                        let slot = flights.remove(i % flights.len());
                        c.finish_destage(slot);
                    }
                }
                Step::LogDone(i) => {
                    while let Some(w) = c.backup_mut().next_io() {
                        prop_assert!(!w.read, "the backup never reads its disk");
                        log.push(w);
                    }
                    if !log.is_empty() {
                        let w = log.remove(i % log.len());
                        c.backup_mut().io_done(w);
                    }
                }
                Step::Idle(b) => c.set_idle(b),
            }
            // Two copies (primary + backup; three with a triple) of every page the primary
            // holds, and the backup holds nothing else.
            for lba in 0..96 {
                prop_assert_eq!(
                    c.backup().copies(lba),
                    copies * u32::from(c.holds(lba)),
                    "page {}",
                    lba
                );
            }
            prop_assert_eq!(c.backup().check(), Ok(()));
        }
        prop_assert_eq!(c.backup().stats().disk_reads, 0);
    }
}
