//! Seek curves: the time the arm needs to move `d` cylinders (d = 0 costs nothing).
//!
//! Three forms, each compiled once into a [`Seek`] that answers in a few instructions:
//! - a measured table of (distance, time) points, interpolated linearly;
//! - Lee's three-point curve from the single-cylinder, average and full-stroke times;
//! - Ruemmler and Wilkes' two-piece curve (square root for short seeks, linear for long ones).

use crate::error::{Error, Result};

/// Disks with at most this many cylinders get a dense per-distance array (at most 256 KiB);
/// larger ones a knot list searched by bisection.
const DENSE_MAX_CYLINDERS: u32 = 1 << 16;

/// Largest seek time accepted, so compiled times fit `u32` nanoseconds (about 4.3 s).
const MAX_SEEK_NS: u64 = u32::MAX as u64;

/// A seek curve as configured or measured.
#[derive(Debug, Clone, PartialEq)]
pub enum SeekSpec {
    /// Measured points `(distance_cylinders, time_ns)`, distances at least 1 and strictly
    /// increasing. Between points: linear interpolation. Below the first point: the first point's
    /// time. Beyond the last point: the last point's time (clamped, not extrapolated — the
    /// last segments of measured tables are noisy, e.g. atlas10k falls from 10.85 to 10.46
    /// ms and rises to 10.83 ms over its last 121 cylinders, and a slope would amplify that).
    Table(Vec<(u64, u64)>),
    /// Lee's curve `t(d) = a sqrt(d-1) + b (d-1) + c` for d >= 1, with `c = min_ns` and `a`,
    /// `b` chosen so that the mean over uniformly random cylinder pairs is `avg_ns` and the
    /// full stroke is about `max_ns` (`a = (-10 min + 15 avg - 5 max) / (3 sqrt N)`,
    /// `b = (7 min - 15 avg + 8 max) / (3 N)`, N = cylinders).
    ThreePoint {
        min_ns: u64,
        avg_ns: u64,
        max_ns: u64,
    },
    /// Ruemmler–Wilkes: `short_a_ns + short_b_ns_per_sqrt * sqrt(d)` for `d < boundary_cyl`,
    /// else `long_a_ns + long_b_ns_per_cyl * d`.
    TwoPiece {
        short_a_ns: u64,
        short_b_ns_per_sqrt: u64,
        long_a_ns: u64,
        long_b_ns_per_cyl: u64,
        boundary_cyl: u64,
    },
}

impl SeekSpec {
    /// Check the parameters and compile the curve for a disk of `cylinders` cylinders.
    /// Errors name the config key the parameter comes from (`disk.seek_table_ms[2]`).
    pub fn compile(&self, cylinders: u32) -> Result<Seek> {
        debug_assert!(cylinders >= 1);
        let max_d = cylinders.saturating_sub(1).max(1);
        match self {
            SeekSpec::Table(points) => {
                validate_table(points)?;
                Ok(if cylinders <= DENSE_MAX_CYLINDERS {
                    let mut dense = vec![0u32; max_d as usize + 1];
                    for (d, slot) in dense.iter_mut().enumerate().skip(1) {
                        *slot = interpolate_table(points, d as u64) as u32;
                    }
                    Seek::dense(dense)
                } else {
                    let knots_d = points.iter().map(|&(d, _)| d as u32).collect();
                    let knots_ns = points.iter().map(|&(_, t)| t as u32).collect();
                    Seek::knots(knots_d, knots_ns)
                })
            }
            SeekSpec::ThreePoint {
                min_ns,
                avg_ns,
                max_ns,
            } => {
                let (min, avg, max) = (*min_ns, *avg_ns, *max_ns);
                if min == 0 {
                    return Err(Error::config("disk.seek_min_ms", "expected a time > 0"));
                }
                if avg < min {
                    return Err(Error::config(
                        "disk.seek_avg_ms",
                        format!("expected >= seek_min_ms ({} ms)", ns_as_ms(min)),
                    ));
                }
                if max < avg {
                    return Err(Error::config(
                        "disk.seek_max_ms",
                        format!("expected >= seek_avg_ms ({} ms)", ns_as_ms(avg)),
                    ));
                }
                if max > MAX_SEEK_NS {
                    return Err(Error::config("disk.seek_max_ms", "expected <= 4294 ms"));
                }
                let n = cylinders as f64;
                let (min, avg, max) = (min as f64, avg as f64, max as f64);
                let a = (-10.0 * min + 15.0 * avg - 5.0 * max) / (3.0 * n.sqrt());
                let b = (7.0 * min - 15.0 * avg + 8.0 * max) / (3.0 * n);
                let curve = |d: u64| {
                    let x = (d - 1) as f64;
                    a * x.sqrt() + b * x + min
                };
                compile_curve(max_d, curve, "disk.seek_avg_ms")
            }
            SeekSpec::TwoPiece {
                short_a_ns,
                short_b_ns_per_sqrt,
                long_a_ns,
                long_b_ns_per_cyl,
                boundary_cyl,
            } => {
                let key = "disk.seek_two_piece_ms";
                if *short_a_ns == 0 && *short_b_ns_per_sqrt == 0 {
                    return Err(Error::config(key, "short-seek times must not all be 0"));
                }
                if *long_a_ns == 0 && *long_b_ns_per_cyl == 0 && *boundary_cyl <= max_d as u64 {
                    return Err(Error::config(key, "long-seek times must not all be 0"));
                }
                let (sa, sb) = (*short_a_ns as f64, *short_b_ns_per_sqrt as f64);
                let (la, lb) = (*long_a_ns as f64, *long_b_ns_per_cyl as f64);
                let boundary = *boundary_cyl;
                let curve = |d: u64| {
                    if d < boundary {
                        sa + sb * (d as f64).sqrt()
                    } else {
                        la + lb * d as f64
                    }
                };
                compile_curve(max_d, curve, key)
            }
        }
    }
}

