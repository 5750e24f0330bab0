//! Online rebuild onto a hot spare, in the simulator's orders and rate limits.
//!
//! The order (`raidlab::rebuild::Order`: sequential, or PRO fed with the live user reads of
//! the failed member) hands out units (rows); the md-style `Throttle` paces them against a
//! real monotonic clock. Consecutive units the order hands out are rebuilt as a run under
//! their row locks (`rebuild_run.rs`): the survivors the level needs are read, the lost units
//! are solved and written to the replacement, and only then are the rows marked rebuilt,
//! after which the planner reads and writes them on the replacement.
//! Progress is checkpointed in the superblocks (the lowest unit not yet rebuilt) so a restart
//! resumes; units above the checkpoint are simply rebuilt again.

use crate::sync::Instant;
use crate::sync::Ordering;
use std::time::Duration;

use raidlab::rebuild::{Gate, Order, Throttle};

use super::Controller;

/// Distinct ids of rebuild jobs.
static JOB_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Threads that rebuild runs at once (each run under its rows' locks). A thread reads its
/// run's survivors and then writes the replacement, so with four about two runs' reads are
/// queued at each survivor while the others write: the simulator's DOR keeps `depth = 2`
/// reads at each survivor, from a pool of 64 unit buffers (four runs of 16). With two, the
/// survivors idled for the rebuild while both runs wrote (`vdf-rebuild --store`: 2.43 s
/// against 2.00 s with four; DOR with 16-unit reads 1.74 s). On memory-speed members they
/// keep both cores busy with the copies and the parity.
pub const REBUILD_THREADS: usize = 4;

/// Checkpoint the superblocks at least this often while rebuilding.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

pub struct Job {
    pub slot: u32,
    pub order: Order,
    pub throttle: Throttle,
    pub started: Instant,
    pub units: u64,
    pub last_checkpoint: Instant,
    /// Runs handed out and not yet rebuilt (one per rebuild thread at most: `REBUILD_THREADS`).
    pub in_flight: u32,
    /// A unit the order handed out that did not extend the last run: the next run's first.
    pub pending: Option<u64>,
    /// Tells a finishing unit whether its job is still the current one.
    pub id: u64,
    /// Units handed out by this job (what the rate limit charges).
    pub handed: u64,
    /// Rows marked rebuilt before it started because their data is trusted (a partial
    /// re-add: rows outside the bitmap's dirty regions); not counted as progress.
    pub trusted: u64,
    /// A partial re-add: the dirty regions it resyncs (`None`: a full rebuild).
    pub partial_regions: Option<u64>,
    /// Rows this job (and the passes that continued it) solved and wrote.
    pub rebuilt_rows: u64,
    /// Rows the disk-oriented executor read again under their locks (a writer came between
    /// a job's first read and its write, or a read failed).
    pub rows_reread: u64,
    /// The disk-oriented executor's state (`rebuild_dor.rs`), made at its first step.
    pub(crate) dor: Option<super::rebuild_dor::DorExec>,
}

/// What a finished rebuild did (`ctl status` shows the last one as `last_rebuild`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub slot: u32,
    pub device: String,
    /// `Some(regions)` for a partial re-add that resynced only the bitmap's dirty regions.
    pub partial_regions: Option<u64>,
    pub rows: u64,
    pub bytes: u64,
    pub member_bytes: u64,
    /// Rows the disk-oriented executor read again under their locks.
    pub rows_reread: u64,
}

/// What `ctl status` shows of a rebuild.
#[derive(Debug, Clone)]
pub struct Progress {
    pub slot: u32,
    pub units_done: u64,
    pub units: u64,
    pub elapsed_s: f64,
    pub order: &'static str,
    pub partial_regions: Option<u64>,
    /// Rows solved and written so far.
    pub rebuilt_rows: u64,
    /// `runs` or `dor` (`serve --rebuild-executor`).
    pub executor: &'static str,
    /// Rows the disk-oriented executor read again under their locks.
    pub rows_reread: u64,
}

impl Controller {
    pub(crate) fn rebuild_active(&self) -> bool {
        self.rebuild.lock().map(|j| j.is_some()).unwrap_or(false)
    }

