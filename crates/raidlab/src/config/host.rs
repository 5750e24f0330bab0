//! The tables of two-level (host + array) runs: `[host]` (the file-system model),
//! `[workload.files]` (file-level workloads) and `[cache.xray]` (X-RAY's tunables), and the
//! checks that tie them to the rest of the experiment.

use std::path::{Path, PathBuf};

use super::tree::Table;
use super::{CacheSpec, Capacity, Unit};
use crate::array::ArraySpec;
use crate::cache::read::xray::Placement;
use crate::cache::read::PolicySpec;
use crate::error::{Error, Result};
use crate::host::{FsPolicy, HostSpec, Latencies, Resize};
use crate::workload::files::{FilesKind, FilesSpec, OnMalformed};
use crate::workload::{SourceSpec, WorkloadSpec};

/// Seconds (config) to nanoseconds, rounded.
fn ns(seconds: f64) -> u64 {
    (seconds * 1e9).round() as u64
}

/// A duration in seconds that must be positive.
fn positive_s(t: &mut Table<'_>, key: &'static str, default: f64) -> Result<u64> {
    let v = t.float(key, 0.0, 1e9)?.unwrap_or(default);
    let n = ns(v);
    if n == 0 {
        return Err(Error::config(t.key(key), format!("must be > 0, got {v}")));
    }
    Ok(n)
}

