//! Tests of the `hotspots` generator: a worked example, bit-for-bit determinism, and
//! properties measured over long streams (arrival burstiness, working-set churn, spot moves,
//! concentration) against the configured values.

use super::*;
use crate::config::synth_test::error_key;
use crate::workload::synth::locality::{measure, measure_pairs, LocalitySpec};
use crate::workload::synth::websearch::SIZE_MIX;
use crate::workload::Op;

const MS: f64 = 1e6;

fn small(seed: u64) -> HotspotsSpec {
    HotspotsSpec {
        space_bytes: 100 << 20,
        requests: 10_000,
        mean_interarrival_ns: MS,
        area_bytes: 1 << 20,
        set_fraction: 0.2,
        set_life_s: 30.0,
        spot_fraction: 0.05,
        spot_share: 0.8,
        spot_life_s: 0.5,
        rate_ratio: 3.0,
        high_share: 0.5,
        high_s: 2.0,
        seed,
    }
}

fn drain(g: &mut Hotspots) -> Vec<Request> {
    std::iter::from_fn(|| g.next_request().unwrap()).collect()
}

#[test]
fn worked_example_of_the_derived_parameters() {
    let spec = small(1);
    // 100 areas of 1 MiB; 20 in the working set; 5 spots.
    assert_eq!((spec.areas(), spec.set_areas(), spec.spots()), (100, 20, 5));
    let mut g = Hotspots::new(spec.clone()).unwrap();
    // Half the time busy at three times the lull rate, mean gap 1 ms: 0.5 * 3 l + 0.5 l =
    // 1/ms, so l = 0.5/ms (lull gap 2 ms) and the busy gap is 2/3 ms. Stays: 2 s busy,
    // 2 * (1 - 0.5) / 0.5 = 2 s lull.
    let [busy, lull] = g.clock().gaps_ns();
    assert!((busy - 2e6 / 3.0).abs() < 1e-6 && (lull - 2e6).abs() < 1e-6);
    assert_eq!(g.clock().stays_ns(), [2e9, 2e9]);
    // 20 distinct members, spots on slots of the set.
    let mut m = g.members().to_vec();
    m.sort_unstable();
    m.dedup();
    assert_eq!(m.len(), 20);
    assert!(g.spot_slots().iter().all(|&s| s < 20));
    let reqs = drain(&mut g);
    assert_eq!(reqs.len(), 10_000);
    assert_eq!(reqs[0].time_ns, 0);
    for w in reqs.windows(2) {
        assert!(w[1].time_ns >= w[0].time_ns);
    }
    for r in &reqs {
        // Aligned to its own size, inside one area, one of the WebSearch sizes.
        assert!(SIZE_MIX.iter().any(|&(s, _)| s == r.len));
        assert_eq!(r.offset % r.len, 0);
        assert_eq!(r.offset / (1 << 20), (r.offset + r.len - 1) / (1 << 20));
        assert!(r.offset + r.len <= 100 << 20);
    }
}

#[test]
fn the_first_requests_are_pinned() {
    // Seed 1 of the fitted model over 10 GiB at 2.65 ms: the exact stream, so that any change
    // to the draws (and any platform difference) shows.
    let spec = HotspotsSpec::websearch(10 << 30, 4, 2.65 * MS, 1);
    // 640 areas of 16 MiB: 173 in the working set, 16 spots.
    assert_eq!(
        (spec.areas(), spec.set_areas(), spec.spots()),
        (640, 173, 16)
    );
    let mut g = Hotspots::new(spec).unwrap();
    let members = g.members().to_vec();
    let got: Vec<(u64, bool, u64, u64)> = drain(&mut g)
        .iter()
        .map(|r| (r.time_ns, r.op == Op::Read, r.offset, r.len))
        .collect();
    assert_eq!(got, PINNED);
    // Nothing moved in 14 ms (a set change every 23 s, a spot move every 0.16 s on
    // average), so every request is on an area of the initial working set.
    assert_eq!(g.moves(), (0, 0));
    for (_, _, offset, _) in PINNED {
        assert!(members.contains(&(offset >> 24)));
    }
}

const PINNED: [(u64, bool, u64, u64); 4] = [
    (0, true, 7_051_780_096, 8192),
    (3_241_274, true, 8_005_681_152, 32768),
    (13_769_061, true, 1_848_680_448, 8192),
    (13_791_992, true, 2_835_324_928, 8192),
];

