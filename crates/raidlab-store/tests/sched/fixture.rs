//! The array each configuration's runs start from: made once, its files captured as the
//! images every run (and every crash state) begins with, and its backup recorded in
//! `wb.json` as `serve` records it.

use std::path::PathBuf;

use raidlab::array::Layout;
use raidlab_store::crash::Materialiser;
use raidlab_store::format::{self, CreateSpec};
use raidlab_store::wb::mirror::mirror_bytes;

use crate::rig::{Cfg, Mode, BACKUP_FILE, CHUNK, LOG_SEGMENT, MIRROR_SLOTS, NVRAM_SLOTS, ROWS};

/// A scratch directory, removed on drop.
pub struct Scratch(pub PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The array made once per configuration: its files, the images every run starts from,
/// and the write cache's backup file (recorded in `wb.json` for recovery).
pub struct Fixture {
    pub dir: Scratch,
    pub paths: Vec<PathBuf>,
    pub extents: Vec<Vec<(u64, u64)>>,
    pub base: Materialiser,
    pub members: Vec<PathBuf>,
    pub backup: PathBuf,
    pub backup_bytes: u64,
    /// `Mode::LogNvram`'s NVRAM file (just before the backup file in `paths`).
    pub nvram: Option<PathBuf>,
}

pub fn fixture(tag: &str, cfg: &Cfg) -> Fixture {
    let dir = std::env::temp_dir().join(format!("raidlab-sched-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let dir = Scratch(dir);
    let created = format::create(&CreateSpec {
        dir: dir.0.clone(),
        name: "sched".into(),
        level: cfg.level,
        layout: Layout::LeftSymmetric,
        disks: cfg.disks,
        chunk_bytes: CHUNK,
        member_data_bytes: ROWS * CHUNK,
        spares: 2,
        members: None,
        force: false,
        // One row per region: the re-adds resync only the rows written while away.
        bitmap_region_bytes: Some(CHUNK),
    })
    .expect("create the array");
    let data0 = created.shape.data_offset_bytes;
    let data1 = data0 + created.shape.member_data_bytes;
    let backup = dir.0.join("wb-backup.img");
    std::fs::File::create(&backup)
        .and_then(|f| f.set_len(BACKUP_FILE))
        .expect("backup file");
    let backup_bytes = match cfg.mode {
        Mode::Log | Mode::LogNvram => BACKUP_FILE - (64 << 10),
        _ => mirror_bytes(MIRROR_SLOTS),
    };
    write_record(&dir.0, cfg.mode, &backup, backup_bytes);
    let mut paths: Vec<PathBuf> = created.members.clone();
    paths.extend(created.spares.iter().cloned());
    let mut extents = vec![vec![(0, 16 << 10), (data0, data1)]; paths.len()];
    let nvram = (cfg.mode == Mode::LogNvram).then(|| {
        let p = nvram_path(&dir.0);
        let bytes = raidlab_store::wb::log::nvram_bytes(NVRAM_SLOTS, LOG_SEGMENT);
        std::fs::File::create(&p)
            .and_then(|f| f.set_len(bytes))
            .expect("nvram file");
        paths.push(p.clone());
        extents.push(vec![(0, bytes)]);
        p
    });
    paths.push(backup.clone());
    extents.push(vec![(0, backup_bytes)]);
    let base = Materialiser::capture_each(paths.clone(), extents.clone()).expect("images");
    Fixture {
        dir,
        paths,
        extents,
        base,
        members: created.members,
        backup,
        backup_bytes,
        nvram,
    }
}

fn nvram_path(dir: &std::path::Path) -> PathBuf {
    dir.join("wb-nvram.img")
}

/// Record the backup in `wb.json` as `serve` does before its first cached write (a
/// recovery retires it, so each crash state gets it afresh).
pub(crate) fn write_record(
    dir: &std::path::Path,
    mode: Mode,
    backup: &std::path::Path,
    bytes: u64,
) {
    let legs = vec![(backup.to_string_lossy().into_owned(), 0, bytes)];
    match mode {
        Mode::Mirror => raidlab_store::wb::setup::write_record(dir, "mirror", &legs, 0),
        Mode::Log => raidlab_store::wb::setup::write_record(dir, "log", &legs, LOG_SEGMENT),
        Mode::LogNvram => {
            let nv = nvram_path(dir).to_string_lossy().into_owned();
            raidlab_store::wb::setup::write_record_with_nvram(
                dir,
                "log",
                &legs,
                LOG_SEGMENT,
                Some((&nv, NVRAM_SLOTS)),
            )
        }
        _ => Ok(()),
    }
    .expect("wb.json");
}
