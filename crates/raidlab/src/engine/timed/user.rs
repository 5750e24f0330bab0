//! The user-request path of the timed engine: a request arrives, is looked up in the read
//! cache, its misses and write-through plan become per-disk operations, and it completes
//! when its last operation does (see `mod.rs` for the simplifications).

use super::rebuild::Owner;
use super::{unified, Sim, Slot};
use crate::array::{DiskOp, Plan};
use crate::cache::read::{Access, MissCost, UniformCost};
use crate::config::{Driver, Writes};
use crate::disk::Class;
use crate::error::{Error, Result};
use crate::workload::{Op, Request};

use super::super::count::tally;
use super::events::Kind;

impl<'e> Sim<'e> {
    pub(super) fn alloc_slot(&mut self) -> u32 {
        match self.free_slots.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// A user request arrives at `now`.
    pub(super) fn issue(&mut self, now: u64, req: &Request) -> Result<()> {
        if self.outstanding >= u64::from(self.spec.outstanding_max) {
            if matches!(self.spec.driver, Driver::Ramp { .. }) {
                // The level cannot keep up: mark it and end the ramp there.
                self.sampler.saturate(now);
                if let Some(s) = self.schedule.as_mut() {
                    s.stop_after(now);
                }
                self.stopped = true;
                return Ok(());
            }
            return Err(Error::config(
                "run.outstanding_max",
                format!(
                    "{} requests in flight at {:.3} s: the offered load exceeds what the array \
                     serves; lower it (run.time_scale, run.iops) or raise outstanding_max",
                    self.outstanding,
                    now as f64 / 1e9
                ),
            ));
        }
        self.wb_idle(now, false)?;
        self.end_warmup(now);
        let m = &mut self.m.count;
        m.requests += 1;
        let is_read = req.op == Op::Read;
        if is_read {
            m.read_requests += 1;
        } else {
            m.write_requests += 1;
        }
        let (first, count) = self.exp.workload.span(req, self.addressing);
        m.block_requests += count;
        if is_read {
            m.read_blocks += count;
        } else {
            m.write_blocks += count;
        }
        self.acc.ops.clear();
        let writes = self.exp.cache.writes;
        // With a write cache, writes go there and the read cache's copies become stale.
        let wb = self.wb.as_ref().map(|wb| wb.read_cache());
        if is_read || (writes == Writes::Access && wb.is_none()) {
            self.lookup(first, count, is_read);
        } else if writes == Writes::Invalidate || wb == Some(true) {
            for lba in first..first + count {
                self.m.count.invalidations += u64::from(self.policy.remove(lba));
            }
        }
        let slot = self.alloc_slot();
        self.rebuild.bind(slot);
        {
            let s = &mut self.slots[slot as usize];
            s.arrival_ns = now;
            s.is_read = is_read;
            s.pending = 0;
            s.writes.clear();
            s.level = self.sampler.level_of(now);
            s.span = (first, count);
            s.rows = None;
            s.waiting_since_ns = None;
        }
        self.outstanding += 1;
        self.m.outstanding_peak = self.m.outstanding_peak.max(self.outstanding);
        if !is_read && self.wb.is_some() {
            return self.wb_write(now, slot, first, count);
        }
        if !is_read {
            return self.write_through(now, slot);
        }
        self.acc.normalize();
        if is_read && self.cf.is_some() && self.recovery_read(now, slot, first, count)? {
            return Ok(());
        }
        debug_assert!(self.slots[slot as usize].writes.is_empty());
        if self.acc.ops.is_empty() {
            // Served wholly from cache.
            return self.done_after(now, slot, self.spec.controller.hit_ns);
        }
        self.submit_acc(now, slot)
    }

    /// Issue the read phase gathered in `acc`, or the write phase when there is none.
    fn submit_acc(&mut self, now: u64, slot: u32) -> Result<()> {
        if self.acc.ops.is_empty() {
            return self.write_phase(now, slot);
        }
        let ops = std::mem::take(&mut self.acc.ops);
        let r = self.submit_all(now, slot, &ops);
        self.acc.ops = ops;
        r
    }

    /// A write-through write: take its stripe rows (`controller.row_locks`), then plan it.
    /// The planner's reads are its read phase and its writes wait for them.
    fn write_through(&mut self, now: u64, slot: u32) -> Result<()> {
        let (first, count) = self.slots[slot as usize].span;
        if let (true, Some(a)) = (self.spec.controller.row_locks, &self.array) {
            let rows = (a.stripe_of(first), a.stripe_of(first + count - 1));
            self.slots[slot as usize].rows = Some(rows);
            if self.row_locks.take(slot, rows.0, rows.1).is_some() {
                self.slots[slot as usize].waiting_since_ns = Some(now);
                self.m.row_lock_waits += 1;
                return Ok(());
            }
        }
        self.plan_write_through(now, slot)
    }

    /// Plan and issue a write-through write that holds its rows.
    fn plan_write_through(&mut self, now: u64, slot: u32) -> Result<()> {
        let (first, count) = self.slots[slot as usize].span;
        if let Some(t) = self.slots[slot as usize].waiting_since_ns.take() {
            self.m.row_lock_wait_ns += now - t;
        }
        match &self.array {
            Some(a) => a.plan_write(first, count, &mut self.plan),
            None => single_disk(&mut self.plan, Op::Write, first, count),
        }
        tally(&self.plan, &mut self.m.count);
        // Only the planner's reads: the write did not look anything up for the disks.
        self.acc.ops.clear();
        let s = &mut self.slots[slot as usize];
        for op in &self.plan.ops {
            match op.op {
                Op::Read => self.acc.ops.push(*op),
                Op::Write => s.writes.push(*op),
            }
        }
        self.acc.normalize();
        self.submit_acc(now, slot)
    }

    /// Request `slot` is done with its rows: hand each to its first waiter, and start every
    /// waiter that now holds all of its rows.
    fn release_rows(&mut self, now: u64, slot: u32) -> Result<()> {
        let Some((r0, r1)) = self.slots[slot as usize].rows.take() else {
            return Ok(());
        };
        let mut handed = std::mem::take(&mut self.handed);
        handed.clear();
        self.row_locks.release(r0, r1, &mut handed);
        let mut r = Ok(());
        for &(w, row) in &handed {
            let last = self.slots[w as usize].rows.expect("a waiter has rows").1;
            if row == last || self.row_locks.take(w, row + 1, last).is_none() {
                r = self.plan_write_through(now, w);
                if r.is_err() {
                    break;
                }
            }
        }
        self.handed = handed;
        r
    }

    /// Look the request's blocks up; misses add their read plans to `acc`.
    pub(super) fn lookup(&mut self, first: u64, count: u64, is_read: bool) {
        let cost: &dyn MissCost = match &self.array {
            Some(a) => a,
            None => &UniformCost,
        };
        let m = &mut self.m.count;
        m.lookups += count;
        for lba in first..first + count {
            // The write cache first (its dirty pages are the newest data), then the read
            // cache if there is one.
            let read_cache = match self.wb.as_mut() {
                Some(wb) => {
                    if wb.cache.read(lba) {
                        m.hits += 1;
                        continue;
                    }
                    wb.read_cache()
                }
                None => true,
            };
            let acc = Access {
                key: lba,
                size: 1,
                now: self.tick,
                cost,
            };
            if read_cache {
                self.tick += 1;
                if self.policy.get(&acc) {
                    m.hits += 1;
                    continue;
                }
            }
            m.misses += 1;
            if is_read {
                match &self.array {
                    Some(a) => {
                        a.plan_read(lba, &mut self.plan);
                        self.rebuild.user_read(a, m.requests, lba, &mut self.plan);
                    }
                    None => single_disk(&mut self.plan, Op::Read, lba, 1),
                }
                m.miss_disk_blocks += tally(&self.plan, m);
                let merge = count <= MERGE_AS_PLANNED_BLOCKS_MAX;
                for &op in &self.plan.ops {
                    if merge {
                        self.acc.push_merging(op);
                    } else {
                        self.acc.ops.push(op);
                    }
                }
            }
            if read_cache {
                self.evicted.clear();
                // A unified cache caches the page only where dirty pages leave room.
                let wc = self.wb.as_ref().map(|wb| &wb.cache);
                if unified::room_for_read(
                    &self.unified,
                    self.policy.as_mut(),
                    wc,
                    &mut self.evicted,
                ) {
                    self.policy.insert(&acc, &mut self.evicted);
                }
                m.evictions += self.evicted.len() as u64;
            }
        }
        debug_assert!(self.policy.used() <= self.policy.capacity());
    }

    /// Issue `ops` for request `slot` at `now`.
    pub(super) fn submit_all(&mut self, now: u64, slot: u32, ops: &[DiskOp]) -> Result<()> {
        debug_assert!(!ops.is_empty());
        self.slots[slot as usize].pending = ops.len() as u32;
        for op in ops {
            self.submit_op(now, op, Class::Foreground, Owner::User(slot))?;
        }
        Ok(())
    }

    /// The read phase of a write is over: issue its writes.
    pub(super) fn write_phase(&mut self, now: u64, slot: u32) -> Result<()> {
        let mut writes = std::mem::take(&mut self.slots[slot as usize].writes);
        let r = self.submit_all(now, slot, &writes);
        // Give the (now cleared) vector back so the slot keeps its capacity.
        writes.clear();
        self.slots[slot as usize].writes = writes;
        r
    }

    /// At the first user request or rebuild start at or after `run.warmup_s`: the cache
    /// counters start again from here (a rebuild's window, which starts no earlier, then
    /// measures from the same zero).
    pub(super) fn end_warmup(&mut self, now: u64) {
        if self.m.measure_from_ns == 0
            && self.spec.measure_from_ns > 0
            && now >= self.spec.measure_from_ns
        {
            self.m.count = self.m.count.measured_from_here();
            self.m.measure_from_ns = now;
        }
    }

    /// Complete request `slot` `delay` after `now`.
    pub(super) fn done_after(&mut self, now: u64, slot: u32, delay: u64) -> Result<()> {
        if delay == 0 {
            self.finish(now, slot)
        } else {
            self.events.push(now + delay, Kind::RequestDone, slot, 0);
            Ok(())
        }
    }

    /// Request `slot` completes at `now`.
    pub(super) fn finish(&mut self, now: u64, slot: u32) -> Result<()> {
        self.release_rows(now, slot)?;
        let s = &self.slots[slot as usize];
        let latency = now - s.arrival_ns;
        self.rebuild.user_done(s.arrival_ns, latency);
        if s.arrival_ns >= self.spec.measure_from_ns {
            // `m.latency` is the merge of the two, made once at the end of the run.
            if s.is_read {
                self.m.read_latency.record(latency);
            } else {
                self.m.write_latency.record(latency);
            }
            self.m.completed += 1;
        }
        self.sampler.completed(now, latency, s.level);
        self.m.sim_ns = self.m.sim_ns.max(now);
        self.outstanding -= 1;
        self.free_slots.push(slot);
        if self.outstanding == 0 {
            self.wb_idle(now, true)?;
        }
        if let Driver::Closed { think_ns, .. } = self.spec.driver {
            if think_ns == 0 {
                self.issue_next(now)?;
            } else if !self.stopped {
                self.events.push(now + think_ns, Kind::Arrival, 0, 0);
            }
        }
        Ok(())
    }
}

/// Requests up to this many blocks merge their read operations as they are planned (a bound
/// far below where any merged count could overflow `DiskOp::count`, so the merges are exact).
const MERGE_AS_PLANNED_BLOCKS_MAX: u64 = 1 << 20;

/// The plan without an `[array]`: one device whose block `b` is logical block `b`.
pub(super) fn single_disk(plan: &mut Plan, op: Op, block: u64, count: u64) {
    plan.ops.clear();
    plan.ops.push(DiskOp {
        disk: 0,
        op,
        block,
        count: u32::try_from(count).unwrap_or(u32::MAX),
    });
}
