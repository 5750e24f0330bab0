//! The checker: a flat model of the logical device (the oracle) and recovery of a
//! materialised crash state, as `serve` does it, followed by a read-back of every block.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use crate::ctrl::column::BLOCK;
use crate::ctrl::{Controller, Options};
use crate::format;

pub use crate::model::{Model, ModelOp, OpKind};

/// A block that read back as none of its allowed values.
#[derive(Debug, Clone)]
pub struct BadBlock {
    pub lba: u64,
    /// Its member's unit was lost in its row when the array was assembled (failed, or a
    /// replacement not yet rebuilt there): the RAID-5/6 write hole's territory.
    pub on_lost_unit: bool,
    /// No write of the run touched it (it should read zeros).
    pub untouched: bool,
    pub got: Option<u64>,
    pub allowed: Vec<u64>,
}

/// What recovery of one crash state gave.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Assembly's error, when it refused the state.
    pub assembly: Option<String>,
    pub recovering: Option<(u32, u64)>,
    pub bad: Vec<BadBlock>,
    /// Rows whose redundancy disagreed with their data after resync (and after any
    /// rebuild), split by whether a unit of the row was lost at assembly.
    pub mismatch_rows: BTreeSet<u64>,
    pub mismatch_rows_lost: BTreeSet<u64>,
    /// Columns the write cache's partial parities could not rebuild (more than one unit
    /// lost during one destage: `wb/ppl.rs`).
    pub ppl_unrecovered: u64,
}

/// What one state's read-back compares against.
struct Expect<'a> {
    allowed: &'a [Vec<u64>],
    touched: &'a [bool],
    lost_lba: &'a [bool],
    /// Rows to read (see `recover_and_check`).
    rows: &'a [bool],
    per_row: usize,
}

fn read_back(model: &Model, ctl: &Controller, x: &Expect<'_>, bad: &mut Vec<BadBlock>) {
    let mut buf = vec![0u8; x.per_row * BLOCK];
    for (row, _) in x.rows.iter().enumerate().filter(|(_, &r)| r) {
        let first = row * x.per_row;
        // One read per row; a failed read makes every block of the row bad.
        let read_ok = ctl.read((first * BLOCK) as u64, &mut buf).is_ok();
        for (i, block) in buf.chunks(BLOCK).enumerate() {
            let lba = (first + i) as u64;
            if bad.iter().any(|b| b.lba == lba) {
                continue;
            }
            let ok = &x.allowed[lba as usize];
            let got = if read_ok {
                model.identify(lba, block)
            } else {
                None
            };
            if got.is_none_or(|id| !ok.contains(&id)) {
                bad.push(BadBlock {
                    lba,
                    on_lost_unit: x.lost_lba[lba as usize],
                    untouched: !x.touched[lba as usize],
                    got,
                    allowed: ok.clone(),
                });
            }
        }
    }
}

/// Assemble `dir` and recover as `serve` does (replay the write cache's backup when `wb`;
/// resync every dirty region; finish a rebuild
/// that assembly resumes or that a spare allows), then read back every block of the rows in
/// `rows_to_check` and compare their redundancy. Rows no member write reached before the
/// cut hold zeros on every member, which read as zeros and are consistent at every level,
/// so they are skipped. Nothing here trusts the run: only the files.
pub fn recover_and_check(
    dir: &Path,
    model: &Model,
    cut: usize,
    rows_to_check: &[bool],
    wb: bool,
) -> Outcome {
    let mut out = Outcome::default();
    let a = match format::assemble(dir) {
        Ok(a) => a,
        Err(e) => {
            out.assembly = Some(e.to_string());
            return out;
        }
    };
    out.recovering = a.recovering;
    // Exactly the controller `serve` would run on these files.
    let ctl = match crate::serve::controller_from(&a, Options::default()) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            out.assembly = Some(format!("controller: {e}"));
            return out;
        }
    };
    if wb {
        // Replay the backup `wb.json` names, and retire it, as a start without a write
        // cache does.
        match crate::wb::setup::start(&a, &ctl, None, false) {
            Ok((_, started)) => {
                out.ppl_unrecovered = started.replayed.map_or(0, |r| r.unrecovered);
            }
            Err(e) => {
                out.assembly = Some(format!("write-cache recovery: {e}"));
                return out;
            }
        }
    }
    let rows = a.shape.rows();
    let blocks = a.shape.size_bytes() / BLOCK as u64;
    let bpu = u64::from(ctl.geo.blocks_per_stripe_unit());
    let (lost_lba, lost_row): (Vec<bool>, Vec<bool>) = {
        let st = ctl.read_state();
        let lost_lba = (0..blocks)
            .map(|lba| {
                let loc = ctl.geo.locate(lba);
                st.array.lost(loc.disk, loc.block / bpu)
            })
            .collect();
        let lost_row = (0..rows)
            .map(|r| (0..ctl.geo.disks()).any(|d| st.array.lost(d, r)))
            .collect();
        (lost_lba, lost_row)
    };
    // Bounded: one step per region at most, plus the final "nothing queued".
    for _ in 0..=rows {
        if !ctl.resync_step() {
            break;
        }
    }
    let allowed = model.allowed(blocks, cut);
    let touched = model.touched(blocks, cut);
    let check_row: Vec<bool> = (0..rows as usize)
        .map(|r| rows_to_check.get(r) != Some(&false))
        .collect();
    let x = Expect {
        allowed: &allowed,
        touched: &touched,
        lost_lba: &lost_lba,
        rows: &check_row,
        per_row: ctl.geo.blocks_per_stripe() as usize,
    };
    read_back(model, &ctl, &x, &mut out.bad);
    // Finish the rebuild (resumed, or started onto a spare as the background would), and
    // read again: the replacement now serves the rows it had not rebuilt.
    if ctl.maybe_start_rebuild() || a.recovering.is_some() {
        for _ in 0..2 * rows + 4 {
            if ctl.rebuild_step(64).is_none() {
                break;
            }
        }
        read_back(model, &ctl, &x, &mut out.bad);
    }
    for row in (0..rows).filter(|&r| check_row[r as usize]) {
        if let Ok(Some(true)) = ctl.sync_row(row, false) {
            if lost_row[row as usize] {
                out.mismatch_rows_lost.insert(row);
            } else {
                out.mismatch_rows.insert(row);
            }
        }
    }
    ctl.stop();
    out
}
