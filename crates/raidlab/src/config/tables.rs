//! The tables every run has: `[workload]` (and `[workload.synthetic]`), `[cache]` and
//! `[array]`. Each function reads one table and rejects its unknown keys.

use std::path::{Path, PathBuf};

use super::tree::{quoted, Table};
use super::{CacheSpec, Capacity, Unit, Writes};
use crate::array::{ArraySpec, Layout, Level};
use crate::cache::read::PolicySpec;
use crate::error::{Error, Result};
use crate::workload::csvtrace::CsvSpec;
use crate::workload::{Format, OpsFilter, SourceSpec, SynthSpec, WorkloadSpec};

pub(super) fn workload_spec(
    mut t: Table<'_>,
    base_dir: Option<&Path>,
    seed: u64,
) -> Result<WorkloadSpec> {
    let block_size = t.size("block_size", 512, 1 << 30, 1)?.unwrap_or_else(|| {
        t.default_used("block_size", 4096);
        4096
    });
    if !block_size.is_power_of_two() {
        return Err(Error::config(
            t.key("block_size"),
            format!("expected a power of two >= 512, got {block_size}"),
        ));
    }
    let ops = match t.choice_or("ops", &["reads", "all"], "reads")? {
        "reads" => OpsFilter::Reads,
        _ => OpsFilter::All,
    };
    let limit = t.uint("limit", 1, u64::MAX)?;
    let device = t.uint("device", 0, u64::MAX)?;
    let split = t.bool_or("split", true)?;
    let source = match t.tables("overlay")? {
        Some(parts) => {
            for key in ["trace", "format", "synthetic"] {
                if t.has(key) {
                    return Err(Error::config(
                        t.key(key),
                        "give either `overlay` or a single source, not both",
                    ));
                }
            }
            super::overlay::overlay_spec(parts, base_dir, seed)?
        }
        None => source_spec(&mut t, base_dir, seed)?,
    };
    t.finish()?;
    Ok(WorkloadSpec {
        source,
        ops,
        limit,
        block_size: block_size as u32,
        device,
        split,
    })
}

/// A trace (`trace`, `format`) or a `[synthetic]` table: the source of `[workload]` or of one
/// part of its `overlay`.
pub(super) fn source_spec(
    t: &mut Table<'_>,
    base_dir: Option<&Path>,
    seed: u64,
) -> Result<SourceSpec> {
    let trace = t.str("trace")?;
    let format_key = t.key("format");
    let format = t.str("format")?;
    let synth = t.table("synthetic")?;
    let files = t.table("files")?;
    Ok(match (trace, synth) {
        _ if files.is_some() && (trace.is_some() || t.has("synthetic")) => {
            return Err(Error::config(
                t.key("files"),
                "give one of `trace`, `[workload.synthetic]` or `[workload.files]`",
            ))
        }
        (None, None) if files.is_some() => {
            let files = files.expect("matched");
            SourceSpec::Files(super::host::files_spec(files, base_dir, seed)?)
        }
        (Some(path), None) => {
            let format = match format {
                None => Format::Auto,
                Some(name) => Format::from_name(name).ok_or_else(|| {
                    Error::config(
                        format_key,
                        format!("expected one of {}, got {name:?}", quoted(Format::NAMES)),
                    )
                })?,
            };
            let format = match (format, t.table("csv")?) {
                (Format::Csv(_), Some(csv)) => Format::Csv(csv_spec(csv)?),
                (_, Some(csv)) => {
                    return Err(Error::config(
                        csv.key(""),
                        "only applies to format = \"csv\"",
                    ))
                }
                (f, None) => f,
            };
            let path = PathBuf::from(path);
            let path = match base_dir {
                Some(dir) if path.is_relative() => dir.join(path),
                _ => path,
            };
            SourceSpec::Trace { path, format }
        }
        (None, Some(s)) => {
            if format.is_some() {
                return Err(Error::config(format_key, "only applies to `trace`"));
            }
            SourceSpec::Synthetic(synth_spec(s, seed)?)
        }
        (Some(_), Some(_)) => {
            return Err(Error::config(
                t.key("synthetic"),
                "give either `trace` or `[workload.synthetic]`, not both",
            ))
        }
        (None, None) => {
            return Err(t.missing(
                "trace",
                "missing; expected a trace path or a [workload.synthetic] table",
            ))
        }
    })
}

