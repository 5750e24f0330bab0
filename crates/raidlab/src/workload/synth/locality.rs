//! Temporal-locality statistics of a request stream, the estimator the `hotspots` generator
//! was fitted with: the same function measures the real traces and the generator, so
//! sampling noise (few requests per window) affects both alike.
//!
//! Requests are placed in areas of `area_bytes` by their start offset and in windows of
//! `window_ns` by their arrival time; only whole windows count (`floor(last arrival /
//! window)` of them). With `n` = the number of areas of the space:
//!
//! * `touched`: distinct areas a window touches, as a share of `n`, averaged over windows;
//! * `reref[j]`: for lag `L = lags[j]` windows, the share of the requests of windows
//!   `L, L+1, ...` that land on an area their window `i - L` touched (requests pooled over
//!   the window pairs). A static popularity keeps this flat as `L` grows; a hot set that
//!   moves makes it fall;
//! * `touched_all`: distinct areas the whole stream touches, as a share of `n`;
//! * `top_share`: the share of all requests on the `round(0.2 n)` most requested areas;
//! * `idc[j]`: variance over mean of the number of arrivals in bins of `bins_ns[j]` (whole
//!   bins only; population variance): 1 for Poisson arrivals, more for bursty ones.

use crate::error::Result;
use crate::workload::RequestSource;

/// What to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalitySpec {
    pub area_bytes: u64,
    /// Areas of the space (the denominator of `touched` and `top_share`); areas past it
    /// count as well (a trace may address beyond the span given).
    pub areas: u64,
    pub window_ns: u64,
    pub lags: Vec<usize>,
    pub bins_ns: Vec<u64>,
}

/// The measured statistics (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalityStats {
    pub requests: u64,
    pub windows: usize,
    pub touched: f64,
    pub reref: Vec<f64>,
    pub touched_all: f64,
    pub top_share: f64,
    pub idc: Vec<f64>,
}

/// Measure `src` to its end.
pub fn measure(src: &mut dyn RequestSource, spec: &LocalitySpec) -> Result<LocalityStats> {
    let mut reqs: Vec<(u64, u64)> = Vec::new();
    while let Some(r) = src.next_request()? {
        reqs.push((r.time_ns, r.offset / spec.area_bytes.max(1)));
    }
    Ok(measure_pairs(&reqs, spec))
}

/// Measure `(arrival_ns, area)` pairs in arrival order.
pub fn measure_pairs(reqs: &[(u64, u64)], spec: &LocalitySpec) -> LocalityStats {
    let n = spec.areas.max(1) as f64;
    let last = reqs.iter().map(|r| r.0).max().unwrap_or(0);
    let w = spec.window_ns.max(1);
    let windows = (last / w) as usize;
    // Areas of each whole window, sorted and deduplicated, with the window's requests.
    let mut per_window: Vec<Vec<u64>> = vec![Vec::new(); windows];
    for &(t, a) in reqs {
        if let Some(v) = per_window.get_mut((t / w) as usize) {
            v.push(a);
        }
    }
    let distinct: Vec<Vec<u64>> = per_window
        .iter()
        .map(|v| {
            let mut d = v.clone();
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect();
    let touched = if windows == 0 {
        0.0
    } else {
        distinct.iter().map(|d| d.len() as f64).sum::<f64>() / windows as f64 / n
    };
    let reref = spec
        .lags
        .iter()
        .map(|&lag| {
            let (mut hits, mut total) = (0u64, 0u64);
            for i in lag..windows {
                let seen = &distinct[i - lag];
                for a in &per_window[i] {
                    hits += u64::from(seen.binary_search(a).is_ok());
                }
                total += per_window[i].len() as u64;
            }
            if total == 0 {
                0.0
            } else {
                hits as f64 / total as f64
            }
        })
        .collect();
    // Requests per area touched.
    let mut all: Vec<u64> = reqs.iter().map(|r| r.1).collect();
    all.sort_unstable();
    let mut counts: Vec<u64> = all
        .chunk_by(|a, b| a == b)
        .map(|c| c.len() as u64)
        .collect();
    let touched_all = counts.len() as f64 / n;
    counts.sort_unstable_by(|a, b| b.cmp(a));
    let top = ((0.2 * n).round() as usize).max(1);
    let top_share = if reqs.is_empty() {
        0.0
    } else {
        counts.iter().take(top).sum::<u64>() as f64 / reqs.len() as f64
    };
    let idc = spec
        .bins_ns
        .iter()
        .map(|&b| {
            let b = b.max(1);
            let bins = (last / b) as usize;
            if bins == 0 {
                return 0.0;
            }
            let mut c = vec![0u64; bins];
            for &(t, _) in reqs {
                if let Some(x) = c.get_mut((t / b) as usize) {
                    *x += 1;
                }
            }
            let mean = c.iter().sum::<u64>() as f64 / bins as f64;
            let var = c.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / bins as f64;
            if mean > 0.0 {
                var / mean
            } else {
                0.0
            }
        })
        .collect();
    LocalityStats {
        requests: reqs.len() as u64,
        windows,
        touched,
        reref,
        touched_all,
        top_share,
        idc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example() {
        // Windows of 10 ns, areas of 1 byte, 5 areas in the space; the last arrival at 31 ns
        // makes 3 whole windows (the request at 31 ns counts only in the whole-stream terms).
        // Window 0: areas 0, 0, 1. Window 1: 1, 2. Window 2: 0, 3, 3.
        let reqs = [
            (0, 0),
            (1, 0),
            (5, 1),
            (10, 1),
            (15, 2),
            (20, 0),
            (21, 3),
            (29, 3),
            (31, 4),
        ];
        let spec = LocalitySpec {
            area_bytes: 1,
            areas: 5,
            window_ns: 10,
            lags: vec![1, 2, 3],
            bins_ns: vec![10],
        };
        let s = measure_pairs(&reqs, &spec);
        assert_eq!((s.requests, s.windows), (9, 3));
        // Distinct per window: 2, 2, 2 of 5 areas.
        assert_eq!(s.touched, 0.4);
        // Lag 1: window 1 (1, 2) on {0, 1}: 1 hit; window 2 (0, 3, 3) on {1, 2}: 0 hits.
        // 1 of 5. Lag 2: window 2 on {0, 1}: 1 of 3. Lag 3: no pair.
        assert_eq!(s.reref, vec![0.2, 1.0 / 3.0, 0.0]);
        // All five areas touched; the top round(0.2 * 5) = 1 area holds 3 of 9 (area 0).
        assert_eq!((s.touched_all, s.top_share), (1.0, 3.0 / 9.0));
        // Bins of 10 ns: 3, 2, 3 -> mean 8/3, variance 2/9, ratio 1/12.
        assert!((s.idc[0] - 1.0 / 12.0).abs() < 1e-12, "{:?}", s.idc);
    }

    #[test]
    fn empty_streams_measure_zero() {
        let spec = LocalitySpec {
            area_bytes: 16,
            areas: 4,
            window_ns: 5,
            lags: vec![1],
            bins_ns: vec![1],
        };
        let s = measure_pairs(&[], &spec);
        assert_eq!(
            (s.windows, s.touched, s.reref[0], s.top_share, s.idc[0]),
            (0, 0.0, 0.0, 0.0, 0.0)
        );
    }
}