pub(super) fn host_spec(mut t: Table<'_>) -> Result<HostSpec> {
    let cache_key = t.key("fs_cache_blocks");
    let fs_cache_blocks = t
        .uint("fs_cache_blocks", 1, u64::from(u32::MAX - 1))?
        .ok_or_else(|| Error::config(cache_key, "missing; expected the FS cache size in blocks"))?;
    let fs_policy = match t.choice("fs_policy", FsPolicy::NAMES)? {
        None | Some("lru") => FsPolicy::Lru,
        Some("clock") => FsPolicy::Clock,
        Some(_) => FsPolicy::TwoQ {
            kin: 0.25,
            kout: 0.5,
        },
    };
    let inode_write_interval_ns = positive_s(&mut t, "inode_write_interval_s", 5.0)?;
    let data_write_interval_ns = positive_s(&mut t, "data_write_interval_s", 30.0)?;
    let atime_granularity_ns = positive_s(&mut t, "atime_granularity_s", 1.0)?;
    let sample_interval_ns = positive_s(&mut t, "sample_interval_s", 1.0)?;
    let inodes_per_block = t.uint_or("inodes_per_block", 1, 1 << 16, 32)? as u32;
    let space_blocks = t.uint("space_blocks", 1, crate::host::SPACE_BLOCKS_MAX)?;
    let latency = Latencies {
        fs_hit_ns: ns(t.float_or("fs_hit_us", 0.0, 1e9, 20.0)? / 1e6),
        array_hit_ns: ns(t.float_or("array_hit_us", 0.0, 1e9, 200.0)? / 1e6),
        disk_ns: ns(t.float_or("disk_ms", 0.0, 1e9, 10.0)? / 1e3),
    };
    if latency.disk_ns == 0 {
        return Err(Error::config(t.key("disk_ms"), "must be > 0"));
    }
    let resize_key = t.key("resize");
    let resize = t
        .float_rows("resize", 2, 0.0, 1e15)?
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            if row.iter().any(|v| v.fract() != 0.0) || row[1] < 1.0 {
                return Err(Error::config(
                    format!("{resize_key}[{i}]"),
                    "expected [after_block_reads, blocks], whole numbers, blocks >= 1",
                ));
            }
            Ok(Resize {
                after_block_reads: row[0] as u64,
                blocks: row[1] as u64,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if resize
        .windows(2)
        .any(|w| w[1].after_block_reads < w[0].after_block_reads)
    {
        return Err(Error::config(
            resize_key,
            "rows must be in increasing order of after_block_reads",
        ));
    }
    t.finish()?;
    Ok(HostSpec {
        fs_cache_blocks,
        fs_policy,
        inode_write_interval_ns,
        data_write_interval_ns,
        atime_granularity_ns,
        inodes_per_block,
        space_blocks,
        latency,
        resize,
        sample_interval_ns,
    })
}

/// `[workload.files]`.
pub(super) fn files_spec(
    mut t: Table<'_>,
    base_dir: Option<&Path>,
    seed: u64,
) -> Result<FilesSpec> {
    let kind_key = t.key("kind");
    let kind_name = t
        .choice("kind", &["random", "zipf", "weblog"])?
        .ok_or_else(|| {
            Error::config(
                &kind_key,
                "missing; expected \"random\", \"zipf\" or \"weblog\"",
            )
        })?;
    // Keys of one kind are mistakes under another.
    let only = |t: &Table<'_>, key: &str, kinds: &[&str]| -> Result<()> {
        if t.has(key) && !kinds.contains(&kind_name) {
            return Err(Error::config(
                t.key(key),
                format!("does not apply to kind = {kind_name:?}"),
            ));
        }
        Ok(())
    };
    for key in [
        "files",
        "file_blocks",
        "reads",
        "partial_fraction",
        "write_fraction",
    ] {
        only(&t, key, &["random", "zipf"])?;
    }
    only(&t, "alpha", &["zipf"])?;
    for key in ["log", "on_malformed", "time_scale"] {
        only(&t, key, &["weblog"])?;
    }
    let kind = match kind_name {
        "random" => FilesKind::Random,
        "zipf" => FilesKind::Zipf {
            alpha: t.float_or("alpha", 0.0, 10.0, 1.0)?,
        },
        _ => {
            let log_key = t.key("log");
            let path = PathBuf::from(
                t.str("log")?
                    .ok_or_else(|| Error::config(log_key, "missing; expected a log path"))?,
            );
            let path = match base_dir {
                Some(dir) if path.is_relative() => dir.join(path),
                _ => path,
            };
            FilesKind::WebLog {
                path,
                on_malformed: match t.choice("on_malformed", &["skip", "fail"])? {
                    None | Some("skip") => OnMalformed::Skip,
                    Some(_) => OnMalformed::Fail,
                },
                time_scale: t.float_or("time_scale", 0.0, 1e6, 1.0)?,
            }
        }
    };
    let files_key = t.key("file_blocks");
    let file_blocks = t.uint_or("file_blocks", 0, u64::from(u32::MAX), 16)?;
    if file_blocks == 0 {
        return Err(Error::config(
            files_key,
            "a file needs at least one block, got 0",
        ));
    }
    let spec = FilesSpec {
        kind,
        files: t.uint_or("files", 1, u64::from(u32::MAX), 1024)?,
        file_blocks: file_blocks as u32,
        reads: t.uint_or("reads", 0, 1 << 40, 20_480)?,
        partial_fraction: t.float_or("partial_fraction", 0.0, 1.0, 0.0)?,
        write_fraction: t.float_or("write_fraction", 0.0, 1.0, 0.0)?,
        think_ns: ns(t.float_or("think_ms", 0.0, 1e9, 0.0)? / 1e3),
        warmup: t.bool_or("warmup", true)?,
        seed: t.uint_or("seed", 0, u64::MAX, seed)?,
    };
    t.finish()?;
    Ok(spec)
}

/// `[cache.xray]`: X-RAY's tunables.
pub(super) fn xray_options(policy: &mut PolicySpec, t: Option<Table<'_>>) -> Result<()> {
    let Some(mut t) = t else {
        return Ok(());
    };
    let PolicySpec::Xray {
        threshold,
        refresh_ns,
        placement,
    } = policy
    else {
        return Err(Error::config(
            t.key(""),
            "only applies to policy = \"xray\"",
        ));
    };
    *threshold = t
        .uint("threshold", 1, 1024)?
        .unwrap_or(u64::from(*threshold)) as u32;
    if t.has("refresh_ms") {
        *refresh_ns = ns(t.float_or("refresh_ms", 1e-3, 1e9, 100.0)? / 1e3);
    }
    let extra = t.float("extra_reads_per_s", 0.0, 1e9)?;
    *placement = match t.choice("placement", &["unlimited", "idle"])? {
        None | Some("unlimited") => {
            if extra.is_some() {
                return Err(Error::config(
                    t.key("extra_reads_per_s"),
                    "only with placement = \"idle\" (unlimited already has all it needs)",
                ));
            }
            Placement::Unlimited
        }
        Some(_) => Placement::Idle {
            extra_reads_per_s: extra.unwrap_or(0.0),
        },
    };
    t.finish()
}

/// What a two-level run requires of the other tables, and the reverse.
pub(super) fn check(
    host: Option<&HostSpec>,
    workload: &WorkloadSpec,
    cache: &CacheSpec,
    array: Option<&ArraySpec>,
    timed: bool,
) -> Result<()> {
    let files = matches!(workload.source, SourceSpec::Files(_));
    let Some(_) = host else {
        if files {
            return Err(Error::config(
                "workload.files",
                "a file-level workload needs a [host] table (the file system it runs on)",
            ));
        }
        return Ok(());
    };
    if !files {
        return Err(Error::config(
            "workload",
            "a [host] run replays a file-level workload: give [workload.files]",
        ));
    }
    if timed {
        return Err(Error::config(
            "run.mode",
            "two-level [host] runs use fixed latencies (host.fs_hit_us, array_hit_us, \
             disk_ms); timed mode is not available for them",
        ));
    }
    if array.is_some() {
        return Err(Error::config(
            "array",
            "not used by [host] runs (the array is one device with fixed latencies); remove it",
        ));
    }
    if cache.unit != Unit::Block {
        return Err(Error::config("cache.unit", "[host] runs cache blocks"));
    }
    if let Capacity::FootprintFraction(_) = cache.capacity {
        return Err(Error::config(
            "cache.capacity_fraction",
            "[host] runs take capacity_blocks",
        ));
    }
    if workload.block_size != 4096 {
        return Err(Error::config(
            "workload.block_size",
            "the host's file system uses 4 KiB blocks",
        ));
    }
    Ok(())
}
