//! Partial parity: closes the RAID-5/6 write hole left by a member that fails *during* a
//! destage (md's partial parity log, kept in the write cache's backup).
//!
//! Page images (`destage.rs`) cover the units already lost when a destage begins. A member
//! that fails while the destage's data and parity writes are in flight is another matter:
//! its unit in the row is then read through parity that a crash may leave half written,
//! and what it held is nowhere else. So before a RAID-5/6 destage writes a row that it does
//! not rewrite whole, the destager puts in the backup, in the same commit as the images:
//!
//! - a **plan** record (`RecKind::Plan`, at the row's first page): which pages of the row the
//!   destage rewrites, and the sequence numbers of the row's partial-parity records;
//! - per column the destage touches (page offset `j` inside the stripe unit), a **partial
//!   parity** record (`RecKind::Parity`, at page `j` of the row's first unit): the XOR of the
//!   row's data pages in that column that the destage leaves alone, as they are before it.
//!
//! A round of several destages reads those pages first and commits every row's records at
//! once ([`WriteBack::partial_parity`]); a destage of its own takes them from its row's
//! parity update, between its reads and its writes, under the row's lock, as md does (old
//! parity XOR old data rewritten, or the data a reconstruct-write reads;
//! [`WriteBack::partial_parity_read`], `ctrl::pages::BeforeRowWrites`).
//!
//! Those pages are not changed by the destage, so after any crash a lost one among them is
//! the partial parity XOR the others, read from the members (or from their images when they
//! were lost already). Replay turns each such page into an image before anything is written
//! ([`synthesize`]), and the images pass then writes it back through the row, which makes the
//! row whole. The records are released with the round's images, durably, before the next
//! round can change those pages. One lost page per column is recovered this way: two
//! members failing during one destage of a RAID-6 row is not covered (counted as
//! `unrecovered` by replay).
//!
//! Replay is idempotent only if the synthesized pages are: the data pass may rewrite the
//! pages they were computed from. So they are first kept in `DIR/wb-ppl` (synced, with its
//! directory), and a replay that finds that file of the same backup epoch uses it instead
//! of computing again.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use super::backup::{Found, Handle};
use super::format::{data_crc, RecKind, RecMeta};
use super::{WriteBack, BLOCK};
use crate::ctrl::{fanout, Controller};
use crate::sync::Ordering;

/// The plan record's payload: magic, then the number of partial-parity records and the
/// sequence number of the first (the rest follow it one by one), the row's pages, and a
/// bitmap of the pages the destage rewrites.
const PLAN_MAGIC: u32 = u32::from_le_bytes(*b"RLPP");
const PLAN_FIXED: usize = 24;
/// Most pages a row may have for its plan to fit one page (rows of up to 127 MiB of data).
pub const PLAN_ROW_PAGES_MAX: u64 = ((BLOCK - PLAN_FIXED) * 8) as u64;

/// The side file of the synthesized pages (see the module's documentation).
pub const SIDE_FILE: &str = "wb-ppl";
const SIDE_MAGIC: [u8; 8] = *b"RLPPLSY1";
/// Most pages the side file holds (far above what a crash can leave: one per column of
/// the rows a round was destaging).
const SIDE_PAGES_MAX: u64 = 1 << 20;

/// One row's partial-parity records to put: its first page, the bitmap of the pages the
/// destage rewrites, and per column (page offset in the unit) its partial parity.
struct RowParities {
    row_first: u64,
    rewritten: Vec<u8>,
    columns: Vec<(u64, Vec<u8>)>,
}

/// A decoded plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub parity_first_seq: u64,
    pub parity_records: u32,
    pub row_pages: u32,
    /// Bit `i`: page `i` of the row is rewritten by the destage.
    pub rewritten: Vec<u8>,
}