fn ns_as_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn validate_table(points: &[(u64, u64)]) -> Result<()> {
    let key = "disk.seek_table_ms";
    if points.is_empty() {
        return Err(Error::config(
            key,
            "expected at least one (distance, time) point",
        ));
    }
    let mut prev = 0u64;
    for (i, &(d, t)) in points.iter().enumerate() {
        let at = format!("{key}[{i}]");
        if d <= prev {
            return Err(Error::config(
                at,
                if i == 0 {
                    format!("expected a distance >= 1 cylinder, got {d}")
                } else {
                    format!("distances must increase strictly; {d} follows {prev}")
                },
            ));
        }
        if d > u32::MAX as u64 {
            return Err(Error::config(at, format!("distance {d} is too large")));
        }
        if t == 0 {
            return Err(Error::config(at, "expected a time > 0"));
        }
        if t > MAX_SEEK_NS {
            return Err(Error::config(at, "expected a time <= 4294 ms"));
        }
        prev = d;
    }
    Ok(())
}

/// The table's time at distance `d >= 1`: linear between points, clamped outside them.
/// Integer arithmetic, so the dense array and the knot list agree exactly.
fn interpolate_table(points: &[(u64, u64)], d: u64) -> u64 {
    let i = points.partition_point(|&(pd, _)| pd < d);
    if i == 0 {
        return points[0].1;
    }
    if i == points.len() {
        return points[i - 1].1;
    }
    let (d0, t0) = points[i - 1];
    let (d1, t1) = points[i];
    lerp(d0, t0, d1, t1, d)
}

/// Linear interpolation between (d0, t0) and (d1, t1) at d0 <= d <= d1, rounded down.
#[inline]
fn lerp(d0: u64, t0: u64, d1: u64, t1: u64, d: u64) -> u64 {
    debug_assert!(d0 <= d && d <= d1 && d0 < d1);
    // Times are below 2^32 and distances below 2^32, so the product fits `i64` unless both
    // are near their bounds; the `i128` path gives the same floor when it does not.
    let (span, dt, x) = ((d1 - d0) as i64, t1 as i64 - t0 as i64, (d - d0) as i64);
    match dt.checked_mul(x) {
        Some(p) => (t0 as i64 + p.div_euclid(span)) as u64,
        None => (t0 as i128 + (dt as i128 * x as i128).div_euclid(span as i128)) as u64,
    }
}

