//! Timed mode: a deterministic discrete-event simulation of the controller in time.
//!
//! A user request is split into cache blocks and looked up in the read cache when it arrives
//! (so its hits and misses are exactly those of counting mode for the same order of
//! arrivals). A request served wholly from cache completes after the controller's hit
//! overhead. Otherwise the array's planner turns its misses (and, for a write, the
//! write-through plan) into per-disk operations: the reads are issued in parallel, then the
//! writes; the request completes `controller.miss_us` after its last operation. Disks are
//! [`Device`]s (queue + drive + timing model); failure events switch the array to degraded
//! mode mid-run.
//!
//! Simplifications, documented where they matter: a block inserted on a miss counts as
//! cached from the moment of the miss (a second request for it before the disk read returns
//! is a hit); a write never reads the blocks it overwrites (only its plan's reads); operations
//! already queued at a disk when it fails still complete.
//!
//! Time is integer nanoseconds; events fire by (time, insertion order), see `events.rs`.
//! Nothing is allocated per event once the pools have grown to the run's peak.

mod ahead;
// Public so the store's replay issues requests at the very arrival times a timed run uses.
pub mod arrivals;
mod backup;
#[cfg(test)]
mod backup_tests;
mod cachefail;
#[cfg(test)]
mod cachefail_tests;
mod destage;
mod events;
#[cfg(test)]
mod golden_tests;
mod rebuild;
#[cfg(test)]
mod rebuild_tests;
mod rowlock;
mod sample;
#[cfg(test)]
mod tests;
mod unified;
mod user;
#[cfg(test)]
mod variants_tests;

use std::time::Instant;

use crate::array::{Array, DiskOp, Plan};
use crate::cache::read::{self, ReadPolicy, Units};
use crate::config::{Action, Arrivals, Driver, Experiment, TimedSpec};
use crate::disk::{Class, Device, DiskIo, SECTOR_BYTES};
use crate::error::{Error, Result};
use crate::metrics::{DiskMetrics, TimedMetrics};
use crate::workload::{Addressing, Request};

use super::count::{self, Prepass, PROGRESS_EVERY};
use ahead::Ahead;
use arrivals::Schedule;
use destage::WriteBack;
use events::{EventQueue, Kind};
use rebuild::{Owner, Rebuilder};
use sample::Sampler;

/// A user request in flight.
#[derive(Debug, Default)]
struct Slot {
    arrival_ns: u64,
    is_read: bool,
    /// Disk operations of the current phase not yet completed.
    pending: u32,
    /// The write phase of a write-through plan, issued when the read phase is done (the
    /// vector keeps its capacity when the slot is reused).
    writes: Vec<DiskOp>,
    /// Ramp level whose measured window the request arrived in.
    level: Option<u32>,
    /// A write-through write's blocks (first, count), the stripe rows it holds or is
    /// taking (first, last; `rowlock.rs`), and when it began to wait for one.
    span: (u64, u64),
    rows: Option<(u64, u64)>,
    waiting_since_ns: Option<u64>,
}

/// Everything a timed run moves.
struct Sim<'e> {
    exp: &'e Experiment,
    spec: &'e TimedSpec,
    policy: Box<dyn ReadPolicy>,
    array: Option<Array>,
    devices: Vec<Device>,
    /// Each device's capacity, read once (every operation is checked against it).
    capacity_sectors: Vec<u64>,
    sectors_per_block: u64,
    events: EventQueue,
    /// Whether device completions are bounded events (`events.rs`): every device serves one
    /// operation at a time and there are few enough of them.
    disk_bounded: bool,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    /// Owner of each disk-operation token, per device (tokens are per device so each
    /// device's table stays as small as its own peak of operations).
    op_owner: Vec<Vec<Owner>>,
    free_ops: Vec<Vec<u32>>,
    plan: Plan,
    acc: Plan,
    evicted: Vec<u64>,
    /// The cache's logical clock (one tick per block access), as in counting mode.
    tick: u64,
    outstanding: u64,
    m: TimedMetrics,
    sampler: Sampler,
    next_event: usize,
    /// The workload, drawn a few requests ahead for the read cache's prefetch (`ahead.rs`).
    src: Ahead,
    addressing: Addressing,
    schedule: Option<Schedule>,
    /// The load last told to the source (ramp levels; 0 before the first).
    load_iops: f64,
    /// The request waiting for its arrival event (open loop and ramp).
    next_req: Option<Request>,
    /// No more requests are issued (source exhausted, duration reached, ramp over).
    stopped: bool,
    /// Request count at which progress is next reported.
    progress_mark: u64,
    /// Ramp levels checked for saturation so far.
    ramp_checked: usize,
    /// Hot spares and the running rebuild (`rebuild.rs`).
    rebuild: Rebuilder,
    /// Time of the last rebuild completion (the run may outlast its last user request).
    rebuild_end_ns: u64,
    /// The write-back cache and its destages (`[write_cache]`, `destage.rs`).
    wb: Option<WriteBack>,
    /// The backup's cache disk (`[backup]` with RAPID, `backup.rs`).
    log: Option<backup::LogDisk>,
    /// Failures of the write cache's copies (`fail_cache` events, `cachefail.rs`).
    cf: Option<cachefail::CacheFail>,
    /// The bound of a unified read/write cache (`write_cache.unified`, `unified.rs`).
    unified: Option<crate::cache::write::unified::Unified>,
    /// Rows held by write-through writes (`controller.row_locks`), and the rows a release
    /// just handed to waiters (scratch).
    row_locks: rowlock::RowLocks,
    handed: Vec<(u32, u64)>,
}