impl Plan {
    pub fn rewrites(&self, i: u64) -> bool {
        self.rewritten[(i / 8) as usize] & (1 << (i % 8)) != 0
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; BLOCK];
        b[0..4].copy_from_slice(&PLAN_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.parity_records.to_le_bytes());
        b[8..16].copy_from_slice(&self.parity_first_seq.to_le_bytes());
        b[16..20].copy_from_slice(&self.row_pages.to_le_bytes());
        b[PLAN_FIXED..PLAN_FIXED + self.rewritten.len()].copy_from_slice(&self.rewritten);
        b
    }

    /// `None` for a payload that is not a plan of a row of `row_pages` pages.
    pub fn decode(b: &[u8], row_pages: u64) -> Option<Plan> {
        if b.len() != BLOCK || b[0..4] != PLAN_MAGIC.to_le_bytes() {
            return None;
        }
        let get32 = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let n = get32(16);
        // A row has fewer columns than pages: a larger count is not a plan (and would
        // make replay look for billions of records).
        if u64::from(n) != row_pages || row_pages > PLAN_ROW_PAGES_MAX || get32(4) > n {
            return None;
        }
        let bytes = (n as usize).div_ceil(8);
        Some(Plan {
            parity_records: get32(4),
            parity_first_seq: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
            row_pages: n,
            rewritten: b[PLAN_FIXED..PLAN_FIXED + bytes].to_vec(),
        })
    }
}

fn xor_into(acc: &mut [u8], src: &[u8]) {
    for (a, s) in acc.iter_mut().zip(src) {
        *a ^= s;
    }
}

/// Whether the unit of `row` (a stripe row) at data position `unit` is lost now: its member
/// failed, or is being rebuilt (a row rebuilt since the last checkpoint is lost again after
/// a crash).
fn unit_lost(ctl: &Controller, st: &crate::ctrl::State, row_first: u64, unit: u64) -> bool {
    let bpu = u64::from(ctl.geo.blocks_per_stripe_unit());
    let loc = ctl.geo.locate(row_first + unit * bpu);
    st.array.lost(loc.disk, loc.block / bpu) || st.array.rebuilding(loc.disk).is_some()
}

