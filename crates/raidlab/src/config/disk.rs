//! The `[disk]` table: timing model (a preset and/or explicit parameters) and queue.
//!
//! ```toml
//! [disk]
//! preset = "cheetah9lp"     # one of disk::presets::NAMES
//! model = "mechanical"      # "constant" | "mechanical" | "ssd"; default: the preset's kind
//! read_ahead_kib = 256      # explicit keys override the preset's fields
//! queue = "clook"           # fcfs | sstf | clook
//! ncq = 32
//! ```
//!
//! Without `preset`: `model = "mechanical"` (or no model at all) starts from `nearline7200`,
//! `"ssd"` from `sata_ssd`, `"constant"` from a 10 ms disk of 512 TiB. Keys of another model
//! than the chosen one are errors. Files (`zones_file`, `seek_file`) are read here; relative
//! paths resolve against the config's directory.

use std::path::{Path, PathBuf};

use super::tree::{quoted, Table};
use crate::disk::model::{MechanicalSpec, SeekSpec, SsdSpec, Zone};
use crate::disk::{files, ms_to_ns, presets, Discipline, DiskSpec, QueueSpec};
use crate::error::{Error, Result};

const KINDS: &[&str] = &["constant", "mechanical", "ssd"];

const CONSTANT_KEYS: &[&str] = &["service_ms", "read_ms", "write_ms", "capacity_gib"];
const MECHANICAL_KEYS: &[&str] = &[
    "rpm",
    "cylinders",
    "surfaces",
    "zones",
    "zones_file",
    "seek_table_ms",
    "seek_file",
    "seek_min_ms",
    "seek_avg_ms",
    "seek_max_ms",
    "seek_two_piece_ms",
    "head_switch_ms",
    "write_settle_ms",
    "overhead_ms",
    "read_ahead_kib",
    "bus_mb_s",
];
const SSD_KEYS: &[&str] = &[
    "channels",
    "dies_per_channel",
    "page_kib",
    "read_us",
    "program_us",
    "transfer_us",
    "capacity_gib",
    "bus_mb_s",
];

/// Sectors per GiB.
const SECTORS_PER_GIB: f64 = (1u64 << 21) as f64;

/// Parse `[disk]` (`None`: the defaults). Relative file paths resolve against `base_dir`.
pub(super) fn disk_spec(
    t: Option<Table<'_>>,
    base_dir: Option<&Path>,
) -> Result<(DiskSpec, QueueSpec)> {
    let Some(mut t) = t else {
        return Ok((default_spec("mechanical"), QueueSpec::default()));
    };
    let model = t.choice("model", KINDS)?;
    let preset_key = t.key("preset");
    let preset = match t.str("preset")? {
        None => None,
        Some(name) => Some(presets::get(name).ok_or_else(|| {
            Error::config(
                &preset_key,
                format!(
                    "unknown preset {name:?}; expected one of {}",
                    quoted(presets::NAMES)
                ),
            )
        })?),
    };
    let mut spec = match (model, preset) {
        (None, None) => default_spec("mechanical"),
        (None, Some(p)) => p,
        (Some(m), None) => default_spec(m),
        (Some(m), Some(p)) if p.kind() == m => p,
        (Some(m), Some(p)) => {
            return Err(Error::config(
                t.key("model"),
                format!(
                    "the preset is a {} disk, not {m:?}; remove `model` or pick a {m} preset",
                    p.kind()
                ),
            ))
        }
    };
    reject_foreign_keys(&t, spec.kind())?;
    match &mut spec {
        DiskSpec::Constant(c) => {
            let service = positive_ms(&mut t, "service_ms")?;
            if let Some(ms) = positive_ms(&mut t, "read_ms")?.or(service) {
                c.read_ns = ms_to_ns(ms);
            }
            if let Some(ms) = positive_ms(&mut t, "write_ms")?.or(service) {
                c.write_ns = ms_to_ns(ms);
            }
            if let Some(gib) = t.float("capacity_gib", 0.0, 1e9)? {
                c.capacity_sectors = (gib * SECTORS_PER_GIB).round() as u64;
            }
        }
        DiskSpec::Mechanical(m) => mechanical(&mut t, m, base_dir)?,
        DiskSpec::Ssd(s) => ssd(&mut t, s)?,
    }
    let queue = queue_spec(&mut t)?;
    t.finish()?;
    spec.build()?;
    Ok((spec, queue))
}

