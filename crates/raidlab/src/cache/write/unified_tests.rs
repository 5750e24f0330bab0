//! Worked example and property test of the unified cache's bound.

use proptest::prelude::*;

use super::Unified;
use crate::cache::backup::{BackupSpec, CacheDisk, RapidSpec};
use crate::cache::read::{lru::Lru, Access, ReadPolicy, UniformCost};
use crate::cache::write::{Backend, OrderKind, RateSpec, WriteCache, WriteSpec};

/// A unified cache of `total` pages in 2-page groups: an LRU read cache and a write cache,
/// both of capacity `total`.
fn caches(total: u64) -> (Lru, WriteCache, Unified) {
    let ws = WriteSpec {
        capacity_pages: total,
        group_pages: 2,
        order: OrderKind::Lrw,
        rate: RateSpec::Asap,
        max_destages: 4,
        seq_pages: 2,
        drain: true,
        read_cache: true,
        unified: true,
        destage_as_user: false,
        stow: Default::default(),
    };
    let w = WriteCache::new(
        &ws,
        Backend {
            disks: 4,
            mirrored: false,
        },
    );
    (
        Lru::new(total, total as usize + 1),
        w,
        Unified::new(total, 2),
    )
}

/// What the engine does on a read: the write cache first, then the read cache; a miss is
/// cached where the bound allows. Returns whether it hit.
fn read(r: &mut Lru, w: &mut WriteCache, u: &Unified, lba: u64, tick: &mut u64) -> bool {
    if w.read(lba) {
        return true;
    }
    let acc = Access {
        key: lba,
        size: 1,
        now: *tick,
        cost: &UniformCost,
    };
    *tick += 1;
    if r.get(&acc) {
        return true;
    }
    let mut ev = Vec::new();
    if u.room_for_read(r, w, &mut ev) {
        r.insert(&acc, &mut ev);
    }
    false
}

/// What the engine does on a page write: the clean copy is stale; make room, then write.
fn write(r: &mut Lru, w: &mut WriteCache, u: &mut Unified, lba: u64) -> bool {
    r.remove(lba);
    let mut ev = Vec::new();
    w.backup().can_accept(lba) && u.room_for_write(r, w, lba, &mut ev) && w.write(lba).is_some()
}

/// Finish the destage of `slot`, keeping its pages clean.
fn finish(r: &mut Lru, w: &mut WriteCache, u: &mut Unified, slot: u32, tick: &mut u64) -> u64 {
    u.destaging(w, slot, w.group_first(slot));
    w.finish_destage(slot);
    u.keep_destaged(r, w, tick, &UniformCost, &mut Vec::new())
}

#[test]
fn dirty_pages_take_clean_pages_space_and_destaged_pages_stay_clean() {
    let (mut r, mut w, mut u) = caches(8);
    let mut tick = 0;
    // Six read misses: 6 clean pages, 0 dirty.
    for lba in 100..106 {
        assert!(!read(&mut r, &mut w, &u, lba, &mut tick));
    }
    assert_eq!((r.used(), w.occupied()), (6, 0));
    // Pages 0 and 1 fit beside them (7, then 8 in all); page 2 evicts the oldest clean page
    // (100).
    for lba in 0..3 {
        assert!(write(&mut r, &mut w, &mut u, lba));
    }
    assert_eq!((r.used(), w.occupied()), (5, 3));
    assert!(!r.contains(100) && r.contains(101));
    // A rewrite of a dirty page needs no room.
    assert!(write(&mut r, &mut w, &mut u, 1));
    assert_eq!((r.used(), w.occupied()), (5, 3));
    // A read miss at the total evicts a clean page (101) for itself.
    assert!(!read(&mut r, &mut w, &u, 106, &mut tick));
    assert_eq!((r.used(), w.occupied()), (5, 3));
    assert!(!r.contains(101) && r.contains(106));
    // Dirty pages are read from the write cache.
    assert!(read(&mut r, &mut w, &u, 2, &mut tick));
    // The least recently written group (page 2's: the rewrite of 1 refreshed group 0) is
    // destaged; its page stays as a clean page.
    let d = w.start_destage().unwrap();
    assert_eq!((d.first, d.pages), (2, 1));
    assert_eq!(finish(&mut r, &mut w, &mut u, d.slot, &mut tick), 1);
    assert_eq!((r.used(), w.occupied()), (6, 2));
    assert!(!w.holds(2) && read(&mut r, &mut w, &u, 2, &mut tick));
    // Five more dirty pages evict five clean pages.
    for lba in 10..15 {
        assert!(write(&mut r, &mut w, &mut u, lba));
    }
    assert_eq!((r.used(), w.occupied()), (1, 7));
    assert_eq!(u.stats.evicted_for_writes, 6);
    // Dirty pages may fill the whole cache; then a write waits and a read miss is not cached.
    assert!(write(&mut r, &mut w, &mut u, 15));
    assert_eq!((r.used(), w.occupied()), (0, 8));
    assert!(!write(&mut r, &mut w, &mut u, 16));
    assert!(!read(&mut r, &mut w, &u, 200, &mut tick));
    assert_eq!((r.used(), w.occupied()), (0, 8));
    assert_eq!(u.check(&r, &w), Ok(()));
}

