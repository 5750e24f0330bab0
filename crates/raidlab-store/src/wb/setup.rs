//! `raidlab serve`'s write-back options, the record of the backup in use (`DIR/wb.json`),
//! and the start-up sequence: replay whatever backup the last run left (whatever this run's
//! options are), then lay out a fresh one for this run.
//!
//! `DIR/wb.json` is written (and synced, with its directory) before the first cached write
//! is accepted, so a crash always leaves a record of where the dirty pages are. A start
//! without `--write-cache-mib` still replays that backup, then retires it.
//! `DIR/wb-void` holds the epoch of a backup that failed and could not be reset: its
//! records were all destaged before writes went straight to the array, and must never be
//! replayed over them.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use raidlab::cache::write::OrderKind;
use raidlab::{Error, Result};

use super::backup::Backup;
use super::log::{nvram_bytes, replay_nvram, Leg, LogBackup, NVRAM_SLOTS_DEFAULT, NVRAM_SLOTS_MAX};
use super::mirror::{mirror_bytes, MirrorBackup};
use super::recover::{replay, Replayed};
use super::{BackupKind, WbSpec, WriteBack, BLOCK};
use crate::ctrl::Controller;
use crate::format::{parse_size, Assembled};
use crate::member::{FileMember, Member};

pub const RECORD_FILE: &str = "wb.json";
pub const VOID_FILE: &str = "wb-void";

/// What `raidlab serve` was asked for about the write cache.
#[derive(Debug, Clone, PartialEq)]
pub struct WbOptions {
    pub spec: WbSpec,
    pub backup: BackupKind,
    /// The mirror file or the physical log file (default `DIR/wb-mirror.img` or
    /// `DIR/wb-log.img`).
    pub path: Option<PathBuf>,
    /// Bytes of log (all legs together).
    pub log_bytes: u64,
    pub segment_bytes: u64,
    /// The log's NVRAM segment buffers (`--log-nvram`, `--log-nvram-slots`): the file and
    /// its slot count.
    pub nvram: Option<(PathBuf, u32)>,
}

/// Largest write cache in MiB (frames are allocated up front).
pub const WRITE_CACHE_MIB_MAX: u64 = 64 << 10;
/// Most destages in flight: one round's groups on fast members (each one row's pages in
/// the round buffer), the destager's threads on slow members (`destage_pool.rs`).
pub const MAX_DESTAGES_MAX: u32 = 256;

impl WbOptions {
    /// Build from the command line's values; each bad value names its option.
    #[allow(clippy::too_many_arguments)]
    pub fn parse(
        write_cache_mib: u64,
        destage: &str,
        thresholds: &str,
        backup: &str,
        path: Option<&str>,
        log_mode: &str,
        log_size: Option<&str>,
        segment: &str,
    ) -> Result<WbOptions> {
        if write_cache_mib == 0 || write_cache_mib > WRITE_CACHE_MIB_MAX {
            return Err(Error::config(
                "--write-cache-mib",
                format!("expected 1 to {WRITE_CACHE_MIB_MAX}, got {write_cache_mib}"),
            ));
        }
        let order = match destage {
            "lrw" | "cscan" | "wow" | "stow" => {
                OrderKind::from_name(destage).expect("a known order")
            }
            other => {
                return Err(Error::config(
                    "--destage",
                    format!("unknown destage order {other:?}; expected lrw, cscan, wow or stow"),
                ))
            }
        };
        let bad_t = || {
            Error::config(
                "--thresholds",
                format!("expected H/L in percent of the cache with 0 <= L < H <= 100, e.g. 80/20; got {thresholds:?}"),
            )
        };
        let (h, l) = thresholds.split_once('/').ok_or_else(bad_t)?;
        let (high_pct, low_pct): (f64, f64) = (
            h.trim().parse().map_err(|_| bad_t())?,
            l.trim().parse().map_err(|_| bad_t())?,
        );
        super::check_thresholds(high_pct, low_pct)?;
        let kind = match (backup, log_mode) {
            ("none", _) => BackupKind::None,
            ("mirror", _) => BackupKind::Mirror,
            ("log", "physical") => BackupKind::Log { logical: false },
            ("log", "logical") => BackupKind::Log { logical: true },
            ("log", other) => {
                return Err(Error::config(
                    "--log-mode",
                    format!("unknown log mode {other:?}; expected physical or logical"),
                ))
            }
            (other, _) => {
                return Err(Error::config(
                    "--backup",
                    format!("unknown backup {other:?}; expected none, mirror or log"),
                ))
            }
        };
        let capacity_pages = write_cache_mib * (1 << 20) / BLOCK as u64;
        // RAPID-Cache sizes its cache disk 5-10x the primary cache; 4x is the least here.
        let log_bytes = match log_size {
            Some(s) => parse_size(s, "--log-size")?,
            None => (4 * write_cache_mib).max(16) << 20,
        };
        let segment_bytes = parse_size(segment, "--segment")?;
        if segment_bytes < 16 * BLOCK as u64
            || segment_bytes > 16 << 20
            || !segment_bytes.is_multiple_of(BLOCK as u64)
        {
            return Err(Error::config(
                "--segment",
                format!(
                    "expected a multiple of 4 KiB from 64 KiB to 16 MiB, got {segment_bytes} bytes"
                ),
            ));
        }
        Ok(WbOptions {
            spec: WbSpec {
                capacity_pages,
                order,
                high_pct,
                low_pct,
                ..WbSpec::default()
            },
            backup: kind,
            path: path.map(PathBuf::from),
            log_bytes,
            segment_bytes,
            nvram: None,
        })
    }

