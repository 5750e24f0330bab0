//! The reference model: what the store promises, as executable code (DESIGN §9).
//!
//! The logical device is a flat array of 4 KiB pages. A client history is a list of calls
//! (writes, FLUSHes, reads), each with the position at which it was issued (`start`) and
//! the position of its reply (`ack`), on one clock shared with the member and backup I/O
//! of the run (`crash::Event` indexes). Calls may overlap: many clients, and the store's
//! own destager, rebuild, resync and operator threads, run at once.
//!
//! **The rules.**
//! - *Durability.* A write is durable once it is acknowledged with FUA, or once a FLUSH
//!   issued after its reply is answered (NBD's contract; with `CAN_MULTI_CONN` a FLUSH
//!   covers every connection). A write-back cache with a backup (`mirror`, `log`) promises
//!   more: every acknowledged write is durable at its reply; its histories mark every
//!   write FUA (`durable_at_ack`). `--backup none` and the write-through fallback promise
//!   the NBD contract only.
//! - *Reads* are linearizable: a read may return write W's bytes for a page if W was
//!   issued before the read returned, and no write W' of that page was answered before the
//!   read was issued while itself issued after W was answered. It may return the initial
//!   zeros only if no write of the page was answered before the read was issued.
//! - *Crashes.* After a crash at position `cut` and recovery, a page may hold W's bytes if
//!   W was issued before the cut and no write W' of the page durable by the cut was issued
//!   after W was answered; zeros only if no write of the page is durable by the cut.
//! - *Redundancy.* Member failures are served while the level survives them: no call may
//!   fail then. After recovery, a row whose units are all present has its parity (or its
//!   copies) consistent with its data (`check` counts no mismatch).
//!
//! Positions: a call issued at position `p` came after events `..p` and before event `p`; a
//! reply at event `a` came after it. So "answered before issued" is `a < p`, "issued before
//! answered" is `p <= a`, and a call with no I/O may be answered at its own start position.
//!
//! Sequential histories (each call answered before the next is issued) reduce to the
//! familiar rule: the newest durable write, or any write issued after it.

use std::collections::{HashMap, HashSet};

use crate::ctrl::column::BLOCK;

/// Position of a call not answered (yet, or ever: the run crashed first).
pub const PENDING: usize = usize::MAX;

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

/// A client call: a write's data id is `index + 1`; `start` is the position when it was
/// issued, `ack` that of its reply (`PENDING` when none).
#[derive(Debug, Clone)]
pub struct ModelOp {
    pub kind: OpKind,
    pub start: usize,
    pub ack: usize,
}

/// The oracle: every write and FLUSH of a run, in the order they were issued.
#[derive(Debug, Default)]
pub struct Model {
    pub ops: Vec<ModelOp>,
    /// The bytes of every block written, by (id, lba): comparing with them is much cheaper
    /// than regenerating the pattern for every block of every state (debug builds).
    expected: HashMap<(u64, u64), Vec<u8>>,
    /// Writes of zeros (TRIM, WRITE_ZEROES): their blocks read as zeros, i.e. as id 0.
    zero_ids: HashSet<u64>,
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

    /// The next write writes zeros (TRIM or WRITE_ZEROES of `count` blocks from `first`): a
    /// block reading zeros then matches it as well as the initial contents.
    pub fn zeros_for(&mut self, _first: u64, _count: u64) {
        let id = self.next_id();
        self.zero_ids.insert(id);
    }