/// Sample a closed-form curve (f64, at construction only): densely for small disks, else
/// at every distance up to 64 and then every ~2% (the interpolation error of a sqrt curve
/// at that spacing is below 1e-4 relative).
fn compile_curve(max_d: u32, curve: impl Fn(u64) -> f64, key: &str) -> Result<Seek> {
    let sample = |d: u64| -> Result<u32> {
        let t = curve(d).round();
        if t.is_nan() || t < 1.0 {
            return Err(Error::config(
                key,
                format!("the seek curve is not positive at distance {d} cylinders"),
            ));
        }
        if t > MAX_SEEK_NS as f64 {
            return Err(Error::config(key, "seek times must be <= 4294 ms"));
        }
        Ok(t as u32)
    };
    if max_d < DENSE_MAX_CYLINDERS {
        let mut dense = vec![0u32; max_d as usize + 1];
        for (d, slot) in dense.iter_mut().enumerate().skip(1) {
            *slot = sample(d as u64)?;
        }
        return Ok(Seek::dense(dense));
    }
    let (mut knots_d, mut knots_ns) = (Vec::new(), Vec::new());
    let mut d = 1u32;
    loop {
        knots_d.push(d);
        knots_ns.push(sample(d as u64)?);
        if d == max_d {
            break;
        }
        let step = if d < 64 { 1 } else { (d / 50).max(1) };
        d = d.saturating_add(step).min(max_d);
    }
    Ok(Seek::knots(knots_d, knots_ns))
}

/// Distances below this are answered from a dense array even when the curve is a knot list
/// (16 KiB): the seeks of a workload that uses a small part of a large drive stay there.
const NEAR_CYLINDERS: u32 = 1 << 12;

/// Knot lookups start in a bucket of `1 << BUCKET_SHIFT` cylinders: the bucket table holds,
/// for each bucket, the first knot at or beyond its start, so a lookup bisects only the knots
/// inside one bucket (at most 4 for the closed-form curves past [`NEAR_CYLINDERS`]).
const BUCKET_SHIFT: u32 = 8;

/// A compiled seek curve.
///
/// Every answer is the knot list's linear interpolation (or the dense table a small drive is
/// compiled into); the near array and the buckets only find the same value faster, so a
/// curve answers the same integer nanoseconds whichever path serves a distance.
#[derive(Debug, Clone)]
pub struct Seek {
    /// `dense[d]` = time of a `d`-cylinder seek for `d < dense.len()` (`dense[0] = 0`). With
    /// no knots it covers every distance of the drive (longer ones clamp to the last entry);
    /// with knots it is the knot interpolation's value for the first [`NEAR_CYLINDERS`].
    dense: Vec<u32>,
    /// Strictly increasing distances >= 1 and their times, interpolated linearly, clamped at
    /// both ends.
    knots_d: Vec<u32>,
    knots_ns: Vec<u32>,
    /// `buckets[b]` = index of the first knot with distance >= `b << BUCKET_SHIFT`, for every
    /// bucket up to the last knot's (empty without knots).
    buckets: Vec<u32>,
}

impl Seek {
    fn dense(dense: Vec<u32>) -> Seek {
        debug_assert!(dense.len() >= 2 && dense[0] == 0);
        Seek {
            dense,
            knots_d: Vec::new(),
            knots_ns: Vec::new(),
            buckets: Vec::new(),
        }
    }

    fn knots(knots_d: Vec<u32>, knots_ns: Vec<u32>) -> Seek {
        debug_assert!(!knots_d.is_empty() && knots_d.len() == knots_ns.len());
        debug_assert!(knots_d.windows(2).all(|w| w[0] < w[1]));
        let last = *knots_d.last().expect("at least one knot");
        let buckets = (0..=(last >> BUCKET_SHIFT))
            .map(|b| knots_d.partition_point(|&k| k < (b << BUCKET_SHIFT)) as u32)
            .collect();
        let mut seek = Seek {
            dense: Vec::new(),
            knots_d,
            knots_ns,
            buckets,
        };
        let near = (0..u64::from(NEAR_CYLINDERS))
            .map(|d| seek.knot_ns(d) as u32)
            .collect();
        seek.dense = near;
        seek
    }

    /// Time of a seek over `d` cylinders, in ns (0 for d = 0).
    #[inline]
    pub fn ns(&self, d: u64) -> u64 {
        if let Some(&t) = self.dense.get(d as usize) {
            return u64::from(t);
        }
        if self.knots_d.is_empty() {
            // Past the drive's longest seek: clamp.
            return u64::from(self.dense[self.dense.len() - 1]);
        }
        self.knot_ns(d)
    }