fn synth_spec(mut t: Table<'_>, run_seed: u64) -> Result<SynthSpec> {
    const REQUESTS_MAX: u64 = 1 << 40;
    let kind = t.choice(
        "kind",
        &["zipf", "uniform", "websearch", "bursty", "hotspots", "spc1"],
    )?;
    let seed = t.uint_or("seed", 0, u64::MAX, run_seed)?;
    let spec = match kind {
        Some("zipf") => SynthSpec::Zipf {
            keys: t.uint_or("keys", 1, 1 << 40, 1_000_000)?,
            alpha: t.float_or("alpha", 0.0, 10.0, 0.9)?,
            requests: t.uint_or("requests", 1, REQUESTS_MAX, 10_000_000)?,
            seed,
        },
        Some("uniform") => SynthSpec::Uniform {
            keys: t.uint_or("keys", 1, 1 << 40, 1_000_000)?,
            requests: t.uint_or("requests", 1, REQUESTS_MAX, 10_000_000)?,
            seed,
        },
        Some("websearch") => {
            // 60 GB: the span of SPC-1-web as the VDF paper gives it.
            let space_gib = t.float_or("space_gib", 0.001, 1e6, 60.0)?;
            let mean_ms = t.float_or("mean_interarrival_ms", 1e-6, 1e9, 3.7)?;
            SynthSpec::WebSearch {
                space_bytes: super::gib_bytes(space_gib),
                requests: t.uint_or("requests", 1, REQUESTS_MAX, 1_000_000)?,
                mean_interarrival_ns: (mean_ms * 1e6).round().max(1.0) as u64,
                seed,
                cluster_bytes: t.uint_or("cluster_kib", 32, 1 << 30, 32)? << 10,
            }
        }
        Some("bursty") => super::bursty::bursty_spec(&mut t, seed)?,
        Some("hotspots") => super::hotspots::hotspots_spec(&mut t, seed)?,
        Some("spc1") => {
            // 573 million 512-byte sectors: the STOW paper's RAID-5 full backend.
            let space_gib = t.float_or("space_gib", 0.001, 1e6, 273.2)?;
            SynthSpec::Spc1 {
                space_bytes: super::gib_bytes(space_gib),
                partial: t.choice("backend", &["full", "partial"])? == Some("partial"),
                iops: t.float_or("iops", 1e-3, 1e9, 1000.0)?,
                // SPC-1: one business scaling unit (the eight streams) per 50 IOPS.
                bsu_iops: t.float_or(
                    "bsu_iops",
                    0.0,
                    1e9,
                    crate::workload::synth::spc1::BSU_IOPS,
                )?,
                requests: t.uint_or("requests", 1, REQUESTS_MAX, 1_000_000)?,
                seed,
            }
        }
        _ => {
            return Err(t.missing(
                "kind",
                "missing; expected one of \"zipf\", \"uniform\", \"websearch\", \"bursty\", \"hotspots\", \"spc1\"",
            ));
        }
    };
    t.finish()?;
    Ok(spec)
}

