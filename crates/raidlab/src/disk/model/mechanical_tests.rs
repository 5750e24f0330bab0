//! Tests of the mechanical model: validation against the DiskSim data, worked examples of
//! rotation, sequential transfer and read-ahead, bad parameters, and a property test.

use super::*;
use crate::disk::{presets, DiskSpec};
use proptest::prelude::*;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

const MEASURED: [(&str, f64); 3] = [
    ("hp_c3323a", 9.53),
    ("cheetah9lp", 5.47),
    ("atlas10k", 5.60),
];

fn spec(name: &str) -> MechanicalSpec {
    match presets::get(name) {
        Some(DiskSpec::Mechanical(m)) => m,
        other => panic!("{name}: {other:?}"),
    }
}

fn read(sector: u64, sectors: u32) -> DiskIo {
    DiskIo {
        op: Op::Read,
        sector,
        sectors,
    }
}

fn write(sector: u64, sectors: u32) -> DiskIo {
    DiskIo {
        op: Op::Write,
        sector,
        sectors,
    }
}

/// Exact mean over uniformly random distinct cylinder pairs: P(d) = 2 (N - d) / (N (N - 1)).
fn mean_seek_ms(m: &Mechanical, n: u64) -> f64 {
    let norm = (n * (n - 1)) as f64;
    (1..n)
        .map(|d| 2.0 * (n - d) as f64 / norm * m.seek_ns(d) as f64)
        .sum::<f64>()
        / 1e6
}

#[test]
fn mean_random_seek_matches_the_data() {
    // Over the preset's cylinder count N (all cylinders, spares included): hp_c3323a 9.527,
    // cheetah9lp 5.468, atlas10k 5.599 ms.
    for (name, expected) in MEASURED {
        let s = spec(name);
        let m = s.build().unwrap();
        let mean = mean_seek_ms(&m, s.cylinders as u64);
        eprintln!("{name}: mean random seek {mean:.4} ms (README {expected})");
        assert!((mean / expected - 1.0).abs() < 0.01, "{name}: {mean}");
    }
}

#[test]
fn three_point_curve_fits_the_tables() {
    // Lee's curve from the table's own 1-cylinder, mean and full-stroke times stays within
    // 0.5 ms RMS of the table over all distances.
    for (name, _) in MEASURED {
        let s = spec(name);
        let n = s.cylinders as u64;
        let table = s.build().unwrap();
        let lee = MechanicalSpec {
            seek: SeekSpec::ThreePoint {
                min_ns: table.seek_ns(1),
                avg_ns: (mean_seek_ms(&table, n) * 1e6).round() as u64,
                max_ns: table.seek_ns(n - 1),
            },
            ..s.clone()
        }
        .build()
        .unwrap();
        let sq: f64 = (1..n)
            .map(|d| ((lee.seek_ns(d) as f64 - table.seek_ns(d) as f64) / 1e6).powi(2))
            .sum();
        let rms = (sq / (n - 1) as f64).sqrt();
        eprintln!("{name}: three-point RMS {rms:.3} ms");
        assert!(rms < 0.5, "{name}: {rms}");
    }
}

#[test]
fn mean_rotational_latency_is_half_a_turn() {
    // A read on the head's own track (cylinder 0, surface 0 after build) needs no seek; over
    // uniformly random start times its latency averages 30000 / rpm ms.
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for name in presets::NAMES {
        let DiskSpec::Mechanical(s) = presets::get(name).unwrap() else {
            continue;
        };
        let m = s.build().unwrap();
        let runs = 20_000;
        let sum: f64 = (0..runs)
            .map(|_| {
                let now = rng.next_u64() % 1_000_000_000_000;
                m.positioning_ns(&read(0, 1), now) as f64
            })
            .sum();
        let mean_ms = sum / runs as f64 / 1e6;
        let expected = 30_000.0 / s.rpm as f64;
        assert!((mean_ms / expected - 1.0).abs() < 0.01, "{name}: {mean_ms}");
    }
}

