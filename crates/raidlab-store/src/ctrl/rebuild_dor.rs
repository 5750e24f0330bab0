//! Disk-oriented reconstruction on the members: the simulator's own executor
//! (`raidlab::rebuild::Dor`, Holland, Gibson and Siewiorek) driven by threads instead of the
//! engine's events (`serve --rebuild-executor dor`).
//!
//! The state machine decides everything it decides in timed mode: one reader per survivor
//! keeping `depth` rebuild reads at its disk, a pool of `buffers` unit buffers that bounds
//! how far the readers run ahead of each other, reads merged up to `read_units` units, and
//! the replacement written in completion order, up to 16 consecutive units a write, two
//! writes at once. Here each action it asks for is carried out by one of the rebuild threads
//! (`Controller::rebuild_threads`: enough for every survivor's reads and both writes), in the
//! rebuild's priority class, and its completion is reported back, which starts the next.
//!
//! A run of the store's other executor (`rebuild_run.rs`) holds its rows for its reads and
//! its write. Here a job's sources are read at different times by different readers, up to
//! `buffers` jobs apart, in the order's sequence (PRO's is not ascending). Holding every
//! job's row from its first read could deadlock with a user write that holds one of those
//! rows and waits for another; so nothing is held while reading. Instead each job notes
//! its row's count of exclusive holds before its first read (`locks.rs`), and its write
//! takes the rows shared, as a run does, and checks that no writer held any of them since:
//! then the sources it read are one consistent row. A row that a writer touched in between
//! (or whose plan changed, or whose read failed) is rebuilt again by a run under its lock,
//! reading its survivors afresh; `ctl status` counts those rows (`rows_reread`).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::sync::Ordering;
use raidlab::array::{Array, Geometry};
use raidlab::rebuild::{reads_for, Action, Ctx, Dor, Survivors};

use super::column::BLOCK;
use super::rebuild::Job;
use super::{Controller, Fault};

/// Most threads a disk-oriented rebuild runs (64 survivors at depth 1, or fewer deeper).
pub const DOR_THREADS_MAX: usize = 64;

/// The executor's state, kept with its rebuild job.
pub(crate) struct DorExec {
    dor: Dor,
    /// Actions the state machine asked for that no thread has taken yet.
    ready: VecDeque<Action>,
    /// Actions taken and not yet reported.
    running: u32,
    /// The jobs read or being read and not yet taken for their write, by sequence number
    /// (at most `buffers`, the state machine's pool).
    jobs: BTreeMap<u64, DorJob>,
    /// Rate control asked for no new unit before this (ns since the job started).
    wake_ns: Option<u64>,
}

/// One unit's job: its sources as they are read.
pub(crate) struct DorJob {
    unit: u64,
    /// Its row's count of exclusive holds before any of its sources was read.
    holds: u64,
    /// Per slot, the unit read from it.
    bufs: Vec<Option<Vec<u8>>>,
    /// A read of it failed: rebuild it again.
    failed: bool,
}

/// The sources a unit is rebuilt from, read from the array's state of the moment.
struct Live<'a> {
    geo: &'a Geometry,
    array: &'a Array,
    slot: u32,
}

impl Survivors for Live<'_> {
    fn disks(&self) -> u32 {
        self.geo.disks()
    }
    fn reads(&self, unit: u64, disk: u32) -> bool {
        reads_for(
            self.geo,
            |x| x != self.slot && self.array.lost(x, unit),
            self.slot,
            unit,
            disk,
        )
    }
}

/// An action taken by a thread, with what it needs.
enum Taken {
    Read {
        disk: u32,
        unit: u64,
        count: u32,
        job: u64,
    },
    Write {
        unit: u64,
        count: u32,
        job: u64,
        jobs: Vec<DorJob>,
    },
}