/// `[workload.csv]`: libCacheSim's CSV reader parameters (`workload/csvtrace.rs`), each
/// defaulting to its [`CsvSpec::DEFAULT`] value.
fn csv_spec(mut t: Table<'_>) -> Result<CsvSpec> {
    let d = CsvSpec::DEFAULT;
    let max = u64::from(crate::workload::csvtrace::MAX_COLUMNS);
    let delimiter_key = t.key("delimiter");
    let delimiter = match t.str("delimiter")? {
        None => d.delimiter,
        Some("\\t" | "\t") => b'\t',
        Some(s) if s.len() == 1 => s.as_bytes()[0],
        Some(s) => {
            return Err(Error::config(
                delimiter_key,
                format!("expected one character (or \"\\t\"), got {s:?}"),
            ))
        }
    };
    let spec = CsvSpec {
        time_col: t.uint("time_col", 0, max)?.map_or(d.time_col, |v| v as u32),
        obj_id_col: t
            .uint("obj_id_col", 1, max)?
            .map_or(d.obj_id_col, |v| v as u32),
        obj_size_col: t
            .uint("obj_size_col", 0, max)?
            .map_or(d.obj_size_col, |v| v as u32),
        op_col: t.uint("op_col", 0, max)?.map_or(d.op_col, |v| v as u32),
        has_header: t.bool_or("has_header", d.has_header)?,
        delimiter,
        obj_id_is_num: t.bool_or("obj_id_is_num", d.obj_id_is_num)?,
    };
    spec.validate()
        .map_err(|(key, msg)| Error::config(t.key(key), msg))?;
    t.finish()?;
    Ok(spec)
}

pub(super) fn cache_spec(mut t: Table<'_>, block_size: u32) -> Result<CacheSpec> {
    let policy_key = t.key("policy");
    let name = match t.str("policy")? {
        Some(name) => name,
        None => return Err(t.missing("policy", "missing; expected a policy name")),
    };
    let mut policy = PolicySpec::from_name(name).ok_or_else(|| {
        Error::config(
            &policy_key,
            format!(
                "expected one of {} or an offline bound ({}), got {name:?}",
                quoted(PolicySpec::NAMES),
                quoted(PolicySpec::OFFLINE_NAMES)
            ),
        )
    })?;
    if let Some(mut mq) = t.table("mq")? {
        let PolicySpec::Mq {
            queues,
            lifetime,
            history_factor,
        } = &mut policy
        else {
            return Err(Error::config(mq.key(""), "only applies to policy = \"mq\""));
        };
        *queues = mq.uint("queues", 1, 32)?.unwrap_or(*queues as u64) as u32;
        *lifetime = mq.uint("lifetime", 1, u64::MAX)?.unwrap_or(*lifetime);
        *history_factor = mq
            .uint("history_factor", 0, 64)?
            .unwrap_or(*history_factor as u64) as u32;
        mq.finish()?;
    }
    if let Some(mut q) = t.table("twoq")? {
        let PolicySpec::TwoQ { kin, kout } = &mut policy else {
            return Err(Error::config(q.key(""), "only applies to policy = \"2q\""));
        };
        *kin = q.float("kin", 0.01, 0.99)?.unwrap_or(*kin);
        *kout = q.float("kout", 0.0, 16.0)?.unwrap_or(*kout);
        q.finish()?;
    }
    if let Some(mut q) = t.table("s3fifo")? {
        let (PolicySpec::S3Fifo {
            small,
            ghost,
            move_threshold,
        }
        | PolicySpec::VdfS3Fifo {
            small,
            ghost,
            move_threshold,
        }) = &mut policy
        else {
            return Err(Error::config(
                q.key(""),
                "only applies to policy = \"s3fifo\" or \"vdf-s3fifo\"",
            ));
        };
        *small = q.float("small", 0.001, 0.999)?.unwrap_or(*small);
        *ghost = q.float("ghost", 0.0, 16.0)?.unwrap_or(*ghost);
        *move_threshold = q
            .uint("move_threshold", 1, u64::from(u8::MAX))?
            .unwrap_or(u64::from(*move_threshold)) as u8;
        q.finish()?;
    }
    if let Some(mut q) = t.table("slru")? {
        let PolicySpec::Slru { segments } = &mut policy else {
            return Err(Error::config(
                q.key(""),
                "only applies to policy = \"slru\"",
            ));
        };
        *segments = q
            .uint(
                "segments",
                1,
                u64::from(crate::cache::read::slru::MAX_SEGMENTS),
            )?
            .unwrap_or(u64::from(*segments)) as u32;
        q.finish()?;
    }
    super::host::xray_options(&mut policy, t.table("xray")?)?;
    let unit = match t.choice_or("unit", &["block", "object"], "block")? {
        "block" => Unit::Block,
        _ => Unit::Object,
    };
    // `capacity_blocks` is in blocks, but also takes a size with a unit ("128MiB");
    // `capacity` is a size in bytes (an integer or "1GiB") in either unit.
    let blocks = t.size("capacity_blocks", 1, 1 << 40, u64::from(block_size))?;
    let bytes = t.uint("capacity_bytes", 1, 1 << 60)?;
    let fraction = t.float("capacity_fraction", 1e-9, 1.0)?;
    let size = match unit {
        Unit::Block => t.size("capacity", 1, 1 << 40, u64::from(block_size))?,
        Unit::Object => t.size("capacity", 1, 1 << 60, 1)?,
    };
    const CAPACITY_KEYS: [&str; 4] = [
        "capacity",
        "capacity_blocks",
        "capacity_bytes",
        "capacity_fraction",
    ];
    let capacity = match (unit, blocks.or(size), bytes, fraction) {
        _ if size.is_some() && (blocks.is_some() || bytes.is_some() || fraction.is_some()) => {
            return Err(Error::config(
                t.key("capacity"),
                "give one capacity: capacity or capacity_blocks/capacity_bytes/capacity_fraction",
            ))
        }
        (Unit::Block, Some(b), None, None) => Capacity::Units(b),
        (Unit::Block, None, None, Some(f)) => Capacity::FootprintFraction(f),
        (Unit::Object, Some(b), None, None) if blocks.is_none() => Capacity::Units(b),
        (Unit::Object, None, Some(b), None) => Capacity::Units(b),
        (Unit::Block, ..) => {
            return Err(t.typo_of(&CAPACITY_KEYS).unwrap_or_else(|| {
                Error::config(
                    t.key("capacity_blocks"),
                    "expected exactly one of capacity (a size such as \"128MiB\"), capacity_blocks or capacity_fraction with unit = \"block\"",
                )
            }))
        }
        (Unit::Object, ..) => {
            return Err(t.typo_of(&CAPACITY_KEYS).unwrap_or_else(|| {
                Error::config(
                    t.key("capacity_bytes"),
                    "expected capacity_bytes or capacity (a size such as \"1GiB\"), and no other capacity, with unit = \"object\"",
                )
            }))
        }
    };
    let writes = match t.choice_or("writes", &["ignore", "invalidate", "access"], "ignore")? {
        "ignore" => Writes::Ignore,
        "invalidate" => Writes::Invalidate,
        _ => Writes::Access,
    };
    t.finish()?;
    Ok(CacheSpec {
        policy,
        unit,
        capacity,
        writes,
    })
}

