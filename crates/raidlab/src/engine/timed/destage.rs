//! The write-back cache in timed mode: user writes absorbed by [`WriteCache`], destages
//! issued as the rate allows, and writes held while the cache is full.
//!
//! A user write is acknowledged `controller.hit_us` after its last page entered the cache. Its
//! pages enter in order as space allows; while one waits (the cache is full), later writes
//! queue behind it (first come, first served), and that time counts as "full". A destage is
//! the planner's operations for one group's dirty pages (`cache/write/plan.rs`), queued at the
//! disks in the `destage` class (or the user class with `destage_priority = "user"`): its reads (read-modify-write or reconstruct-write) first,
//! then its writes; when the last write completes the pages are freed, waiting writes are
//! admitted and more destages start. After the last event, with `drain = true`, whatever is
//! still dirty is destaged at the maximum rate (the run's disks and series then extend to the
//! end of that drain; `sim_s`, the user requests' span, does not).
//!
//! Reads look up the write cache before the read cache: a page that is dirty or being
//! destaged is a hit. With a write cache, writes always invalidate the read cache's copy.

use std::collections::VecDeque;

use super::{unified, Owner, Sim};
use crate::array::{DiskOp, Level, Plan};
use crate::cache::read::ReadPolicy;
use crate::cache::write::plan::{plan_destage, RowKinds};
use crate::cache::write::unified::Unified;
use crate::cache::write::{Backend, WriteCache, WriteSpec};
use crate::config::{Experiment, TimedSpec};
use crate::disk::Class;
use crate::engine::count::tally;
use crate::error::Result;
use crate::metrics::write::WriteCacheMetrics;
use crate::metrics::SERIES_ROWS_MAX;
use crate::workload::Op;

/// One destage in flight.
#[derive(Debug, Default)]
struct Flight {
    /// The group's slot in the cache.
    group: u32,
    /// Operations of the current phase not yet completed.
    pending: u32,
    /// The write phase, issued when the reads are done (keeps its capacity on reuse).
    writes: Vec<DiskOp>,
}

/// A user write waiting for cache space: pages `next..end` are still to enter.
#[derive(Debug, Clone, Copy)]
struct Waiter {
    slot: u32,
    /// The write's first page (`next == first`: no page has entered yet).
    first: u64,
    next: u64,
    end: u64,
    arrival_ns: u64,
}

pub(super) struct WriteBack {
    pub(super) cache: WriteCache,
    spec: WriteSpec,
    flights: Vec<Flight>,
    free: Vec<u32>,
    waiting: VecDeque<Waiter>,
    plan: Plan,
    scratch: Plan,
    m: WriteCacheMetrics,
    /// Time up to which occupancy and fullness are integrated.
    last_ns: u64,
    interval_ns: u64,
    next_row_ns: u64,
    row_from_ns: u64,
    row_occ_area: f64,
    row_full_ns: u64,
    row_destaged: u64,
    /// Set once the final drain has begun, with its start time.
    drain_from: Option<u64>,
}

impl WriteBack {
    pub(super) fn new(
        exp: &Experiment,
        spec: &TimedSpec,
        disks: usize,
    ) -> Result<Option<WriteBack>> {
        let Some(ws) = exp.write_cache.as_ref() else {
            return Ok(None);
        };
        let mirrored = exp
            .array
            .as_ref()
            .is_some_and(|a| matches!(a.level, Level::Raid1 | Level::Raid10));
        let mut cache = WriteCache::new(
            ws,
            Backend {
                disks: disks as u32,
                mirrored,
            },
        );
        super::backup::install(exp, &mut cache);
        let m = WriteCacheMetrics {
            order: ws.order.name(),
            capacity_pages: ws.capacity_pages,
            group_pages: ws.group_pages,
            ..Default::default()
        };
        Ok(Some(WriteBack {
            cache,
            spec: ws.clone(),
            flights: Vec::new(),
            free: Vec::new(),
            waiting: VecDeque::new(),
            plan: Plan::default(),
            scratch: Plan::default(),
            m,
            last_ns: 0,
            interval_ns: spec.interval_ns,
            next_row_ns: spec.interval_ns,
            row_from_ns: 0,
            row_occ_area: 0.0,
            row_full_ns: 0,
            row_destaged: 0,
            drain_from: None,
        }))
    }

    /// Whether a read cache sits beside the write cache.
    #[inline]
    pub(super) fn read_cache(&self) -> bool {
        self.spec.read_cache
    }

    /// Integrate occupancy and fullness up to `t` (before any change at `t`).
    #[inline]
    pub(super) fn integrate(&mut self, t: u64) {
        debug_assert!(t >= self.last_ns);
        let dt = t - self.last_ns;
        if dt == 0 {
            return;
        }
        let occ = self.cache.occupied() as f64;
        let area = occ * dt as f64;
        self.m.occupancy_area += area;
        self.m.occupancy_sq_area += occ * area;
        self.row_occ_area += area;
        if !self.waiting.is_empty() {
            self.m.full_ns += dt;
            self.row_full_ns += dt;
        }
        self.last_ns = t;
    }