#[derive(Debug, Clone)]
enum Step {
    Read(u64),
    Write(u64),
    Destage,
    Finish(usize),
    LogDone(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..48).prop_map(Step::Read),
        4 => (0u64..48).prop_map(Step::Write),
        2 => Just(Step::Destage),
        2 => (0usize..8).prop_map(Step::Finish),
        1 => (0usize..8).prop_map(Step::LogDone),
    ]
}

proptest! {
    #[test]
    fn clean_plus_dirty_pages_never_exceed_the_total(
        steps in proptest::collection::vec(step(), 1..300),
        total in 4u64..24,
        backup in 0u8..3,
    ) {
        let (mut r, mut w, mut u) = caches(total);
        // Dirty pages of a unified cache are still backed up: one copy per RAPID backup.
        let rapid = RapidSpec {
            nvram_pages: 4,
            segment_pages: 2,
            segment_buffers: 1,
            segments: 64,
            gc_free_segments: 2,
            cache_disk: CacheDisk::Physical,
        };
        let (spec, copies) = match backup {
            0 => (BackupSpec::None, 0),
            1 => (BackupSpec::Rapid(rapid), 1),
            _ => (BackupSpec::Triple(rapid), 2),
        };
        w.set_backup(spec.build(total));
        let mut tick = 0;
        let mut flights = Vec::new();
        let mut log = Vec::new();
        for s in steps {
            match s {
                Step::Read(lba) => {
                    read(&mut r, &mut w, &u, lba, &mut tick);
                }
                Step::Write(lba) => {
                    write(&mut r, &mut w, &mut u, lba);
                }
                Step::Destage => {
                    if let Some(d) = w.start_destage() {
                        flights.push(d.slot);
                    }
                }
                Step::Finish(i) => {
                    if !flights.is_empty() {
                        let slot = flights.remove(i % flights.len());
                        finish(&mut r, &mut w, &mut u, slot, &mut tick);
                    }
                }
                Step::LogDone(i) => {
                    while let Some(io) = w.backup_mut().next_io() {
                        log.push(io);
                    }
                    if !log.is_empty() {
                        let io = log.remove(i % log.len());
                        w.backup_mut().io_done(io);
                    }
                }
            }
            prop_assert!(r.used() + w.occupied() <= total, "{} + {} > {}", r.used(), w.occupied(), total);
            prop_assert_eq!(u.check(&r, &w), Ok(()));
            for lba in 0..48 {
                // A page is clean or dirty, never both; dirty ones are backed up.
                prop_assert!(!(r.contains(lba) && w.page_state(lba).0), "page {}", lba);
                if copies > 0 {
                    prop_assert_eq!(w.backup().copies(lba), copies * u32::from(w.holds(lba)));
                }
            }
        }
    }
}