    /// Back the log with an NVRAM file of `slots` segment buffers (default
    /// `NVRAM_SLOTS_DEFAULT`); `slots` without a file, or a file without the log backup, is
    /// refused naming the option.
    pub fn with_nvram(mut self, path: Option<&str>, slots: Option<u32>) -> Result<WbOptions> {
        let Some(path) = path else {
            if slots.is_some() {
                return Err(Error::config(
                    "--log-nvram-slots",
                    "given without --log-nvram",
                ));
            }
            return Ok(self);
        };
        if !matches!(self.backup, BackupKind::Log { .. }) {
            return Err(Error::config(
                "--log-nvram",
                "the NVRAM buffers the log backup: it needs --backup log",
            ));
        }
        if path.is_empty() {
            return Err(Error::config(
                "--log-nvram",
                "expected a file path, got \"\"",
            ));
        }
        let slots = slots.unwrap_or(NVRAM_SLOTS_DEFAULT);
        if slots == 0 || slots > NVRAM_SLOTS_MAX {
            return Err(Error::config(
                "--log-nvram-slots",
                format!("expected 1 to {NVRAM_SLOTS_MAX}, got {slots}"),
            ));
        }
        // Absolute in wb.json, so a restart from another directory finds it.
        let path = std::path::absolute(path)
            .map_err(|e| Error::config("--log-nvram", format!("{path}: {e}")))?;
        self.nvram = Some((path, slots));
        Ok(self)
    }

    /// At most `n` destages in flight (one destage round's groups), the simulator's
    /// `write_cache.max_destages`: 1 to `MAX_DESTAGES_MAX`.
    pub fn with_max_destages(mut self, n: u32) -> Result<WbOptions> {
        if n == 0 || n > MAX_DESTAGES_MAX {
            return Err(Error::config(
                "--max-destages",
                format!("expected 1 to {MAX_DESTAGES_MAX}, got {n}"),
            ));
        }
        self.spec.max_destages = n;
        Ok(self)
    }

    /// Mirror slots: two versions of every cached page (a rewrite holds both until the
    /// newer is durable) and room for what the destages in flight protect their rows with:
    /// page images of up to two lost units and a partial parity per column plus a plan,
    /// for rows of `pages_per_unit` pages per unit (at least 64 per destage, at most 4,096;
    /// a put that finds no slot loses the backup, and the cache then writes through).
    pub fn mirror_slots(&self, pages_per_unit: u64) -> u64 {
        let per_destage = (3 * pages_per_unit + 1).clamp(64, 4096);
        2 * self.spec.capacity_pages + per_destage * u64::from(self.spec.max_destages) + 64
    }
}

