//! Crash states of arrays behind the write-back cache: the members and the backup file are
//! recorded together, every write the client saw answered is durable (the backup's
//! promise), and recovery replays the backup the way `serve` does before the checks.
//!
//! The run is driven from one thread: writes, flushes, destage rounds (at the rate's
//! allowance, or forced) and rebuild steps interleave in a seeded order, so every run and
//! every crash state is reproducible. With `overlap`, destages are begun and ended apart
//! (as the destager's pool runs them on slow members): up to `max_destages` are written and
//! not yet synced at once, with writes, flushes and rebuild steps between, and they end in
//! any order. With the log's NVRAM drained by threads (`Kind::LogNvram(Drain::Threads)`, as
//! `serve` runs it) the drainers copy segments to the log file in the background, and any
//! interleaving they take must keep the promises; drained inline, those runs too are
//! reproducible by seed.

use super::*;
use crate::wb::backup::Backup;
use crate::wb::log::{Drain, LogBackup};
use crate::wb::mirror::{mirror_bytes, MirrorBackup};
use crate::wb::{BackupKind, WbSpec, WriteBack};
use raidlab::cache::write::OrderKind;

/// Cache pages: four rows of the largest test row (RAID-6 4+2: 16 pages).
const CACHE_PAGES: u64 = 64;
const MIRROR_SLOTS: u64 = 2 * CACHE_PAGES + 32;
const LOG_SEGMENT: u64 = 64 << 10;
/// The backup file (the backup itself fits in its first MiB).
const BACKUP_FILE: u64 = DATA_OFFSET_BYTES;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Mirror,
    Log,
    /// The log behind NVRAM segment buffers (`--log-nvram`), a file of its own, drained
    /// by threads (`serve`'s way: the drains race the run) or inline (by the writer that
    /// needs a slot: the whole run, and so every crash state, fixed by the seed).
    LogNvram(Drain),
}

/// NVRAM slots of `Kind::LogNvram`: few, so writers wait for drains.
const NVRAM_SLOTS: u32 = 2;

struct WbConfig {
    base: Config,
    kind: Kind,
    order: OrderKind,
    /// Several destages in flight at once, ending out of order.
    overlap: bool,
}