pub(super) fn array_spec(mut t: Table<'_>, block_size: u32) -> Result<ArraySpec> {
    let level_key = t.key("level");
    let level = match t.str("level")? {
        None => {
            t.default_used("level", "raid5");
            Level::Raid5
        }
        Some(name) => Level::from_name(name).ok_or_else(|| {
            Error::config(
                &level_key,
                format!("expected one of {}, got {name:?}", quoted(Level::NAMES)),
            )
        })?,
    };
    let layout_key = t.key("layout");
    let layout = match t.str("layout")? {
        None => {
            t.default_used("layout", "left-symmetric");
            Layout::LeftSymmetric
        }
        Some(name) => Layout::from_name(name).ok_or_else(|| {
            Error::config(
                &layout_key,
                format!("expected one of {}, got {name:?}", quoted(Layout::NAMES)),
            )
        })?,
    };
    let disks = match t.uint("disks", 1, 1024)? {
        Some(d) => d,
        None => return Err(t.missing("disks", "missing; expected the number of disks")),
    };
    let stripe_unit_bytes = t.size("stripe_unit", 1, 1 << 34, 1)?.unwrap_or_else(|| {
        t.default_used("stripe_unit", 65536);
        65536
    });
    let failed = t
        .uint_list("failed", u32::MAX as u64)?
        .unwrap_or_default()
        .into_iter()
        .map(|d| d as u32)
        .collect();
    t.finish()?;
    Ok(ArraySpec {
        level,
        disks: disks as u32,
        stripe_unit_bytes,
        layout,
        failed,
        block_size,
    })
}
