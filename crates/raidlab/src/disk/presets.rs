//! The drives raidlab ships, by name.
//!
//! Measured (from `../shared/disks/`, DiskSim-validated parameters; full seek tables and zone
//! maps in `presets/measured.rs`; no command overhead, no read-ahead):
//!
//! | preset | drive | cyl | surf | rpm | head switch | write settle | zones | bus |
//! | --- | --- | --- | --- | --- | --- | --- | --- | --- |
//! | `cheetah9lp` | Seagate Cheetah 9LP (ST39102LW), 9 GB | 6962 | 12 | 10045 | 0.030 ms | 0.461 ms | 11 | 80 MB/s (Ultra2) |
//! | `atlas10k` | Quantum Atlas 10K, 9 GB | 10042 | 6 | 10025 | 0.176 ms | 0.487 ms | 24 | 80 MB/s (Ultra2) |
//! | `hp_c3323a` | HP C3323A, 1 GB | 2982 | 7 | 5400 | 0.65 ms | 0.07 ms | 8 | 10 MB/s (fast SCSI-2) |
//!
//! Approximate (built from published headline numbers; head switch, write settle and the
//! zone maps are plausible guesses, not measurements). Zone maps are `zones` equal bands of
//! cylinders with sectors per track falling linearly from `outer` to `inner` (constant linear
//! density makes sectors per track proportional to radius); the cylinder count is chosen so
//! that the capacity matches the nominal one within 0.05%:
//!
//! | preset | drive | cyl | surf | rpm | spt outer..inner (MB/s) | zones | seek | head sw. / settle | bus | capacity |
//! | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
//! | `hp97560` | HP 97560 (Ruemmler–Wilkes) | 1962 | 19 | 4002 | 72 (2.46) | 1 | two-piece 3.24 + 0.400 sqrt(d) ms, d < 383, else 8.00 + 0.008 d | 1.6 / 0 ms | 10 MB/s | 1.37 GB |
//! | `hp97560_rapid` | HP 97560 as altered by RAPID-Cache | 1962 | 6 | 7200 | 288 (17.7) | 1 | same two-piece | 1.6 / 0 ms | 40 MB/s | 1.74 GB |
//! | `st3146807lc` | Seagate Cheetah 10K.6, 147 GB | 55600 | 8 | 10000 | 820..469 (70..40) | 16 | three-point 0.35 / 4.7 / 9.5 ms | 0.2 / 0.2 ms | 320 MB/s | 146.8 GB |
//! | `ibm40k1052` | IBM 40K1052, 73.4 GB 2.5" SAS | 47040 | 4 | 10000 | 938..586 (80..50) | 16 | three-point 0.2 / 4.5 / 9.0 ms | 0.2 / 0.2 ms | 300 MB/s | 73.4 GB |
//! | `wd10eals` | WD Caviar Blue 1 TB SATA | 235400 | 6 | 7200 | 1790..977 (110..60) | 16 | three-point 2.0 / 8.9 / 21.0 ms | 1.0 / 0.5 ms | 300 MB/s | 1.00 TB |
//! | `nearline7200` | a 4 TB 7,200 rpm nearline HDD | 400000 | 8 | 7200 | 3255..1628 (200..100) | 16 | three-point 0.8 / 8.5 / 16.0 ms | 0.5 / 0.3 ms | 600 MB/s | 4.00 TB |
//!
//! `sata_ssd`: a SATA SSD, 8 channels x 4 dies, 16 KiB pages, 50 µs read, 500 µs program,
//! 40 µs channel transfer per page (~400 MB/s per channel), 550 MB/s interface, 512 GB.

mod measured;

use super::model::{ConstantSpec, DiskSpec, MechanicalSpec, SeekSpec, SsdSpec, Zone};

/// Every preset name, in the order of the table above.
pub const NAMES: &[&str] = &[
    "cheetah9lp",
    "atlas10k",
    "hp_c3323a",
    "hp97560",
    "hp97560_rapid",
    "st3146807lc",
    "ibm40k1052",
    "wd10eals",
    "nearline7200",
    "sata_ssd",
];

