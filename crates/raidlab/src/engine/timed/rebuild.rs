//! The rebuild process in the timed engine: hot spares, the running rebuild's order and
//! executor (`crate::rebuild`, sans-IO), and the disk I/O they ask for.
//!
//! Devices `0..members` are the array's members, `members..members + spares` its hot spares.
//! When a rebuild of member `d` starts, `d`'s operations go to the spare's device from then
//! on: only rows already rebuilt are planned onto `d` (see `array/mode.rs`), so the
//! replacement is read (redirection) and written (user writes to rebuilt rows, rebuild
//! writes) while the failed device gets nothing new. When every unit is written the member is
//! normal again, on the spare's device.
//!
//! Rebuild operations are queued in the `rebuild` class, below user I/O. One rebuild runs at
//! a time; a rebuild event while one runs waits for it (RAID-6 with two failed disks rebuilds
//! them one after the other).
//!
//! A simplification: a user write to a row whose rebuild reads are in flight does not
//! restart that row's rebuild (no data is moved, so only the timing could differ).

use std::collections::VecDeque;

use super::events::Kind;
use super::Sim;
use crate::array::{Array, Plan};
use crate::config::Experiment;
use crate::disk::{Class, DiskIo, SECTOR_BYTES};
use crate::error::{Error, Result};
use crate::metrics::{RebuildMetrics, RebuildRecord, WindowCounts};
use crate::rebuild::{
    order::Order, reads_for, Action, Ctx, Dor, ExecutorSpec, RebuildSpec, Sor, Survivors, Throttle,
};
use crate::workload::Op;

/// Who a disk operation belongs to (stored per disk-operation token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Owner {
    /// A user request's slot.
    User(u32),
    /// An entry of the rebuild's operation table.
    Rebuild(u32),
    /// A write-cache destage in flight (`destage.rs`).
    Destage(u32),
    /// A transfer of the backup's cache disk (`backup.rs`).
    Backup(u32),
}

#[derive(Debug, Clone, Copy)]
enum OpKind {
    /// A rebuild read at this member of this many units.
    Read(u32, u32),
    /// A write of this many units to the replacement.
    Write(u32),
    /// A piggybacked write of a unit a user read reconstructed.
    Piggyback,
}

impl OpKind {
    /// The disk operation and the units it spans.
    fn io(self) -> (Op, u64) {
        match self {
            OpKind::Read(_, n) => (Op::Read, u64::from(n)),
            OpKind::Write(n) => (Op::Write, u64::from(n)),
            OpKind::Piggyback => (Op::Write, 1),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct RebuildOp {
    job: u64,
    unit: u64,
    kind: OpKind,
}

#[derive(Debug)]
enum Executor {
    Dor(Dor),
    Sor(Sor),
}

/// The rebuild in progress.
#[derive(Debug)]
struct Active {
    disk: u32,
    spare_dev: u32,
    units: u64,
    order: Order,
    exec: Executor,
    throttle: Throttle,
    /// Index of its record in the metrics.
    record: usize,
}

/// The survivors of a rebuilding member in the array's current state.
struct ArraySurvivors<'a> {
    array: &'a Array,
    failed: u32,
}

impl Survivors for ArraySurvivors<'_> {
    fn disks(&self) -> u32 {
        self.array.spec().disks
    }
    #[inline]
    fn reads(&self, unit: u64, disk: u32) -> bool {
        reads_for(
            self.array.geometry(),
            |d| self.array.lost(d, unit),
            self.failed,
            unit,
            disk,
        )
    }
}

/// Rebuild state of a timed run (inert without `[rebuild]`).
#[derive(Debug)]
pub(super) struct Rebuilder {
    spec: Option<RebuildSpec>,
    members: u32,
    /// Device of each member (a rebuilt member lives on its spare's device).
    member_dev: Vec<u32>,
    spare_used: Vec<bool>,
    active: Option<Active>,
    /// Rebuild events waiting for the running rebuild: (disk, spare).
    waiting: VecDeque<(u32, Option<u32>)>,
    /// When each member last failed.
    failed_ns: Vec<u64>,
    ops: Vec<RebuildOp>,
    free_ops: Vec<u32>,
    actions: Vec<Action>,
    /// The last request whose read of the rebuilding disk PRO was told of, and the unit.
    last_told: (u64, u64),
    /// Units the request being looked up reconstructs whole, to write to the replacement.
    staged: Vec<u64>,
    /// (request slot, unit) piggybacked writes waiting for their request's reads.
    piggy: Vec<(u32, u64)>,
    pub(super) metrics: RebuildMetrics,
}

impl Rebuilder {
    /// Devices of the run: members plus spares.
    pub(super) fn new(exp: &Experiment, members: u32) -> Rebuilder {
        let spares = exp.rebuild.as_ref().map_or(0, |r| r.spares);
        let metrics = RebuildMetrics {
            level: exp.array.as_ref().map(|a| a.level),
            disks: members,
            mttf_hours: exp.rebuild.as_ref().map_or(0.0, |r| r.mttf_hours),
            ..RebuildMetrics::default()
        };
        Rebuilder {
            spec: exp.rebuild.clone(),
            members,
            member_dev: (0..members).collect(),
            spare_used: vec![false; spares as usize],
            active: None,
            waiting: VecDeque::new(),
            failed_ns: vec![0; members as usize],
            ops: Vec::new(),
            free_ops: Vec::new(),
            actions: Vec::new(),
            last_told: (u64::MAX, 0),
            staged: Vec::new(),
            piggy: Vec::new(),
            metrics,
        }
    }

