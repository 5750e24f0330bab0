//! Tests of the bursty generator: the history table by hand, worked examples, the paper's
//! statistics within bands, presets' miss-ratio shapes, bad parameters, and properties.

use proptest::prelude::*;

use super::*;
use crate::cache::read::{build, Access, PolicySpec, UniformCost};
use crate::error::Error;

fn spec() -> BurstySpec {
    BurstySpec::preset("synthetic-a", 7).unwrap()
}

fn drain(g: &mut Bursty) -> Vec<Request> {
    let mut out = Vec::new();
    while let Some(r) = g.next_request().unwrap() {
        out.push(r);
    }
    out
}

#[test]
fn history_is_an_lru_stack() {
    let mut h = History::new(3);
    for b in [10, 11, 12] {
        h.push(b);
    }
    assert_eq!(h.top_down().collect::<Vec<_>>(), [12, 11, 10]);
    // Distance 2 is the bottom: it moves to the top.
    assert_eq!(h.take(2), Some(10));
    assert_eq!(h.top_down().collect::<Vec<_>>(), [10, 12, 11]);
    assert_eq!(h.take(3), None);
    // A push on a full table drops the bottom (11).
    h.push(13);
    assert_eq!(h.top_down().collect::<Vec<_>>(), [13, 10, 12]);
    assert_eq!(h.take(0), Some(13));
    let mut empty = History::new(0);
    empty.push(1);
    assert!(empty.is_empty() && empty.take(0).is_none());
}

#[test]
fn worked_examples() {
    // All writes, a one-entry table, every request from history: the first request draws a
    // block uniformly, every later one repeats it.
    let one = BurstySpec {
        read_ratio: 0.0,
        working_set_bytes: 8192,
        history_share: 1.0,
        requests: 50,
        ..spec()
    };
    let reqs = drain(&mut Bursty::new(one).unwrap());
    assert_eq!(reqs.len(), 50);
    assert!(reqs.iter().all(|r| r.op == Op::Write && r.len == 8192));
    assert!(reqs.iter().all(|r| r.offset == reqs[0].offset));
    assert_eq!(reqs[0].time_ns, 0);
    // No history: addresses are uniform, so 2,000 draws over 2M blocks barely repeat.
    let none = BurstySpec {
        history_share: 0.0,
        requests: 2000,
        ..spec()
    };
    let mut blocks: Vec<u64> = drain(&mut Bursty::new(none).unwrap())
        .iter()
        .map(|r| r.offset / 8192)
        .collect();
    blocks.sort_unstable();
    blocks.dedup();
    assert!(blocks.len() >= 1995, "{}", blocks.len());
    // The background gap solves the rate equation: lambda 32, mu 1024, speed-up 10 at 1000/s
    // gives g = 1 ms * 1056 / (3.2 + 1024) = 1.028037... ms.
    let g = Bursty::new(spec()).unwrap();
    assert!((g.background_gap_ns - 1e6 * 1056.0 / 1027.2).abs() < 1e-6);
    // Tables split the 4,096-entry working set by the read ratio.
    assert_eq!(g.tables()[0].capacity(), 1638);
    assert_eq!(g.tables()[1].capacity(), 2458);
}

#[test]
fn same_seed_same_stream() {
    let a = drain(
        &mut Bursty::new(BurstySpec {
            requests: 5000,
            ..spec()
        })
        .unwrap(),
    );
    let b = drain(
        &mut Bursty::new(BurstySpec {
            requests: 5000,
            ..spec()
        })
        .unwrap(),
    );
    assert_eq!(a, b);
    let c = drain(
        &mut Bursty::new(BurstySpec {
            requests: 5000,
            seed: 8,
            ..spec()
        })
        .unwrap(),
    );
    assert_ne!(a, c);
}