fn default_spec(kind: &str) -> DiskSpec {
    let name = match kind {
        "constant" => return presets::constant_default(),
        "ssd" => "sata_ssd",
        _ => "nearline7200",
    };
    // Invariant: both names are in presets::NAMES (checked by the presets' tests).
    presets::get(name).expect("default presets exist")
}

/// A key of another model than `kind` is an error naming it.
fn reject_foreign_keys(t: &Table<'_>, kind: &str) -> Result<()> {
    let own = match kind {
        "constant" => CONSTANT_KEYS,
        "ssd" => SSD_KEYS,
        _ => MECHANICAL_KEYS,
    };
    for (other, keys) in [
        ("constant", CONSTANT_KEYS),
        ("mechanical", MECHANICAL_KEYS),
        ("ssd", SSD_KEYS),
    ] {
        if let Some(key) = keys.iter().find(|k| !own.contains(k) && t.has(k)) {
            return Err(Error::config(
                t.key(key),
                format!("only applies to model = \"{other}\"; this disk is {kind:?}"),
            ));
        }
    }
    Ok(())
}

/// An optional time in ms that must be > 0 (checked here so the error names this key).
fn positive_ms(t: &mut Table<'_>, key: &'static str) -> Result<Option<f64>> {
    match t.float(key, 0.0, 1e6)? {
        Some(ms) if ms_to_ns(ms) == 0 => Err(Error::config(t.key(key), "expected a time > 0")),
        other => Ok(other),
    }
}

fn resolve(path: &str, base_dir: Option<&Path>) -> PathBuf {
    let path = PathBuf::from(path);
    match base_dir {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path,
    }
}

/// A number of a row that must be a whole number in `[0, max]`.
fn whole(key: String, v: f64, max: f64) -> Result<u64> {
    if v.fract() != 0.0 || v > max {
        return Err(Error::config(
            key,
            format!("expected a whole number in [0, {max}], got {v}"),
        ));
    }
    Ok(v as u64)
}