    /// PRO's access monitor: a user read reached `row` of member `disk`.
    pub(crate) fn note_user_read(&self, disk: u32, row: u64) {
        if let Ok(mut job) = self.rebuild.lock() {
            if let Some(j) = job.as_mut() {
                if j.slot == disk {
                    j.order.user_read(row);
                }
            }
        }
    }

    fn new_job(&self, slot: u32, done_below: u64) -> Job {
        let units = self.shape.rows();
        let mut order = self.opts.rebuild_order.build(units);
        for u in 0..done_below.min(units) {
            order.take(u);
        }
        Job {
            slot,
            order,
            throttle: Throttle::new(self.opts.rebuild_rate, 0),
            started: Instant::now(),
            units,
            last_checkpoint: Instant::now(),
            in_flight: 0,
            pending: None,
            id: JOB_IDS.fetch_add(1, Ordering::Relaxed),
            handed: 0,
            trusted: 0,
            partial_regions: None,
            rebuilt_rows: 0,
            rows_reread: 0,
            dor: None,
        }
    }

    /// A job that rebuilds only the rows `dirty` selects (a partial re-add); the others are
    /// marked rebuilt by the caller. `regions` is how many bitmap regions they make.
    pub(crate) fn new_partial_job(
        &self,
        slot: u32,
        dirty: impl Fn(u64) -> bool,
        regions: u64,
    ) -> Job {
        let mut job = self.new_job(slot, 0);
        for u in (0..job.units).filter(|&u| !dirty(u)) {
            job.order.take(u);
            job.trusted += 1;
        }
        job.units -= job.trusted;
        job.partial_regions = Some(regions);
        job
    }