/// Seek time in ms of `d` cylinders computed straight from the spec, in f64.
fn independent_seek_ms(seek: &SeekSpec, cylinders: u64, d: u64) -> f64 {
    if d == 0 {
        return 0.0;
    }
    let d = d as f64;
    match seek {
        SeekSpec::Table(points) => {
            let p: Vec<(f64, f64)> = points
                .iter()
                .map(|&(x, t)| (x as f64, t as f64 / 1e6))
                .collect();
            if d <= p[0].0 {
                return p[0].1;
            }
            for w in p.windows(2) {
                if d <= w[1].0 {
                    return w[0].1 + (w[1].1 - w[0].1) * (d - w[0].0) / (w[1].0 - w[0].0);
                }
            }
            p[p.len() - 1].1
        }
        SeekSpec::ThreePoint {
            min_ns,
            avg_ns,
            max_ns,
        } => {
            let (min, avg, max) = (*min_ns as f64, *avg_ns as f64, *max_ns as f64);
            let n = cylinders as f64;
            let a = (-10.0 * min + 15.0 * avg - 5.0 * max) / (3.0 * n.sqrt());
            let b = (7.0 * min - 15.0 * avg + 8.0 * max) / (3.0 * n);
            (a * (d - 1.0).sqrt() + b * (d - 1.0) + min) / 1e6
        }
        SeekSpec::TwoPiece {
            short_a_ns,
            short_b_ns_per_sqrt,
            long_a_ns,
            long_b_ns_per_cyl,
            boundary_cyl,
        } => {
            if d < *boundary_cyl as f64 {
                (*short_a_ns as f64 + *short_b_ns_per_sqrt as f64 * d.sqrt()) / 1e6
            } else {
                (*long_a_ns as f64 + *long_b_ns_per_cyl as f64 * d) / 1e6
            }
        }
    }
}

#[test]
fn random_4k_reads_cost_seek_half_turn_and_transfer() {
    // Independent estimate: mean seek between two uniformly random sectors (cylinders from
    // the zone table, seek from the spec in f64) + half a revolution + 8 sectors at the
    // capacity-weighted zone rate + command overhead. The model's mean over random 4 KiB
    // reads at random times must be within 5% of it.
    for name in presets::NAMES {
        let DiskSpec::Mechanical(s) = presets::get(name).unwrap() else {
            continue;
        };
        let mut m = s.build().unwrap();
        let cap = s.capacity_sectors();
        let period_ms = 60_000.0 / s.rpm as f64;
        let surfaces = s.surfaces as u64;
        let cyl_of = |lba: u64| {
            let mut first = 0;
            for z in &s.zones {
                let per_cyl = surfaces * z.sectors_per_track as u64;
                let size = (z.last_cyl - z.first_cyl + 1) as u64 * per_cyl;
                if lba < first + size {
                    return z.first_cyl as u64 + (lba - first) / per_cyl;
                }
                first += size;
            }
            unreachable!()
        };
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        let samples = 40_000;
        let seek_ms: f64 = (0..samples)
            .map(|_| {
                let (a, b) = (cyl_of(rng.next_u64() % cap), cyl_of(rng.next_u64() % cap));
                independent_seek_ms(&s.seek, s.cylinders as u64, a.abs_diff(b))
            })
            .sum::<f64>()
            / samples as f64;
        let transfer_ms: f64 = s
            .zones
            .iter()
            .map(|z| {
                let share = ((z.last_cyl - z.first_cyl + 1) as u64
                    * surfaces
                    * z.sectors_per_track as u64) as f64
                    / cap as f64;
                share * 8.0 * period_ms / z.sectors_per_track as f64
            })
            .sum();
        let estimate = seek_ms + period_ms / 2.0 + transfer_ms + s.command_overhead_ns as f64 / 1e6;

        let ops = 20_000;
        let mut now = 0u64;
        let mut total_ns = 0u64;
        for _ in 0..ops {
            now += rng.next_u64() % 20_000_000;
            let sector = (rng.next_u64() % (cap / 8)) * 8;
            let t = m.service(&read(sector, 8), now).total_ns;
            total_ns += t;
            now += t;
        }
        let mean = total_ns as f64 / ops as f64 / 1e6;
        eprintln!(
            "{name}: mean 4 KiB read {mean:.3} ms, estimate {estimate:.3} ms (seek {seek_ms:.3})"
        );
        assert!(
            (mean / estimate - 1.0).abs() < 0.05,
            "{name}: {mean} vs {estimate}"
        );
    }
}