impl Controller {
    /// Threads the rebuild runs: a run each for the store's runs, or one for every read the
    /// disk-oriented executor keeps at the survivors and for each of its replacement writes.
    pub(crate) fn rebuild_threads(&self) -> usize {
        match self.opts.rebuild_executor {
            super::RebuildExecutor::Runs => super::rebuild::REBUILD_THREADS,
            super::RebuildExecutor::Dor { depth, .. } => {
                let reads = (self.geo.disks() as usize - 1) * depth as usize;
                (reads + raidlab::rebuild::dor::WRITE_DEPTH as usize).min(DOR_THREADS_MAX)
            }
        }
    }

    /// One step of a disk-oriented rebuild: take one action the executor asks for, carry it
    /// out and report it (which asks for the next ones). With nothing to take, waits up to
    /// 20 ms for another thread's report (or, without `wait_for_work`, returns that wait
    /// at once). Returns as `rebuild_step` does.
    pub(super) fn dor_step(
        &self,
        buffers: u32,
        depth: u32,
        wait_for_work: bool,
    ) -> Option<Duration> {
        let (taken, slot, id) = {
            let st = self.read_state();
            let mut guard = self.rebuild.lock().ok()?;
            let j = guard.as_mut()?;
            if j.dor.is_none() {
                let read_units = self.run_units_max();
                j.dor = Some(DorExec {
                    dor: Dor::new(self.geo.disks(), buffers, depth, read_units),
                    ready: VecDeque::new(),
                    running: 0,
                    jobs: BTreeMap::new(),
                    wake_ns: None,
                });
            }
            let (slot, id) = (j.slot, j.id);
            self.dor_pump(&st.array, j);
            let exec = j.dor.as_mut().expect("made above");
            match exec.ready.pop_front() {
                Some(Action::Read {
                    disk,
                    unit,
                    count,
                    job,
                }) => {
                    exec.running += 1;
                    (
                        Taken::Read {
                            disk,
                            unit,
                            count,
                            job,
                        },
                        slot,
                        id,
                    )
                }
                Some(Action::Write { unit, count, job }) => {
                    exec.running += 1;
                    let jobs = (job..job + u64::from(count))
                        .map(|s| exec.jobs.remove(&s).expect("a written job was read"))
                        .collect();
                    (
                        Taken::Write {
                            unit,
                            count,
                            job,
                            jobs,
                        },
                        slot,
                        id,
                    )
                }
                Some(Action::WakeAt(_)) => unreachable!("wake-ups are not queued"),
                None if exec.running == 0 && exec.dor.is_done() => {
                    let done = guard.take();
                    drop(guard);
                    drop(st);
                    let slot = super::rebuild::slot_of_finished(&self.read_state().array);
                    self.finish_rebuild_of(slot, done);
                    return None;
                }
                None => {
                    let now_ns = j.started.elapsed().as_nanos() as u64;
                    let wait = exec
                        .wake_ns
                        .map_or(Duration::from_millis(20), |t| {
                            Duration::from_nanos(t.saturating_sub(now_ns))
                        })
                        .min(Duration::from_millis(100));
                    drop(st);
                    if !wait_for_work {
                        return Some(wait.max(Duration::from_micros(1)));
                    }
                    drop(crate::sync::wait_timeout(
                        &self.rebuild_cv,
                        &self.rebuild,
                        guard,
                        wait,
                    ));
                    return Some(Duration::ZERO);
                }
            }
        };
        match taken {
            Taken::Read {
                disk,
                unit,
                count,
                job,
            } => self.dor_read(slot, id, disk, unit, count, job),
            Taken::Write {
                unit,
                count,
                job,
                jobs,
            } => self.dor_write(slot, id, unit, count, job, jobs),
        }
        Some(Duration::ZERO)
    }