/// Run one experiment in timed mode. `progress(requests_since_last_call)` is called every
/// [`PROGRESS_EVERY`] requests; returning `false` cancels the run.
pub fn run(
    exp: &Experiment,
    pre: Option<Prepass>,
    workload_thread: bool,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<TimedMetrics> {
    let spec = exp
        .timed
        .as_ref()
        .ok_or_else(|| Error::config("run.mode", "expected \"timed\""))?;
    let started = Instant::now();
    let mut sim = Sim::new(exp, spec, pre, workload_thread)?;
    sim.start()?;
    let mut now = 0;
    loop {
        while let Some(e) = sim.events.pop() {
            // Closing intervals and applying config events push no engine events, so doing
            // it after the pop sees the same queue.
            now = e.time_ns;
            sim.advance_to(now)?;
            sim.m.events += 1;
            match e.kind {
                Kind::Arrival => sim.arrival(now)?,
                Kind::DiskDone => sim.disk_done(now, e.a, e.b)?,
                Kind::RequestDone => sim.finish(now, e.a)?,
                Kind::RebuildStart => sim.rebuild_start_event(now, e.a)?,
                Kind::RebuildWake => sim.rebuild_wake(now)?,
                Kind::CacheFail => sim.cache_fail_event(now, e.a)?,
            }
            sim.cache_fail_poll(now);
            if sim.m.count.requests >= sim.progress_mark {
                sim.progress_mark += PROGRESS_EVERY;
                if !progress(PROGRESS_EVERY) {
                    return Err(Error::Cancelled);
                }
            }
        }
        // Nothing left to happen: the write cache destages what it still holds, once.
        if !sim.drain_write_cache(now)? {
            break;
        }
    }
    progress(sim.m.count.requests % PROGRESS_EVERY);
    Ok(sim.finish_run(started))
}

impl<'e> Sim<'e> {
    fn new(
        exp: &'e Experiment,
        spec: &'e TimedSpec,
        pre: Option<Prepass>,
        workload_thread: bool,
    ) -> Result<Sim<'e>> {
        let (capacity, pre) = count::resolve_capacity(exp, pre)?;
        let policy = read::build_in(&exp.cache.policy, capacity, Units::Blocks)?;
        let array = exp.array.as_ref().map(Array::new).transpose()?;
        let members = array.as_ref().map_or(1, |a| a.spec().disks);
        let rebuild = Rebuilder::new(exp, members);
        let disks = members as usize;
        let devices = (0..rebuild.devices() as usize + backup::extra_devices(exp))
            .map(|_| Ok(Device::new(spec.disk.build()?, spec.queue)))
            .collect::<Result<Vec<_>>>()?;
        let mut capacity_sectors: Vec<u64> = devices
            .iter()
            .map(|d| rebuild.usable_sectors(d.model().capacity_sectors()))
            .collect();
        let log = backup::LogDisk::new(
            exp,
            &mut capacity_sectors,
            members,
            rebuild.devices() as usize,
        )?;
        let cf = cachefail::CacheFail::new(exp, spec, &mut capacity_sectors, members)?;
        let n_devices = devices.len();
        let disk_bounded =
            n_devices < events::NEAR_MAX && devices.iter().all(|d| d.model().parallelism() == 1);
        // One completion per device, one arrival of the open loop or ramp.
        let bounded_sources = if disk_bounded { n_devices } else { 0 } + 1;
        let mut m = TimedMetrics::default();
        m.count.disk_reads = vec![0; disks];
        m.count.disk_writes = vec![0; disks];
        m.count.capacity = capacity;
        m.count.footprint_blocks = pre.map(|p| p.footprint_blocks);
        m.count.cold_miss_disk_blocks = pre.map(|p| p.cold_miss_disk_blocks);
        // A ramp's stream may change with each level's load: it is drawn where it is used.
        let ramp = matches!(spec.driver, Driver::Ramp { .. });
        // An open loop at a Poisson rate scales the workload's streams to it, before the
        // first request is drawn.
        let load = match spec.driver {
            Driver::Open {
                arrivals: Arrivals::Poisson { iops },
            } => Some(iops),
            _ => None,
        };
        let src = super::open_workload(&exp.workload, workload_thread && !ramp, load)?;
        let addressing = src.addressing();
        Ok(Sim {
            exp,
            spec,
            policy,
            array,
            sectors_per_block: u64::from(exp.workload.block_size) / SECTOR_BYTES,
            sampler: Sampler::new(spec.interval_ns, devices.len()),
            capacity_sectors,
            devices,
            events: EventQueue::with_capacity(1024, bounded_sources),
            disk_bounded,
            slots: Vec::new(),
            free_slots: Vec::new(),
            op_owner: vec![Vec::new(); n_devices],
            free_ops: vec![Vec::new(); n_devices],
            plan: Plan::default(),
            acc: Plan::default(),
            evicted: Vec::with_capacity(64),
            tick: 0,
            outstanding: 0,
            m,
            next_event: 0,
            // No drawing ahead for a ramp either.
            src: Ahead::new(src, !ramp),
            addressing,
            schedule: Schedule::new(&spec.driver, exp.run.seed),
            load_iops: 0.0,
            next_req: None,
            stopped: false,
            progress_mark: PROGRESS_EVERY,
            ramp_checked: 0,
            rebuild,
            rebuild_end_ns: 0,
            wb: WriteBack::new(exp, spec, disks)?,
            log,
            cf,
            unified: unified::build(exp),
            row_locks: rowlock::RowLocks::default(),
            handed: Vec::new(),
        })
    }

    /// Issue the first requests: the closed loop's population, or the first arrival.
    fn start(&mut self) -> Result<()> {
        if let Some(s) = &self.schedule {
            self.sampler.set_levels(s.levels());
        }
        if self.rebuild.enabled() {
            self.sampler.rebuild_progress = Some(0.0);
        }
        self.schedule_rebuilds();
        self.schedule_cache_failures();
        match self.spec.driver {
            Driver::Closed { outstanding, .. } => {
                for _ in 0..outstanding {
                    if !self.issue_next(0)? {
                        break;
                    }
                }
            }
            _ => self.schedule_arrival()?,
        }
        Ok(())
    }

    /// Before handling an event at `t`: close the time-series intervals and apply the
    /// configured events due by then (config events at the same nanosecond as an engine
    /// event come first).
    fn advance_to(&mut self, t: u64) -> Result<()> {
        self.sampler
            .advance(t, &mut self.devices, self.outstanding, &mut self.m.series);
        if let Some(wb) = self.wb.as_mut() {
            wb.advance(t);
        }
        while let Some(ev) = self.spec.events.get(self.next_event) {
            if ev.at_ns > t {
                break;
            }
            self.next_event += 1;
            match ev.action {
                Action::Fail(disk) => {
                    // Validated against the same sequence of failures at config time.
                    let array = self.array.as_mut().expect("events need an array");
                    array.fail(disk)?;
                    self.m.failures.push((ev.at_ns, disk));
                    self.rebuild.failed(ev.at_ns, disk);
                }
                // Scheduled as engine events (`Kind::RebuildStart`, `Kind::CacheFail`): they
                // issue I/O.
                Action::Rebuild { .. } | Action::FailCache(_) => {}
            }
        }
        Ok(())
    }

    /// Read the next request and schedule its arrival (open loop and ramp).
    fn schedule_arrival(&mut self) -> Result<()> {
        if self.stopped {
            return Ok(());
        }
        let schedule = self.schedule.as_mut().expect("open loop has a schedule");
        let (req, t) = if let Some(t) = schedule.next_ramp() {
            // A ramp's time comes first: the request is drawn at its level's load (a
            // generator whose streams scale with load needs it).
            let Some(t) = t else {
                self.stopped = true;
                return Ok(());
            };
            let iops = schedule.level_iops();
            if iops != self.load_iops {
                self.load_iops = iops;
                self.src.set_load(iops)?;
            }
            let Some(req) = self.draw()? else {
                self.stopped = true;
                return Ok(());
            };
            (req, t)
        } else {
            let Some(req) = self.draw()? else {
                self.stopped = true;
                return Ok(());
            };
            let schedule = self.schedule.as_mut().expect("open loop has a schedule");
            let Some(t) = schedule.next(req.time_ns) else {
                self.stopped = true;
                return Ok(());
            };
            (req, t)
        };
        if self.spec.duration_ns.is_some_and(|d| t >= d) {
            self.stopped = true;
            return Ok(());
        }
        // A ramp stops once a finished level fell behind its offered load.
        while self.sampler.level_over(self.ramp_checked, t) {
            if self.sampler.fell_behind(self.ramp_checked) {
                self.stopped = true;
                return Ok(());
            }
            self.ramp_checked += 1;
        }
        self.next_req = Some(req);
        // One arrival at a time: the next is scheduled when this one fires.
        self.events.push_bounded(t, Kind::Arrival, 0, 0);
        Ok(())
    }

    /// The workload's next request (`Ok(None)` at its end).
    #[inline]
    fn draw(&mut self) -> Result<Option<Request>> {
        let (exp, addressing) = (self.exp, self.addressing);
        self.src
            .next_request(self.policy.as_ref(), |r| exp.workload.span(r, addressing))
    }

    /// An arrival event: the open loop's scheduled request, or a closed-loop thread's next.
    fn arrival(&mut self, now: u64) -> Result<()> {
        match self.spec.driver {
            Driver::Closed { .. } => {
                self.issue_next(now)?;
            }
            _ => {
                let req = self.next_req.take().expect("an arrival has its request");
                self.issue(now, &req)?;
                self.schedule_arrival()?;
            }
        }
        Ok(())
    }

    /// Closed loop: issue the next request of the stream now; `false` when there is none.
    fn issue_next(&mut self, now: u64) -> Result<bool> {
        if self.stopped || self.spec.duration_ns.is_some_and(|d| now >= d) {
            self.stopped = true;
            return Ok(false);
        }
        match self.draw()? {
            Some(req) => {
                self.issue(now, &req)?;
                Ok(true)
            }
            None => {
                self.stopped = true;
                Ok(false)
            }
        }
    }

    /// Start whatever disk `disk` can start now.
    fn start_disk(&mut self, now: u64, disk: usize) {
        // `may_start` is false exactly when `start` would answer `None` without any effect.
        while self.devices[disk].may_start() {
            let Some(s) = self.devices[disk].start(now) else {
                break;
            };
            if self.disk_bounded {
                // One operation in service at a time: its completion is the disk's only event.
                self.events
                    .push_bounded(s.done_ns, Kind::DiskDone, disk as u32, s.token);
            } else {
                self.events
                    .push(s.done_ns, Kind::DiskDone, disk as u32, s.token);
            }
        }
    }

    fn disk_done(&mut self, now: u64, disk: u32, token: u32) -> Result<()> {
        let d = disk as usize;
        self.devices[d].complete(now, token);
        let owner = self.op_owner[d][token as usize];
        self.free_ops[d].push(token);
        self.start_disk(now, d);
        let slot = match owner {
            Owner::User(slot) => slot,
            Owner::Rebuild(tag) => return self.rebuild_done(now, tag),
            Owner::Destage(id) => return self.destage_op_done(now, id),
            Owner::Backup(id) => return self.backup_op_done(now, id),
        };
        let s = &mut self.slots[slot as usize];
        debug_assert!(s.pending > 0);
        s.pending -= 1;
        if s.pending > 0 {
            return Ok(());
        }
        let has_writes = !s.writes.is_empty();
        self.rebuild_reads_done(now, slot)?;
        if has_writes {
            return self.write_phase(now, slot);
        }
        self.done_after(now, slot, self.spec.controller.miss_ns)
    }

    /// Queue `op` (an operation on array member `op.disk`) in `class` for `owner` at the
    /// device that now holds that member, and start the device if it is idle.
    fn submit_op(&mut self, now: u64, op: &DiskOp, class: Class, owner: Owner) -> Result<()> {
        let disk = op.disk as usize;
        let io = DiskIo {
            op: op.op,
            sector: op.block * self.sectors_per_block,
            sectors: (u64::from(op.count) * self.sectors_per_block) as u32,
        };
        let capacity = self.capacity_sectors[disk];
        if io.sector + u64::from(io.sectors) > capacity {
            return Err(Error::config(
                "disk",
                format!(
                    "disk {disk} holds {capacity} sectors ({:.2} GiB) but the workload \
                     reaches sector {}; choose a larger drive (disk.preset) or a \
                     smaller workload",
                    (capacity * SECTOR_BYTES) as f64 / (1u64 << 30) as f64,
                    io.sector + u64::from(io.sectors)
                ),
            ));
        }
        self.rebuild.user_op(op.disk, op.op);
        let dev = self.rebuild.dev_of(op.disk);
        let token = self.alloc_token(dev, owner);
        self.devices[dev].submit(now, io, class, token);
        self.start_disk(now, dev);
        Ok(())
    }

    /// A token of device `dev` for an operation of `owner`.
    fn alloc_token(&mut self, dev: usize, owner: Owner) -> u32 {
        match self.free_ops[dev].pop() {
            Some(t) => {
                self.op_owner[dev][t as usize] = owner;
                t
            }
            None => {
                self.op_owner[dev].push(owner);
                (self.op_owner[dev].len() - 1) as u32
            }
        }
    }

    fn finish_run(mut self, started: Instant) -> TimedMetrics {
        if self.spec.measure_from_ns > 0 && self.m.measure_from_ns == 0 {
            // The stream ended inside the warm-up: nothing was measured.
            self.m.count = self.m.count.measured_from_here();
            self.m.measure_from_ns = self.spec.measure_from_ns;
        }
        // Requests record only their own direction's latency (`user.rs`); all of them
        // together are the two merged.
        debug_assert_eq!(self.m.latency.count(), 0);
        debug_assert!(self.row_locks.is_idle(), "every write released its rows");
        self.m.latency.merge(&self.m.read_latency);
        self.m.latency.merge(&self.m.write_latency);
        // Disks and series close at the last event, which a rebuild or a write cache's final
        // destages may put after the last user completion (`sim_ns`).
        let end = self.write_cache_metrics(self.m.sim_ns.max(self.rebuild_end_ns));
        self.backup_metrics(end);
        self.cache_fail_metrics(end);
        self.unified_metrics();
        self.sampler
            .finish(end, &mut self.devices, self.outstanding, &mut self.m.series);
        self.m.ramp = self.sampler.ramp_points();
        let secs = end.max(1);
        self.m.disks = self
            .devices
            .iter_mut()
            .map(|d| {
                let st = d.stats(end);
                DiskMetrics {
                    ops: st.ops,
                    read_sectors: st.read_sectors,
                    write_sectors: st.write_sectors,
                    utilization: st.busy_ns as f64 / secs as f64,
                    queue_mean: st.queue_area as f64 / secs as f64,
                    queue_max: st.queue_max,
                    seek_cylinders_mean: if st.ops == 0 {
                        0.0
                    } else {
                        st.seek_cylinders as f64 / st.ops as f64
                    },
                    choices_mean: if st.ops == 0 {
                        0.0
                    } else {
                        st.choices as f64 / st.ops as f64
                    },
                    buffer_hits: st.buffer_hits,
                }
            })
            .collect();
        if self.rebuild.enabled() {
            self.m.rebuild = Some(std::mem::take(&mut self.rebuild.metrics));
        }
        self.m.count.metadata_bytes = self.policy.metadata_bytes() as u64;
        self.m.count.wall_ns = started.elapsed().as_nanos() as u64;
        debug_assert_eq!(
            self.m.count.hits + self.m.count.misses,
            self.m.count.lookups
        );
        debug_assert_eq!(self.outstanding, 0);
        self.m
    }
}
