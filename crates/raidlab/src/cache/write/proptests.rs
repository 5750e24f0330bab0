//! Invariants of the write cache on random streams, for every order with every rate: no
//! acknowledged write is lost (each page is dirty, in flight with its latest version, or on
//! "disk" with it), occupancy stays within capacity and equals the pages held, and once
//! writes stop every page is destaged.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Step {
    Write(u64),
    Start,
    /// Complete the in-flight destage at this index (mod the number in flight).
    Finish(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..48).prop_map(Step::Write),
        2 => Just(Step::Start),
        2 => (0usize..8).prop_map(Step::Finish),
    ]
}

fn rate(i: u8) -> RateSpec {
    match i {
        0 => RateSpec::Linear {
            high_pct: 90.0,
            low_pct: 40.0,
        },
        1 => RateSpec::Fixed {
            threshold_pct: 60.0,
        },
        _ => RateSpec::Asap,
    }
}

/// The model: latest version written per page, the version on disk, and the versions each
/// in-flight destage carries (the latest at the time it started: the cache's dirty copy is
/// always the newest acknowledged one).
#[derive(Default)]
struct Model {
    latest: HashMap<u64, u64>,
    disk: HashMap<u64, u64>,
    flights: Vec<(Destage, Vec<(u64, u64)>)>,
    version: u64,
}

impl Model {
    fn start(&mut self, c: &WriteCache, d: Destage) {
        let bits = c.flight_bits(d.slot);
        let mut carried = Vec::new();
        for i in 0..c.group_pages() {
            if bits[(i / 64) as usize] >> (i % 64) & 1 != 0 {
                let lba = d.first + i;
                carried.push((lba, self.latest[&lba]));
            }
        }
        assert_eq!(carried.len() as u32, d.pages);
        self.flights.push((d, carried));
    }

    fn finish(&mut self, c: &mut WriteCache, i: usize) {
        let (d, carried) = self.flights.swap_remove(i);
        for (lba, v) in carried {
            self.disk.insert(lba, v);
        }
        c.finish_destage(d.slot);
    }

    /// Every acknowledged version is recoverable, and reads see the latest.
    fn check(&self, c: &WriteCache) -> Result<(), TestCaseError> {
        for (&lba, &v) in &self.latest {
            let (dirty, flight) = c.page_state(lba);
            let in_flight = self
                .flights
                .iter()
                .flat_map(|(_, carried)| carried.iter())
                .find(|(l, _)| *l == lba)
                .map(|&(_, v)| v);
            prop_assert_eq!(flight, in_flight.is_some(), "page {}", lba);
            if !dirty {
                // The newest version must be the one in flight, or on disk.
                let newest = in_flight.or(self.disk.get(&lba).copied());
                prop_assert_eq!(newest, Some(v), "page {} lost its version {}", lba, v);
            }
        }
        let (pages, _) = c.recount();
        prop_assert_eq!(pages, c.occupied());
        prop_assert!(c.occupied() <= c.capacity());
        Ok(())
    }
}

proptest! {
    #[test]
    fn no_write_is_lost_and_everything_drains(
        order in 0usize..4,
        rate_i in 0u8..3,
        steps in proptest::collection::vec(step(), 1..300),
    ) {
        let spec = WriteSpec {
            capacity_pages: 16,
            group_pages: 4,
            order: OrderKind::from_name(OrderKind::NAMES[order]).unwrap(),
            rate: rate(rate_i),
            max_destages: 3,
            seq_pages: 1,
            drain: true,
            read_cache: false,
        unified: false,
        destage_as_user: false,
        stow: Default::default(),
        };
        let mut c = WriteCache::new(&spec, Backend { disks: 5, mirrored: order % 2 == 0 });
        let mut m = Model::default();
        for s in steps {
            match s {
                Step::Write(lba) => {
                    if c.write(lba).is_some() {
                        m.version += 1;
                        m.latest.insert(lba, m.version);
                    }
                }
                Step::Start => {
                    if c.wants_destage() {
                        let d = c.start_destage().expect("wants_destage implies a victim");
                        m.start(&c, d);
                    }
                }
                Step::Finish(i) => {
                    if !m.flights.is_empty() {
                        let i = i % m.flights.len();
                        m.finish(&mut c, i);
                    }
                }
            }
            prop_assert!(c.inflight() <= 3);
            prop_assert_eq!(c.inflight() as usize, m.flights.len());
            m.check(&c)?;
        }
        // Writes stop: drain. Bounded: each round destages at least one group or completes one.
        c.drain();
        for _ in 0..10_000 {
            while c.wants_destage() {
                let d = c.start_destage().unwrap();
                m.start(&c, d);
            }
            if m.flights.is_empty() {
                break;
            }
            m.finish(&mut c, 0);
            m.check(&c)?;
        }
        prop_assert_eq!(c.occupied(), 0);
        prop_assert_eq!(c.recount(), (0, 0));
        for (lba, v) in &m.latest {
            prop_assert_eq!(m.disk.get(lba), Some(v));
        }
    }
}