#[test]
fn zone_boundaries_round_trip() {
    // The first and last sector of each zone lie on the zone's first and last cylinder.
    for (name, _) in MEASURED {
        let s = spec(name);
        let m = s.build().unwrap();
        let mut first = 0u64;
        for z in &s.zones {
            let size = (z.last_cyl - z.first_cyl + 1) as u64
                * s.surfaces as u64
                * z.sectors_per_track as u64;
            assert_eq!(m.position_of(first), z.first_cyl as u64, "{name}");
            assert_eq!(m.position_of(first + size - 1), z.last_cyl as u64, "{name}");
            first += size;
        }
        assert_eq!(m.capacity_sectors(), first);
    }
}

#[test]
fn sequential_reads_lose_no_revolution() {
    // hp_c3323a zone 0: 120 sectors per track, 5400 rpm -> period 11,111,111 ns; slot j at
    // floor(j * 11111111 / 120). Read 0..8 at t = 0 with the head on cylinder 0, surface 0:
    // no seek, slot 0 is under the head, transfer floor(8 P / 120) = 740,740 ns.
    let mut m = spec("hp_c3323a").build().unwrap();
    let s = m.service(&read(0, 8), 0);
    assert_eq!((s.seek_ns, s.rotation_ns, s.total_ns), (0, 0, 740_740));
    // The next 8 sectors start exactly where the head is: floor(16 P / 120) - 740,740.
    let s = m.service(&read(8, 8), 740_740);
    assert_eq!((s.seek_ns, s.rotation_ns, s.total_ns), (0, 0, 740_741));
    // Keep streaming across track (head switch) and cylinder boundaries (7 surfaces: sector
    // 840 starts cylinder 1). No op may wait more than one sector beyond its switch.
    let sector_ns = 11_111_111 / 120 + 1;
    let mut now = 1_481_481;
    for k in 2..(7 * 120 * 2 / 8) {
        let s = m.service(&read(k * 8, 8), now);
        assert!(s.rotation_ns <= sector_ns, "op {k}: {s:?}");
        let switch = if (k * 8) % 840 == 0 {
            m.seek_ns(1).max(650_000)
        } else if (k * 8) % 120 == 0 {
            650_000
        } else {
            0
        };
        assert_eq!(s.seek_ns, switch, "op {k}");
        now += s.total_ns;
    }
    // 1680 sectors = 14 tracks: 14 revolutions plus 13 switches and their skew slack, far
    // from the 14 extra revolutions a skewless layout would lose.
    assert!(now < 14 * 11_111_111 + 13 * 1_000_000, "{now}");
    // One transfer across a track boundary: 116..124 = 4 sectors, head switch, 4 sectors.
    let mut m = spec("hp_c3323a").build().unwrap();
    let s = m.service(&read(116, 8), 0);
    // Skew: ceil(650000 * 120 / 11111111) = 8 sectors; the switch ends 650,000 ns after the
    // first track's end, sector 0 of surface 1 (slot 8) passes 740,740 ns after it, so the
    // transfer is 8 sectors + one skew: 2 * 370,370(.4) + 740,740 (+ rounding).
    assert!(s.transfer_ns.abs_diff(1_481_481) <= 2, "{s:?}");
}

#[test]
fn writes_settle_and_heads_switch() {
    let mut m = spec("hp_c3323a").build().unwrap();
    // Same track: only the 0.07 ms write settle.
    assert_eq!(m.service(&write(0, 8), 0).seek_ns, 70_000);
    // Another surface of cylinder 0: head switch 0.65 ms.
    let now = 100_000_000;
    assert_eq!(m.service(&read(120, 8), now).seek_ns, 650_000);
    // Cylinder 1 (sector 840): max(seek(1) = 1.178 ms, head switch).
    let s = m.service(&read(840, 8), 2 * now);
    assert_eq!((s.seek_ns, s.seek_cylinders), (1_178_043, 1));
    assert_eq!(m.head_position(), 1);
}