/// The spec of preset `name` (`None` if there is none of that name).
pub fn get(name: &str) -> Option<DiskSpec> {
    Some(match name {
        "cheetah9lp" => measured_hdd(
            6962,
            12,
            10045,
            measured::CHEETAH9LP_ZONES,
            measured::CHEETAH9LP_SEEK,
            30_000,
            461_000,
            80,
        ),
        "atlas10k" => measured_hdd(
            10042,
            6,
            10025,
            measured::ATLAS10K_ZONES,
            measured::ATLAS10K_SEEK,
            176_000,
            487_000,
            80,
        ),
        "hp_c3323a" => measured_hdd(
            2982,
            7,
            5400,
            measured::HP_C3323A_ZONES,
            measured::HP_C3323A_SEEK,
            650_000,
            70_000,
            10,
        ),
        "hp97560" => hp97560(19, 4002, 72, 10),
        "hp97560_rapid" => hp97560(6, 7200, 288, 40),
        "st3146807lc" => approx_hdd(
            (55600, 8, 10000),
            (820, 469),
            (350_000, 4_700_000, 9_500_000),
            (200_000, 200_000),
            320,
        ),
        "ibm40k1052" => approx_hdd(
            (47040, 4, 10000),
            (938, 586),
            (200_000, 4_500_000, 9_000_000),
            (200_000, 200_000),
            300,
        ),
        "wd10eals" => approx_hdd(
            (235_400, 6, 7200),
            (1790, 977),
            (2_000_000, 8_900_000, 21_000_000),
            (1_000_000, 500_000),
            300,
        ),
        "nearline7200" => approx_hdd(
            (400_000, 8, 7200),
            (3255, 1628),
            (800_000, 8_500_000, 16_000_000),
            (500_000, 300_000),
            600,
        ),
        "sata_ssd" => DiskSpec::Ssd(SsdSpec {
            channels: 8,
            dies_per_channel: 4,
            page_bytes: 16384,
            read_ns: 50_000,
            program_ns: 500_000,
            transfer_ns_per_page: 40_000,
            capacity_sectors: 1_000_000_000,
            bus_mb_s: 550,
        }),
        _ => return None,
    })
}

/// The default for a constant model without a preset: X-RAY's 10 ms disk, 512 TiB address
/// space (large enough for any trace).
pub fn constant_default() -> DiskSpec {
    DiskSpec::Constant(ConstantSpec {
        read_ns: 10_000_000,
        write_ns: 10_000_000,
        capacity_sectors: 1 << 40,
    })
}

#[allow(clippy::too_many_arguments)]
fn measured_hdd(
    cylinders: u32,
    surfaces: u32,
    rpm: u32,
    zones: &[(u32, u32, u32)],
    seek: &[(u64, u64)],
    head_switch_ns: u64,
    write_settle_ns: u64,
    bus_mb_s: u32,
) -> DiskSpec {
    DiskSpec::Mechanical(MechanicalSpec {
        cylinders,
        surfaces,
        rpm,
        zones: zones
            .iter()
            .map(|&(first_cyl, last_cyl, sectors_per_track)| Zone {
                first_cyl,
                last_cyl,
                sectors_per_track,
            })
            .collect(),
        seek: SeekSpec::Table(seek.to_vec()),
        head_switch_ns,
        write_settle_ns,
        command_overhead_ns: 0,
        read_ahead_sectors: 0,
        bus_mb_s,
    })
}

/// Ruemmler and Wilkes' two-piece seek curve of the HP 97560.
pub(crate) fn hp97560_seek() -> SeekSpec {
    SeekSpec::TwoPiece {
        short_a_ns: 3_240_000,
        short_b_ns_per_sqrt: 400_000,
        long_a_ns: 8_000_000,
        long_b_ns_per_cyl: 8_000,
        boundary_cyl: 383,
    }
}