    /// Ask the executor what can start now; note each new job's row hold count before any
    /// of its reads is handed out.
    fn dor_pump(&self, array: &Array, j: &mut Job) {
        let now_ns = j.started.elapsed().as_nanos() as u64;
        let busy = self.busy.swap(false, Ordering::Relaxed);
        let survivors = Live {
            geo: &self.geo,
            array,
            slot: j.slot,
        };
        let exec = j.dor.as_mut().expect("the executor exists");
        if exec.wake_ns.is_some_and(|t| t <= now_ns) {
            exec.wake_ns = None;
        }
        let mut out = Vec::new();
        let mut ctx = Ctx {
            now_ns,
            busy,
            order: &mut j.order,
            survivors: &survivors,
            throttle: &mut j.throttle,
            unit_bytes: self.shape.chunk_bytes,
        };
        exec.dor.pump(&mut ctx, &mut out);
        let n = self.geo.disks() as usize;
        for a in out {
            match a {
                Action::WakeAt(t) => exec.wake_ns = Some(t),
                Action::Read {
                    unit, count, job, ..
                } => {
                    for i in 0..u64::from(count) {
                        exec.jobs.entry(job + i).or_insert_with(|| DorJob {
                            unit: unit + i,
                            holds: self.locks.holds(unit + i),
                            bufs: vec![None; n],
                            failed: false,
                        });
                    }
                    exec.ready.push_back(a);
                }
                Action::Write { .. } => exec.ready.push_back(a),
            }
        }
    }

    /// Report a finished action of job `id` (`on_exec` updates the executor's state), ask
    /// for what follows and wake the threads waiting for work. Returns whether a checkpoint
    /// of the rebuild's progress is due. A report for a job that has ended is dropped.
    fn dor_report(&self, id: u64, on_exec: impl FnOnce(&mut Job)) -> bool {
        let st = self.read_state();
        let Ok(mut guard) = self.rebuild.lock() else {
            return false;
        };
        let Some(j) = guard.as_mut().filter(|j| j.id == id && j.dor.is_some()) else {
            return false;
        };
        on_exec(j);
        j.dor.as_mut().expect("checked").running -= 1;
        self.dor_pump(&st.array, j);
        let due = j.last_checkpoint.elapsed() >= super::rebuild::CHECKPOINT_EVERY;
        if due {
            j.last_checkpoint = crate::sync::Instant::now();
        }
        self.rebuild_cv.notify_all();
        due
    }

    /// Read units `unit..unit + count` of jobs `job..` from survivor `disk`.
    fn dor_read(&self, slot: u32, id: u64, disk: u32, unit: u64, count: u32, job: u64) {
        let unit_bytes = self.geo.blocks_per_stripe_unit() as usize * BLOCK;
        let dev = self.read_state().devs[disk as usize].clone();
        let gone = dev.is_none();
        let mut buf = vec![0u8; unit_bytes * count as usize];
        let result = self.member_read(disk, dev, self.geo.row_block(unit), &mut buf);
        // The units stay unread either way: their write rebuilds them again from whatever
        // survives. A source that already left its slot (it failed since the job was made)
        // fails nothing: the slot may hold another rebuild's replacement by now.
        if let (Err(f), false) = (&result, gone) {
            let _ = self.fail_device(f, "I/O error during rebuild");
        }
        let parts: Vec<Vec<u8>> = if count == 1 {
            vec![buf]
        } else {
            buf.chunks(unit_bytes).map(<[u8]>::to_vec).collect()
        };
        debug_assert_ne!(disk, slot);
        self.dor_report(id, |j| {
            let exec = j.dor.as_mut().expect("checked");
            for (seq, part) in (job..).zip(parts) {
                let dj = exec
                    .jobs
                    .get_mut(&seq)
                    .expect("a job is kept until written");
                debug_assert_eq!(dj.unit, unit + (seq - job));
                match result {
                    Ok(()) => dj.bufs[disk as usize] = Some(part),
                    Err(_) => dj.failed = true,
                }
            }
            exec.dor.read_done(disk, job, count);
        });
    }

