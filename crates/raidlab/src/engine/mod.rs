//! Drivers that move requests through the layers. Counting mode (`count`) has no clock; the
//! discrete-event `timed` mode
//! adds the clock, disk models and queues.
//!
//! [`run_batch`] runs many experiments on a few threads: each run is independent and
//! simulates on one thread, so results do not depend on the thread count or scheduling.
//! When a core is spare, a run's workload is drawn on a thread of its own
//! ([`crate::workload::threaded`]): the same stream, so the same results, in less time.

pub mod count;
pub mod hierarchy;
pub mod offline;
#[cfg(test)]
mod offline_tests;
pub mod timed;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::array::ArraySpec;
use crate::config::{Capacity, Experiment, Mode, Writes};
use crate::error::{Error, Result};
use crate::metrics::RunMetrics;
use crate::workload::WorkloadSpec;

/// Where a batch stands, passed to the progress callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchProgress {
    pub runs_done: usize,
    pub runs_total: usize,
    /// Requests replayed so far over all runs.
    pub requests: u64,
    /// Requests read so far by the footprint pre-pass under way (`capacity_fraction`), 0
    /// when none is.
    pub prepass_requests: u64,
}

/// Run one experiment.
pub fn run(exp: &Experiment) -> Result<RunMetrics> {
    run_one(exp, None, spare_cores(1), &mut |_| true)
}

/// Run one experiment in its mode, with a pre-pass already computed (or `None`);
/// `workload_thread`: draw the workload on a thread of its own (results are the same
/// either way).
pub fn run_one(
    exp: &Experiment,
    pre: Option<count::Prepass>,
    workload_thread: bool,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<RunMetrics> {
    if exp.host.is_some() {
        return hierarchy::run(exp, progress).map(|m| RunMetrics::Hierarchy(Box::new(m)));
    }
    match exp.run.mode {
        Mode::Count => {
            count::run(exp, pre, workload_thread, progress).map(|m| RunMetrics::Count(Box::new(m)))
        }
        Mode::Timed => {
            timed::run(exp, pre, workload_thread, progress).map(|m| RunMetrics::Timed(Box::new(m)))
        }
    }
}

/// Environment variable that, set to `0`, keeps every run's workload on the run's thread.
pub const WORKLOAD_THREAD_ENV: &str = "RAIDLAB_WORKLOAD_THREAD";

/// Cores this process may use (its CPU affinity and any CPU quota), at least 1.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether `runs` runs at once leave a core for each one's workload thread: the process
/// has at least two [`cores`] per run and [`WORKLOAD_THREAD_ENV`] is not `0`.
pub fn spare_cores(runs: usize) -> bool {
    let off = std::env::var_os(WORKLOAD_THREAD_ENV).is_some_and(|v| v == "0");
    !off && runs.max(1).saturating_mul(2) <= cores()
}

/// The workload of a run: [`crate::workload::open`], told its `load` (IOPS) before anything
/// is drawn when one is given, on a thread of its own when `own_thread`.
pub(crate) fn open_workload(
    spec: &WorkloadSpec,
    own_thread: bool,
    load: Option<f64>,
) -> Result<Box<dyn crate::workload::RequestSource>> {
    if own_thread {
        crate::workload::threaded::open(spec, load)
    } else {
        let mut src = crate::workload::open(spec)?;
        if let Some(iops) = load {
            src.set_load(iops)?;
        }
        Ok(src)
    }
}

/// Run `exps` on up to `threads` threads, results in the order of `exps`. Pre-passes (footprint,
/// compulsory misses) are shared between runs of the same workload and array. `progress` is called from worker threads
/// (hence `Sync`) at most every [`count::PROGRESS_EVERY`] requests and after each run;
/// returning `false` cancels the remaining work (those runs yield `Error::Cancelled`).
pub fn run_batch(
    exps: &[Experiment],
    threads: usize,
    progress: &(dyn Fn(BatchProgress) -> bool + Sync),
) -> Vec<Result<RunMetrics>> {
    let busy = threads.clamp(1, exps.len().max(1));
    run_batch_with(exps, threads, spare_cores(busy), progress)
}

/// [`run_batch`], saying whether each run draws its workload on a thread of its own (a
/// caller that runs batches in several processes knows better than [`spare_cores`]).
pub fn run_batch_with(
    exps: &[Experiment],
    threads: usize,
    workload_thread: bool,
    progress: &(dyn Fn(BatchProgress) -> bool + Sync),
) -> Vec<Result<RunMetrics>> {
    let total = exps.len();
    let threads = threads.clamp(1, total.max(1));
    let prepasses = Prepasses::default();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let requests = AtomicU64::new(0);
    let prepass_requests = AtomicU64::new(0);
    let cancelled = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<RunMetrics>>>> =
        Mutex::new((0..total).map(|_| None).collect());
    let report = |delta: u64| -> bool {
        let r = requests.fetch_add(delta, Ordering::Relaxed) + delta;
        let ok = !cancelled.load(Ordering::Relaxed)
            && progress(BatchProgress {
                runs_done: done.load(Ordering::Relaxed),
                runs_total: total,
                requests: r,
                prepass_requests: prepass_requests.load(Ordering::Relaxed),
            });
        if !ok {
            cancelled.store(true, Ordering::Relaxed);
        }
        ok
    };
    let worker = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= total {
            break;
        }
        let exp = &exps[i];
        let outcome = if cancelled.load(Ordering::Relaxed) {
            Err(Error::Cancelled)
        } else {
            let mut tick = |n: u64| {
                prepass_requests.store(n, Ordering::Relaxed);
                report(0)
            };
            let pre = prepasses.get(exp, workload_thread, &mut tick);
            prepass_requests.store(0, Ordering::Relaxed);
            pre.and_then(|fp| run_one(exp, fp, workload_thread, &mut |d| report(d)))
        };
        results
            .lock()
            .expect("no worker panics while holding the lock")[i] = Some(outcome);
        done.fetch_add(1, Ordering::Relaxed);
        report(0);
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(worker);
        }
        worker();
    });
    results
        .into_inner()
        .expect("workers have joined")
        .into_iter()
        .map(|r| r.unwrap_or(Err(Error::Cancelled)))
        .collect()
}