impl WriteBack {
    /// Put the plan and partial-parity records of every row of `round` that a destage
    /// rewrites only in part (RAID-5/6 with a backup); the caller commits them with the
    /// round's images. Returns their handles, to release with the images.
    pub(super) fn partial_parity(
        &self,
        rows: &[(u64, Vec<(u64, u64)>)],
    ) -> std::io::Result<Vec<Handle>> {
        if self.backup.is_none() {
            return Ok(Vec::new());
        }
        let shape = self.ctl.shape();
        let per_row = self.ctl.geo.blocks_per_stripe();
        if !matches!(
            shape.level,
            raidlab::array::Level::Raid5 | raidlab::array::Level::Raid6
        ) || per_row > PLAN_ROW_PAGES_MAX
        {
            return Ok(Vec::new());
        }
        let bpu = u64::from(self.ctl.geo.blocks_per_stripe_unit());
        let units = per_row / bpu;
        // Per row: its bitmap, its columns needing a partial parity, and the runs of pages
        // to read for them.
        struct RowPlan {
            row_first: u64,
            rewritten: Vec<u8>,
            columns: Vec<u64>,
        }
        let mut plans: Vec<RowPlan> = Vec::new();
        let mut reads: Vec<(u64, u64)> = Vec::new();
        for (row, runs) in rows {
            let row_first = row * per_row;
            let mut rewritten = vec![0u8; per_row.div_ceil(8) as usize];
            for &(first, n) in runs {
                debug_assert!(first >= row_first && first + n <= row_first + per_row);
                for lba in first..first + n {
                    let i = lba - row_first;
                    rewritten[(i / 8) as usize] |= 1 << (i % 8);
                }
            }
            let bit = |i: u64| rewritten[(i / 8) as usize] & (1 << (i % 8)) != 0;
            // A column no page of which is rewritten keeps its parity; one rewritten whole
            // has nothing left to lose.
            let columns: Vec<u64> = (0..bpu)
                .filter(|&j| {
                    let hit = (0..units).filter(|&u| bit(u * bpu + j)).count() as u64;
                    hit > 0 && hit < units
                })
                .collect();
            if columns.is_empty() {
                continue;
            }
            for u in 0..units {
                let mut run: Option<(u64, u64)> = None;
                for &j in &columns {
                    if bit(u * bpu + j) {
                        continue;
                    }
                    let lba = row_first + u * bpu + j;
                    match &mut run {
                        Some((s, n)) if *s + *n == lba => *n += 1,
                        _ => {
                            if let Some(r) = run.take() {
                                reads.push(r);
                            }
                            run = Some((lba, 1));
                        }
                    }
                }
                if let Some(r) = run {
                    reads.push(r);
                }
            }
            plans.push(RowPlan {
                row_first,
                rewritten,
                columns,
            });
        }
        if plans.is_empty() {
            return Ok(Vec::new());
        }
        // The pages the destages leave alone, as they are now: one read per run, in
        // parallel on slow members (each run lies on one member).
        let parallel = reads.len() > 1 && self.ctl.fan_out(0..shape.disks);
        let got = fanout::each(parallel, reads.clone(), |(lba, n)| {
            let mut buf = vec![0u8; n as usize * BLOCK];
            self.ctl.read(lba * BLOCK as u64, &mut buf).map(|()| buf)
        });
        let mut pages: HashMap<u64, &[u8]> = HashMap::new();
        for (&(lba, n), r) in reads.iter().zip(&got) {
            let Ok(buf) = r else {
                // Only a dead array fails a read: the destage's writes fail next.
                return Ok(Vec::new());
            };
            for k in 0..n {
                pages.insert(lba + k, &buf[k as usize * BLOCK..(k as usize + 1) * BLOCK]);
            }
        }
        let rows: Vec<RowParities> = plans
            .into_iter()
            .map(|p| {
                let pps = p
                    .columns
                    .iter()
                    .map(|&j| {
                        let mut pp = vec![0u8; BLOCK];
                        for u in 0..units {
                            if let Some(d) = pages.get(&(p.row_first + u * bpu + j)) {
                                xor_into(&mut pp, d);
                            }
                        }
                        (j, pp)
                    })
                    .collect();
                RowParities {
                    row_first: p.row_first,
                    rewritten: p.rewritten,
                    columns: pps,
                }
            })
            .collect();
        self.put_partial_parities(&rows)
    }

    /// The records of one row's partial parities that the row's own parity update read
    /// (`ctrl::pages::BeforeRowWrites`): `runs` are the pages (first, count) the destage
    /// rewrites in row `row`, `pps` the columns and their partial parities. Not committed.
    pub(super) fn partial_parity_read(
        &self,
        row: u64,
        runs: &[(u64, u64)],
        pps: &[(u64, Vec<u8>)],
    ) -> std::io::Result<Vec<Handle>> {
        let per_row = self.ctl.geo.blocks_per_stripe();
        if self.backup.is_none() || pps.is_empty() || per_row > PLAN_ROW_PAGES_MAX {
            return Ok(Vec::new());
        }
        let row_first = row * per_row;
        let mut rewritten = vec![0u8; per_row.div_ceil(8) as usize];
        for &(first, n) in runs {
            debug_assert!(first >= row_first && first + n <= row_first + per_row);
            for i in first - row_first..first - row_first + n {
                rewritten[(i / 8) as usize] |= 1 << (i % 8);
            }
        }
        self.put_partial_parities(&[RowParities {
            row_first,
            rewritten,
            columns: pps.to_vec(),
        }])
    }