    /// Write the rebuilt units `unit..unit + count` (jobs `job..`, `jobs` their sources).
    fn dor_write(
        &self,
        slot: u32,
        id: u64,
        unit: u64,
        count: u32,
        job: u64,
        mut jobs: Vec<DorJob>,
    ) {
        let (marked, reread) = match self.dor_write_rows(slot, id, unit, count, &mut jobs) {
            Ok((mut marked, redo)) => {
                // Rebuild the rows that must be read again under their locks, as a run does
                // (the write's shared hold of them is let go by now).
                let mut reread = 0u64;
                for (at, len) in redo {
                    reread += u64::from(len);
                    match self.rebuild_run(slot, at, len, id) {
                        Ok(m) => marked += m,
                        Err(f) => {
                            let _ = self.fail_device(&f, "I/O error during rebuild");
                            break;
                        }
                    }
                }
                (marked, reread)
            }
            Err(f) => {
                let _ = self.fail_device(&f, "I/O error during rebuild");
                (0, 0)
            }
        };
        let due = self.dor_report(id, |j| {
            j.rebuilt_rows += marked;
            j.rows_reread += reread;
            j.dor.as_mut().expect("checked").dor.write_done(job, count);
        });
        if due {
            self.persist_progress();
        }
    }

    /// Solve and write rows `first..first + count` from the sources their jobs read, under
    /// the rows' shared locks, and mark them rebuilt. Returns the rows marked and the
    /// stretches of rows that must be read again instead: a writer held the row since its
    /// job's first read, a read failed, its plan now reads other members, or it was rebuilt
    /// already. Only those are read again; the others are written from what was read (one
    /// touched row among 16 merged ones used to send all 16 back to their disks).
    fn dor_write_rows(
        &self,
        slot: u32,
        id: u64,
        first: u64,
        count: u32,
        jobs: &mut [DorJob],
    ) -> Result<(u64, Vec<(u64, u32)>), Fault> {
        let last = first + u64::from(count) - 1;
        let unit_bytes = self.geo.blocks_per_stripe_unit() as usize * BLOCK;
        let _rows = self.locks.share(first, last);
        let (plans, target) = {
            let st = self.read_state();
            let Some(map) = st.array.rebuilding(slot) else {
                return Ok((0, Vec::new()));
            };
            if !self.job_is(id) {
                return Ok((0, Vec::new()));
            }
            let Some(plans) = self.row_plans(&st, map, slot, first, last) else {
                return Ok((0, Vec::new()));
            };
            (plans, st.devs[slot as usize].clone())
        };
        let consistent: Vec<bool> = plans
            .iter()
            .zip(jobs.iter())
            .map(|(plan, dj)| {
                let read: Vec<u32> = (0..dj.bufs.len() as u32)
                    .filter(|&d| dj.bufs[d as usize].is_some())
                    .collect();
                !plan.done
                    && !dj.failed
                    && read == plan.reads
                    && dj.holds % 2 == 0
                    && self.locks.holds(dj.unit) == dj.holds
            })
            .collect();
        let (mut marked, mut redo) = (0u64, Vec::new());
        let mut i = 0usize;
        // Bounded: each pass consumes at least one row of `count`.
        while i < plans.len() {
            let (start, good) = (i, consistent[i]);
            while i < plans.len() && consistent[i] == good {
                i += 1;
            }
            let at = first + start as u64;
            if !good {
                redo.push((at, (i - start) as u32));
                continue;
            }
            let mut out = vec![0u8; unit_bytes * (i - start)];
            for ((plan, dj), dst) in plans[start..i]
                .iter()
                .zip(jobs[start..i].iter_mut())
                .zip(out.chunks_mut(unit_bytes))
            {
                // The row's members in plan order: the units read, and a zeroed unit for
                // each one solved (the target's is then copied to `dst`).
                let mut units: Vec<Vec<u8>> = plan
                    .order
                    .iter()
                    .map(|&d| {
                        dj.bufs[d as usize]
                            .take()
                            .unwrap_or_else(|| vec![0u8; unit_bytes])
                    })
                    .collect();
                let mut chunks: Vec<&mut [u8]> = units.iter_mut().map(Vec::as_mut_slice).collect();
                self.solve_row(plan, &mut chunks);
                dst.copy_from_slice(chunks[plan.target_at]);
            }
            self.member_write(slot, target.as_ref(), self.geo.row_block(at), &out)?;
            marked += self.mark_rebuilt_if_current(slot, target.as_ref(), id, at, &plans[start..i]);
        }
        Ok((marked, redo))
    }
}
