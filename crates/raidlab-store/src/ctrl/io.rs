//! The read path (healthy, redirected to a replacement, or reconstructed), member I/O and
//! its retries, and member syncs; writes are in `write.rs`.
//!
//! Member errors follow one rule. In a read phase nothing has been written yet, so the
//! member is failed and the request is planned again in the new mode. In a write phase the
//! plan's other writes still complete: the parity they carry was computed from values read
//! before any write, so the row is consistent without the failed member, which is simply
//! failed afterwards. Only when the level cannot survive the failure does the client see
//! an error.

use crate::sync::{Arc, Ordering};
use std::cell::RefCell;

use raidlab::array::Plan;

use super::column::{Workspace, BLOCK};
use super::{fanout, Controller, Fault, IoFail, SlotSet};
use crate::member::Member;
use crate::parity;

/// Attempts of one request: each failed attempt fails a member, and no level survives more
/// than two, so three retries always reach an answer.
const ATTEMPTS_MAX: u32 = 4;

/// Per-row lists of a parity write, reused between writes (no allocation per request).
#[derive(Default)]
pub(crate) struct RowScratch {
    /// Data members in Q's syndrome order.
    pub(super) data: Vec<usize>,
    /// Per member: lost in this row.
    pub(super) lost: Vec<bool>,
    /// Per column of the workspace: parity written there.
    pub(super) cols: Vec<bool>,
}

crate::sync::thread_local! {
    pub(crate) static SCRATCH: RefCell<(Plan, Workspace, RowScratch)> = RefCell::new(Default::default());
}

/// One attempt at a row's write: `Ok(devices that failed a write)`, `Err(Ok(fault))` for a
/// read failure (nothing written yet: fail the device and plan again).
/// Called by `run_row_plan` between a plan's reads and its writes: the plan, the row's
/// workspace holding what was read, and the workspace's first column.
pub(crate) type AfterReads<'a> = &'a mut dyn FnMut(&Plan, &Workspace, u32);

pub(crate) type RowAttempt = Result<Vec<Fault>, Result<Fault, IoFail>>;

impl Controller {
    /// Check a byte range against the export and the 4 KiB block size.
    pub fn check_range(&self, offset: u64, len: u64) -> Result<(), IoFail> {
        if !offset.is_multiple_of(BLOCK as u64) || !len.is_multiple_of(BLOCK as u64) {
            return Err(IoFail::Invalid(format!(
                "request at {offset} of {len} bytes is not aligned to {BLOCK} bytes"
            )));
        }
        if offset
            .checked_add(len)
            .is_none_or(|e| e > self.size_bytes())
        {
            return Err(IoFail::Invalid(format!(
                "request at {offset} of {len} bytes ends past the end of the array ({} bytes)",
                self.size_bytes()
            )));
        }
        Ok(())
    }