    pub(super) fn devices(&self) -> u32 {
        self.members + self.spare_used.len() as u32
    }

    pub(super) fn enabled(&self) -> bool {
        self.spec.is_some()
    }

    /// The device that serves member `disk` now.
    #[inline]
    pub(super) fn dev_of(&self, disk: u32) -> usize {
        self.member_dev[disk as usize] as usize
    }

    /// Usable sectors of a device: its capacity, or the configured extent.
    pub(super) fn usable_sectors(&self, capacity_sectors: u64) -> u64 {
        let extent = self
            .spec
            .as_ref()
            .and_then(|s| s.extent_bytes)
            .map_or(u64::MAX, |b| b / SECTOR_BYTES);
        capacity_sectors.min(extent)
    }

    pub(super) fn failed(&mut self, now: u64, disk: u32) {
        self.failed_ns[disk as usize] = now;
    }

    /// A user request (number `request`) misses logical block `lba`, planned in `plan`. Tells
    /// PRO's Access Monitor (once per unit per request) and, with piggybacking, turns the
    /// reconstruction of a unit not yet rebuilt into reads of the whole unit, staging the
    /// unit's write to the replacement.
    #[inline]
    pub(super) fn user_read(&mut self, array: &Array, request: u64, lba: u64, plan: &mut Plan) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let loc = array.locate(lba);
        if loc.disk != a.disk {
            return;
        }
        let bpu = array.blocks_per_stripe_unit();
        let unit = loc.block / u64::from(bpu);
        if self.last_told == (request, unit) {
            return;
        }
        self.last_told = (request, unit);
        a.order.user_read(unit);
        let piggyback = self.spec.as_ref().is_some_and(|s| s.piggyback);
        if piggyback && array.lost(a.disk, unit) && a.order.take(unit) {
            for op in &mut plan.ops {
                op.block = unit * u64::from(bpu);
                op.count = bpu;
            }
            self.staged.push(unit);
        }
    }

    /// The request being issued got `slot`.
    #[inline]
    pub(super) fn bind(&mut self, slot: u32) {
        for unit in self.staged.drain(..) {
            self.piggy.push((slot, unit));
        }
    }

    /// A user operation to member `disk`: counts redirected reads.
    #[inline]
    pub(super) fn user_op(&mut self, disk: u32, op: Op) {
        if let Some(a) = &self.active {
            if a.disk == disk && op == Op::Read {
                self.metrics.records[a.record].redirected_reads += 1;
            }
        }
    }