#[test]
fn same_seed_same_stream_bit_for_bit() {
    let a = drain(&mut Hotspots::new(small(5)).unwrap());
    let b = drain(&mut Hotspots::new(small(5)).unwrap());
    assert_eq!(a, b);
    let c = drain(&mut Hotspots::new(small(6)).unwrap());
    assert_ne!(a, c);
    // The arrival stream has its own random stream: changing where requests go leaves the
    // arrival times alone.
    let d = drain(
        &mut Hotspots::new(HotspotsSpec {
            spot_share: 0.3,
            set_life_s: 5.0,
            ..small(5)
        })
        .unwrap(),
    );
    assert!(a.iter().zip(&d).all(|(x, y)| x.time_ns == y.time_ns));
    assert_ne!(a, d);
}

fn arrivals(spec: HotspotsSpec, bins_s: &[f64]) -> (f64, Vec<f64>) {
    let mut g = Hotspots::new(spec.clone()).unwrap();
    let pairs: Vec<(u64, u64)> = drain(&mut g).iter().map(|r| (r.time_ns, 0)).collect();
    let last = pairs.last().unwrap().0 as f64;
    let s = measure_pairs(
        &pairs,
        &LocalitySpec {
            area_bytes: 1,
            areas: 1,
            window_ns: 1 << 40,
            lags: vec![],
            bins_ns: bins_s.iter().map(|b| (b * 1e9) as u64).collect(),
        },
    );
    (last / (spec.requests - 1) as f64, s.idc)
}

#[test]
fn arrivals_follow_the_two_rate_formula() {
    // The fitted arrival parameters at 2.5 ms (400 requests/s), 600,000 requests (25 min).
    let spec = HotspotsSpec {
        requests: 600_000,
        ..HotspotsSpec::websearch(10 << 30, 0, 2.5 * MS, 3)
    };
    let (mean, idc) = arrivals(spec.clone(), &[0.1, 1.0, 5.0]);
    assert!((mean / 2.5e6 - 1.0).abs() < 0.02, "mean gap {mean}");
    for (i, t) in [0.1, 1.0, 5.0].into_iter().enumerate() {
        let want = spec.arrival_idc(t);
        assert!(
            (idc[i] / want - 1.0).abs() < 0.2,
            "bin {t} s: {} vs {want}",
            idc[i]
        );
    }
    // With equal rates the arrivals are Poisson: variance equals mean in any bin.
    let (_, idc) = arrivals(
        HotspotsSpec {
            rate_ratio: 1.0,
            ..spec
        },
        &[0.1, 1.0],
    );
    assert!(idc.iter().all(|&x| (0.9..1.1).contains(&x)), "{idc:?}");
}

#[test]
fn the_working_set_drifts_at_its_configured_rate() {
    // No spots: requests spread over the 20 members of a 200-area space, 2,000 a second, so
    // every member is touched in every 1 s window. A request L windows later lands on an area
    // touched in window i when its member was already in the set when window i ended: the
    // mean of exp(-x / life) for x in [L - 1, L] s.
    let life = 20.0;
    let spec = HotspotsSpec {
        space_bytes: 200 << 15,
        requests: 600_000,
        mean_interarrival_ns: 0.5 * MS,
        area_bytes: 1 << 15,
        set_fraction: 0.1,
        set_life_s: life,
        spot_share: 0.0,
        rate_ratio: 1.0,
        ..small(9)
    };
    let mut g = Hotspots::new(spec.clone()).unwrap();
    let loc = LocalitySpec {
        area_bytes: 1 << 15,
        areas: 200,
        window_ns: 1_000_000_000,
        lags: vec![1, 5, 10],
        bins_ns: vec![],
    };
    let s = measure(&mut g, &loc).unwrap();
    for (i, lag) in [1.0f64, 5.0, 10.0].into_iter().enumerate() {
        let want = life * ((-(lag - 1.0) / life).exp() - (-lag / life).exp());
        assert!(
            (s.reref[i] - want).abs() < 0.03,
            "lag {lag}: {} vs {want}",
            s.reref[i]
        );
    }
    // 20 members over 300 s, one change per member per 20 s: 300 expected.
    let (changes, _) = g.moves();
    assert!((250..350).contains(&changes), "{changes}");
    // Every window touches just the 20 members (plus the odd replacement).
    assert!((s.touched * 200.0 - 20.0).abs() < 1.0, "{}", s.touched);
}