    /// Close the series intervals that end at or before `t` (the engine's sampler closes the
    /// same ones, so the rows line up).
    pub(super) fn advance(&mut self, t: u64) {
        while self.next_row_ns <= t {
            let end = self.next_row_ns;
            self.row(end);
            self.next_row_ns = end.saturating_add(self.interval_ns);
        }
    }

    fn row(&mut self, end: u64) {
        self.integrate(end);
        let span = (end - self.row_from_ns).max(1) as f64;
        let s = &mut self.m.series;
        if s.occupancy.len() < SERIES_ROWS_MAX {
            s.occupancy
                .push(self.row_occ_area / span / self.cache.capacity() as f64);
            s.full.push(self.row_full_ns as f64 / span);
            s.destage_pages_per_s
                .push(self.row_destaged as f64 / (span / 1e9));
            s.inflight.push(self.cache.inflight());
            let st = self.cache.order_state();
            let cap = self.cache.capacity() as f64;
            s.seq_queue.push(st.seq_pages as f64 / cap);
            s.desired_seq.push(st.desired_seq_pages / cap);
        }
        self.row_from_ns = end;
        self.row_occ_area = 0.0;
        self.row_full_ns = 0;
        self.row_destaged = 0;
    }

    fn alloc_flight(&mut self) -> u32 {
        match self.free.pop() {
            Some(i) => i,
            None => {
                self.flights.push(Flight::default());
                (self.flights.len() - 1) as u32
            }
        }
    }

    /// Final metrics, the series closed at `end`.
    fn metrics(&mut self, end: u64, user_end: u64) -> WriteCacheMetrics {
        self.advance(end);
        if end > self.row_from_ns {
            self.row(end);
        }
        self.integrate(end);
        let mut m = std::mem::take(&mut self.m);
        m.stats = self.cache.stats.clone();
        m.span_ns = end;
        m.drain_ns = end.saturating_sub(user_end);
        m.left_pages = self.cache.occupied();
        m.order_state = self.cache.order_state();
        m
    }
}

/// Let pages `next..end` of a user write into `cache`, in order, while the backup accepts
/// them and there is room (a unified cache evicting clean pages for them); returns the first
/// page left out (`end` when all entered).
fn absorb(
    cache: &mut WriteCache,
    unified: &mut Option<Unified>,
    policy: &mut dyn ReadPolicy,
    evicted: &mut Vec<u64>,
    first: u64,
    mut next: u64,
    end: u64,
) -> u64 {
    if next == first {
        cache.start_request();
    }
    while next < end
        && cache.backup().can_accept(next)
        && unified::room_for_write(unified, policy, cache, evicted, next)
        && cache.write(next).is_some()
    {
        next += 1;
    }
    next
}