    /// The knot list's time at distance `d`: bisection inside `d`'s bucket, then the linear
    /// interpolation of [`lerp`] (integer, rounded down).
    fn knot_ns(&self, d: u64) -> u64 {
        if d == 0 {
            return 0;
        }
        let b = (d >> BUCKET_SHIFT) as usize;
        let i = match self.buckets.get(b) {
            Some(&lo) => {
                // Every knot before `lo` is below the bucket's start (<= d); every knot from
                // the next bucket's first on is beyond the bucket (> d).
                let hi = self
                    .buckets
                    .get(b + 1)
                    .map_or(self.knots_d.len(), |&h| h as usize);
                let lo = lo as usize;
                lo + self.knots_d[lo..hi].partition_point(|&k| (k as u64) < d)
            }
            None => self.knots_d.len(),
        };
        debug_assert_eq!(i, self.knots_d.partition_point(|&k| (k as u64) < d));
        if i == 0 {
            return self.knots_ns[0] as u64;
        }
        if i == self.knots_d.len() {
            return self.knots_ns[i - 1] as u64;
        }
        lerp(
            self.knots_d[i - 1] as u64,
            self.knots_ns[i - 1] as u64,
            self.knots_d[i] as u64,
            self.knots_ns[i] as u64,
            d,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(e: Error) -> String {
        match e {
            Error::Config { key, .. } => key,
            other => panic!("expected a config error, got {other}"),
        }
    }

    #[test]
    fn table_interpolates_and_clamps() {
        // Points (2, 1.0 ms), (6, 3.0 ms): d = 1 clamps to 1.0 ms, d = 4 is halfway (2.0 ms),
        // d = 100 clamps to 3.0 ms.
        let spec = SeekSpec::Table(vec![(2, 1_000_000), (6, 3_000_000)]);
        for cyl in [100, 200_000] {
            let s = spec.compile(cyl).unwrap();
            assert_eq!(s.ns(0), 0);
            assert_eq!(s.ns(1), 1_000_000);
            assert_eq!(s.ns(2), 1_000_000);
            assert_eq!(s.ns(4), 2_000_000);
            assert_eq!(s.ns(5), 2_500_000);
            assert_eq!(s.ns(99), 3_000_000);
        }
        // A falling segment interpolates too: (1, 5 ms) -> (3, 4 ms) gives 4.5 ms at 2.
        let s = SeekSpec::Table(vec![(1, 5_000_000), (3, 4_000_000)])
            .compile(10)
            .unwrap();
        assert_eq!(s.ns(2), 4_500_000);
    }

    #[test]
    fn two_piece_hp97560() {
        // Ruemmler–Wilkes HP 97560: 3.24 + 0.400 sqrt(d) ms for d < 383, else 8.00 + 0.008 d.
        let s = crate::disk::presets::hp97560_seek().compile(1962).unwrap();
        assert_eq!(s.ns(1), 3_640_000); // 3.24 + 0.4
        assert_eq!(s.ns(100), 7_240_000); // 3.24 + 0.4 * 10
        assert_eq!(s.ns(382), 11_057_928); // 3.24 + 0.4 * sqrt(382) = 3.24 + 7.817928 ms
        assert_eq!(s.ns(383), 11_064_000); // 8.00 + 0.008 * 383
        assert_eq!(s.ns(1961), 23_688_000); // full stroke: 8.00 + 0.008 * 1961
    }

    #[test]
    fn three_point_hits_its_end_points_and_mean() {
        // min 1 ms, avg 8 ms, max 16 ms over N = 1000 cylinders: t(1) = c = min exactly;
        // mean over random pairs ~ avg; t(N-1) ~ max.
        let n = 1000u32;
        let spec = SeekSpec::ThreePoint {
            min_ns: 1_000_000,
            avg_ns: 8_000_000,
            max_ns: 16_000_000,
        };
        let s = spec.compile(n).unwrap();
        assert_eq!(s.ns(1), 1_000_000);
        let mean = mean_random_seek_ns(&s, n as u64);
        assert!((mean / 8e6 - 1.0).abs() < 0.01, "mean {mean}");
        assert!((s.ns(n as u64 - 1) as f64 / 16e6 - 1.0).abs() < 0.01);
        // The knot form of a big disk agrees with the exact curve to well under 1 µs.
        let big = spec.compile(400_000).unwrap();
        assert!(!big.knots_d.is_empty());
        let (a, b) = (
            (-10.0 * 1e6 + 15.0 * 8e6 - 5.0 * 16e6) / (3.0 * 400_000f64.sqrt()),
            (7.0 * 1e6 - 15.0 * 8e6 + 8.0 * 16e6) / (3.0 * 400_000.0),
        );
        for d in [1u64, 63, 64, 65, 1000, 12_345, 200_001, 399_999, 500_000] {
            let x = (d.min(399_999) - 1) as f64;
            let exact = a * x.sqrt() + b * x + 1e6;
            assert!((big.ns(d) as f64 - exact).abs() < 1000.0, "d {d}");
        }
    }

    /// The knot list's value by plain bisection and `i128` arithmetic, as `Seek::ns` computed
    /// it before the near array and the buckets.
    fn reference_ns(s: &Seek, d: u64) -> u64 {
        if d == 0 {
            return 0;
        }
        let i = s.knots_d.partition_point(|&k| (k as u64) < d);
        if i == 0 {
            return s.knots_ns[0] as u64;
        }
        if i == s.knots_d.len() {
            return s.knots_ns[i - 1] as u64;
        }
        let (d0, t0) = (s.knots_d[i - 1] as i128, s.knots_ns[i - 1] as i128);
        let (d1, t1) = (s.knots_d[i] as i128, s.knots_ns[i] as i128);
        (t0 + ((t1 - t0) * (d as i128 - d0)).div_euclid(d1 - d0)) as u64
    }

    #[test]
    fn fast_paths_answer_the_knot_interpolation_exactly() {
        let curves = [
            crate::disk::presets::get("nearline7200").map(|s| match s {
                crate::disk::DiskSpec::Mechanical(m) => m.seek,
                _ => unreachable!(),
            }),
            Some(crate::disk::presets::hp97560_seek()),
            // A measured table on a drive too large for the dense form, with a falling segment
            // and a gap wider than a bucket.
            Some(SeekSpec::Table(vec![
                (1, 900_000),
                (3, 1_100_000),
                (300, 4_000_000),
                (301, 3_900_000),
                (5_000, 9_000_000),
                (70_000, 18_000_000),
                (70_001, 17_999_999),
            ])),
        ];
        for (c, spec) in curves.into_iter().enumerate() {
            let spec = spec.unwrap();
            for cylinders in [70_000u32, 400_000] {
                let s = spec.compile(cylinders).unwrap();
                assert!(!s.knots_d.is_empty());
                for d in 0..=u64::from(cylinders) + 300 {
                    assert_eq!(
                        s.ns(d),
                        reference_ns(&s, d),
                        "curve {c}, {cylinders} cyl, d {d}"
                    );
                }
            }
        }
        // The lerp's `i128` fallback: a product past `i64`.
        assert_eq!(
            lerp(1, 1, 4_000_000_000, 4_000_000_000, 3_999_999_999),
            3_999_999_999
        );
        assert_eq!(lerp(1, 4_000_000_000, 4_000_000_000, 1, 3_999_999_999), 2);
    }

    /// Exact mean of a seek over uniformly random distinct cylinder pairs on N cylinders:
    /// P(d) = 2 (N - d) / (N (N - 1)) for d = 1..N-1.
    pub(crate) fn mean_random_seek_ns(s: &Seek, n: u64) -> f64 {
        let norm = (n * (n - 1)) as f64;
        (1..n)
            .map(|d| 2.0 * (n - d) as f64 / norm * s.ns(d) as f64)
            .sum()
    }

    #[test]
    fn bad_curves_name_their_key() {
        let table = |p: Vec<(u64, u64)>| key_of(SeekSpec::Table(p).compile(100).unwrap_err());
        assert_eq!(table(vec![]), "disk.seek_table_ms");
        assert_eq!(table(vec![(0, 1)]), "disk.seek_table_ms[0]");
        assert_eq!(table(vec![(1, 1), (3, 2), (3, 4)]), "disk.seek_table_ms[2]");
        assert_eq!(table(vec![(1, 1), (3, 0)]), "disk.seek_table_ms[1]");
        let three = |min_ns, avg_ns, max_ns| {
            key_of(
                SeekSpec::ThreePoint {
                    min_ns,
                    avg_ns,
                    max_ns,
                }
                .compile(1000)
                .unwrap_err(),
            )
        };
        assert_eq!(three(0, 1, 2), "disk.seek_min_ms");
        assert_eq!(three(5, 4, 6), "disk.seek_avg_ms");
        assert_eq!(three(1, 5, 4), "disk.seek_max_ms");
        // avg barely above min with a long full stroke: a < 0 and the curve dips below 0.
        assert_eq!(three(5_000_000, 5_100_000, 30_000_000), "disk.seek_avg_ms");
        let two = SeekSpec::TwoPiece {
            short_a_ns: 0,
            short_b_ns_per_sqrt: 0,
            long_a_ns: 1,
            long_b_ns_per_cyl: 1,
            boundary_cyl: 10,
        };
        assert_eq!(
            key_of(two.compile(100).unwrap_err()),
            "disk.seek_two_piece_ms"
        );
    }
}
