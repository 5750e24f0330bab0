//! Recovery after an unclean stop: every record of the backup's current epoch is read, and
//! written through the array: first the newest page image of each page (so a row a crash
//! left with stale parity is made whole before data lands on it), then the newest data
//! record of each page; then the members are synced.
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

use super::backup::Backup;
use super::format::RecKind;
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
    /// Page images written back (rows a destage was changing).
    pub images: u64,
    /// The largest sequence number seen (new writes continue after it).
    pub seq_max: u64,
}

/// Replay `backup` onto the array of `ctl`. An error names the backup and what is wrong;
/// nothing is then written.
pub fn replay(ctl: &Controller, backup: &dyn Backup, path: &str) -> raidlab::Result<Replayed> {
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
        };
        let e = newest.entry(r.meta.lba).or_insert(i);
        if scan.records[*e].meta.seq < r.meta.seq {
            *e = i;
        }
    }
    for (pass, newest) in [(RecKind::Image, &images), (RecKind::Data, &datas)] {
        for &i in newest.values() {
            let r = &scan.records[i];
            ctl.write(r.meta.lba * BLOCK as u64, &r.data, false)
                .map_err(|e| {
                    super::backup::bad(path, format!("replaying page {}: {e}", r.meta.lba))
                })?;
            match pass {
                RecKind::Image => out.images += 1,
                RecKind::Data => out.pages += 1,
            }
        }
    }
    if out.pages + out.images > 0 {
        ctl.flush()
            .map_err(|e| super::backup::bad(path, format!("syncing the replayed pages: {e}")))?;
    }
    Ok(out)
}
