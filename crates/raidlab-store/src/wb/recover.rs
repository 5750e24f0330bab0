//! Recovery after an unclean stop: every record of the backup's current epoch is read, and
//! written through the array: first the newest page image of each page (so a row a crash
//! left with stale parity is made whole before data lands on it), with the images rebuilt
//! from the destages' partial parities for units lost during a destage (`ppl.rs`), then
//! the newest data record of each page; then the members are synced.
//!
//! **Images never outrank data.** An image holds what the members held for a lost unit when
//! a destage began; a write of that page may be acknowledged while the image is read, and
//! get a smaller sequence number than the image. So kinds are ranked, not sequence numbers:
//! every page's data record, older or newer than its image, is replayed after the images.
//! That is safe because a data record that survives is never older than what the members
//! held: records are released only after their destage is synced, and in version order
//! (`Backup::release_destaged`). Only then may the caller start a new epoch: a crash
//! during recovery leaves the records in place, and the next start replays them again
//! (replay is idempotent: it writes the same bytes).

use std::collections::BTreeMap;
use std::path::Path;

use super::backup::Backup;
use super::format::RecKind;
use super::ppl;
use super::BLOCK;
use crate::ctrl::Controller;

/// What a replay found and wrote.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// Records read (all versions).
    pub records: u64,
    /// Records whose data failed its checksum (torn, never acknowledged).
    pub torn: u64,
    /// Pages written back (newest versions of data pages).
    pub pages: u64,
    /// Page images written back (rows a destage was changing), synthesized ones included.
    pub images: u64,
    /// Of those, rebuilt from a partial parity (a unit lost during a destage).
    pub synthesized: u64,
    /// Columns whose lost pages a partial parity could not rebuild (more than one lost
    /// during one destage).
    pub unrecovered: u64,
    /// The largest sequence number seen (new writes continue after it).
    pub seq_max: u64,
}

/// Replay `backup` onto the array of `ctl`. An error names the backup and what is wrong;
/// nothing is then written. `side`: where pages rebuilt from partial parities are kept
/// before anything is written (`ppl.rs`; the caller removes it once the backup is reset).
pub fn replay(
    ctl: &Controller,
    backup: &dyn Backup,
    path: &str,
    side: Option<&Path>,
) -> raidlab::Result<Replayed> {
    let scan = backup
        .scan()
        .map_err(|e| super::backup::bad(path, format!("reading the backup: {e}")))?;
    let blocks = ctl.size_bytes() / BLOCK as u64;
    let mut out = Replayed {
        records: scan.records.len() as u64,
        torn: scan.torn,
        ..Default::default()
    };
    // Page -> index of its newest image and of its newest data record (BTreeMaps: replay
    // in page order, deterministic).
    let mut images: BTreeMap<u64, usize> = BTreeMap::new();
    let mut datas: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, r) in scan.records.iter().enumerate() {
        if r.meta.lba >= blocks {
            return Err(super::backup::bad(
                path,
                format!(
                    "a record for page {} lies past the end of the array ({blocks} pages): the backup does not belong to this array's shape",
                    r.meta.lba
                ),
            ));
        }
        out.seq_max = out.seq_max.max(r.meta.seq);
        let newest = match r.meta.kind {
            RecKind::Image => &mut images,
            RecKind::Data => &mut datas,
            RecKind::Plan | RecKind::Parity | RecKind::Release => continue,
        };
        let e = newest.entry(r.meta.lba).or_insert(i);
        if scan.records[*e].meta.seq < r.meta.seq {
            *e = i;
        }
    }
    let epoch = backup.epoch();
    let kept = side.and_then(|p| ppl::load_side(p, epoch));
    let rebuilt = match kept {
        Some(pages) => pages,
        None => {
            let s = ppl::synthesize(ctl, &scan.records, &images)
                .map_err(|e| super::backup::bad(path, e))?;
            out.unrecovered = s.unrecovered;
            if s.unrecovered > 0 {
                crate::warn!(
                    "{path}: {} column(s) of rows being destaged lost more than one unit during the destage; their lost pages cannot be rebuilt",
                    s.unrecovered
                );
            }
            if let (Some(p), false) = (side, s.pages.is_empty()) {
                ppl::store_side(p, epoch, &s.pages).map_err(|e| {
                    super::backup::bad(
                        &p.display().to_string(),
                        format!("keeping the pages rebuilt from partial parities: {e}"),
                    )
                })?;
            }
            s.pages
        }
    };
    out.synthesized = rebuilt.len() as u64;
    let pass_images = rebuilt.iter().map(|(lba, d)| (*lba, d.as_slice())).chain(
        images
            .values()
            .map(|&i| (scan.records[i].meta.lba, scan.records[i].data.as_slice())),
    );
    let pass_data = datas
        .values()
        .map(|&i| (scan.records[i].meta.lba, scan.records[i].data.as_slice()));
    for (lba, data) in pass_images {
        write_page(ctl, path, lba, data)?;
        out.images += 1;
    }
    for (lba, data) in pass_data {
        write_page(ctl, path, lba, data)?;
        out.pages += 1;
    }
    if out.pages + out.images > 0 {
        ctl.flush()
            .map_err(|e| super::backup::bad(path, format!("syncing the replayed pages: {e}")))?;
    }
    Ok(out)
}

fn write_page(ctl: &Controller, path: &str, lba: u64, data: &[u8]) -> raidlab::Result<()> {
    ctl.write(lba * BLOCK as u64, data, false)
        .map_err(|e| super::backup::bad(path, format!("replaying page {lba}: {e}")))
}
