//! Where the `hotspots` defaults come from: the WebSearch sample measured with the locality
//! estimator, and the fits that chose the parameters. The fits are ignored tests that print
//! their tables (run them in release mode):
//!
//! ```text
//! cargo test -p raidlab --release --lib hotspots::fit -- --ignored --nocapture
//! ```
//!
//! The plain tests check that the sample still measures as documented (skipped without the
//! traces) and that the fitted model reproduces the sample's statistics.

use std::path::Path;

use super::*;
use crate::workload::open_trace_file;
use crate::workload::real_traces_tests::traces;
use crate::workload::synth::locality::{measure, measure_pairs, LocalitySpec, LocalityStats};
use crate::workload::Format;

const AREA: u64 = 16 << 20;
const LAGS: [usize; 4] = [1, 2, 4, 8];
const BINS_S: [f64; 5] = [0.1, 0.5, 1.0, 2.0, 5.0];
/// The sample: 60.055 s; devices 0 and 1 hold 8,340 and 8,231 requests over spans of 1,068
/// and 1,058 areas. The fits simulate one device of their mean size.
const SAMPLE_S: f64 = 60.055;
const SAMPLE_AREAS: u64 = 1063;
const SAMPLE_REQUESTS: u64 = 8285;
/// What the estimator gives on devices 0 and 1 of the sample (their mean), in the order of
/// [`row`]: touched per window, reref at lags 1, 2, 4, 8 windows, touched over 60 s.
const SAMPLE: [f64; 6] = [0.1096, 0.6734, 0.5561, 0.5314, 0.5034, 0.2828];

fn loc(areas: u64) -> LocalitySpec {
    LocalitySpec {
        area_bytes: AREA,
        areas,
        window_ns: 5_000_000_000,
        lags: LAGS.to_vec(),
        bins_ns: BINS_S.iter().map(|b| (b * 1e9) as u64).collect(),
    }
}

/// The statistics the locality fit matches.
fn row(s: &LocalityStats) -> [f64; 6] {
    [
        s.touched,
        s.reref[0],
        s.reref[1],
        s.reref[2],
        s.reref[3],
        s.touched_all,
    ]
}

/// The requests of a trace (of device `dev`, or all) as `(arrival_ns, area)` pairs, and the
/// areas their addresses span: one pass over the file.
fn read_trace(path: &Path, format: Format, dev: Option<u64>) -> (Vec<(u64, u64)>, u64) {
    let mut src = open_trace_file(path, format, dev).unwrap();
    let (mut pairs, mut end) = (Vec::new(), 0);
    while let Some(r) = src.next_request().unwrap() {
        pairs.push((r.time_ns, r.offset / AREA));
        end = end.max(r.offset + r.len);
    }
    (pairs, end.div_ceil(AREA))
}

/// The sample's device `dev` measured over its own span (`None` without the traces).
fn sample_device(dev: u64) -> Option<LocalityStats> {
    let path = traces()?.join("websearch/wsrch-small.mqsim.txt");
    let (pairs, span) = read_trace(&path, Format::MqSim, Some(dev));
    Some(measure_pairs(&pairs, &loc(span)))
}

/// The model at the sample's conditions (one device), averaged over `seeds`.
fn model_row(spec: &HotspotsSpec, seeds: u64) -> [f64; 6] {
    let mut sum = [0.0; 6];
    for seed in 1..=seeds {
        let mut g = Hotspots::new(HotspotsSpec {
            seed,
            ..spec.clone()
        })
        .unwrap();
        let r = row(&measure(&mut g, &loc(SAMPLE_AREAS)).unwrap());
        for (s, x) in sum.iter_mut().zip(r) {
            *s += x / seeds as f64;
        }
    }
    sum
}

fn at_sample(spec: HotspotsSpec) -> HotspotsSpec {
    HotspotsSpec {
        space_bytes: SAMPLE_AREAS * AREA,
        requests: SAMPLE_REQUESTS,
        mean_interarrival_ns: SAMPLE_S * 1e9 / SAMPLE_REQUESTS as f64,
        ..spec
    }
}