#[test]
fn read_ahead_serves_later_reads_from_the_buffer() {
    // hp_c3323a with 64 sectors of read-ahead, 0.1 ms command overhead and a 10 MB/s bus.
    let s = MechanicalSpec {
        read_ahead_sectors: 64,
        command_overhead_ns: 100_000,
        ..spec("hp_c3323a")
    };
    let mut m = s.build().unwrap();
    // Read 0..8 at t = 0: overhead 0.1 ms, then slot 0 comes at 11,111,111 ns (next turn);
    // it ends 740,740 ns later, at 11,851,851.
    let first = m.service(&read(0, 8), 0);
    assert_eq!(first.total_ns, 11_851_851);
    let t0 = first.total_ns;
    // 5 ms later the read-ahead has read 5,000,000 / 92,592.6 = 54 sectors: 8..62.
    let later = t0 + 5_000_000;
    assert_eq!(m.positioning_ns(&read(8, 8), later), 0);
    let hit = m.service(&read(8, 8), later);
    // Overhead + 4096 bytes at 10 MB/s = 100,000 + 409,600 ns.
    assert!(hit.buffer_hit);
    assert_eq!(hit.total_ns, 509_600);
    // 54..62 is in, 60..68 not yet; a little later (64 sectors done) it is.
    assert!(!m.clone().service(&read(60, 8), later).buffer_hit);
    let done = t0 + 64 * 92_593 + 1;
    assert!(m.clone().service(&read(60, 8), done).buffer_hit);
    // Nothing beyond the 64-sector limit (sector 72 on) is ever read ahead.
    assert!(!m.clone().service(&read(70, 8), t0 + 100_000_000).buffer_hit);
    // The read's own sectors stay in the segment.
    assert!(m.clone().service(&read(0, 8), done).buffer_hit);
    // A write drops the segment.
    let mut w = m.clone();
    let s = w.service(&write(500, 8), done);
    assert!(!s.buffer_hit);
    assert!(!w.service(&read(8, 8), done + s.total_ns).buffer_hit);
}

#[test]
fn read_ahead_moves_the_head() {
    // Read the last 8 sectors of track 0 (112..120) with 200 sectors of read-ahead: after a
    // long idle time it has read tracks 1 (surface 1) and most of track 2 (surface 2, up to
    // sector 319). A read of 330..338 is a miss but needs no head switch.
    let with_ra = MechanicalSpec {
        read_ahead_sectors: 200,
        ..spec("hp_c3323a")
    };
    let mut m = with_ra.build().unwrap();
    let t = m.service(&read(112, 8), 0).total_ns;
    let s = m.service(&read(330, 8), t + 1_000_000_000);
    assert!(!s.buffer_hit);
    assert_eq!(s.seek_ns, 0);
    // Without read-ahead the head stays on surface 0 and switches.
    let mut m = spec("hp_c3323a").build().unwrap();
    let t = m.service(&read(112, 8), 0).total_ns;
    assert_eq!(m.service(&read(330, 8), t + 1_000_000_000).seek_ns, 650_000);
}

fn key_of(s: MechanicalSpec) -> String {
    match s.build().unwrap_err() {
        Error::Config { key, .. } => key,
        other => panic!("{other}"),
    }
}