fn hp97560(surfaces: u32, rpm: u32, spt: u32, bus_mb_s: u32) -> DiskSpec {
    DiskSpec::Mechanical(MechanicalSpec {
        cylinders: 1962,
        surfaces,
        rpm,
        zones: vec![Zone {
            first_cyl: 0,
            last_cyl: 1961,
            sectors_per_track: spt,
        }],
        seek: hp97560_seek(),
        head_switch_ns: 1_600_000,
        write_settle_ns: 0,
        command_overhead_ns: 0,
        read_ahead_sectors: 0,
        bus_mb_s,
    })
}

/// `zones` equal bands over all cylinders, sectors per track falling linearly from `outer`
/// (zone 0) to `inner` (last zone).
fn linear_zones(cylinders: u32, zones: u32, outer: u32, inner: u32) -> Vec<Zone> {
    (0..zones)
        .map(|k| Zone {
            first_cyl: (k as u64 * cylinders as u64 / zones as u64) as u32,
            last_cyl: ((k as u64 + 1) * cylinders as u64 / zones as u64) as u32 - 1,
            sectors_per_track: outer - ((outer - inner) * k + (zones - 1) / 2) / (zones - 1),
        })
        .collect()
}

fn approx_hdd(
    (cylinders, surfaces, rpm): (u32, u32, u32),
    (outer_spt, inner_spt): (u32, u32),
    (min_ns, avg_ns, max_ns): (u64, u64, u64),
    (head_switch_ns, write_settle_ns): (u64, u64),
    bus_mb_s: u32,
) -> DiskSpec {
    DiskSpec::Mechanical(MechanicalSpec {
        cylinders,
        surfaces,
        rpm,
        zones: linear_zones(cylinders, 16, outer_spt, inner_spt),
        seek: SeekSpec::ThreePoint {
            min_ns,
            avg_ns,
            max_ns,
        },
        head_switch_ns,
        write_settle_ns,
        command_overhead_ns: 0,
        read_ahead_sectors: 0,
        bus_mb_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_builds_and_unknown_is_none() {
        for name in NAMES {
            let spec = get(name).unwrap_or_else(|| panic!("{name}"));
            spec.build().unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(get("nope").is_none());
    }

    #[test]
    fn capacities_match_the_drives() {
        // Sum over zones of cylinders x surfaces x sectors per track, in bytes.
        let bytes = |name| match get(name).unwrap() {
            DiskSpec::Mechanical(m) => m.capacity_sectors() as f64 * 512.0,
            DiskSpec::Ssd(s) => s.capacity_sectors as f64 * 512.0,
            DiskSpec::Constant(c) => c.capacity_sectors as f64 * 512.0,
        };
        // HP 97560: 1962 x 19 x 72 x 512 = 1,374,216,192 bytes exactly.
        assert_eq!(bytes("hp97560"), 1_374_216_192.0);
        // RAPID's altered drive: 1962 x 6 x 288 x 512 = 1,735,852,032.
        assert_eq!(bytes("hp97560_rapid"), 1_735_852_032.0);
        for (name, nominal) in [
            ("st3146807lc", 146.8e9),
            ("ibm40k1052", 73.4e9),
            ("wd10eals", 1e12),
            ("nearline7200", 4e12),
            ("sata_ssd", 512e9),
            // The measured drives' zone maps hold 9.18, 9.20 and 1.08 GB.
            ("cheetah9lp", 9.18e9),
            ("atlas10k", 9.20e9),
            ("hp_c3323a", 1.08e9),
        ] {
            let b = bytes(name);
            assert!((b / nominal - 1.0).abs() < 0.02, "{name}: {b}");
        }
    }

    #[test]
    fn linear_zones_span_outer_to_inner() {
        let z = linear_zones(100, 4, 40, 10);
        assert_eq!(
            z.iter()
                .map(|z| (z.first_cyl, z.last_cyl, z.sectors_per_track))
                .collect::<Vec<_>>(),
            // 30/3 = 10 sectors less per zone.
            vec![(0, 24, 40), (25, 49, 30), (50, 74, 20), (75, 99, 10)]
        );
    }
}