#[test]
fn spots_move_at_their_configured_rate() {
    // One spot takes every request; the set stands still. The spot moves twice a second and
    // lands on another of the 20 slots with p = 19/20, so the area changes between
    // consecutive requests about 1.9 times a second.
    let spec = HotspotsSpec {
        requests: 200_000,
        set_life_s: 1e9,
        spot_fraction: 0.01,
        spot_share: 1.0,
        spot_life_s: 0.5,
        rate_ratio: 1.0,
        ..small(4)
    };
    assert_eq!(spec.spots(), 1);
    let mut g = Hotspots::new(spec).unwrap();
    let reqs = drain(&mut g);
    let secs = reqs.last().unwrap().time_ns as f64 / 1e9;
    let changes = reqs
        .windows(2)
        .filter(|w| w[0].offset >> 20 != w[1].offset >> 20)
        .count() as f64;
    let (_, moves) = g.moves();
    assert!(
        (moves as f64 / secs / 2.0 - 1.0).abs() < 0.1,
        "{moves} in {secs} s"
    );
    assert!(
        (changes / secs / 1.9 - 1.0).abs() < 0.1,
        "{changes} in {secs} s"
    );
}

#[test]
fn spots_carry_their_share() {
    // Nothing moves: the 10 spots' areas (on distinct slots for this seed) get the spots'
    // 80% plus their part of the rest, 0.2 * 10 / 200.
    let spec = HotspotsSpec {
        space_bytes: 1000 << 20,
        requests: 200_000,
        set_life_s: 1e9,
        spot_fraction: 0.01,
        spot_life_s: 1e9,
        ..small(2)
    };
    let mut g = Hotspots::new(spec).unwrap();
    let mut slots = g.spot_slots().to_vec();
    slots.sort_unstable();
    slots.dedup();
    assert_eq!(slots.len(), 10);
    let spot_areas: Vec<u64> = slots.iter().map(|&s| g.members()[s as usize]).collect();
    let reqs = drain(&mut g);
    let on = reqs
        .iter()
        .filter(|r| spot_areas.contains(&(r.offset >> 20)))
        .count() as f64
        / reqs.len() as f64;
    assert!((on - 0.81).abs() < 0.01, "{on}");
}

/// The config key a refused spec names.
fn key(spec: HotspotsSpec) -> String {
    error_key(Hotspots::new(spec).map(drop))
}

fn k(s: &str) -> String {
    format!("workload.synthetic.{s}")
}

#[test]
fn bad_parameters_name_their_key() {
    let s = small(1);
    assert_eq!(
        key(HotspotsSpec {
            area_bytes: 3 << 10,
            ..s.clone()
        }),
        k("area_kib")
    );
    assert_eq!(
        key(HotspotsSpec {
            space_bytes: 9 << 20,
            ..s.clone()
        }),
        k("space_gib")
    );
    assert_eq!(
        key(HotspotsSpec {
            mean_interarrival_ns: f64::NAN,
            ..s.clone()
        }),
        k("mean_interarrival_ms")
    );
    assert_eq!(
        key(HotspotsSpec {
            high_share: 0.0,
            ..s.clone()
        }),
        k("high_share")
    );
    assert_eq!(
        key(HotspotsSpec {
            spot_life_s: f64::INFINITY,
            ..s.clone()
        }),
        k("spot_life_s")
    );
}

#[test]
fn settings_that_would_spin_the_generator_are_refused() {
    let s = small(1);
    // Every area a spot, each moving every millisecond: thousands of moves a request.
    let many = HotspotsSpec {
        area_bytes: 32 << 10,
        spot_fraction: 1.0,
        spot_life_s: 1e-3,
        ..s.clone()
    };
    assert!(many.spots() > 1_000, "{}", many.spots());
    assert_eq!(key(many), k("spot_life_s"));
    // A request every 11 days: the working set changes many times a request.
    assert_eq!(
        key(HotspotsSpec {
            mean_interarrival_ns: 1e15,
            requests: 100,
            ..s.clone()
        }),
        k("set_life_s")
    );
    // A span past 2^60 ns.
    assert_eq!(
        key(HotspotsSpec {
            mean_interarrival_ns: 1e15,
            requests: 2_000,
            set_life_s: 1e12,
            spot_life_s: 1e12,
            high_s: 1e9,
            ..s.clone()
        }),
        k("requests")
    );
    // Busy periods of 1 ms around requests ten seconds apart.
    assert_eq!(
        key(HotspotsSpec {
            mean_interarrival_ns: 1e10,
            high_s: 1e-3,
            ..s.clone()
        }),
        k("high_s")
    );
    // The fitted model itself is accepted at the sizes the experiments use.
    for requests in [1_000, 1_000_000, 1_000_000_000] {
        HotspotsSpec::websearch(60 << 30, requests, 3.7e6, 1)
            .validate()
            .unwrap();
    }
}