#[test]
fn bad_parameters_name_their_key() {
    let base = spec("hp_c3323a");
    let with = |f: &dyn Fn(&mut MechanicalSpec)| {
        let mut s = base.clone();
        f(&mut s);
        key_of(s)
    };
    let zone = |first_cyl, last_cyl, sectors_per_track| Zone {
        first_cyl,
        last_cyl,
        sectors_per_track,
    };
    assert_eq!(with(&|s| s.rpm = 0), "disk.rpm");
    assert_eq!(with(&|s| s.cylinders = 0), "disk.cylinders");
    assert_eq!(with(&|s| s.surfaces = 0), "disk.surfaces");
    assert_eq!(with(&|s| s.head_switch_ns = 0), "disk.head_switch_ms");
    assert_eq!(with(&|s| s.bus_mb_s = 0), "disk.bus_mb_s");
    assert_eq!(with(&|s| s.zones.clear()), "disk.zones");
    // Overlapping: zone 1 starts on zone 0's last cylinder (993).
    assert_eq!(with(&|s| s.zones[1].first_cyl = 993), "disk.zones[1]");
    // Unordered.
    assert_eq!(with(&|s| s.zones.swap(2, 3)), "disk.zones[3]");
    // First after last.
    assert_eq!(
        with(&|s| s.zones[4] = zone(1700, 1650, 96)),
        "disk.zones[4]"
    );
    // Beyond the disk's 2982 cylinders.
    assert_eq!(with(&|s| s.zones[7].last_cyl = 2982), "disk.zones[7]");
    assert_eq!(with(&|s| s.zones[5].sectors_per_track = 0), "disk.zones[5]");
    assert_eq!(
        with(&|s| s.seek = SeekSpec::Table(vec![(1, 1_000_000), (5, 2_000_000), (4, 3_000_000)])),
        "disk.seek_table_ms[2]"
    );
    assert_eq!(
        with(&|s| s.seek = SeekSpec::ThreePoint {
            min_ns: 5_000_000,
            avg_ns: 4_000_000,
            max_ns: 9_000_000
        }),
        "disk.seek_avg_ms"
    );
}

#[test]
fn embedded_presets_match_the_data_files() {
    let dir = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/disks"
    ));
    if !dir.is_dir() {
        eprintln!("skipped: {} is absent", dir.display());
        return;
    }
    for (name, _) in MEASURED {
        let s = spec(name);
        let zones = crate::disk::files::read_zones(&dir.join(format!("{name}.zones.csv"))).unwrap();
        assert_eq!(s.zones, zones, "{name}");
        let seek = crate::disk::files::read_seek(&dir.join(format!("{name}.seek"))).unwrap();
        assert_eq!(s.seek, SeekSpec::Table(seek), "{name}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// For random operations from the same state, `positioning_ns` equals the positioning
    /// part of the service that follows; every service takes time; a media operation's parts
    /// add up to its total.
    #[test]
    fn positioning_agrees_with_service(
        ops in proptest::collection::vec((any::<bool>(), any::<u64>(), 1u32..300, 0u64..30_000_000), 1..40),
        preset in 0usize..3,
        read_ahead in prop_oneof![Just(0u64), Just(64), Just(1024)],
    ) {
        let s = MechanicalSpec {
            read_ahead_sectors: read_ahead,
            command_overhead_ns: 50_000,
            ..spec(MEASURED[preset].0)
        };
        let mut m = s.build().unwrap();
        let cap = m.capacity_sectors();
        let mut now = 0u64;
        let mut last_end = 0u64;
        for (is_read, at, sectors, gap) in ops {
            // Half the reads continue the previous one, so read-ahead hits happen.
            let sector = if is_read && at % 2 == 0 { last_end } else { at % cap };
            let sectors = sectors.min((cap - sector) as u32).max(1);
            let sector = sector.min(cap - sectors as u64);
            let io = DiskIo { op: if is_read { Op::Read } else { Op::Write }, sector, sectors };
            now += gap;
            let pos = m.positioning_ns(&io, now);
            let s = m.service(&io, now);
            prop_assert!(s.total_ns > 0);
            if s.buffer_hit {
                prop_assert_eq!(pos, 0);
            } else {
                prop_assert_eq!(pos, s.seek_ns + s.rotation_ns);
                prop_assert_eq!(s.total_ns, 50_000 + s.seek_ns + s.rotation_ns + s.transfer_ns);
            }
            now += s.total_ns;
            last_end = (sector + sectors as u64) % cap;
        }
    }
}