    /// A user request that arrived at `arrival_ns` took `latency_ns`.
    #[inline]
    pub(super) fn user_done(&mut self, arrival_ns: u64, latency_ns: u64) {
        if !self.enabled() {
            // The metrics are reported only with `[rebuild]`.
            return;
        }
        let m = &mut self.metrics;
        let Some(first) = m.records.first() else {
            m.before.record(latency_ns);
            return;
        };
        if arrival_ns < first.start_ns {
            m.before.record(latency_ns);
        } else if self.active.is_some()
            || m.records
                .iter()
                .any(|r| r.end_ns.is_none_or(|e| arrival_ns < e))
        {
            m.during.record(latency_ns);
        } else {
            m.after.record(latency_ns);
        }
    }
}

impl Sim<'_> {
    /// Turn the config's `rebuild` events into engine events: they issue disk I/O, so they
    /// must fire in time order with the disks' completions (failures are applied before any
    /// engine event at the same time, so a rebuild at a failure's time sees it).
    pub(super) fn schedule_rebuilds(&mut self) {
        for (i, ev) in self.spec.events.iter().enumerate() {
            if let crate::config::Action::Rebuild { .. } = ev.action {
                self.events.push(ev.at_ns, Kind::RebuildStart, i as u32, 0);
            }
        }
    }

    /// The `rebuild` event `index` of `[[events]]` fires.
    pub(super) fn rebuild_start_event(&mut self, now: u64, index: u32) -> Result<()> {
        let crate::config::Action::Rebuild { disk, spare } =
            self.spec.events[index as usize].action
        else {
            unreachable!("only rebuild events are scheduled as RebuildStart");
        };
        self.rebuild_event(now, disk, spare)
    }

    /// A `rebuild` event: start now, or after the running rebuild.
    fn rebuild_event(&mut self, now: u64, disk: u32, spare: Option<u32>) -> Result<()> {
        if self.rebuild.active.is_some() {
            self.rebuild.waiting.push_back((disk, spare));
            return Ok(());
        }
        self.rebuild_start(now, disk, spare)
    }

    fn rebuild_start(&mut self, now: u64, disk: u32, spare: Option<u32>) -> Result<()> {
        // The window's counters start here; `unit_rebuilt` turns them into differences. The
        // config puts every rebuild at or after the warm-up, whose end resets them first.
        self.end_warmup(now);
        let window = window_counts(&self.m.count, &mut self.devices, now);
        let r = &mut self.rebuild;
        let spec = r
            .spec
            .as_ref()
            .ok_or_else(|| Error::config("rebuild", "a rebuild event needs [rebuild]"))?;
        // Spares were checked against the events when the config was loaded.
        let spare = match spare {
            Some(s) => s,
            None => r
                .spare_used
                .iter()
                .position(|u| !u)
                .ok_or_else(|| Error::config("rebuild.spares", "no free hot spare"))?
                as u32,
        };
        r.spare_used[spare as usize] = true;
        let spare_dev = r.members + spare;
        let array = self.array.as_mut().expect("a rebuild needs an array");
        let bpu = u64::from(array.blocks_per_stripe_unit());
        let unit_sectors = bpu * self.sectors_per_block;
        let usable = self.capacity_sectors.iter().copied().min().unwrap_or(0);
        let units = usable / unit_sectors;
        if units == 0 || units > u64::from(u32::MAX) * 64 {
            return Err(Error::config(
                "rebuild.extent_gib",
                format!("a member of {usable} sectors holds no whole stripe unit to rebuild"),
            ));
        }
        array.start_rebuild(disk, units, spec.redirect, "rebuild")?;
        r.member_dev[disk as usize] = spare_dev;
        let exec = match spec.executor {
            ExecutorSpec::Dor {
                buffers,
                depth,
                read_units,
            } => Executor::Dor(Dor::new(r.members, buffers, depth, read_units)),
            ExecutorSpec::Sor { stripes } => Executor::Sor(Sor::new(stripes)),
        };
        r.metrics.records.push(RebuildRecord {
            disk,
            spare,
            units,
            unit_bytes: unit_sectors * SECTOR_BYTES,
            failed_ns: r.failed_ns[disk as usize],
            start_ns: now,
            window,
            ..RebuildRecord::default()
        });
        r.active = Some(Active {
            disk,
            spare_dev,
            units,
            order: spec.order.build(units),
            exec,
            throttle: Throttle::new(spec.rate, now),
            record: r.metrics.records.len() - 1,
        });
        self.sampler.rebuild_progress = Some(0.0);
        self.rebuild_pump(now)
    }

    /// The read phase of user request `slot` is over: write the units it reconstructed
    /// for piggybacking.
    pub(super) fn rebuild_reads_done(&mut self, now: u64, slot: u32) -> Result<()> {
        if self.rebuild.piggy.is_empty() {
            return Ok(());
        }
        let mut i = 0;
        // Bounded by the units staged by requests in flight.
        while i < self.rebuild.piggy.len() {
            let (s, unit) = self.rebuild.piggy[i];
            if s != slot {
                i += 1;
                continue;
            }
            self.rebuild.piggy.swap_remove(i);
            let a = self
                .rebuild
                .active
                .as_ref()
                .expect("a staged unit is not yet rebuilt");
            let (spare_dev, record) = (a.spare_dev as usize, a.record);
            self.rebuild.metrics.records[record].piggybacked += 1;
            self.rebuild_submit(now, spare_dev, unit, OpKind::Piggyback, 0);
        }
        Ok(())
    }

    /// A rate-control wake-up.
    pub(super) fn rebuild_wake(&mut self, now: u64) -> Result<()> {
        self.rebuild_pump(now)
    }

    /// Ask the executor what to start now and start it.
    fn rebuild_pump(&mut self, now: u64) -> Result<()> {
        let Some(a) = self.rebuild.active.as_mut() else {
            return Ok(());
        };
        let array = self.array.as_ref().expect("a rebuild needs an array");
        let survivors = ArraySurvivors {
            array,
            failed: a.disk,
        };
        let unit_bytes = self.rebuild.metrics.records[a.record].unit_bytes;
        let mut ctx = Ctx {
            now_ns: now,
            busy: self.outstanding > 0,
            order: &mut a.order,
            survivors: &survivors,
            throttle: &mut a.throttle,
            unit_bytes,
        };
        let mut actions = std::mem::take(&mut self.rebuild.actions);
        actions.clear();
        match &mut a.exec {
            Executor::Dor(d) => d.pump(&mut ctx, &mut actions),
            Executor::Sor(s) => s.pump(&mut ctx, &mut actions),
        }
        let r = self.rebuild_issue(now, &actions);
        self.rebuild.actions = actions;
        r
    }

    /// Start the executor's actions.
    fn rebuild_issue(&mut self, now: u64, actions: &[Action]) -> Result<()> {
        let Some(a) = self.rebuild.active.as_ref() else {
            return Ok(());
        };
        let (disk, spare_dev, record) = (a.disk, a.spare_dev, a.record);
        for &act in actions {
            let (dev, unit, kind, job) = match act {
                Action::Read {
                    disk: d,
                    unit,
                    count,
                    job,
                } => (self.rebuild.dev_of(d), unit, OpKind::Read(d, count), job),
                Action::Write { unit, count, job } => {
                    (spare_dev as usize, unit, OpKind::Write(count), job)
                }
                Action::WakeAt(t) => {
                    self.events.push(t.max(now), Kind::RebuildWake, 0, 0);
                    continue;
                }
            };
            debug_assert!(dev != disk as usize, "rebuild I/O on the failed device");
            let rec = &mut self.rebuild.metrics.records[record];
            match kind {
                OpKind::Read(..) => rec.reads += 1,
                _ => rec.writes += 1,
            }
            self.rebuild_submit(now, dev, unit, kind, job);
        }
        Ok(())
    }

    /// Queue one rebuild operation `kind` from `unit` at device `dev`.
    fn rebuild_submit(&mut self, now: u64, dev: usize, unit: u64, kind: OpKind, job: u64) {
        let bpu = u64::from(
            self.array
                .as_ref()
                .expect("a rebuild needs an array")
                .blocks_per_stripe_unit(),
        );
        let sectors = bpu * self.sectors_per_block;
        let (op, units) = kind.io();
        let entry = RebuildOp { job, unit, kind };
        let tag = match self.rebuild.free_ops.pop() {
            Some(t) => {
                self.rebuild.ops[t as usize] = entry;
                t
            }
            None => {
                self.rebuild.ops.push(entry);
                (self.rebuild.ops.len() - 1) as u32
            }
        };
        let io = DiskIo {
            op,
            sector: unit * sectors,
            sectors: (units * sectors) as u32,
        };
        let token = self.alloc_token(dev, Owner::Rebuild(tag));
        let as_user = self.rebuild.spec.as_ref().is_some_and(|s| s.as_user);
        let class = if as_user {
            Class::Foreground
        } else {
            Class::Rebuild
        };
        self.devices[dev].submit(now, io, class, token);
        self.start_disk(now, dev);
    }

    /// A rebuild operation (table entry `tag`) completed at `now`.
    pub(super) fn rebuild_done(&mut self, now: u64, tag: u32) -> Result<()> {
        let op = self.rebuild.ops[tag as usize];
        self.rebuild.free_ops.push(tag);
        if let OpKind::Piggyback = op.kind {
            self.unit_rebuilt(now, op.unit)?;
            return self.rebuild_pump(now);
        }
        let Some(a) = self.rebuild.active.as_mut() else {
            return Ok(());
        };
        let mut actions = std::mem::take(&mut self.rebuild.actions);
        actions.clear();
        let rebuilt = match (op.kind, &mut a.exec) {
            (OpKind::Read(d, n), Executor::Dor(x)) => {
                x.read_done(d, op.job, n);
                0
            }
            (OpKind::Read(..), Executor::Sor(x)) => {
                x.read_done(op.job, &mut actions);
                0
            }
            (OpKind::Write(n), Executor::Dor(x)) => {
                x.write_done(op.job, n);
                n
            }
            (OpKind::Write(n), Executor::Sor(x)) => {
                debug_assert_eq!(n, 1);
                x.write_done(op.job);
                n
            }
            (OpKind::Piggyback, _) => unreachable!("handled above"),
        };
        let r = self.rebuild_issue(now, &actions);
        self.rebuild.actions = actions;
        r?;
        for unit in op.unit..op.unit + u64::from(rebuilt) {
            self.unit_rebuilt(now, unit)?;
        }
        self.rebuild_pump(now)
    }

    /// `unit` of the rebuilding disk is on the replacement.
    fn unit_rebuilt(&mut self, now: u64, unit: u64) -> Result<()> {
        let a = self.rebuild.active.as_ref().expect("a rebuild is running");
        let (disk, units, record) = (a.disk, a.units, a.record);
        let array = self.array.as_mut().expect("a rebuild needs an array");
        array.mark_rebuilt(disk, unit);
        let done = array.rebuilding(disk).map_or(0, |m| m.count());
        let rec = &mut self.rebuild.metrics.records[record];
        rec.rebuilt = done;
        self.sampler.rebuild_progress = Some(done as f64 / units as f64);
        if done < units {
            return Ok(());
        }
        // Redundancy is restored.
        array.finish_rebuild(disk);
        rec.end_ns = Some(now);
        let end = window_counts(&self.m.count, &mut self.devices, now);
        let rec = &mut self.rebuild.metrics.records[record];
        rec.window = WindowCounts::since(&end, &rec.window);
        if let Order::Pro(p) = &a.order {
            let st = p.stats();
            rec.decisions = st.decisions;
            rec.hot_decisions = st.hot_decisions;
            rec.zones_created = st.zones_created;
        }
        self.rebuild.active = None;
        self.rebuild_end_ns = now;
        if let Some((disk, spare)) = self.rebuild.waiting.pop_front() {
            self.rebuild_start(now, disk, spare)?;
        }
        Ok(())
    }
}

/// The counters a rebuild window is measured with, as they stand at `now`.
fn window_counts(
    m: &crate::metrics::CountMetrics,
    devices: &mut [crate::disk::Device],
    now: u64,
) -> WindowCounts {
    WindowCounts {
        lookups: m.lookups,
        hits: m.hits,
        miss_disk_blocks: m.miss_disk_blocks,
        busy_ns: devices.iter_mut().map(|d| d.stats(now).busy_ns).collect(),
    }
}