    /// Put, per row (its first page, the bitmap of the pages the destage rewrites, and its
    /// columns' partial parities), a partial-parity record per column and the row's plan.
    fn put_partial_parities(&self, rows: &[RowParities]) -> std::io::Result<Vec<Handle>> {
        let Some(b) = &self.backup else {
            return Ok(Vec::new());
        };
        let per_row = self.ctl.geo.blocks_per_stripe();
        let mut handles = Vec::new();
        let mut g = self.lock();
        for RowParities {
            row_first,
            rewritten,
            columns: pps,
        } in rows
        {
            let first_seq = g.seq + 1;
            for (j, pp) in pps {
                g.seq += 1;
                let meta = RecMeta {
                    lba: row_first + j,
                    seq: g.seq,
                    kind: RecKind::Parity,
                };
                let live = super::Live {
                    pages: &g.pages,
                    frames: &g.frames,
                };
                handles.push(b.put(meta, pp, &live)?);
            }
            let plan = Plan {
                parity_first_seq: first_seq,
                parity_records: pps.len() as u32,
                row_pages: per_row as u32,
                rewritten: rewritten.clone(),
            };
            g.seq += 1;
            let meta = RecMeta {
                lba: *row_first,
                seq: g.seq,
                kind: RecKind::Plan,
            };
            let live = super::Live {
                pages: &g.pages,
                frames: &g.frames,
            };
            handles.push(b.put(meta, &plan.encode(), &live)?);
        }
        drop(g);
        self.counters
            .partial_parity
            .fetch_add(handles.len() as u64, Ordering::Relaxed);
        Ok(handles)
    }
}

/// What [`synthesize`] found.
#[derive(Debug, Default)]
pub struct Synthesized {
    /// Pages rebuilt from a partial parity, as images: (page, bytes).
    pub pages: Vec<(u64, Vec<u8>)>,
    /// Columns with more than one lost page the plan does not cover (cannot be rebuilt).
    pub unrecovered: u64,
}

/// Rebuild, as images, the pages of lost units that the backup's complete plans cover and
/// that no image holds. `images`: page -> index in `records` of its newest image. Nothing
/// is written. An error is a plan that does not fit this array (a foreign backup).
pub fn synthesize(
    ctl: &Controller,
    records: &[Found],
    images: &BTreeMap<u64, usize>,
) -> Result<Synthesized, String> {
    let per_row = ctl.geo.blocks_per_stripe();
    let bpu = u64::from(ctl.geo.blocks_per_stripe_unit());
    let mut out = Synthesized::default();
    let mut plans: BTreeMap<u64, usize> = BTreeMap::new();
    let mut parity: HashMap<u64, usize> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        match r.meta.kind {
            RecKind::Plan => {
                if r.meta.lba % per_row != 0 {
                    return Err(format!(
                        "a plan record at page {} is not at the start of a row of {per_row} pages",
                        r.meta.lba
                    ));
                }
                let e = plans.entry(r.meta.lba).or_insert(i);
                if records[*e].meta.seq < r.meta.seq {
                    *e = i;
                }
            }
            RecKind::Parity => {
                parity.insert(r.meta.seq, i);
            }
            RecKind::Data | RecKind::Image | RecKind::Release => {}
        }
    }
    if plans.is_empty() {
        return Ok(out);
    }
    let units = per_row / bpu;
    // The lost units of every planned row, taken before any read (a read takes the
    // state's lock itself: never hold it across one).
    let lost_of: Vec<Vec<u64>> = {
        let st = ctl.read_state();
        plans
            .keys()
            .map(|&row_first| {
                (0..units)
                    .filter(|&u| unit_lost(ctl, &st, row_first, u))
                    .collect()
            })
            .collect()
    };
    let mut page = vec![0u8; BLOCK];
    for ((&row_first, &i), lost) in plans.iter().zip(lost_of) {
        let plan = Plan::decode(&records[i].data, per_row).ok_or_else(|| {
            format!("the plan record of the row at page {row_first} does not fit this array's rows")
        })?;
        if u64::from(plan.parity_records) > bpu {
            return Err(format!(
                "the plan record of the row at page {row_first} names {} partial parities, more than the row's {bpu} columns",
                plan.parity_records
            ));
        }
        if lost.is_empty() {
            continue;
        }
        // Its partial parities, all of them, or the plan's commit never completed (and the
        // destage never began writing).
        let columns: Option<Vec<&Found>> = (0..u64::from(plan.parity_records))
            .map(|k| {
                parity
                    .get(&(plan.parity_first_seq + k))
                    .map(|&p| &records[p])
            })
            .collect();
        let Some(columns) = columns else {
            continue;
        };
        for pp in columns {
            if !(row_first..row_first + bpu).contains(&pp.meta.lba) {
                return Err(format!(
                    "a partial-parity record of the row at page {row_first} names page {}",
                    pp.meta.lba
                ));
            }
            let j = pp.meta.lba - row_first;
            let mut acc = pp.data.clone();
            let mut unknown = Vec::new();
            for u in 0..units {
                let i = u * bpu + j;
                if plan.rewrites(i) {
                    continue;
                }
                let lba = row_first + i;
                if lost.contains(&u) {
                    match images.get(&lba) {
                        Some(&k) => xor_into(&mut acc, &records[k].data),
                        None => unknown.push(lba),
                    }
                } else {
                    // A unit in service: read from its member (nothing is written before
                    // every page is synthesized).
                    ctl.read(lba * BLOCK as u64, &mut page)
                        .map_err(|e| format!("reading page {lba} for a partial parity: {e}"))?;
                    xor_into(&mut acc, &page);
                }
            }
            match unknown.as_slice() {
                [] => {}
                [lba] => out.pages.push((*lba, acc)),
                _ => out.unrecovered += 1,
            }
        }
    }
    Ok(out)
}