    /// Read `buf.len()` bytes at `offset` (through the read cache when there is one).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoFail> {
        self.check_range(offset, buf.len() as u64)?;
        self.busy.store(true, Ordering::Relaxed);
        let first = offset / BLOCK as u64;
        match &self.cache {
            Some(cache) => cache.read(self, first, buf),
            None => self.read_blocks(first, buf),
        }
    }

    /// Read whole blocks from the array, bypassing the cache.
    pub(crate) fn read_blocks(&self, first: u64, buf: &mut [u8]) -> Result<(), IoFail> {
        let bpu = u64::from(self.geo.blocks_per_stripe_unit());
        let count = (buf.len() / BLOCK) as u64;
        let mut lba = first;
        while lba < first + count {
            let run = ((lba / bpu + 1) * bpu).min(first + count) - lba;
            let at = ((lba - first) as usize) * BLOCK;
            let out = &mut buf[at..at + run as usize * BLOCK];
            self.read_unit_run(lba, run, out)?;
            lba += run;
        }
        Ok(())
    }

    /// Read `run` blocks from `lba`, all in one stripe unit.
    fn read_unit_run(&self, lba: u64, run: u64, out: &mut [u8]) -> Result<(), IoFail> {
        let loc = self.geo.locate(lba);
        let row = loc.block / u64::from(self.geo.blocks_per_stripe_unit());
        self.with_retries(format_args!("block {lba}"), || {
            let st = self.read_state();
            if let Some(d) = &st.dead {
                return Err(Err(IoFail::Failed(d.clone())));
            }
            let direct = SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                st.array.plan_read(lba, &mut s.0);
                (s.0.ops.len() == 1).then(|| s.0.ops[0])
            });
            match direct {
                Some(op) => {
                    let dev = st.devs[op.disk as usize].clone();
                    drop(st);
                    self.member_read(op.disk, dev, op.block, out).map_err(Ok)
                }
                None => {
                    drop(st);
                    self.reconstruct_run(lba, run, row, out)
                }
            }
        })
    }

    /// Run `attempt` until it succeeds. A failed attempt names the device whose read failed
    /// (`Err(Ok(fault))`): nothing has been written yet, so that device is failed and the
    /// request planned again in the new mode. Bounded: no level survives more than two
    /// failures, so `ATTEMPTS_MAX` attempts always reach an answer (a device that already
    /// left its slot is not failed again, and the next attempt reads its replacement).
    pub(crate) fn with_retries<T>(
        &self,
        what: std::fmt::Arguments<'_>,
        mut attempt: impl FnMut() -> Result<T, Result<Fault, IoFail>>,
    ) -> Result<T, IoFail> {
        for _ in 0..ATTEMPTS_MAX {
            match attempt() {
                Ok(v) => return Ok(v),
                Err(Ok(f)) => self.fail_device(&f, "read error")?,
                Err(Err(e)) => return Err(e),
            }
        }
        Err(IoFail::Failed(format!("{what}: too many member failures")))
    }

    /// Reconstruct `run` blocks from `lba` (one unit) whose member is lost in `row`. `Err(Ok)`
    /// names a member that failed while reading.
    fn reconstruct_run(
        &self,
        lba: u64,
        run: u64,
        row: u64,
        out: &mut [u8],
    ) -> Result<(), Result<Fault, IoFail>> {
        // Shared: this only reads the row's survivors (`locks.rs`).
        let _row = self.locks.share(row, row);
        let st = self.read_state();
        if let Some(d) = &st.dead {
            return Err(Err(IoFail::Failed(d.clone())));
        }
        let loc = self.geo.locate(lba);
        let n = self.geo.disks() as usize;
        let (disks, dev_list): (Vec<u32>, Vec<Option<Arc<dyn Member>>>) = SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            st.array.plan_read(lba, &mut s.0);
            let d: Vec<u32> = s.0.ops.iter().map(|o| o.disk).collect();
            let devs = d.iter().map(|&x| st.devs[x as usize].clone()).collect();
            (d, devs)
        });
        if disks.len() == 1 {
            // The mode changed since the caller planned: a direct read now.
            drop(st);
            return self
                .member_read(disks[0], dev_list[0].clone(), loc.block, out)
                .map_err(Ok);
        }
        if self.opts.rebuild_order != raidlab::rebuild::OrderSpec::Sequential
            || self.rebuild_active()
        {
            self.note_user_read(loc.disk, row);
        }
        let lost: Vec<bool> = (0..n as u32).map(|d| st.array.lost(d, row)).collect();
        drop(st);
        let width = run as usize;
        let bpu = self.geo.blocks_per_stripe_unit();
        let col0 = (loc.block % u64::from(bpu)) as u32;
        let parallel = self.fan_out(disks.iter().copied());
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            let ws = &mut s.1;
            ws.reset(n, col0, width);
            // The survivors' reads, all at once when the members are slow.
            let spans: Vec<(usize, usize, usize)> =
                disks.iter().map(|&d| (d as usize, 0, width)).collect();
            let jobs: Vec<_> = disks
                .iter()
                .zip(dev_list)
                .zip(ws.old_spans_mut(&spans))
                .collect();
            let done = fanout::each(parallel, jobs, |((&d, dev), buf)| {
                self.member_read(d, dev, loc.block, buf)
            });
            done.into_iter()
                .collect::<Result<(), Fault>>()
                .map_err(Ok)?;
            // Slot order: data slots, P, Q; the plan read every member needed.
            let ndata = self.geo.data_disks() as usize;
            let par = self.geo.parity_disks(row);
            // Data in Q's syndrome order (md's), then P, then Q if it was read.
            let q_read = par.q.is_some_and(|q| disks.contains(&q));
            let order: Vec<usize> = self
                .geo
                .parity_order(row)
                .take(ndata + 1 + usize::from(q_read))
                .map(|d| d as usize)
                .collect();
            let missing: Vec<usize> = order
                .iter()
                .enumerate()
                .filter(|(_, &d)| lost[d] || !disks.contains(&(d as u32)))
                .map(|(i, _)| i)
                .collect();
            if missing.len() > 2 || (!q_read && missing.len() > 1) {
                return Err(Err(IoFail::Failed(format!(
                    "block {lba}: more members lost than parity can solve"
                ))));
            }
            // Each member's run is contiguous in the workspace, and parity works bytewise,
            // so the whole run is solved at once, in place: no copy per block.
            let k = order
                .iter()
                .position(|&d| d == loc.disk as usize)
                .expect("target in row");
            let mut runs: Vec<Option<&mut [u8]>> = ws.old_runs_mut().map(Some).collect();
            let mut refs: Vec<&mut [u8]> = order
                .iter()
                .map(|&d| runs[d].take().expect("members of a row are distinct"))
                .collect();
            parity::reconstruct(ndata, &mut refs, &missing);
            out.copy_from_slice(refs[k]);
            Ok(())
        })
    }

    /// Read from slot `slot`'s device; `Err` names the device on any error (or a missing
    /// device).
    pub(crate) fn member_read(
        &self,
        slot: u32,
        dev: Option<Arc<dyn Member>>,
        block: u64,
        buf: &mut [u8],
    ) -> Result<(), Fault> {
        let blocks = (buf.len() / BLOCK) as u64;
        let c = &self.counters[slot as usize];
        self.member_io(slot, dev.as_ref(), &c.read_blocks, blocks, |d| {
            d.read_at(buf, self.shape.data_offset_bytes + block * BLOCK as u64)
        })
    }

    pub(crate) fn member_write(
        &self,
        slot: u32,
        dev: Option<&Arc<dyn Member>>,
        block: u64,
        buf: &[u8],
    ) -> Result<(), Fault> {
        let blocks = (buf.len() / BLOCK) as u64;
        let c = &self.counters[slot as usize];
        self.member_io(slot, dev, &c.write_blocks, blocks, |d| {
            d.write_at(buf, self.shape.data_offset_bytes + block * BLOCK as u64)
        })
    }

    /// One data-area operation on a member, counted in `done` (blocks) or as an error.
    fn member_io(
        &self,
        slot: u32,
        dev: Option<&Arc<dyn Member>>,
        done: &std::sync::atomic::AtomicU64,
        blocks: u64,
        op: impl FnOnce(&dyn Member) -> std::io::Result<()>,
    ) -> Result<(), Fault> {
        let Some(dev) = dev else {
            return Err(Fault::missing(slot));
        };
        let t0 = std::time::Instant::now();
        let r = op(dev.as_ref());
        fanout::observe(
            &self.counters[slot as usize].op_ns_mean,
            t0.elapsed().as_nanos() as u64,
        );
        match r {
            Ok(()) => {
                done.fetch_add(blocks, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                self.counters[slot as usize]
                    .errors
                    .fetch_add(1, Ordering::Relaxed);
                Err(Fault::new(slot, Some(dev), &e))
            }
        }
    }

    /// fdatasync the members of `which`; one that fails its sync is failed (md does the
    /// same: Linux reports a lost write-back once per descriptor, so a later sync would
    /// succeed over data the kernel dropped).
    pub(crate) fn sync_slots(&self, which: SlotSet) -> Result<(), IoFail> {
        // The devices are looked up first so no lock is held across the syncs, which run
        // all at once when the members are slow (an fdatasync on a disk is).
        let devs: Vec<(u32, Arc<dyn Member>)> = {
            let st = self.read_state();
            which
                .iter()
                .filter_map(|slot| Some((slot, st.devs[slot as usize].clone()?)))
                .collect()
        };
        let parallel = self.fan_out_syncs(devs.iter().map(|&(s, _)| s));
        let done = fanout::each(parallel, devs, |(slot, d)| {
            let t0 = std::time::Instant::now();
            let r = d.sync();
            fanout::observe(
                &self.counters[slot as usize].sync_ns_mean,
                t0.elapsed().as_nanos() as u64,
            );
            r.map_err(|e| Fault::new(slot, Some(&d), &e))
        });
        for f in done.into_iter().filter_map(Result::err) {
            self.fail_device(&f, "sync")?;
        }
        Ok(())
    }
}