/// The pre-pass of each distinct (workload, array, writes), computed once: the first run that needs
/// it computes it while holding the lock, so concurrent runs wait instead of repeating it.
#[derive(Default)]
struct Prepasses {
    known: Mutex<Vec<(PrepassKey, count::Prepass)>>,
}

/// What a pre-pass depends on: the workload, the array (miss costs), what counts as a
/// lookup and the warm-up (compulsory misses are counted after it).
type PrepassKey = (WorkloadSpec, Option<ArraySpec>, Writes, u64);

impl Prepasses {
    fn get(
        &self,
        exp: &Experiment,
        workload_thread: bool,
        tick: &mut dyn FnMut(u64) -> bool,
    ) -> Result<Option<count::Prepass>> {
        let fraction = matches!(exp.cache.capacity, Capacity::FootprintFraction(_));
        let asked = exp.run.footprint && exp.run.mode == Mode::Count;
        if !(fraction || asked) {
            return Ok(None);
        }
        let mut known = self.known.lock().expect("no panics while holding the lock");
        let warmup = exp.run.warmup_requests;
        let key: PrepassKey = (
            exp.workload.clone(),
            exp.array.clone(),
            exp.cache.writes,
            warmup,
        );
        if let Some((_, pre)) = known.iter().find(|(k, _)| *k == key) {
            return Ok(Some(*pre));
        }
        let pre = count::prepass_with(
            &exp.workload,
            exp.array.as_ref(),
            exp.cache.writes,
            warmup,
            workload_thread,
            tick,
        )?;
        known.push((key, pre));
        Ok(Some(pre))
    }
}

#[cfg(test)]
mod tests;