#[path = "setup_record.rs"]
mod record;
use record::Record;
pub use record::{parse_record, write_record, write_record_with_nvram};

fn io_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Store {
        path: path.display().to_string(),
        msg: e.to_string(),
    }
}

/// Write `text` to `path` atomically and durably (temp file, fsync, rename, fsync dir).
fn write_durably(dir: &Path, path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
    f.write_all(text.as_bytes()).map_err(|e| io_err(&tmp, e))?;
    f.sync_all().map_err(|e| io_err(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| io_err(path, e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(dir, e))
}

fn remove_durably(dir: &Path, path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err(dir, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(path, e)),
    }
}

/// Open `path` as a backup device of at least `bytes`; with `create`, a regular file is
/// created or grown to that size (recovery never creates: a missing backup is an error).
fn open_sized(path: &Path, bytes: u64, create: bool) -> Result<Arc<dyn Member>> {
    if !create && !path.exists() {
        return Err(io_err(
            path,
            "the write-cache backup recorded in wb.json is missing",
        ));
    }
    let is_file = fs::metadata(path).map(|m| m.is_file()).unwrap_or(true);
    if is_file && create {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        let len = f.metadata().map_err(|e| io_err(path, e))?.len();
        if len < bytes {
            fill_zeros(&f, len, bytes).map_err(|e| io_err(path, e))?;
        }
    }
    let m = FileMember::open(&path.display().to_string()).map_err(|e| io_err(path, e))?;
    if m.len_bytes() < bytes {
        return Err(io_err(
            path,
            format!(
                "{} bytes is too small for the write-cache backup (needs {bytes})",
                m.len_bytes()
            ),
        ));
    }
    Ok(Arc::new(m))
}

/// Write zeros over `from..to` of a new backup file and sync them. A sparse file would take
/// its blocks at the first write of each, and an fdatasync after that write also commits
/// the allocation to the file system's journal; written blocks make every later commit a
/// plain data flush (measured: about a third more depth-1 writes per second with the log on
/// ext4). It also claims the space now: a full file system fails the set-up with the
/// file's name, not a backup write later.
fn fill_zeros(f: &fs::File, from: u64, to: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let zeros = vec![0u8; 1 << 20];
    let mut at = from;
    while at < to {
        let n = (to - at).min(zeros.len() as u64) as usize;
        f.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    f.sync_all()
}

fn open_legs(rec: &Record, create: bool) -> Result<Vec<Leg>> {
    rec.legs
        .iter()
        .map(|(p, base, bytes)| {
            Ok((
                open_sized(Path::new(p), base + bytes, create)?,
                *base,
                *bytes,
            ))
        })
        .collect()
}

/// The backup a record names, opened for recovery; `None` when it holds no backup yet.
fn open_recorded(rec: &Record, uuid: [u8; 16]) -> Result<Option<Box<dyn Backup>>> {
    Ok(match rec.kind.as_str() {
        "mirror" => {
            let (p, base, bytes) = &rec.legs[0];
            assert_eq!(*base, 0, "a mirror starts at 0");
            MirrorBackup::open(open_sized(Path::new(p), *bytes, false)?, uuid)?
                .map(|m| Box::new(m) as Box<dyn Backup>)
        }
        _ => {
            let legs = open_legs(rec, false)?;
            if let Some((p, slots)) = &rec.nvram {
                // The NVRAM's staged segments go onto their legs before the log is read.
                let seg = rec.segment_bytes;
                let dev = open_sized(Path::new(p), nvram_bytes(*slots, seg), false)
                    .map_err(|e| match e {
                        Error::Store { path, msg } if msg.contains("missing") => Error::Store {
                            path,
                            msg: "the log's NVRAM recorded in wb.json is missing: the last run's acknowledged writes may be only there".into(),
                        },
                        e => e,
                    })?;
                let r = replay_nvram(&dev, &legs, seg, uuid, *slots)?;
                if r.replayed > 0 || r.ignored > 0 {
                    crate::info!(
                        "{p}: {} NVRAM segment(s) written to the log, {} slot(s) ignored",
                        r.replayed,
                        r.ignored
                    );
                }
            }
            Some(Box::new(LogBackup::open(legs, uuid)?) as Box<dyn Backup>)
        }
    })
}

/// What start-up did, for the log line.
#[derive(Debug, Default)]
pub struct Started {
    pub replayed: Option<Replayed>,
    pub voided: bool,
    pub retired: bool,
}

/// Replay the backup the last run recorded, then set up this run's write cache (if any).
/// `discard`: the operator accepts losing what an unreadable backup held.
pub fn start(
    a: &Assembled,
    ctl: &Arc<Controller>,
    opts: Option<&WbOptions>,
    discard: bool,
) -> Result<(Option<Arc<WriteBack>>, Started)> {
    let dir = a.dir.as_path();
    let rec_path = dir.join(RECORD_FILE);
    let void_path = dir.join(VOID_FILE);
    let mut started = Started::default();
    let mut after_epoch = 0;
    if rec_path.exists() {
        let text = fs::read_to_string(&rec_path).map_err(|e| io_err(&rec_path, e))?;
        let rec = Record::parse(&text, &rec_path.display().to_string())?;
        let voided_epoch = match fs::read_to_string(&void_path) {
            Ok(t) => Some(
                t.trim()
                    .parse::<u64>()
                    .map_err(|_| io_err(&void_path, "not an epoch number"))?,
            ),
            Err(_) => None,
        };
        match open_recorded(&rec, a.uuid) {
            Ok(Some(b)) => {
                after_epoch = b.epoch();
                if voided_epoch.is_some_and(|v| b.epoch() <= v) {
                    started.voided = true;
                } else {
                    let side = dir.join(super::ppl::SIDE_FILE);
                    started.replayed =
                        Some(replay(ctl, b.as_ref(), &rec.legs[0].0, Some(&side))?);
                }
                // The replayed pages are on the members: retire the old records for good
                // (and the pages rebuilt from their partial parities with them).
                if b.reset().is_ok() {
                    after_epoch = b.epoch();
                    remove_durably(dir, &dir.join(super::ppl::SIDE_FILE))?;
                }
            }
            Ok(None) => {}
            Err(e) if discard => {
                crate::warn!("--backup-discard: not replaying the write-cache backup ({e})");
            }
            Err(e) => {
                return Err(Error::Store {
                    path: rec.legs[0].0.clone(),
                    msg: format!(
                        "{e}; the write cache's dirty pages of the last run may be there, so the array is not served (after a clean stop, or to accept losing them, start with --backup-discard)"
                    ),
                })
            }
        }
    }
    let Some(o) = opts else {
        if rec_path.exists() {
            remove_durably(dir, &rec_path)?;
            started.retired = true;
        }
        remove_durably(dir, &void_path)?;
        return Ok((None, started));
    };
    let mut kind = o.backup;
    if kind == (BackupKind::Log { logical: true })
        && (a.devs.iter().any(|d| d.is_none()) || a.recovering.is_some())
    {
        // The failed member held a leg: RAPID falls back to another backup until the array
        // is whole again.
        crate::warn!(
            "a logical log needs a leg on every member and the array is degraded; backing the write cache up with a mirror file ({}) until it is whole{}",
            dir.join("wb-mirror.img").display(),
            if o.nvram.is_some() {
                " (the mirror needs no NVRAM segment buffers: --log-nvram is unused)"
            } else {
                ""
            }
        );
        kind = BackupKind::Mirror;
    }
    let backup: Option<Box<dyn Backup>> = match kind {
        BackupKind::None => {
            remove_durably(dir, &rec_path)?;
            None
        }
        BackupKind::Mirror => {
            let slots = o.mirror_slots(u64::from(ctl.geo.blocks_per_stripe_unit()));
            let path = match (o.backup, &o.path) {
                (BackupKind::Mirror, Some(p)) => p.clone(),
                _ => dir.join("wb-mirror.img"),
            };
            let dev = open_sized(&path, mirror_bytes(slots), true)?;
            let m = MirrorBackup::create(dev, a.uuid, slots, after_epoch)?;
            let rec = Record {
                kind: "mirror".into(),
                legs: vec![(path.display().to_string(), 0, mirror_bytes(slots))],
                segment_bytes: 0,
                nvram: None,
            };
            write_durably(dir, &rec_path, &rec.to_json().to_string())?;
            Some(Box::new(m))
        }
        BackupKind::Log { logical } => {
            let legs: Vec<(String, u64, u64)> = if logical {
                // A partition past the data area of every member (RAPID's logical cache disk).
                let live: Vec<&Arc<dyn Member>> = a.devs.iter().flatten().collect();
                let share = (o.log_bytes / live.len() as u64).div_ceil(o.segment_bytes)
                    * o.segment_bytes
                    + super::format::SUPERS_BYTES;
                let base = (a.shape.data_offset_bytes + a.shape.member_data_bytes)
                    .next_multiple_of(1 << 20);
                live.iter()
                    .map(|d| (d.path().to_string(), base, share))
                    .collect()
            } else {
                let path = o.path.clone().unwrap_or_else(|| dir.join("wb-log.img"));
                vec![(path.display().to_string(), 0, o.log_bytes)]
            };
            let rec = Record {
                kind: if logical { "log-logical" } else { "log" }.into(),
                legs,
                segment_bytes: o.segment_bytes,
                nvram: o.nvram.as_ref().map(|(p, k)| (p.display().to_string(), *k)),
            };
            let mut legs = open_legs(&rec, true)?;
            if logical {
                // The legs are the served members themselves, now grown to hold them: the
                // log's I/O then queues with the array's on each member (a disk-timed
                // member's model and queue), as RAPID's logical cache disk shares the disks.
                let live: Vec<&Arc<dyn Member>> = a.devs.iter().flatten().collect();
                for ((dev, _, _), m) in legs.iter_mut().zip(live) {
                    m.refresh_len()
                        .map_err(|e| io_err(Path::new(m.path()), e))?;
                    *dev = m.clone();
                }
            }
            // The log picks an epoch past any it finds on its legs (and past the clock).
            let l = LogBackup::create(
                legs,
                a.uuid,
                o.segment_bytes,
                o.spec.capacity_pages,
            )
            .map_err(|e| match e {
                Error::Store { path, msg } if msg.contains("too small") => Error::config(
                    "--log-size",
                    format!("{path}: {msg} (the log must hold twice the write cache plus 4 segments; raise --log-size)"),
                ),
                e => e,
            })?;
            let l = match &o.nvram {
                Some((p, slots)) => {
                    let dev = open_sized(p, nvram_bytes(*slots, o.segment_bytes), true)?;
                    l.with_nvram(dev, *slots)?
                }
                None => l,
            };
            write_durably(dir, &rec_path, &rec.to_json().to_string())?;
            Some(Box::new(l))
        }
    };
    remove_durably(dir, &void_path)?;
    let wb = WriteBack::new(ctl.clone(), o.spec.clone(), kind, backup)?;
    let void_dir = dir.to_path_buf();
    let wb = Arc::new(wb.with_void_hook(Box::new(move |epoch| {
        write_durably(&void_dir, &void_dir.join(VOID_FILE), &format!("{epoch}\n"))
            .map_err(std::io::Error::other)
    })));
    if let Some(r) = &started.replayed {
        wb.set_next_seq(r.seq_max);
    }
    let weak = Arc::downgrade(&wb);
    ctl.set_front_status(Box::new(move || weak.upgrade().map(|w| w.status())));
    Ok((Some(wb), started))
}

/// A clean stop: destage everything, stop the destager, and retire the backup's records.
pub fn stop(wb: &WriteBack, destager: crate::sync::thread::JoinHandle<()>) -> bool {
    let drained = wb.drain_all().is_ok();
    wb.stop();
    let _ = destager.join();
    if drained {
        if let Some(b) = &wb.backup {
            let _ = b.reset();
        }
    }
    drained
}

#[cfg(test)]
#[path = "setup_tests.rs"]
mod tests;