/// Read share, phase lengths and per-phase gaps of one long stream, within bands of about
/// five standard errors.
#[test]
fn statistics_match_the_parameters() {
    let s = BurstySpec {
        requests: 400_000,
        gap_len: 256.0,
        burst_len: 32.0,
        read_ratio: 0.4,
        rate_iops: 2000.0,
        ..spec()
    };
    let mut g = Bursty::new(s.clone()).unwrap();
    let (mut reads, mut last_t) = (0u64, 0u64);
    let (mut gap_sum, mut gap_n) = ([0f64; 2], [0u64; 2]);
    let (mut runs, mut run_len, mut prev) = ([0u64; 2], [0u64; 2], None);
    while let Some(r) = g.next_request().unwrap() {
        let phase = usize::from(g.in_burst());
        reads += u64::from(r.op == Op::Read);
        assert!(r.time_ns >= last_t);
        if prev.is_some() {
            gap_sum[phase] += (r.time_ns - last_t) as f64;
            gap_n[phase] += 1;
        }
        if prev != Some(phase) {
            runs[phase] += 1;
        }
        run_len[phase] += 1;
        prev = Some(phase);
        last_t = r.time_ns;
    }
    let n = s.requests as f64;
    let read_share = reads as f64 / n;
    assert!(
        (read_share - 0.4).abs() < 5.0 * (0.24f64 / n).sqrt(),
        "{read_share}"
    );
    // About 1,390 cycles: the mean burst length has a standard error near 2.7%.
    let burst_mean = run_len[1] as f64 / runs[1] as f64;
    let gap_mean = run_len[0] as f64 / runs[0] as f64;
    assert!((burst_mean / 32.0 - 1.0).abs() < 0.14, "burst {burst_mean}");
    assert!((gap_mean / 256.0 - 1.0).abs() < 0.14, "gap {gap_mean}");
    // Per-phase mean gaps: exponential, so the standard error is mean / sqrt(count).
    let g_b = g.background_gap_ns;
    let bg = gap_sum[0] / gap_n[0] as f64;
    let burst = gap_sum[1] / gap_n[1] as f64;
    assert!(
        (bg / g_b - 1.0).abs() < 5.0 / (gap_n[0] as f64).sqrt(),
        "{bg} vs {g_b}"
    );
    let want = g_b / 10.0;
    assert!(
        (burst / want - 1.0).abs() < 5.0 / (gap_n[1] as f64).sqrt(),
        "{burst} vs {want}"
    );
    // The overall mean inter-arrival is 1/rate (cycle-to-cycle variation: wider band).
    let mean = last_t as f64 / (n - 1.0);
    assert!((mean / 5e5 - 1.0).abs() < 0.06, "mean gap {mean} ns");
}

/// LRU miss ratio of a stream at `capacity_blocks` (8 KiB blocks).
fn lru_miss_ratio(reqs: &[Request], capacity_blocks: u64) -> f64 {
    let mut lru = build(&PolicySpec::Lru, capacity_blocks).unwrap();
    let (mut misses, mut evicted) = (0u64, Vec::new());
    for (i, r) in reqs.iter().enumerate() {
        let acc = Access {
            key: r.offset / 8192,
            size: 1,
            now: i as u64,
            cost: &UniformCost,
        };
        if !lru.get(&acc) {
            misses += 1;
            evicted.clear();
            lru.insert(&acc, &mut evicted);
        }
    }
    misses as f64 / reqs.len() as f64
}

#[test]
fn presets_have_their_stated_shapes() {
    const MB: u64 = 128; // 8 KiB blocks per MB
    let run = |name: &str| {
        let s = BurstySpec {
            requests: 200_000,
            ..BurstySpec::preset(name, 3).unwrap()
        };
        drain(&mut Bursty::new(s).unwrap())
    };
    let reads = |r: &[Request]| r.iter().filter(|q| q.op == Op::Read).count() as f64 / 2e5;
    // B: 40% reads; once a cache holds the 1 MB working set, the misses are the 17% drawn
    // outside it (plus the few cold misses), and more cache barely helps.
    let b = run("synthetic-b");
    assert!((reads(&b) - 0.4).abs() < 0.01);
    let (b2, b64) = (lru_miss_ratio(&b, 2 * MB), lru_miss_ratio(&b, 64 * MB));
    assert!((0.165..0.185).contains(&b2), "B at 2 MB: {b2}");
    assert!(b2 - b64 < 0.01, "B: {b2} -> {b64}");
    // A: misses fall steeply once the cache passes the 32 MB working set, to about 10%.
    let a = run("synthetic-a");
    let (a8, a48) = (lru_miss_ratio(&a, 8 * MB), lru_miss_ratio(&a, 48 * MB));
    assert!(a8 > 0.6 && (0.09..0.13).contains(&a48), "A: {a8} -> {a48}");
    // C: 80% reads, about 60% misses at 64 MB, still falling at 256 MB.
    let c = run("synthetic-c");
    assert!((reads(&c) - 0.8).abs() < 0.01);
    let (c64, c256) = (lru_miss_ratio(&c, 64 * MB), lru_miss_ratio(&c, 256 * MB));
    assert!(
        (0.52..0.68).contains(&c64) && c256 < c64 - 0.2,
        "C: {c64} -> {c256}"
    );
    // D: writes only; a cache above 32 MB absorbs more than 97% (less cold misses).
    let d = run("synthetic-d");
    assert_eq!(reads(&d), 0.0);
    let d40 = lru_miss_ratio(&d, 40 * MB);
    assert!(d40 < 0.03 + 4096.0 / 2e5 + 0.005, "D at 40 MB: {d40}");
}

