//! The checker: a flat model of the logical device (the oracle) and recovery of a
//! materialised crash state, as `serve` does it, followed by a read-back of every block.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use crate::ctrl::column::BLOCK;
use crate::ctrl::{Controller, Options};
use crate::format;

/// The bytes write `id` puts in logical block `lba`: a header (id, lba) and a pattern from
/// both, so a block mixing two writes, or holding another block's data, is recognised.
/// Id 0 is the initial contents: zeros.
pub fn block_bytes(id: u64, lba: u64) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    if id == 0 {
        return b;
    }
    b[..8].copy_from_slice(&id.to_le_bytes());
    b[8..16].copy_from_slice(&lba.to_le_bytes());
    let mut x = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ lba.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    for w in b[16..].chunks_mut(8) {
        // xorshift64: cheap and never stuck at zero once seeded non-zero.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x |= 1;
        w.copy_from_slice(&x.to_le_bytes()[..w.len()]);
    }
    b
}

#[derive(Debug, Clone)]
pub enum OpKind {
    Write { first: u64, count: u64, fua: bool },
    Flush,
}

/// A client call: its data id is `index + 1`; `start` is the journal position when it was
/// issued, `ack` the index of its `Ack` event.
#[derive(Debug, Clone)]
pub struct ModelOp {
    pub kind: OpKind,
    pub start: usize,
    pub ack: usize,
}

/// The oracle: the client calls of a run, in order (the test issues them one at a time).
#[derive(Debug, Default)]
pub struct Model {
    pub ops: Vec<ModelOp>,
    /// The bytes of every block written, by (id, lba): comparing with them is much cheaper
    /// than regenerating the pattern for every block of every state (debug builds).
    expected: HashMap<(u64, u64), Vec<u8>>,
}

impl Model {
    /// The data of the next write, `count` blocks from `first`, remembered for the checks.
    pub fn data_for(&mut self, first: u64, count: u64) -> Vec<u8> {
        let id = self.next_id();
        let mut data = Vec::with_capacity(count as usize * BLOCK);
        for lba in first..first + count {
            let b = block_bytes(id, lba);
            data.extend_from_slice(&b);
            self.expected.insert((id, lba), b);
        }
        data
    }

    /// Which write a block read back holds: `Some(id)` (0 for zeros) or None for bytes no
    /// single write produced (torn, mixed, another block's, or garbage).
    pub fn identify(&self, lba: u64, got: &[u8]) -> Option<u64> {
        if got.iter().all(|&b| b == 0) {
            return Some(0);
        }
        let id = u64::from_le_bytes(got[..8].try_into().ok()?);
        let want = self.expected.get(&(id, lba))?;
        (got == want.as_slice()).then_some(id)
    }

    /// The id the next write's data carries.
    pub fn next_id(&self) -> u64 {
        self.ops.len() as u64 + 1
    }

    /// The first cut at which op `i` (a write) is durable: its own FUA ack, or the ack of
    /// the first flush issued after it returned. `usize::MAX` when never.
    fn durable_from(&self, i: usize) -> usize {
        let w = &self.ops[i];
        if let OpKind::Write { fua: true, .. } = w.kind {
            return w.ack + 1;
        }
        self.ops[i + 1..]
            .iter()
            .find(|f| matches!(f.kind, OpKind::Flush) && f.start > w.ack)
            .map_or(usize::MAX, |f| f.ack + 1)
    }

    /// Per logical block, the ids it may hold after a crash at `cut`: the newest durable
    /// write's (0 when none) and those of every write issued after it before the cut.
    pub fn allowed(&self, blocks: u64, cut: usize) -> Vec<Vec<u64>> {
        let mut allowed: Vec<Vec<u64>> = vec![vec![0]; blocks as usize];
        for (i, op) in self.ops.iter().enumerate() {
            let OpKind::Write { first, count, .. } = op.kind else {
                continue;
            };
            if op.start >= cut {
                break;
            }
            let id = i as u64 + 1;
            let durable = self.durable_from(i) <= cut;
            for b in first..first + count {
                let set = &mut allowed[b as usize];
                if durable {
                    set.clear();
                }
                set.push(id);
            }
        }
        allowed
    }

    /// Blocks some write of the run touches (before `cut`).
    pub fn touched(&self, blocks: u64, cut: usize) -> Vec<bool> {
        let mut t = vec![false; blocks as usize];
        for op in self.ops.iter().filter(|o| o.start < cut) {
            if let OpKind::Write { first, count, .. } = op.kind {
                t[first as usize..(first + count) as usize].fill(true);
            }
        }
        t
    }
}

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
        if let Err(e) = crate::wb::setup::start(&a, &ctl, None, false) {
            out.assembly = Some(format!("write-cache recovery: {e}"));
            return out;
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