fn wb_record(cfg: &WbConfig) -> Run {
    let base = &cfg.base;
    let (dir, mut paths) = create_array(base);
    let backup_path = dir.0.join("wb-backup.img");
    std::fs::File::create(&backup_path)
        .and_then(|f| f.set_len(BACKUP_FILE))
        .expect("backup file");
    paths.push(backup_path.clone());
    let backup_bytes = match cfg.kind {
        Kind::Mirror => mirror_bytes(MIRROR_SLOTS),
        Kind::Log | Kind::LogNvram(_) => DATA_OFFSET_BYTES - (64 << 10),
    };
    assert!(backup_bytes <= DATA_OFFSET_BYTES);
    // Members: superblock and bitmap, and the data area; the backup file: the backup.
    let mut extents = vec![
        vec![
            (0, 16 << 10),
            (DATA_OFFSET_BYTES, DATA_OFFSET_BYTES + MEMBER_DATA)
        ];
        paths.len()
    ];
    *extents.last_mut().expect("the backup file") = vec![(0, backup_bytes)];
    let nvram_path = dir.0.join("wb-nvram.img");
    let nvram_bytes = crate::wb::log::nvram_bytes(NVRAM_SLOTS, LOG_SEGMENT);
    if matches!(cfg.kind, Kind::LogNvram(_)) {
        std::fs::File::create(&nvram_path)
            .and_then(|f| f.set_len(nvram_bytes))
            .expect("nvram file");
        paths.push(nvram_path.clone());
        extents.push(vec![(0, nvram_bytes)]);
    }
    let j = journal();
    // Set-up is not part of the run: serve records a backup in wb.json only once its
    // creation is durable. The initial images are taken after it.
    j.lock().expect("journal").paused = true;
    let a = format::assemble(&dir.0).expect("assemble the new array");
    let index_of = |p: &str| {
        paths
            .iter()
            .position(|x| x.to_string_lossy() == p)
            .expect("a listed device")
    };
    let wrap = |d: &Arc<dyn Member>| RecordingMember::wrap(d.clone(), index_of(d.path()), &j);
    let mut a2 = a.clone();
    a2.devs = a.devs.iter().map(|d| d.as_ref().map(wrap)).collect();
    let spare: Option<Arc<dyn Member>> = a.spares.first().map(wrap);
    let ctl = Arc::new(recorded_controller(&a2));
    let bdev: Arc<dyn Member> =
        Arc::new(crate::member::FileMember::open(&backup_path.to_string_lossy()).expect("backup"));
    let bdev = wrap(&bdev);
    let path = backup_path.to_string_lossy().into_owned();
    let (backup, record): (Box<dyn Backup>, _) = match cfg.kind {
        Kind::Mirror => (
            Box::new(MirrorBackup::create(bdev, a.uuid, MIRROR_SLOTS, 0).expect("mirror")),
            ("mirror".to_string(), vec![(path, 0, backup_bytes)], 0, None),
        ),
        Kind::Log | Kind::LogNvram(_) => {
            let log = LogBackup::create(
                vec![(bdev, 0, backup_bytes)],
                a.uuid,
                LOG_SEGMENT,
                CACHE_PAGES,
            )
            .expect("log");
            let (log, nv) = if let Kind::LogNvram(drain) = cfg.kind {
                let nvp = nvram_path.to_string_lossy().into_owned();
                let nvdev: Arc<dyn Member> =
                    Arc::new(crate::member::FileMember::open(&nvp).expect("nvram"));
                let log = log
                    .with_nvram_drain(wrap(&nvdev), NVRAM_SLOTS, drain)
                    .expect("nvram");
                (log, Some((nvp, NVRAM_SLOTS)))
            } else {
                (log, None)
            };
            (
                Box::new(log),
                (
                    "log".to_string(),
                    vec![(path, 0, backup_bytes)],
                    LOG_SEGMENT,
                    nv,
                ),
            )
        }
    };
    let wb = WriteBack::new(
        ctl.clone(),
        WbSpec {
            capacity_pages: CACHE_PAGES,
            order: cfg.order,
            high_pct: 80.0,
            low_pct: 20.0,
            max_destages: 2,
        },
        match cfg.kind {
            Kind::Mirror => BackupKind::Mirror,
            Kind::Log | Kind::LogNvram(_) => BackupKind::Log { logical: false },
        },
        Some(backup),
    )
    .expect("write cache");
    let mat = Materialiser::capture_each(paths.clone(), extents).expect("images");
    j.lock().expect("journal").paused = false;

    let mut r = rng(base.seed);
    let mut model = Model::default();
    let rebuild_started = fail_and_spare(base, &ctl, &j, spare);
    let blocks = ctl.size_bytes() / BLOCK as u64;
    let bpu = u64::from(ctl.geo.blocks_per_stripe_unit());
    let per_row = ctl.geo.blocks_per_stripe();
    let rows = ctl.shape().rows();
    let mut rebuilt = 0;
    // Destages begun and not ended (`overlap`): at most `max_destages`, the cache's bound.
    let mut begun: Vec<crate::wb::destage::Batch> = Vec::new();
    let mut begun_max = 0;
    for _ in 0..base.ops {
        let (first, count) = pick_write(&mut r, blocks, bpu, per_row);
        // Room first: with no destager thread a full cache would make the writer wait.
        for _ in 0..64 {
            if wb.room() >= count {
                break;
            }
            match begun.pop() {
                Some(b) => wb.destage_end(b),
                None => {
                    wb.destage_step(true);
                }
            }
        }
        let fua = r.next_u32() % 10 < 3;
        let id = model.next_id();
        let data = model.data_for(first, count);
        let start = position(&j);
        wb.write(first * BLOCK as u64, &data, fua).expect("write");
        let at = ack(&j, id);
        // With a backup every answered write is durable, FUA or not.
        model.ops.push(ModelOp {
            kind: OpKind::Write {
                first,
                count,
                fua: true,
            },
            start,
            ack: at,
        });
        let roll = r.next_u32() % 100;
        if roll < 10 {
            let start = position(&j);
            let id = model.next_id();
            wb.flush().expect("flush");
            let at = ack(&j, id);
            model.ops.push(ModelOp {
                kind: OpKind::Flush,
                start,
                ack: at,
            });
        } else if roll < 45 && cfg.overlap {
            if roll < 32 {
                if let Some(b) = wb.destage_begin(roll < 25) {
                    begun.push(b);
                    begun_max = begun_max.max(begun.len());
                }
            } else if !begun.is_empty() {
                let i = r.next_u32() as usize % begun.len();
                wb.destage_end(begun.swap_remove(i));
            }
        } else if roll < 45 {
            wb.destage_step(roll < 25);
        } else if roll < 55 {
            ctl.intent_clear_idle(true);
        }
        rebuild_tick(base, &ctl, &mut r, rows, &mut rebuilt);
    }
    let rebuild_done =
        (base.setup == Setup::Rebuilding && ctl.rebuild_progress().is_none()).then(|| position(&j));
    assert!(
        !cfg.overlap || begun_max >= 2,
        "never two destages in flight at once"
    );
    // Destages still begun are cut off by the crash, as a controller's in flight are.
    drop(begun);
    drop(wb);
    drop(ctl);
    Run {
        dir,
        mat,
        events: snapshot(&j),
        model,
        rebuild_started,
        rebuild_done,
        data_offset: DATA_OFFSET_BYTES,
        per_row,
        wb: Some(record),
    }
}