#[test]
fn bad_parameters_name_their_key() {
    let key = |s: BurstySpec| match Bursty::new(s).err().unwrap() {
        Error::Config { key, .. } => key,
        other => panic!("{other}"),
    };
    let k = |s: &str| format!("workload.synthetic.{s}");
    assert_eq!(
        key(BurstySpec {
            rate_iops: 0.0,
            ..spec()
        }),
        k("rate_iops")
    );
    assert_eq!(
        key(BurstySpec {
            burst_len: 0.5,
            ..spec()
        }),
        k("burst_len")
    );
    assert_eq!(
        key(BurstySpec {
            gap_len: f64::NAN,
            ..spec()
        }),
        k("gap_len")
    );
    assert_eq!(
        key(BurstySpec {
            burst_speedup: 0.0,
            ..spec()
        }),
        k("burst_speedup")
    );
    assert_eq!(
        key(BurstySpec {
            read_ratio: 1.5,
            ..spec()
        }),
        k("read_ratio")
    );
    assert_eq!(
        key(BurstySpec {
            history_share: -0.1,
            ..spec()
        }),
        k("history_share")
    );
    assert_eq!(
        key(BurstySpec {
            request_bytes: 1000,
            ..spec()
        }),
        k("request_bytes")
    );
    assert_eq!(
        key(BurstySpec {
            space_bytes: 8192,
            ..spec()
        }),
        k("space_gib")
    );
    assert_eq!(
        key(BurstySpec {
            working_set_bytes: 100,
            ..spec()
        }),
        k("working_set_mib")
    );
    let huge = BurstySpec {
        working_set_bytes: 1 << 40,
        ..spec()
    };
    assert_eq!(key(huge), k("working_set_mib"));
    let wide = BurstySpec {
        distance: Distance::Normal {
            mean: 0.5,
            std: 2.0,
        },
        ..spec()
    };
    assert_eq!(key(wide), k("distance_std"));
    let flat = BurstySpec {
        distance: Distance::Exponential { mean: 0.0 },
        ..spec()
    };
    assert_eq!(key(flat), k("distance_mean"));
    assert!(BurstySpec::preset("synthetic-e", 1).is_none());
}

fn small_spec() -> impl Strategy<Value = BurstySpec> {
    (
        (
            1u64..400,
            1.0f64..50.0,
            1.0f64..200.0,
            1.0f64..20.0,
            0.0f64..=1.0,
        ),
        (
            1u64..64,
            2u64..4096,
            0.0f64..=1.0,
            0u8..3,
            0.0f64..=1.0,
            0.01f64..=1.0,
        ),
        any::<u64>(),
    )
        .prop_map(
            |((requests, burst, gap, speedup, read), (ws, space, share, shape, m, sd), seed)| {
                let distance = match shape {
                    0 => Distance::Uniform,
                    1 => Distance::Exponential { mean: m.max(0.01) },
                    _ => Distance::Normal { mean: m, std: sd },
                };
                BurstySpec {
                    requests,
                    rate_iops: 500.0,
                    burst_len: burst,
                    gap_len: gap,
                    burst_speedup: speedup,
                    read_ratio: read,
                    request_bytes: 4096,
                    space_bytes: space.max(ws) * 4096,
                    working_set_bytes: ws * 4096,
                    history_share: share,
                    distance,
                    seed,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every request is aligned, inside the space, in time order; tables stay within their
    /// capacities, which add up to the working set; the stream has exactly `requests`.
    #[test]
    fn requests_are_well_formed(s in small_spec()) {
        let mut g = Bursty::new(s.clone()).unwrap();
        let caps = [g.tables()[0].capacity(), g.tables()[1].capacity()];
        prop_assert!(caps[0] + caps[1] >= (s.working_set_bytes / 4096) as usize);
        let (mut n, mut last) = (0u64, 0u64);
        while let Some(r) = g.next_request().unwrap() {
            n += 1;
            prop_assert!(r.offset % 4096 == 0 && r.offset + r.len <= s.space_bytes);
            prop_assert!(r.time_ns >= last);
            last = r.time_ns;
            if s.read_ratio == 0.0 { prop_assert_eq!(r.op, Op::Write); }
            if s.read_ratio == 1.0 { prop_assert_eq!(r.op, Op::Read); }
            for (t, cap) in g.tables().iter().zip(caps) {
                prop_assert!(t.len() <= cap);
            }
        }
        prop_assert_eq!(n, s.requests);
    }
}