fn fmt(r: &[f64]) -> String {
    r.iter()
        .map(|x| format!("{x:.4}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_websearch_sample_measures_as_documented() {
    let (Some(a), Some(b)) = (sample_device(0), sample_device(1)) else {
        eprintln!("skipped: the WebSearch sample (../shared/traces/websearch) is absent");
        return;
    };
    let mean: Vec<f64> = row(&a)
        .iter()
        .zip(row(&b))
        .map(|(x, y)| (x + y) / 2.0)
        .collect();
    for (got, want) in mean.iter().zip(SAMPLE) {
        assert!((got - want).abs() < 5e-4, "{mean:?}");
    }
}

#[test]
fn the_fitted_model_reproduces_the_sample() {
    let spec = at_sample(HotspotsSpec::websearch(0, 0, 1.0, 0));
    let got = model_row(&spec, 20);
    for (g, w) in got.iter().zip(SAMPLE) {
        assert!((g - w).abs() < 0.05, "{} vs {}", fmt(&got), fmt(&SAMPLE));
    }
}

#[test]
#[ignore = "prints the measurements; run in release mode"]
fn print_the_real_traces() {
    let Some(dir) = traces() else { return };
    for dev in 0..3 {
        let s = sample_device(dev).unwrap();
        println!(
            "websearch device {dev}: {} requests, {} windows; touched, reref 1/2/4/8, touched 60 s: \
             {}; top 20%: {:.3}; idc at {BINS_S:?} s: {}",
            s.requests,
            s.windows,
            fmt(&row(&s)),
            s.top_share,
            fmt(&s.idc)
        );
    }
    let (pairs, _) = read_trace(
        &dir.join("websearch/wsrch-small.mqsim.txt"),
        Format::MqSim,
        None,
    );
    let s = measure_pairs(&pairs, &loc(1));
    println!(
        "websearch, all devices: {} requests; idc at {BINS_S:?} s: {}",
        s.requests,
        fmt(&s.idc)
    );
    // The longer traces, with windows of 60 s (they are far less intense).
    for (rel, format) in [
        ("disksim/ascii.trace", Format::DiskSim),
        ("cloudphysics/cloudPhysicsIO.csv", Format::CloudPhysicsCsv),
        ("hp/hplajw-1week.msr.csv", Format::Msr),
    ] {
        let (pairs, areas) = read_trace(&dir.join(rel), format, None);
        let spec = LocalitySpec {
            window_ns: 60_000_000_000,
            lags: vec![1, 2, 5, 10, 20],
            bins_ns: vec![1_000_000_000, 10_000_000_000],
            ..loc(areas)
        };
        let s = measure_pairs(&pairs, &spec);
        println!(
            "{rel}: {} requests, {} areas, {} windows of 60 s; touched {:.3}; reref at 1/2/5/10/20 \
             windows {}; touched all {:.3}; top 20% {:.3}; idc at 1 s, 10 s: {}",
            s.requests,
            areas,
            s.windows,
            s.touched,
            fmt(&s.reref),
            s.touched_all,
            s.top_share,
            fmt(&s.idc)
        );
    }
}

#[test]
#[ignore = "a grid search; run in release mode"]
fn fit_the_locality_to_the_sample() {
    let base = at_sample(HotspotsSpec::websearch(0, 0, 1.0, 0));
    let mut best: Vec<(f64, String)> = Vec::new();
    for set_fraction in [0.15, 0.2, 0.22, 0.25, 0.27, 0.3, 0.35] {
        for spot_fraction in [0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04] {
            for spot_share in [0.6, 0.7, 0.75, 0.8, 0.85, 0.875, 0.9] {
                for spot_life_s in [1.0, 2.0, 2.5, 3.0, 4.0, 5.0, 8.0] {
                    let spec = HotspotsSpec {
                        set_fraction,
                        spot_fraction,
                        spot_share,
                        spot_life_s,
                        ..base.clone()
                    };
                    let r = model_row(&spec, 20);
                    let err: f64 = r.iter().zip(SAMPLE).map(|(a, b)| (a - b).powi(2)).sum();
                    best.push((
                        err,
                        format!(
                            "set {set_fraction} spots {spot_fraction} share {spot_share} \
                             life {spot_life_s}: {}",
                            fmt(&r)
                        ),
                    ));
                }
            }
        }
    }
    best.sort_by(|a, b| a.0.total_cmp(&b.0));
    println!("sample: {}", fmt(&SAMPLE));
    for (err, line) in best.iter().take(15) {
        println!("{err:.5} {line}");
    }
}

#[test]
#[ignore = "a search over set_life_s; run in release mode"]
fn fit_the_set_life_to_the_long_run_concentration() {
    // The PRO paper's Table 2: over each full trace the hottest 20% of the space receives
    // about 70% of requests. One device of three (the sample's busy ones) gets a third of
    // the requests.
    for (name, requests, mean_ms) in [
        ("WebSearch1", 842_535u64, 3.74),
        ("WebSearch2", 999_999, 3.73),
        ("WebSearch3", 999_999, 5.71),
    ] {
        let per_device = requests / 3;
        for set_life_s in [
            1000.0, 2000.0, 2500.0, 2750.0, 3000.0, 3250.0, 3500.0, 4000.0, 6000.0,
        ] {
            let mut share = 0.0;
            for seed in 1..=10 {
                let spec = HotspotsSpec {
                    space_bytes: SAMPLE_AREAS * AREA,
                    requests: per_device,
                    mean_interarrival_ns: mean_ms * 3.0 * 1e6,
                    set_life_s,
                    seed,
                    ..HotspotsSpec::websearch(0, 0, 1.0, 0)
                };
                let mut g = Hotspots::new(spec).unwrap();
                let s = measure(&mut g, &loc(SAMPLE_AREAS)).unwrap();
                share += s.top_share / 10.0;
            }
            println!(
                "{name} ({:.0} s): set_life_s {set_life_s}: top 20% share {share:.3}",
                requests as f64 * mean_ms / 1e3
            );
        }
    }
}

#[test]
#[ignore = "a grid fit; run in release mode"]
fn fit_the_arrivals() {
    // The whole sample (all devices: the arrival process is shared).
    let Some(dir) = traces() else { return };
    let path = dir.join("websearch/wsrch-small.mqsim.txt");
    let (pairs, _) = read_trace(&path, Format::MqSim, None);
    let times: Vec<u64> = pairs.iter().map(|p| p.0).collect();
    let fit_bins = [0.5, 1.0, 2.0];
    let s = measure_pairs(
        &pairs,
        &LocalitySpec {
            bins_ns: fit_bins.iter().map(|b| (b * 1e9) as u64).collect(),
            ..loc(1)
        },
    );
    let m = times.len() as f64 / (*times.last().unwrap() as f64 / 1e9);
    // Index of dispersion 1 + 2 (v / m) c (1 - (c / T)(1 - exp(-T / c))): fit v / m and c
    // on a grid, by squared error of the logarithms.
    let idc = |vm: f64, c: f64, t: f64| 1.0 + 2.0 * vm * c * (1.0 - c / t * (1.0 - (-t / c).exp()));
    let mut best = (f64::INFINITY, 0.0, 0.0);
    for ci in 1..=400 {
        let c = ci as f64 * 0.05;
        for vi in 1..=1000 {
            let vm = vi as f64 * 0.05;
            let e: f64 = fit_bins
                .iter()
                .zip(&s.idc)
                .map(|(&t, &x)| (idc(vm, c, t).ln() - x.ln()).powi(2))
                .sum();
            if e < best.0 {
                best = (e, vm, c);
            }
        }
    }
    let (_, vm, c) = best;
    // The share of the busy state from the skew of the per-second counts (their Poisson
    // part removed): a two-point rate distribution with mass p on the higher value has skew
    // (1 - 2p) / sqrt(p (1 - p)).
    let secs = (*times.last().unwrap() / 1_000_000_000) as usize;
    let mut per_s = vec![0f64; secs];
    for &t in &times {
        if let Some(x) = per_s.get_mut((t / 1_000_000_000) as usize) {
            *x += 1.0;
        }
    }
    let mean = per_s.iter().sum::<f64>() / secs as f64;
    let var = per_s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / secs as f64;
    let m3 = per_s.iter().map(|x| (x - mean).powi(3)).sum::<f64>() / secs as f64;
    let skew = (m3 - mean) / (var - mean).powf(1.5);
    let p = (1..100)
        .map(|i| i as f64 / 100.0)
        .min_by(|a, b| {
            let f = |p: f64| ((1.0 - 2.0 * p) / (p * (1.0 - p)).sqrt() - skew).abs();
            f(*a).total_cmp(&f(*b))
        })
        .unwrap();
    // Relative rates h, l with p h + (1 - p) l = 1 and p (1 - p) (h - l)^2 = v / m^2.
    let gap = (vm / m / (p * (1.0 - p))).sqrt();
    let low = 1.0 - p * gap;
    let high = low + gap;
    println!(
        "rate {m:.1}/s; idc at {fit_bins:?} s: {}; fit v/m {vm:.2}, correlation time {c:.2} s; \
         per-second skew {skew:.3} -> busy share {p:.2}; rates {high:.3} / {low:.3} of the mean \
         (ratio {:.3}); busy stays {:.2} s, lulls {:.2} s",
        fmt(&s.idc),
        high / low,
        c / (1.0 - p),
        c / p
    );
}

#[test]
#[ignore = "prints the models under the sample's conditions; run in release mode"]
fn print_the_models_at_the_sample() {
    // The static WebSearch generator of pro-dor.toml (16 MiB popularity clusters) sampled
    // as one device of the sample, beside the fitted hotspots model (20 seeds each).
    let mut sum = [0.0; 6];
    for seed in 1..=20u64 {
        let mut g = crate::workload::synth::WebSearch::new(
            SAMPLE_AREAS * AREA,
            SAMPLE_REQUESTS,
            (SAMPLE_S * 1e9 / SAMPLE_REQUESTS as f64) as u64,
            seed,
        )
        .unwrap()
        .with_cluster(AREA)
        .unwrap();
        let r = row(&measure(&mut g, &loc(SAMPLE_AREAS)).unwrap());
        for (s, x) in sum.iter_mut().zip(r) {
            *s += x / 20.0;
        }
    }
    println!("sample:               {}", fmt(&SAMPLE));
    println!("websearch (static):   {}", fmt(&sum));
    let fitted = model_row(&at_sample(HotspotsSpec::websearch(0, 0, 1.0, 0)), 20);
    println!("hotspots (fitted):    {}", fmt(&fitted));
}