fn mechanical(t: &mut Table<'_>, m: &mut MechanicalSpec, base_dir: Option<&Path>) -> Result<()> {
    if let Some(v) = t.uint("rpm", 0, 1_000_000)? {
        m.rpm = v as u32;
    }
    if let Some(v) = t.uint("cylinders", 0, u32::MAX as u64)? {
        m.cylinders = v as u32;
    }
    if let Some(v) = t.uint("surfaces", 0, 1024)? {
        m.surfaces = v as u32;
    }

    // Zones: inline rows or a file, not both.
    let zones_key = t.key("zones");
    let zones_file_key = t.key("zones_file");
    let rows = t.float_rows("zones", 3, 0.0, u32::MAX as f64)?;
    let zones_file = t.str("zones_file")?;
    match (rows, zones_file) {
        (Some(_), Some(_)) => {
            return Err(Error::config(
                zones_file_key,
                "give either `zones` or `zones_file`, not both",
            ))
        }
        (Some(rows), None) => {
            m.zones = rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let cell =
                        |j: usize| whole(format!("{zones_key}[{i}][{j}]"), r[j], u32::MAX as f64);
                    Ok(Zone {
                        first_cyl: cell(0)? as u32,
                        last_cyl: cell(1)? as u32,
                        sectors_per_track: cell(2)? as u32,
                    })
                })
                .collect::<Result<_>>()?
        }
        (None, Some(path)) => m.zones = files::read_zones(&resolve(path, base_dir))?,
        (None, None) => {}
    }
    let zones_from_file = zones_file.map(|p| (zones_file_key, p));
    let seek_from_file = seek(t, m, base_dir)?;

    let ms = |t: &mut Table<'_>, key: &'static str| t.float(key, 0.0, 1e4).map(|v| v.map(ms_to_ns));
    if let Some(ns) = ms(t, "head_switch_ms")? {
        m.head_switch_ns = ns;
    }
    if let Some(ns) = ms(t, "write_settle_ms")? {
        m.write_settle_ns = ns;
    }
    if let Some(ns) = ms(t, "overhead_ms")? {
        m.command_overhead_ns = ns;
    }
    if let Some(kib) = t.uint("read_ahead_kib", 0, 1 << 22)? {
        m.read_ahead_sectors = kib * 2;
    }
    if let Some(v) = t.uint("bus_mb_s", 0, 100_000)? {
        m.bus_mb_s = v as u32;
    }
    // Validate here so that a problem in data read from a file (zones beyond `cylinders`, a
    // seek table the curve compiler rejects) names the file key rather than `zones[i]`.
    m.validate().map(drop).map_err(|e| match e {
        Error::Config { key, msg } => {
            let from = |prefix: &str, file: &Option<(String, &str)>| {
                file.as_ref()
                    .filter(|_| key.starts_with(prefix))
                    .map(|(k, p)| {
                        let what = key.trim_start_matches("disk.");
                        (k.clone(), format!("{p}: {what}: {msg}"))
                    })
            };
            match from("disk.zones", &zones_from_file)
                .or_else(|| from("disk.seek_table_ms", &seek_from_file))
            {
                Some((k, m)) => Error::config(k, m),
                None => Error::Config { key, msg },
            }
        }
        other => other,
    })
}

/// The seek curve: at most one of `seek_table_ms`, `seek_file`, the three-point keys,
/// `seek_two_piece_ms`. A three-point key alone adjusts a three-point preset; over another
/// curve all three are needed.
///
/// Returns the key and path of the seek file, if the curve came from one.
fn seek<'a>(
    t: &mut Table<'a>,
    m: &mut MechanicalSpec,
    base_dir: Option<&Path>,
) -> Result<Option<(String, &'a str)>> {
    let file_key = t.key("seek_file");
    let table_key = t.key("seek_table_ms");
    let rows = t.float_rows("seek_table_ms", 2, 0.0, 4294.0)?;
    let file = t.str("seek_file")?;
    let min = t.float("seek_min_ms", 0.0, 4294.0)?;
    let avg = t.float("seek_avg_ms", 0.0, 4294.0)?;
    let max = t.float("seek_max_ms", 0.0, 4294.0)?;
    let two_key = t.key("seek_two_piece_ms");
    let two = t.float_list("seek_two_piece_ms", 0.0, 1e6)?;
    let three_key = [
        (min, "seek_min_ms"),
        (avg, "seek_avg_ms"),
        (max, "seek_max_ms"),
    ]
    .iter()
    .find(|(v, _)| v.is_some())
    .map(|&(_, k)| k);
    let three = three_key.is_some();
    let given: Vec<&str> = [
        (rows.is_some(), "seek_table_ms"),
        (file.is_some(), "seek_file"),
        (three, three_key.unwrap_or("seek_min_ms")),
        (two.is_some(), "seek_two_piece_ms"),
    ]
    .iter()
    .filter(|(present, _)| *present)
    .map(|&(_, k)| k)
    .collect();
    if given.len() > 1 {
        return Err(Error::config(
            t.key(given[1]),
            format!(
                "only one seek curve may be given; `{}` is given too",
                given[0]
            ),
        ));
    }
    if let Some(rows) = rows {
        m.seek = SeekSpec::Table(
            rows.iter()
                .enumerate()
                .map(|(i, r)| {
                    let d = whole(format!("{table_key}[{i}][0]"), r[0], u32::MAX as f64)?;
                    Ok((d, ms_to_ns(r[1])))
                })
                .collect::<Result<_>>()?,
        );
    } else if let Some(path) = file {
        m.seek = SeekSpec::Table(files::read_seek(&resolve(path, base_dir))?);
        return Ok(Some((file_key, path)));
    } else if three {
        let base = match m.seek {
            SeekSpec::ThreePoint {
                min_ns,
                avg_ns,
                max_ns,
            } => Some((min_ns, avg_ns, max_ns)),
            _ => None,
        };
        let pick = |v: Option<f64>, from_base: Option<u64>, key: &str| {
            v.map(ms_to_ns).or(from_base).ok_or_else(|| {
                Error::config(
                    t.key(key),
                    "missing; the preset's seek curve is not three-point, so seek_min_ms, seek_avg_ms and seek_max_ms are needed together",
                )
            })
        };
        m.seek = SeekSpec::ThreePoint {
            min_ns: pick(min, base.map(|b| b.0), "seek_min_ms")?,
            avg_ns: pick(avg, base.map(|b| b.1), "seek_avg_ms")?,
            max_ns: pick(max, base.map(|b| b.2), "seek_max_ms")?,
        };
    } else if let Some(v) = two {
        let [a, b, c, e, boundary] = v[..] else {
            return Err(Error::config(
                two_key,
                "expected [short_a_ms, short_b_ms_per_sqrt_cyl, long_a_ms, long_b_ms_per_cyl, boundary_cyl]",
            ));
        };
        m.seek = SeekSpec::TwoPiece {
            short_a_ns: ms_to_ns(a),
            short_b_ns_per_sqrt: ms_to_ns(b),
            long_a_ns: ms_to_ns(c),
            long_b_ns_per_cyl: ms_to_ns(e),
            boundary_cyl: whole(format!("{two_key}[4]"), boundary, u32::MAX as f64)?,
        };
    }
    Ok(None)
}