    /// The last rebuild that completed.
    pub fn last_rebuild(&self) -> Option<Report> {
        self.last_rebuild
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A replacement recorded in the superblocks: carry on from its checkpoint.
    pub(crate) fn resume_rebuild(&self, slot: u32) {
        let done = {
            let st = self.read_state();
            st.array
                .rebuilding(slot)
                .map(|m| m.next_clear(0).unwrap_or(m.len()))
                .unwrap_or(0)
        };
        let job = self.new_job(slot, done);
        if let Ok(mut j) = self.rebuild.lock() {
            *j = Some(job);
        }
    }

    /// The failed slot a spare would rebuild now, if any (the array alive, a spare present,
    /// the slot not rebuilding and past its missing grace).
    fn slot_to_rebuild(&self, st: &super::State) -> Option<u32> {
        if st.dead.is_some() || st.spares.is_empty() {
            return None;
        }
        st.array
            .failed()
            .iter()
            .copied()
            .find(|&s| st.array.rebuilding(s).is_none() && self.spare_may_take(st, s))
    }

    /// Start a rebuild if a slot is failed, none is rebuilding and a spare is present.
    pub fn maybe_start_rebuild(&self) -> bool {
        if self.rebuild_active() {
            return false;
        }
        // Asked shared first: the main loop asks every 20 ms, and a write lock waits for
        // every row write in flight (each holds the state shared through its member I/O)
        // while every new request waits behind it. Taken exclusively on every ask, it held
        // up the reads of a busy array by 12 ms on average on disk-timed members.
        if self.slot_to_rebuild(&self.read_state()).is_none() {
            return false;
        }
        let mut st = self.write_state();
        let Some(slot) = self.slot_to_rebuild(&st) else {
            return false;
        };
        let spare = st.spares.remove(0);
        if st
            .array
            .start_rebuild(slot, self.shape.rows(), true, "rebuild")
            .is_err()
        {
            st.spares.insert(0, spare);
            return false;
        }
        crate::info!(
            { "slot": slot, "device": spare.path() },
            "rebuilding slot {slot} onto {} ({} order)",
            spare.path(),
            self.opts.rebuild_order.name()
        );
        st.devs[slot as usize] = Some(spare);
        self.counters[slot as usize].reset();
        self.persist(&mut st);
        drop(st);
        let job = self.new_job(slot, 0);
        if let Ok(mut j) = self.rebuild.lock() {
            *j = Some(job);
        }
        true
    }

    pub fn rebuild_progress(&self) -> Option<Progress> {
        // Lock order is state before the job: copy what is needed and let the job go first.
        let (slot, units, elapsed_s, trusted, partial_regions, rebuilt_rows, rows_reread) = {
            let job = self.rebuild.lock().ok()?;
            let j = job.as_ref()?;
            (
                j.slot,
                j.units,
                j.started.elapsed().as_secs_f64(),
                j.trusted,
                j.partial_regions,
                j.rebuilt_rows,
                j.rows_reread,
            )
        };
        let st = self.read_state();
        let done = st.array.rebuilding(slot).map(|m| m.count()).unwrap_or(0);
        Some(Progress {
            slot,
            units_done: done.saturating_sub(trusted).min(units),
            units,
            elapsed_s,
            order: self.opts.rebuild_order.name(),
            partial_regions,
            rebuilt_rows,
            executor: self.opts.rebuild_executor.name(),
            rows_reread,
        })
    }

    /// Rebuild up to `units_max` units, in runs of consecutive units the order hands out
    /// (`rebuild_run`). Returns `Some(wait)` when rate control asks to wait (or another
    /// thread still holds the last units), `None` when there is nothing more to do right
    /// now. Several threads may call it at once.
    ///
    /// With the disk-oriented executor a call carries out one of its actions (`units_max`
    /// does not apply; `rebuild_dor.rs`).
    pub fn rebuild_step(&self, units_max: u32) -> Option<Duration> {
        self.rebuild_step_waiting(units_max, true)
    }

    /// [`Controller::rebuild_step`]; with `wait_for_work` false the disk-oriented executor
    /// returns at once when it has no action to take (the wait it would have made), so the
    /// caller can do other work meanwhile.
    pub(crate) fn rebuild_step_waiting(
        &self,
        units_max: u32,
        wait_for_work: bool,
    ) -> Option<Duration> {
        if let super::RebuildExecutor::Dor { buffers, depth } = self.opts.rebuild_executor {
            return self.dor_step(buffers, depth, wait_for_work);
        }
        let run_max = self.run_units_max();
        let mut units_left = units_max;
        // Bounded: every pass hands out at least one unit of `units_max`, or returns.
        while units_left > 0 {
            if self.stopping() {
                return None;
            }
            let (slot, first, count, id) = {
                let mut guard = self.rebuild.lock().ok()?;
                let j = guard.as_mut()?;
                let now_ns = j.started.elapsed().as_nanos() as u64;
                let busy = self.busy.swap(false, Ordering::Relaxed);
                let bytes = j.handed * self.shape.chunk_bytes;
                if let Gate::WaitUntil(t) = j.throttle.gate(now_ns, bytes, busy) {
                    return Some(
                        Duration::from_nanos(t.saturating_sub(now_ns))
                            .min(Duration::from_millis(100)),
                    );
                }
                match j.next_run(run_max.min(units_left)) {
                    Some((first, count)) => {
                        j.in_flight += 1;
                        j.handed += u64::from(count);
                        (j.slot, first, count, j.id)
                    }
                    // Another thread is finishing the last units: let it.
                    None if j.in_flight > 0 => return Some(Duration::from_millis(1)),
                    None => {
                        let done = guard.take();
                        drop(guard);
                        // The read guard must be gone before finishing takes the write lock.
                        let slot = slot_of_finished(&self.read_state().array);
                        self.finish_rebuild_of(slot, done);
                        return None;
                    }
                }
            };
            units_left -= count;
            let result = self.rebuild_run(slot, first, count, id);
            let checkpoint_due = {
                let mut guard = self.rebuild.lock().ok()?;
                match guard.as_mut() {
                    Some(j) if j.id == id => {
                        j.in_flight -= 1;
                        if let Ok(rows) = result {
                            j.rebuilt_rows += rows;
                        }
                        let due = j.last_checkpoint.elapsed() >= CHECKPOINT_EVERY;
                        if due {
                            j.last_checkpoint = Instant::now();
                        }
                        due
                    }
                    _ => false,
                }
            };
            if let Err(f) = result {
                // A survivor (or the replacement) failed: fail that device, if it is still in
                // its slot; the job is dropped if the replacement failed or the array cannot
                // go on. Otherwise the units stay unrebuilt, and when the order runs out
                // `finish_rebuild_of` starts a fresh pass over the units left.
                let _ = self.fail_device(&f, "I/O error during rebuild");
                return None;
            }
            if checkpoint_due {
                self.persist_progress();
            }
        }
        Some(Duration::ZERO)
    }

    pub(super) fn finish_rebuild_of(&self, slot: Option<u32>, done: Option<Job>) {
        let Some(slot) = slot else { return };
        let mut st = self.write_state();
        let Some(map) = st.array.rebuilding(slot) else {
            return;
        };
        if !map.is_full() {
            // Units left that the order did not hand out again after a survivor error:
            // start over on the rest with a fresh job (rows already rebuilt are skipped),
            // which carries on the finished one's account.
            let next = map.next_clear(0).unwrap_or(map.len());
            drop(st);
            let mut job = self.new_job(slot, next);
            if let Some(d) = done.filter(|d| d.slot == slot) {
                (job.units, job.trusted) = (d.units, d.trusted);
                (job.partial_regions, job.rebuilt_rows) = (d.partial_regions, d.rebuilt_rows);
                job.rows_reread = d.rows_reread;
                job.started = d.started;
            }
            if let Ok(mut j) = self.rebuild.lock() {
                *j = Some(job);
            }
            return;
        }
        st.array.finish_rebuild(slot);
        let name = st.devs[slot as usize]
            .as_ref()
            .map(|d| d.path().to_string())
            .unwrap_or_default();
        let rows = done.as_ref().map_or(0, |d| d.rebuilt_rows);
        let report = Report {
            slot,
            device: name.clone(),
            partial_regions: done.as_ref().and_then(|d| d.partial_regions),
            rows,
            bytes: rows * self.shape.chunk_bytes,
            member_bytes: self.shape.member_data_bytes,
            rows_reread: done.as_ref().map_or(0, |d| d.rows_reread),
        };
        let what = match report.partial_regions {
            Some(g) => format!("partial re-add, {g} dirty region(s): "),
            None => String::new(),
        };
        crate::info!(
            { "slot": slot, "device": name, "rows": rows, "bytes": report.bytes,
              "member_bytes": report.member_bytes, "partial_regions": report.partial_regions,
              "rows_reread": report.rows_reread },
            "rebuild of slot {slot} onto {name} complete ({what}{rows} rows, {} of {} bytes written)",
            report.bytes, report.member_bytes
        );
        *self.last_rebuild.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
        self.persist(&mut st);
        drop(st);
        self.maybe_start_rebuild();
    }

    /// Whether rebuild job `job` is still the one running.
    pub(super) fn job_is(&self, job: u64) -> bool {
        self.rebuild
            .lock()
            .map(|j| j.as_ref().is_some_and(|j| j.id == job))
            .unwrap_or(false)
    }
}

impl Job {
    /// The next run: up to `max` consecutive units in the order's sequence, as `(first,
    /// count)`; `None` when the order has handed out every unit. A unit that does not
    /// follow the run is kept for the next one, so the order's sequence is kept.
    fn next_run(&mut self, max: u32) -> Option<(u64, u32)> {
        let first = match self.pending.take() {
            Some(u) => u,
            None => self.order.next_unit()?,
        };
        let mut count = 1u32;
        while count < max {
            match self.order.next_unit() {
                Some(u) if u == first + u64::from(count) => count += 1,
                Some(u) => {
                    self.pending = Some(u);
                    break;
                }
                None => break,
            }
        }
        Some((first, count))
    }
}

/// The slot whose rebuild the order finished (the only rebuilding one).
pub(super) fn slot_of_finished(array: &raidlab::array::Array) -> Option<u32> {
    array
        .failed()
        .iter()
        .copied()
        .find(|&s| array.rebuilding(s).is_some())
}