/// The synthesized pages kept by an earlier replay of backup epoch `epoch`, if its side file
/// is whole. A torn or foreign file is ignored: it was written before any replay write,
/// so computing again gives the same pages.
pub fn load_side(path: &Path, epoch: u64) -> Option<Vec<(u64, Vec<u8>)>> {
    decode_side(&fs::read(path).ok()?, epoch)
}

/// Decode a side file's bytes (layout: magic, epoch, page count, CRC-32C of the rest in
/// bytes 28..32, then per page its number and 4 KiB).
pub fn decode_side(b: &[u8], epoch: u64) -> Option<Vec<(u64, Vec<u8>)>> {
    if b.len() < 32 || b[0..8] != SIDE_MAGIC {
        return None;
    }
    let get64 = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(b[28..32].try_into().expect("4 bytes"));
    let n = get64(16);
    if get64(8) != epoch || n > SIDE_PAGES_MAX {
        return None;
    }
    let want = 32 + n as usize * (8 + BLOCK);
    if b.len() != want || side_crc(b) != crc {
        return None;
    }
    let mut out = Vec::with_capacity(n as usize);
    for k in 0..n as usize {
        let at = 32 + k * (8 + BLOCK);
        out.push((get64(at), b[at + 8..at + 8 + BLOCK].to_vec()));
    }
    Some(out)
}

/// CRC-32C of the side file but its CRC field (bytes 28..32).
fn side_crc(b: &[u8]) -> u32 {
    crc32c::crc32c_append(data_crc(&b[..28]), &b[32..])
}

/// Keep `pages` for backup epoch `epoch` durably in `path` (and its directory).
pub fn store_side(path: &Path, epoch: u64, pages: &[(u64, Vec<u8>)]) -> std::io::Result<()> {
    let n = pages.len() as u64;
    assert!(n <= SIDE_PAGES_MAX, "{n} synthesized pages");
    let mut b = Vec::with_capacity(32 + pages.len() * (8 + BLOCK));
    b.extend_from_slice(&SIDE_MAGIC);
    b.extend_from_slice(&epoch.to_le_bytes());
    b.extend_from_slice(&n.to_le_bytes());
    b.extend_from_slice(&[0u8; 8]);
    for (lba, d) in pages {
        assert_eq!(d.len(), BLOCK);
        b.extend_from_slice(&lba.to_le_bytes());
        b.extend_from_slice(d);
    }
    let crc = side_crc(&b);
    b[28..32].copy_from_slice(&crc.to_le_bytes());
    let mut f = File::create(path)?;
    f.write_all(&b)?;
    f.sync_all()?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}