impl Sim<'_> {
    /// User write `slot` of pages `first..first + count` arrives at `now`.
    pub(super) fn wb_write(&mut self, now: u64, slot: u32, first: u64, count: u64) -> Result<()> {
        let wb = self.wb.as_mut().expect("called with a write cache");
        wb.integrate(now);
        let end = first + count;
        // Later writes queue behind a waiting one (first come, first served).
        let next = if wb.waiting.is_empty() {
            absorb(
                &mut wb.cache,
                &mut self.unified,
                self.policy.as_mut(),
                &mut self.evicted,
                first,
                first,
                end,
            )
        } else {
            first
        };
        if next < end {
            let backup_full = wb.waiting.is_empty() && !wb.cache.backup().can_accept(next);
            // Full: this write (and every later one) waits for destages to free space.
            wb.waiting.push_back(Waiter {
                slot,
                first,
                next,
                end,
                arrival_ns: now,
            });
            if backup_full {
                self.stall(now, true);
            }
        }
        self.pump(now)?;
        if next == end {
            return self.done_after(now, slot, self.spec.controller.hit_ns);
        }
        Ok(())
    }

    /// Issue the backup's log writes, then start destages while the rate allows.
    pub(super) fn pump(&mut self, now: u64) -> Result<()> {
        self.log_pump(now)?;
        loop {
            let Some(wb) = self.wb.as_mut() else {
                return Ok(());
            };
            if !wb.cache.wants_destage() {
                return Ok(());
            }
            let d = wb
                .cache
                .start_destage()
                .expect("wants_destage: a victim exists");
            let kinds: RowKinds = plan_destage(
                self.array.as_ref(),
                d.first,
                wb.cache.group_pages(),
                wb.cache.flight_bits(d.slot),
                &mut wb.scratch,
                &mut wb.plan,
            );
            let r = &mut wb.m.rows;
            r.full += kinds.full;
            r.rmw += kinds.rmw;
            r.rcw += kinds.rcw;
            r.runs += kinds.runs;
            tally(&wb.plan, &mut self.m.count);
            let id = wb.alloc_flight();
            let mut reads = std::mem::take(&mut wb.plan.ops);
            let f = &mut wb.flights[id as usize];
            f.group = d.slot;
            f.writes.clear();
            for op in &reads {
                if op.op == Op::Write {
                    f.writes.push(*op);
                    wb.m.destage_write_ops += 1;
                    wb.m.destage_write_blocks += u64::from(op.count);
                } else {
                    wb.m.destage_read_ops += 1;
                    wb.m.destage_read_blocks += u64::from(op.count);
                }
            }
            reads.retain(|o| o.op == Op::Read);
            debug_assert!(!f.writes.is_empty(), "a destage writes its pages");
            let r = if reads.is_empty() {
                self.destage_write_phase(now, id)
            } else {
                self.destage_submit(now, id, &reads)
            };
            // Give the plan's vector back so it keeps its capacity.
            reads.clear();
            self.wb.as_mut().expect("present").plan.ops = reads;
            r?;
        }
    }

    /// Queue the write phase of destage `id` (its writes vector keeps its capacity).
    fn destage_write_phase(&mut self, now: u64, id: u32) -> Result<()> {
        let wb = self.wb.as_mut().expect("present");
        let mut writes = std::mem::take(&mut wb.flights[id as usize].writes);
        let r = self.destage_submit(now, id, &writes);
        writes.clear();
        self.wb.as_mut().expect("present").flights[id as usize].writes = writes;
        r
    }

    /// Queue one phase of destage `id`.
    fn destage_submit(&mut self, now: u64, id: u32, ops: &[DiskOp]) -> Result<()> {
        let wb = self.wb.as_mut().expect("present");
        wb.flights[id as usize].pending = ops.len() as u32;
        // The paper's md set-up had no priority: destages then compete with user I/O in one
        // class (one C-LOOK sweep), instead of waiting below it.
        let class = if wb.spec.destage_as_user {
            Class::Foreground
        } else {
            Class::Destage
        };
        for op in ops {
            self.submit_op(now, op, class, Owner::Destage(id))?;
        }
        Ok(())
    }

    /// One disk operation of destage `id` completed at `now`.
    pub(super) fn destage_op_done(&mut self, now: u64, id: u32) -> Result<()> {
        let wb = self.wb.as_mut().expect("destages need a write cache");
        let f = &mut wb.flights[id as usize];
        debug_assert!(f.pending > 0);
        f.pending -= 1;
        if f.pending > 0 {
            return Ok(());
        }
        if !f.writes.is_empty() {
            return self.destage_write_phase(now, id);
        }
        // The destage is complete: free its pages and admit waiting writes.
        let group = f.group;
        wb.integrate(now);
        self.unified_destaging(group);
        let wb = self.wb.as_mut().expect("present");
        let freed = wb.cache.finish_destage(group);
        wb.row_destaged += u64::from(freed);
        wb.free.push(id);
        self.unified_destaged();
        self.admit_waiting(now)?;
        self.pump(now)
    }

    /// Let waiting writes into the space freed, in arrival order.
    pub(super) fn admit_waiting(&mut self, now: u64) -> Result<()> {
        loop {
            let wb = self.wb.as_mut().expect("present");
            let Some(w) = wb.waiting.front_mut() else {
                self.end_stall(now);
                return Ok(());
            };
            w.next = absorb(
                &mut wb.cache,
                &mut self.unified,
                self.policy.as_mut(),
                &mut self.evicted,
                w.first,
                w.next,
                w.end,
            );
            if w.next < w.end {
                if wb.cache.backup().can_accept(w.next) {
                    self.end_stall(now);
                } else {
                    self.stall(now, false);
                }
                return Ok(());
            }
            let w = wb.waiting.pop_front().expect("front exists");
            wb.m.waited_writes += 1;
            wb.m.wait_ns += now - w.arrival_ns;
            self.done_after(now, w.slot, self.spec.controller.hit_ns)?;
        }
    }

    /// Called when no event is left: start destaging everything still dirty (once, with
    /// `drain = true`). `true` when destages were started.
    pub(super) fn drain_write_cache(&mut self, now: u64) -> Result<bool> {
        let Some(wb) = self.wb.as_mut() else {
            return Ok(false);
        };
        if !wb.spec.drain || wb.drain_from.is_some() || wb.cache.occupied() == 0 {
            return Ok(false);
        }
        debug_assert!(wb.waiting.is_empty() && wb.cache.inflight() == 0);
        wb.drain_from = Some(now);
        wb.cache.drain();
        self.pump(now)?;
        Ok(true)
    }

    /// Store the write cache's metrics; returns the time the run's disks and series end at
    /// (the last event: after the final drain, or `user_end`).
    pub(super) fn write_cache_metrics(&mut self, user_end: u64) -> u64 {
        let Some(wb) = self.wb.as_mut() else {
            return user_end;
        };
        let end = user_end.max(wb.last_ns);
        if !wb.read_cache() {
            // No read cache ran (the `[cache]` the config carries is a placeholder).
            self.m.count.capacity = 0;
        }
        self.m.write_cache = Some(wb.metrics(end, user_end));
        end
    }
}

#[cfg(test)]
mod tests;
