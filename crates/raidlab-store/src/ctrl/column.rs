//! Parity upkeep of one stripe row, column by column.
//!
//! The planner decides *which* blocks a write reads and writes (RMW, RCW or a full
//! reconstruct, see `raidlab::array::Plan`); this module decides the *bytes*. A row workspace
//! holds, per member, the old contents the plan read and the new contents it will write, for
//! the columns (block offsets inside the stripe unit) the write touches. For every column whose
//! parity is written, the new parity comes from whichever inputs the plan gathered:
//!
//! 1. every data slot known (written now, or its old value read): compute P and Q afresh;
//! 2. every surviving member read (RAID-6 "full" update): solve the lost data first, then 1;
//! 3. otherwise read-modify-write: the old parity plus the change of each written slot.
//!
//! Which case applies is read off the plan, never chosen here, so the bytes follow the same
//! decision the simulator charges for.

use crate::parity;

pub const BLOCK: usize = 4096;

/// One row's buffers: `n` members x `width` blocks, old and new.
#[derive(Default)]
pub struct Workspace {
    pub n: usize,
    pub width: usize,
    /// Column offset of the first buffered block inside the stripe unit.
    pub c0: u32,
    old: Vec<u8>,
    new: Vec<u8>,
    /// Per member and column: old value read / new value set.
    read: Vec<bool>,
    set: Vec<bool>,
}

impl Workspace {
    /// Reset for `n` members and columns `c0..c0 + width` (reuses the allocation).
    pub fn reset(&mut self, n: usize, c0: u32, width: usize) {
        self.n = n;
        self.c0 = c0;
        self.width = width;
        let bytes = n * width * BLOCK;
        if self.old.len() < bytes {
            self.old.resize(bytes, 0);
            self.new.resize(bytes, 0);
        }
        self.read.clear();
        self.read.resize(n * width, false);
        self.set.clear();
        self.set.resize(n * width, false);
    }

    #[inline]
    fn at(&self, disk: usize, col: usize) -> usize {
        debug_assert!(disk < self.n && col < self.width);
        (disk * self.width + col) * BLOCK
    }

    /// Old contents of `count` blocks of `disk` from column `col` (to be filled by a read).
    pub fn old_mut(&mut self, disk: usize, col: usize, count: usize) -> &mut [u8] {
        let a = self.at(disk, col);
        for c in col..col + count {
            self.read[disk * self.width + c] = true;
        }
        &mut self.old[a..a + count * BLOCK]
    }

    /// New contents of `count` blocks of `disk` from column `col`.
    pub fn new_mut(&mut self, disk: usize, col: usize, count: usize) -> &mut [u8] {
        let a = self.at(disk, col);
        for c in col..col + count {
            self.set[disk * self.width + c] = true;
        }
        &mut self.new[a..a + count * BLOCK]
    }

    pub fn new_ref(&self, disk: usize, col: usize, count: usize) -> &[u8] {
        let a = self.at(disk, col);
        &self.new[a..a + count * BLOCK]
    }

    /// Old contents of several spans at once, `(disk, col, count)` each, to be filled by
    /// reads running in parallel: the slices in the spans' order. Spans must not overlap.
    pub fn old_spans_mut(&mut self, spans: &[(usize, usize, usize)]) -> Vec<&mut [u8]> {
        let mut at: Vec<(usize, usize, usize)> = Vec::with_capacity(spans.len());
        for (i, &(disk, col, count)) in spans.iter().enumerate() {
            for c in col..col + count {
                self.read[disk * self.width + c] = true;
            }
            at.push((self.at(disk, col), count * BLOCK, i));
        }
        at.sort_unstable();
        let mut out: Vec<Option<&mut [u8]>> = (0..spans.len()).map(|_| None).collect();
        let mut rest: &mut [u8] = &mut self.old;
        let mut base = 0usize;
        for (a, len, i) in at {
            assert!(a >= base, "spans of one plan overlap");
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(a - base);
            let (mine, tail) = tail.split_at_mut(len);
            out[i] = Some(mine);
            rest = tail;
            base = a + len;
        }
        out.into_iter()
            .map(|s| s.expect("every span placed"))
            .collect()
    }