fn ssd(t: &mut Table<'_>, s: &mut SsdSpec) -> Result<()> {
    if let Some(v) = t.uint("channels", 0, 1024)? {
        s.channels = v as u32;
    }
    if let Some(v) = t.uint("dies_per_channel", 0, 1024)? {
        s.dies_per_channel = v as u32;
    }
    if let Some(v) = t.uint("page_kib", 0, 1024)? {
        s.page_bytes = v as u32 * 1024;
    }
    let us = |t: &mut Table<'_>, key: &'static str| {
        t.float(key, 0.0, 1e7)
            .map(|v| v.map(|us: f64| (us * 1e3).round() as u64))
    };
    if let Some(ns) = us(t, "read_us")? {
        s.read_ns = ns;
    }
    if let Some(ns) = us(t, "program_us")? {
        s.program_ns = ns;
    }
    if let Some(ns) = us(t, "transfer_us")? {
        s.transfer_ns_per_page = ns;
    }
    if let Some(gib) = t.float("capacity_gib", 0.0, 1e9)? {
        s.capacity_sectors = (gib * SECTORS_PER_GIB).round() as u64;
    }
    if let Some(v) = t.uint("bus_mb_s", 0, 100_000)? {
        s.bus_mb_s = v as u32;
    }
    Ok(())
}

fn queue_spec(t: &mut Table<'_>) -> Result<QueueSpec> {
    let mut q = QueueSpec::default();
    if let Some(name) = t.choice("queue", Discipline::NAMES)? {
        // Invariant: `choice` only returns one of Discipline::NAMES.
        q.discipline = Discipline::from_name(name).expect("a discipline name");
    }
    if let Some(n) = t.uint("ncq", 1, 256)? {
        q.ncq = n as u32;
    }
    if let Some(ms) = t.float("aging_ms", 0.0, 1e9)? {
        q.aging_ns = ms_to_ns(ms);
    }
    Ok(q)
}

#[cfg(test)]
#[path = "disk_tests.rs"]
mod tests;