    /// Id 0 (zeros) is allowed wherever a zero write is.
    fn with_zeros(&self, mut ids: Vec<u64>) -> Vec<u64> {
        if !ids.contains(&0) && ids.iter().any(|i| self.zero_ids.contains(i)) {
            ids.push(0);
        }
        ids
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

    /// Issue a call at `start` (concurrent histories): returns its index; the write's data
    /// id is `index + 1` (take the data with `data_for` first).
    pub fn begin(&mut self, kind: OpKind, start: usize) -> usize {
        self.ops.push(ModelOp {
            kind,
            start,
            ack: PENDING,
        });
        self.ops.len() - 1
    }

    /// Call `i` was answered at `ack`.
    pub fn end(&mut self, i: usize, ack: usize) {
        assert!(ack >= self.ops[i].start, "a reply before its call");
        self.ops[i].ack = ack;
    }

    /// The first cut at which op `i` (a write) is durable: its own FUA reply, or the reply
    /// of the first FLUSH issued after it was answered. `PENDING` when never.
    fn durable_from(&self, i: usize) -> usize {
        let w = &self.ops[i];
        if w.ack == PENDING {
            return PENDING;
        }
        if let OpKind::Write { fua: true, .. } = w.kind {
            return w.ack + 1;
        }
        self.ops
            .iter()
            .filter(|f| matches!(f.kind, OpKind::Flush) && f.start > w.ack && f.ack != PENDING)
            .map(|f| f.ack + 1)
            .min()
            .unwrap_or(PENDING)
    }

    /// Per logical block, the ids it may hold after a crash at `cut` (see the module's
    /// rules): every write issued before the cut that no durable later write superseded,
    /// and 0 when no write of the block is durable.
    pub fn allowed(&self, blocks: u64, cut: usize) -> Vec<Vec<u64>> {
        // Per block: the latest start among writes durable by the cut (None: no such write).
        let mut newest_durable: Vec<Option<usize>> = vec![None; blocks as usize];
        for (i, op) in self.ops.iter().enumerate() {
            let OpKind::Write { first, count, .. } = op.kind else {
                continue;
            };
            if op.start >= cut || self.durable_from(i) > cut {
                continue;
            }
            for b in first..first + count {
                let s = &mut newest_durable[b as usize];
                *s = Some(s.map_or(op.start, |x: usize| x.max(op.start)));
            }
        }
        let mut allowed: Vec<Vec<u64>> = newest_durable
            .iter()
            .map(|d| if d.is_none() { vec![0] } else { Vec::new() })
            .collect();
        for (i, op) in self.ops.iter().enumerate() {
            let OpKind::Write { first, count, .. } = op.kind else {
                continue;
            };
            if op.start >= cut {
                continue;
            }
            for b in first..first + count {
                // Superseded only by a durable write issued after this one was answered.
                if newest_durable[b as usize].is_none_or(|s| op.ack >= s) {
                    allowed[b as usize].push(i as u64 + 1);
                }
            }
        }
        allowed
            .into_iter()
            .map(|ids| self.with_zeros(ids))
            .collect()
    }

    /// The ids a read of block `lba` issued at `start` and answered at `ack` may return
    /// (linearizability; see the module's rules).
    pub fn allowed_read(&self, lba: u64, start: usize, ack: usize) -> Vec<u64> {
        let touches = |op: &ModelOp| match op.kind {
            OpKind::Write { first, count, .. } => (first..first + count).contains(&lba),
            OpKind::Flush => false,
        };
        // The latest start among writes of the block answered before the read was issued.
        let floor = self
            .ops
            .iter()
            .filter(|op| touches(op) && op.ack != PENDING && op.ack < start)
            .map(|op| op.start)
            .max();
        let mut out: Vec<u64> = if floor.is_none() { vec![0] } else { Vec::new() };
        for (i, op) in self.ops.iter().enumerate() {
            if touches(op) && op.start <= ack && floor.is_none_or(|f| op.ack >= f) {
                out.push(i as u64 + 1);
            }
        }
        self.with_zeros(out)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn w(first: u64, count: u64, fua: bool, start: usize, ack: usize) -> ModelOp {
        ModelOp {
            kind: OpKind::Write { first, count, fua },
            start,
            ack,
        }
    }

    fn flush(start: usize, ack: usize) -> ModelOp {
        ModelOp {
            kind: OpKind::Flush,
            start,
            ack,
        }
    }

    /// Sequential: the newest durable write or anything issued after it.
    #[test]
    fn sequential_history_keeps_the_newest_durable_write() {
        let m = Model {
            ops: vec![w(0, 1, false, 0, 1), flush(2, 3), w(0, 1, false, 4, 5)],
            ..Default::default()
        };
        assert_eq!(
            m.allowed(1, 1)[0],
            vec![0, 1],
            "before the flush: old or new"
        );
        assert_eq!(
            m.allowed(1, 4)[0],
            vec![1],
            "the flush made write 1 durable"
        );
        assert_eq!(m.allowed(1, 6)[0], vec![1, 3], "write 3 not flushed");
    }

    /// Two overlapping writes, both durable: either may win; neither is superseded by the
    /// other since neither was answered before the other was issued.
    #[test]
    fn overlapping_durable_writes_may_land_in_either_order() {
        let m = Model {
            ops: vec![w(0, 1, true, 0, 3), w(0, 1, true, 1, 2)],
            ..Default::default()
        };
        assert_eq!(m.allowed(1, 10)[0], vec![1, 2]);
        // A third write issued after both were answered, durable: only it.
        let mut m = m;
        m.ops.push(w(0, 1, true, 4, 5));
        assert_eq!(m.allowed(1, 10)[0], vec![3]);
        assert_eq!(
            m.allowed(1, 5)[0],
            vec![1, 2, 3],
            "write 3 not answered by cut 5"
        );
    }

    /// A FLUSH covers only writes answered before it was issued.
    #[test]
    fn a_flush_covers_writes_answered_before_it() {
        let m = Model {
            ops: vec![w(0, 1, false, 0, 3), flush(2, 4)],
            ..Default::default()
        };
        assert_eq!(
            m.allowed(1, 10)[0],
            vec![0, 1],
            "write answered after the flush began"
        );
    }

    #[test]
    fn reads_are_linearizable() {
        let m = Model {
            ops: vec![w(0, 1, false, 0, 2), w(0, 1, false, 4, 7)],
            ..Default::default()
        };
        // Issued before write 1 was answered: zeros or write 1.
        assert_eq!(m.allowed_read(0, 1, 2), vec![0, 1]);
        // Issued after write 1 was answered, answered after write 2 was issued: either.
        assert_eq!(m.allowed_read(0, 3, 5), vec![1, 2]);
        // Issued after write 2 was answered: only write 2.
        assert_eq!(m.allowed_read(0, 8, 9), vec![2]);
    }
}