    /// Every member's old run (`width` blocks each), in member order.
    pub fn old_runs_mut(&mut self) -> std::slice::ChunksMut<'_, u8> {
        let run = self.width * BLOCK;
        self.old[..self.n * run].chunks_mut(run)
    }

    pub fn old_ref(&self, disk: usize, col: usize, count: usize) -> &[u8] {
        let a = self.at(disk, col);
        &self.old[a..a + count * BLOCK]
    }

    fn was_read(&self, disk: usize, col: usize) -> bool {
        self.read[disk * self.width + col]
    }

    fn is_set(&self, disk: usize, col: usize) -> bool {
        self.set[disk * self.width + col]
    }

    /// Compute the new parity of column `col`, given the members of the row in slot order
    /// (`data[k]` is the member of data slot k, `p`/`q` the parity members) and which members
    /// are lost in this row. Parity members that are lost are skipped. Returns false when the
    /// plan gathered too little to decide (a planner bug; the caller fails the request).
    pub fn parity_column(
        &mut self,
        col: usize,
        data: &[usize],
        p: Option<usize>,
        q: Option<usize>,
        lost: &[bool],
    ) -> bool {
        let live_p = p.filter(|&d| !lost[d]);
        let live_q = q.filter(|&d| !lost[d]);
        if live_p.is_none() && live_q.is_none() {
            return true;
        }
        let ndata = data.len();
        let known = |ws: &Self, d: usize| ws.is_set(d, col) || ws.was_read(d, col);
        let all_known = data.iter().all(|&d| known(self, d));
        let all_survivors_read = (0..self.n).all(|d| lost[d] || self.was_read(d, col));
        if !all_known && all_survivors_read {
            // Solve the lost data of the old column in place (case 2).
            let mut missing: Vec<usize> = Vec::with_capacity(2);
            for (k, &d) in data.iter().enumerate() {
                if lost[d] {
                    missing.push(k);
                }
            }
            let mut order: Vec<usize> = data.to_vec();
            order.extend(p);
            order.extend(q);
            if let Some(pd) = p {
                if lost[pd] {
                    missing.push(ndata);
                }
            }
            if let Some(qd) = q {
                if lost[qd] {
                    missing.push(ndata + 1);
                }
            }
            if missing.len() > 2 {
                return false;
            }
            self.solve_old(col, &order, ndata, q.is_some(), &missing);
            for &d in data {
                self.read[d * self.width + col] = true;
            }
        }
        let all_known = data.iter().all(|&d| known(self, d));
        if all_known {
            self.full_parity(col, data, live_p, live_q);
            return true;
        }
        // Read-modify-write: needs the old value of every written slot and the old parity.
        let rmw_ok = data
            .iter()
            .all(|&d| !self.is_set(d, col) || self.was_read(d, col))
            && live_p.is_none_or(|d| self.was_read(d, col))
            && live_q.is_none_or(|d| self.was_read(d, col));
        if !rmw_ok {
            return false;
        }
        self.rmw_parity(col, data, live_p, live_q);
        true
    }

    /// Solve `missing` (indices in `order`: data slots, then P, then Q) of the old column.
    fn solve_old(
        &mut self,
        col: usize,
        order: &[usize],
        ndata: usize,
        has_q: bool,
        missing: &[usize],
    ) {
        let mut blocks: Vec<Vec<u8>> = order
            .iter()
            .map(|&d| self.old_ref(d, col, 1).to_vec())
            .collect();
        {
            let mut refs: Vec<&mut [u8]> = blocks.iter_mut().map(|b| b.as_mut_slice()).collect();
            if has_q {
                parity::reconstruct(ndata, &mut refs, missing);
            } else {
                parity::reconstruct(ndata, &mut refs[..ndata + 1], missing);
            }
        }
        for &m in missing {
            let d = order[m];
            let a = self.at(d, col);
            self.old[a..a + BLOCK].copy_from_slice(&blocks[m]);
        }
    }

    fn full_parity(&mut self, col: usize, data: &[usize], p: Option<usize>, q: Option<usize>) {
        let mut pb = [0u8; BLOCK];
        let mut qb = [0u8; BLOCK];
        for (k, &d) in data.iter().enumerate() {
            let a = self.at(d, col);
            let src = if self.is_set(d, col) {
                &self.new[a..a + BLOCK]
            } else {
                &self.old[a..a + BLOCK]
            };
            parity::xor_into(&mut pb, src);
            if q.is_some() {
                parity::mul_xor_into(&mut qb, src, k);
            }
        }
        if let Some(pd) = p {
            self.new_mut(pd, col, 1).copy_from_slice(&pb);
        }
        if let Some(qd) = q {
            self.new_mut(qd, col, 1).copy_from_slice(&qb);
        }
    }

    fn rmw_parity(&mut self, col: usize, data: &[usize], p: Option<usize>, q: Option<usize>) {
        let mut pb = [0u8; BLOCK];
        let mut qb = [0u8; BLOCK];
        if let Some(pd) = p {
            pb.copy_from_slice(self.old_ref(pd, col, 1));
        }
        if let Some(qd) = q {
            qb.copy_from_slice(self.old_ref(qd, col, 1));
        }
        let mut delta = [0u8; BLOCK];
        for (k, &d) in data.iter().enumerate() {
            if !self.is_set(d, col) {
                continue;
            }
            let a = self.at(d, col);
            delta.copy_from_slice(&self.old[a..a + BLOCK]);
            parity::xor_into(&mut delta, &self.new[a..a + BLOCK]);
            parity::xor_into(&mut pb, &delta);
            if q.is_some() {
                parity::mul_xor_into(&mut qb, &delta, k);
            }
        }
        if let Some(pd) = p {
            self.new_mut(pd, col, 1).copy_from_slice(&pb);
        }
        if let Some(qd) = q {
            self.new_mut(qd, col, 1).copy_from_slice(&qb);
        }
    }
}