fn wb_cfg(
    tag: &'static str,
    level: Level,
    setup: Setup,
    kind: Kind,
    order: OrderKind,
    seed: u64,
    overlap: bool,
) -> WbConfig {
    let disks = if level == Level::Raid6 { 6 } else { 4 };
    let mut base = cfg(tag, level, disks, setup, seed);
    // The backup's syncs add cut points: fewer random states per cut keep ~1,000+ states.
    base.random_per_cut = 1;
    if setup == Setup::Degraded {
        base.random_per_cut += 1;
    }
    // One sync per write and few per destage round (one bitmap write per round, too):
    // more writes and more random states per cut than the array alone needs to reach
    // ~1,000 states.
    base.ops = 64;
    base.random_per_cut += 1;
    WbConfig {
        base,
        kind,
        order,
        overlap,
    }
}

fn wb_run(c: &WbConfig) -> Tally {
    let t0 = Instant::now();
    let run = wb_record(c);
    let t = crash_and_check(&run, c.base.random_per_cut, c.base.seed);
    report(&c.base, &run, &t, t0.elapsed().as_secs_f64());
    t
}

/// Every state keeps every answered write (none lost, none stale, none torn), assembles,
/// resumes its rebuild and leaves no row inconsistent; and, unlike the array alone, no
/// lost unit reads wrong: the page images in the backup close the write hole.
fn assert_wb_promises(t: &Tally) {
    assert_promises(t);
    assert_eq!((t.hole, t.lost_row_mismatch), (0, 0), "{t:?}");
}

macro_rules! wb_case {
    ($name:ident, $level:expr, $setup:expr, $kind:expr, $order:expr, $seed:expr) => {
        wb_case!($name, $level, $setup, $kind, $order, $seed, false);
    };
    ($name:ident, $level:expr, $setup:expr, $kind:expr, $order:expr, $seed:expr, $overlap:expr) => {
        #[test]
        fn $name() {
            let t = wb_run(&wb_cfg(
                stringify!($name),
                $level,
                $setup,
                $kind,
                $order,
                $seed,
                $overlap,
            ));
            assert_wb_promises(&t);
        }
    };
}

