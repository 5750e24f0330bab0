//! Worked examples of the write cache with a small geometry: 4-page groups, 8-page capacity.

use super::*;

fn spec(order: OrderKind, rate: RateSpec) -> WriteSpec {
    WriteSpec {
        capacity_pages: 8,
        group_pages: 4,
        order,
        rate,
        max_destages: 2,
        seq_pages: 1,
        drain: true,
        read_cache: false,
        unified: false,
        destage_as_user: false,
        stow: Default::default(),
    }
}

fn cache(order: OrderKind) -> WriteCache {
    let rate = RateSpec::Linear {
        high_pct: 75.0,
        low_pct: 50.0,
    };
    WriteCache::new(
        &spec(order, rate),
        Backend {
            disks: 5,
            mirrored: false,
        },
    )
}

#[test]
fn hits_are_classified_and_reads_served() {
    let mut c = cache(OrderKind::Wow);
    assert_eq!(c.write(9), Some(Absorbed::NewGroup)); // group 2
    assert_eq!(c.write(10), Some(Absorbed::StripeHit));
    assert_eq!(c.write(9), Some(Absorbed::Overwrite));
    assert_eq!(c.write(0), Some(Absorbed::NewGroup)); // group 0
    assert_eq!(c.occupied(), 3);
    assert_eq!(
        (
            c.stats.page_writes,
            c.stats.overwrite_hits,
            c.stats.stripe_hits,
            c.stats.new_groups
        ),
        (4, 1, 1, 2)
    );
    assert!(c.read(10));
    assert!(!c.read(11));
    assert_eq!((c.stats.read_lookups, c.stats.read_hits), (2, 1));
    assert_eq!(c.recount(), (3, 2));
}

#[test]
fn linear_rate_drives_destages() {
    // 8 pages, 75/50: L = 4, H = 6, max 2 in flight.
    let mut c = cache(OrderKind::Cscan);
    for lba in [0, 1, 2] {
        c.write(lba).unwrap();
    }
    assert!(!c.wants_destage()); // 3 < L
    c.write(4).unwrap();
    assert_eq!(c.allowed(), 1); // at L
    assert!(c.wants_destage());
    let d = c.start_destage().unwrap();
    // CSCAN from 0: group 0 with pages 0-2.
    assert_eq!((d.first, d.pages), (0, 3));
    assert_eq!(c.flight_bits(d.slot), &[0b0111]);
    // In flight pages still occupy the cache and serve reads.
    assert_eq!(c.occupied(), 4);
    assert!(c.holds(1));
    assert!(!c.wants_destage()); // 1 in flight, 1 allowed
    assert_eq!(c.finish_destage(d.slot), 3);
    assert_eq!(c.occupied(), 1);
    assert!(!c.holds(1));
    assert_eq!(c.recount(), (1, 1));
}

#[test]
fn a_full_cache_refuses_new_pages_but_takes_overwrites() {
    let mut c = cache(OrderKind::Lrw);
    for lba in 0..8 {
        c.write(lba).unwrap();
    }
    assert_eq!(c.occupied(), 8);
    assert_eq!(c.write(8), None);
    assert_eq!(c.write(3), Some(Absorbed::Overwrite));
    assert_eq!(c.occupied(), 8);
    assert_eq!(c.stats.page_writes, 9);
    // LRW: group 0 (written before 1, whose last write was page 7... and then page 3
    // rewrote group 0): group 1 is the least recently written.
    let d = c.start_destage().unwrap();
    assert_eq!(d.first, 4);
    c.finish_destage(d.slot);
    assert_eq!(c.write(8), Some(Absorbed::NewGroup));
}

#[test]
fn writes_during_a_destage_take_a_second_buffer_and_come_back() {
    let mut c = cache(OrderKind::Wow);
    c.write(0).unwrap();
    c.write(1).unwrap();
    let d = c.start_destage().unwrap();
    assert_eq!(d.pages, 2);
    // Page 1 is rewritten while its old version is in flight; page 2 is new.
    assert_eq!(c.write(1), Some(Absorbed::StripeHit));
    assert_eq!(c.page_state(1), (true, true));
    assert_eq!(c.write(2), Some(Absorbed::StripeHit));
    assert_eq!(c.occupied(), 4);
    // The group is not in the order while its destage is in flight.
    assert!(c.start_destage().is_none());
    c.finish_destage(d.slot);
    assert_eq!(c.page_state(1), (true, false));
    assert_eq!(c.occupied(), 2);
    let d2 = c.start_destage().unwrap();
    assert_eq!((d2.first, d2.pages), (0, 2));
    assert_eq!(c.flight_bits(d2.slot), &[0b0110]);
    c.finish_destage(d2.slot);
    assert_eq!(c.recount(), (0, 0));
}

#[test]
fn full_group_destages_are_counted() {
    let mut c = cache(OrderKind::Stow);
    for lba in 4..8 {
        c.write(lba).unwrap();
    }
    let d = c.start_destage().unwrap();
    assert_eq!(d.pages, 4);
    assert_eq!(c.stats.full_destages, 1);
    // seq_pages = 1: pages 5, 6, 7 follow a present page.
    assert_eq!(c.stats.seq_pages, 3);
}

#[test]
fn drain_destages_below_the_low_threshold() {
    let mut c = cache(OrderKind::Stow);
    c.write(0).unwrap();
    assert!(!c.wants_destage());
    c.drain();
    assert!(c.wants_destage());
    let d = c.start_destage().unwrap();
    c.finish_destage(d.slot);
    assert_eq!(c.occupied(), 0);
}

#[test]
fn sequential_means_an_ascending_run_not_just_neighbours() {
    // seq_pages = 1: a page is sequential when it extends a run of at least 2.
    let mut c = cache(OrderKind::Stow);
    // Written 2, 0, 1, 3: page 1 extends present 0 (run 2, sequential), page 3 extends
    // present 2 (run 2, sequential); 0 and 2 start runs of 1.
    for lba in [2, 0, 1, 3] {
        c.write(lba).unwrap();
    }
    assert_eq!(c.stats.seq_pages, 2);
    // Written 6, 4, 5: 6 starts a run (5 absent), 4 starts one, 5 extends 4 (run 2). Page 6
    // is not re-classified when 5 arrives after it.
    let mut c = cache(OrderKind::Stow);
    for lba in [6, 4, 5] {
        c.write(lba).unwrap();
    }
    assert_eq!(c.stats.seq_pages, 1);
}