wb_case!(
    wb_lrw_mirror_raid5,
    Level::Raid5,
    Setup::Healthy,
    Kind::Mirror,
    OrderKind::Lrw,
    101
);
wb_case!(
    wb_stow_mirror_raid5,
    Level::Raid5,
    Setup::Healthy,
    Kind::Mirror,
    OrderKind::Stow,
    102
);
wb_case!(
    wb_lrw_log_raid5,
    Level::Raid5,
    Setup::Healthy,
    Kind::Log,
    OrderKind::Lrw,
    103
);
wb_case!(
    wb_stow_log_raid5,
    Level::Raid5,
    Setup::Healthy,
    Kind::Log,
    OrderKind::Stow,
    104
);
wb_case!(
    wb_lrw_mirror_raid6,
    Level::Raid6,
    Setup::Healthy,
    Kind::Mirror,
    OrderKind::Lrw,
    105
);
wb_case!(
    wb_stow_mirror_raid6,
    Level::Raid6,
    Setup::Healthy,
    Kind::Mirror,
    OrderKind::Stow,
    106
);
wb_case!(
    wb_lrw_log_raid6,
    Level::Raid6,
    Setup::Healthy,
    Kind::Log,
    OrderKind::Lrw,
    107
);
wb_case!(
    wb_stow_log_raid6,
    Level::Raid6,
    Setup::Healthy,
    Kind::Log,
    OrderKind::Stow,
    108
);
wb_case!(
    wb_lrw_mirror_raid5_degraded,
    Level::Raid5,
    Setup::Degraded,
    Kind::Mirror,
    OrderKind::Lrw,
    111
);
wb_case!(
    wb_stow_mirror_raid5_degraded,
    Level::Raid5,
    Setup::Degraded,
    Kind::Mirror,
    OrderKind::Stow,
    112
);
wb_case!(
    wb_lrw_log_raid5_degraded,
    Level::Raid5,
    Setup::Degraded,
    Kind::Log,
    OrderKind::Lrw,
    113
);
wb_case!(
    wb_stow_log_raid5_degraded,
    Level::Raid5,
    Setup::Degraded,
    Kind::Log,
    OrderKind::Stow,
    114
);
wb_case!(
    wb_lrw_mirror_raid6_degraded,
    Level::Raid6,
    Setup::Degraded,
    Kind::Mirror,
    OrderKind::Lrw,
    115
);
wb_case!(
    wb_stow_mirror_raid6_degraded,
    Level::Raid6,
    Setup::Degraded,
    Kind::Mirror,
    OrderKind::Stow,
    116
);
wb_case!(
    wb_lrw_log_raid6_degraded,
    Level::Raid6,
    Setup::Degraded,
    Kind::Log,
    OrderKind::Lrw,
    117
);
wb_case!(
    wb_stow_log_raid6_degraded,
    Level::Raid6,
    Setup::Degraded,
    Kind::Log,
    OrderKind::Stow,
    118
);
wb_case!(
    wb_lrw_mirror_raid5_rebuild,
    Level::Raid5,
    Setup::Rebuilding,
    Kind::Mirror,
    OrderKind::Lrw,
    121
);
wb_case!(
    wb_stow_mirror_raid5_rebuild,
    Level::Raid5,
    Setup::Rebuilding,
    Kind::Mirror,
    OrderKind::Stow,
    122
);
wb_case!(
    wb_lrw_log_raid5_rebuild,
    Level::Raid5,
    Setup::Rebuilding,
    Kind::Log,
    OrderKind::Lrw,
    123
);
wb_case!(
    wb_stow_log_raid5_rebuild,
    Level::Raid5,
    Setup::Rebuilding,
    Kind::Log,
    OrderKind::Stow,
    124
);
wb_case!(
    wb_lrw_mirror_raid6_rebuild,
    Level::Raid6,
    Setup::Rebuilding,
    Kind::Mirror,
    OrderKind::Lrw,
    125
);
wb_case!(
    wb_stow_mirror_raid6_rebuild,
    Level::Raid6,
    Setup::Rebuilding,
    Kind::Mirror,
    OrderKind::Stow,
    126
);
wb_case!(
    wb_lrw_log_raid6_rebuild,
    Level::Raid6,
    Setup::Rebuilding,
    Kind::Log,
    OrderKind::Lrw,
    127
);
wb_case!(
    wb_stow_log_raid6_rebuild,
    Level::Raid6,
    Setup::Rebuilding,
    Kind::Log,
    OrderKind::Stow,
    128
);
wb_case!(
    wb_lrw_log_nvram_raid5,
    Level::Raid5,
    Setup::Healthy,
    Kind::LogNvram(Drain::Threads),
    OrderKind::Lrw,
    131
);
wb_case!(
    wb_stow_log_nvram_raid6,
    Level::Raid6,
    Setup::Healthy,
    Kind::LogNvram(Drain::Inline),
    OrderKind::Stow,
    132
);
wb_case!(
    wb_lrw_log_nvram_raid5_degraded,
    Level::Raid5,
    Setup::Degraded,
    Kind::LogNvram(Drain::Inline),
    OrderKind::Lrw,
    133
);
// Several destages in flight at once, ending out of order (the destager's pool).
wb_case!(
    wb_lrw_mirror_raid5_overlap,
    Level::Raid5,
    Setup::Healthy,
    Kind::Mirror,
    OrderKind::Lrw,
    141,
    true
);
wb_case!(
    wb_stow_log_raid6_overlap,
    Level::Raid6,
    Setup::Healthy,
    Kind::Log,
    OrderKind::Stow,
    142,
    true
);
wb_case!(
    wb_stow_mirror_raid5_degraded_overlap,
    Level::Raid5,
    Setup::Degraded,
    Kind::Mirror,
    OrderKind::Stow,
    143,
    true
);
wb_case!(
    wb_lrw_log_raid6_rebuild_overlap,
    Level::Raid6,
    Setup::Rebuilding,
    Kind::Log,
    OrderKind::Lrw,
    144,
    true
);
wb_case!(
    wb_lrw_log_nvram_raid5_overlap,
    Level::Raid5,
    Setup::Healthy,
    Kind::LogNvram(Drain::Threads),
    OrderKind::Lrw,
    145,
    true
);
