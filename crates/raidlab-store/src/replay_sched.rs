//! `raidlab replay URI WORKLOAD --schedule`: the workload issued at the arrival times a timed
//! run of the same config uses — trace timestamps x `time_scale`, a Poisson rate (`iops`) or
//! a ramp of levels (`levels_iops`) — drawn from the core's own `Schedule`, seeded by
//! `run.seed`, so the store and the simulator see the same requests at the same instants.
//!
//! Open loop on real time: a dispatcher thread sleeps to each arrival and hands the request
//! to one of `qd` workers, each with its own NBD connection and one request in flight. A
//! request's response time runs from its scheduled arrival to its reply, so a request that
//! waited for a free worker (the array is saturated) pays that wait, as in the simulator's
//! open loop. Like timed mode, requests arriving before `warmup_s` count in no summary
//! metric; a ramp measures each level's window after its warm-up and stops after the first
//! level that completes less than 95% of what arrived in its window, or that is still
//! issuing its window's arrivals 5% of the window after it ended in real time.

use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use raidlab::config::{Driver, Experiment};
use raidlab::engine::timed::arrivals::{Level, Schedule};
use raidlab::workload::{self, Op};
use raidlab::{Error, Result};
use serde_json::{json, Value};

use crate::nbd::Client;
use crate::replay::fill;

/// Connections (one request in flight each) the scheduled replay opens at most: the
/// simulator's open loop has no bound, and a replay of a cache that fills needs hundreds.
pub const WORKERS_MAX: u32 = 1024;
/// Requests a scheduled replay records at most (about 24 bytes each).
pub const RECORDS_MAX: usize = 20_000_000;
/// A ramp level is saturated when it completes less than this share of its arrivals.
const SATURATED_BELOW: f64 = 0.95;

/// Whether the dispatcher, at real time `elapsed` and about to issue the arrival at `t_ns`,
/// is so far behind level `l` that the level cannot have kept up: `t_ns` is in the level's
/// measured window and the window ended more than `1 - SATURATED_BELOW` of its length ago.
/// A lag of that size leaves that share of the window's arrivals unissued at its end, so
/// the completion rule (the simulator's, `SATURATED_BELOW`) would judge it saturated too.
/// Without the margin a lag of one arrival gap at the window's end (a worker busy for a
/// few ms when the last arrival fell due) judged a level saturated whose mean response was
/// 3-5 ms (STOW's ramp at 900 IOPS on disk-timed members).
fn backlogged(l: &Level, elapsed: Duration, t_ns: u64) -> bool {
    let window_ns = l.end_ns.saturating_sub(l.measure_ns);
    let margin_ns = (window_ns as f64 * (1.0 - SATURATED_BELOW)) as u64;
    let late = elapsed >= Duration::from_nanos(l.end_ns.saturating_add(margin_ns));
    late && t_ns >= l.measure_ns && t_ns < l.end_ns
}

#[derive(Debug, Clone)]
pub struct ScheduleOptions {
    pub workers: u32,
    pub requests_max: Option<u64>,
    /// Write one line per request (`arrival_ns,latency_ns,op,ok`) to this file.
    pub log: Option<std::path::PathBuf>,
}

/// One finished request: arrival (scheduled), completion, both in ns since the start.
#[derive(Debug, Clone, Copy)]
struct Record {
    arrival_ns: u64,
    done_ns: u64,
    read: bool,
    ok: bool,
}

struct Job {
    arrival_ns: u64,
    first: u64,
    count: u64,
    read: bool,
    seed: u64,
}

/// Mean and percentiles of response times in ms (`null` without any).
fn latency_json(mut ns: Vec<u64>) -> Value {
    if ns.is_empty() {
        return Value::Null;
    }
    ns.sort_unstable();
    let q = |p: f64| ns[((ns.len() - 1) as f64 * p).round() as usize] as f64 / 1e6;
    let mean = ns.iter().map(|&v| v as f64).sum::<f64>() / ns.len() as f64 / 1e6;
    json!({
        "count": ns.len(),
        "mean_ms": mean,
        "p50_ms": q(0.5),
        "p95_ms": q(0.95),
        "p99_ms": q(0.99),
        "max_ms": *ns.last().expect("not empty") as f64 / 1e6,
    })
}

/// Completions inside each ramp level's measured window, counted as they happen (the
/// dispatcher reads them at the window's end to decide saturation).
struct LevelCounts {
    windows: Vec<(u64, u64)>,
    done: Vec<AtomicU64>,
}

impl LevelCounts {
    fn new(levels: &[(f64, Level)]) -> LevelCounts {
        LevelCounts {
            windows: levels
                .iter()
                .map(|(_, l)| (l.measure_ns, l.end_ns))
                .collect(),
            done: levels.iter().map(|_| AtomicU64::new(0)).collect(),
        }
    }
    fn completed(&self, at_ns: u64) {
        // Windows do not overlap and are in time order.
        let i = self.windows.partition_point(|w| w.1 <= at_ns);
        if let Some(&(from, to)) = self.windows.get(i) {
            if at_ns >= from && at_ns < to {
                self.done[i].fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Replay `exp`'s workload at its timed run's arrival times; the report as JSON.
pub fn replay_scheduled(uri: &str, exp: &Experiment, opts: &ScheduleOptions) -> Result<Value> {
    if opts.workers == 0 || opts.workers > WORKERS_MAX {
        return Err(Error::config(
            "--qd",
            format!("expected 1 to {WORKERS_MAX}, got {}", opts.workers),
        ));
    }
    let Some(spec) = exp.timed.as_ref() else {
        return Err(Error::config(
            "run.mode",
            "--schedule replays a timed run's arrivals: the config needs [run] mode = \"timed\"",
        ));
    };
    if matches!(spec.driver, Driver::Closed { .. }) {
        return Err(Error::config(
            "run.driver",
            "--schedule needs an open loop or a ramp; for a closed loop use --qd without --schedule",
        ));
    }
    let mut schedule = Schedule::new(&spec.driver, exp.run.seed).expect("open loop or ramp");
    let levels = schedule.levels();
    let ramp = !levels.is_empty();
    let io = |e: std::io::Error| Error::store(uri.to_string(), e.to_string());
    let bs = u64::from(exp.workload.block_size);
    let mut clients = Vec::with_capacity(opts.workers as usize);
    for _ in 0..opts.workers {
        clients.push(Client::connect(uri).map_err(io)?);
    }
    let size = clients[0].size_bytes();
    let max_piece = u64::from(clients[0].block_size().maximum).clamp(bs, 32 << 20) / bs * bs;
    let blocks = size / bs;
    if blocks == 0 {
        return Err(Error::store(
            uri.to_string(),
            format!("the export ({size} bytes) is smaller than one {bs}-byte block"),
        ));
    }
    let load = match spec.driver {
        Driver::Open {
            arrivals: raidlab::config::Arrivals::Poisson { iops },
        } => Some(iops),
        _ => None,
    };
    let mut src = workload::open(&exp.workload)?;
    if let Some(iops) = load {
        src.set_load(iops)?;
    }
    let addressing = src.addressing();
    let counts = Arc::new(LevelCounts::new(&levels));
    let records: Arc<Mutex<Vec<Record>>> = Arc::new(Mutex::new(Vec::new()));
    let errors = Arc::new(AtomicU64::new(0));
    // Records kept, over all workers (whichever worker takes a request).
    let recorded = Arc::new(AtomicUsize::new(0));
    let failure: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    // A short queue: a request waits here only while every worker is busy.
    let (tx, rx) = sync_channel::<Job>(opts.workers as usize);
    let rx = Arc::new(Mutex::new(rx));
    let started = Instant::now();
    // The replay's time zero on the wall clock, so a caller can place its own events (control
    // commands) in the replay's frame.
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let now_ns = move || started.elapsed().as_nanos() as u64;
    let mut handles = Vec::new();
    for mut client in clients {
        let (rx, records, recorded, counts, errors, failure) = (
            Arc::clone(&rx),
            Arc::clone(&records),
            Arc::clone(&recorded),
            Arc::clone(&counts),
            Arc::clone(&errors),
            Arc::clone(&failure),
        );
        handles.push(std::thread::spawn(move || {
            // Grown to the largest piece this worker moves: hundreds of workers each
            // holding two buffers of the export's largest piece would be gigabytes.
            let (mut payload, mut buf) = (Vec::new(), Vec::new());
            let mut mine = Vec::new();
            loop {
                let job = match rx.lock().unwrap_or_else(|e| e.into_inner()).recv() {
                    Ok(j) => j,
                    Err(_) => break,
                };
                let mut ok = true;
                let (mut block, mut left) = (job.first % blocks, job.count);
                // Bounded: every piece moves at least one block.
                while left > 0 {
                    let n = left.min(blocks - block).min(max_piece / bs);
                    let (off, len) = (block * bs, (n * bs) as usize);
                    if buf.len() < len {
                        buf.resize(len, 0);
                        payload.resize(len, 0);
                    }
                    let r = if job.read {
                        client.read(off, &mut buf[..len])
                    } else {
                        fill(&mut payload[..len], job.seed ^ block);
                        client.write(off, &payload[..len], false)
                    };
                    if let Err(e) = r {
                        ok = false;
                        if let crate::nbd::ClientError::Io(e) = e {
                            // The connection is gone: record why and stop this worker.
                            *failure.lock().unwrap_or_else(|e| e.into_inner()) =
                                Some(e.to_string());
                            break;
                        }
                    }
                    left -= n;
                    block = (block + n) % blocks;
                }
                let done_ns = now_ns();
                counts.completed(done_ns);
                if !ok {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                if recorded.fetch_add(1, Ordering::Relaxed) < RECORDS_MAX {
                    mine.push(Record {
                        arrival_ns: job.arrival_ns,
                        done_ns,
                        read: job.read,
                        ok,
                    });
                }
                if failure.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                    break;
                }
            }
            records
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(mine);
            let _ = client.disconnect();
        }));
    }
    // The dispatcher: this thread.
    let mut issued = 0u64;
    let mut late = 0u64;
    let mut level_arrived = vec![0u64; levels.len()];
    let mut saturated_level: Option<usize> = None;
    let mut current_level = 0usize;
    let mut load_iops = 0.0;
    let mut dispatch_err: Option<Error> = None;
    loop {
        if opts.requests_max.is_some_and(|m| issued >= m)
            || failure.lock().unwrap_or_else(|e| e.into_inner()).is_some()
        {
            break;
        }
        let (req, t) = if let Some(t) = schedule.next_ramp() {
            let Some(t) = t else { break };
            let iops = schedule.level_iops();
            if iops != load_iops {
                load_iops = iops;
                if let Err(e) = src.set_load(iops) {
                    dispatch_err = Some(e);
                    break;
                }
            }
            match src.next_request() {
                Ok(Some(r)) => (r, t),
                Ok(None) => break,
                Err(e) => {
                    dispatch_err = Some(e);
                    break;
                }
            }
        } else {
            let r = match src.next_request() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    dispatch_err = Some(e);
                    break;
                }
            };
            let Some(t) = schedule.next(r.time_ns) else {
                break;
            };
            (r, t)
        };
        if spec.duration_ns.is_some_and(|d| t >= d) {
            break;
        }
        if ramp {
            // Still issuing a level's measured arrivals well after its window ended in real
            // time: the backlog alone says it did not keep up (and judging it now bounds the
            // run).
            if let Some((_, l)) = levels.get(current_level) {
                if backlogged(l, started.elapsed(), t) {
                    saturated_level = Some(current_level);
                    break;
                }
            }
            // Entering a later level: judge the ones whose windows ended.
            while current_level < levels.len() && t >= levels[current_level].1.end_ns {
                let due = Duration::from_nanos(levels[current_level].1.end_ns);
                let now = started.elapsed();
                if due > now {
                    std::thread::sleep(due - now);
                }
                let done = counts.done[current_level].load(Ordering::Relaxed);
                let arrived = level_arrived[current_level];
                if (done as f64) < SATURATED_BELOW * arrived as f64 {
                    saturated_level = Some(current_level);
                    break;
                }
                current_level += 1;
            }
            if saturated_level.is_some() {
                break;
            }
            if let Some(i) = levels
                .iter()
                .position(|(_, l)| t >= l.measure_ns && t < l.end_ns)
            {
                level_arrived[i] += 1;
            }
        }
        let due = Duration::from_nanos(t);
        let now = started.elapsed();
        if due > now {
            std::thread::sleep(due - now);
        } else if now - due > Duration::from_millis(1) {
            late += 1;
        }
        let (first, count) = exp.workload.span(&req, addressing);
        let job = Job {
            arrival_ns: t,
            first,
            count,
            read: req.op == Op::Read,
            seed: issued,
        };
        issued += 1;
        if tx.send(job).is_err() {
            break;
        }
    }
    drop(tx);
    for h in handles {
        let _ = h.join();
    }
    if let Some(e) = dispatch_err {
        return Err(e);
    }
    if let Some(e) = failure.lock().unwrap_or_else(|e| e.into_inner()).take() {
        return Err(Error::store(uri.to_string(), e));
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let mut records = std::mem::take(&mut *records.lock().unwrap_or_else(|e| e.into_inner()));
    records.sort_unstable_by_key(|r| r.arrival_ns);
    if let Some(path) = &opts.log {
        let ioerr = |e: std::io::Error| Error::store(path.display().to_string(), e.to_string());
        let mut w = std::io::BufWriter::new(std::fs::File::create(path).map_err(ioerr)?);
        writeln!(w, "arrival_ns,latency_ns,op,ok").map_err(ioerr)?;
        for r in &records {
            writeln!(
                w,
                "{},{},{},{}",
                r.arrival_ns,
                r.done_ns - r.arrival_ns,
                if r.read { "r" } else { "w" },
                u8::from(r.ok)
            )
            .map_err(ioerr)?;
        }
        w.flush().map_err(ioerr)?;
    }
    let from = spec.measure_from_ns;
    let measured: Vec<&Record> = records.iter().filter(|r| r.arrival_ns >= from).collect();
    let lat = |f: &dyn Fn(&Record) -> bool| {
        latency_json(
            measured
                .iter()
                .filter(|r| f(r))
                .map(|r| r.done_ns - r.arrival_ns)
                .collect(),
        )
    };
    let last_done = measured.iter().map(|r| r.done_ns).max().unwrap_or(from);
    let span_s = (last_done.saturating_sub(from)) as f64 / 1e9;
    let level_rows: Vec<Value> = levels
        .iter()
        .enumerate()
        .take_while(|(i, _)| saturated_level.is_none_or(|s| *i <= s) && *i <= current_level)
        .map(|(i, (iops, l))| {
            let in_window: Vec<u64> = records
                .iter()
                .filter(|r| r.arrival_ns >= l.measure_ns && r.arrival_ns < l.end_ns)
                .map(|r| r.done_ns - r.arrival_ns)
                .collect();
            let done = counts.done[i].load(Ordering::Relaxed);
            let window_s = (l.end_ns - l.measure_ns) as f64 / 1e9;
            let mean = if in_window.is_empty() {
                Value::Null
            } else {
                json!(in_window.iter().sum::<u64>() as f64 / in_window.len() as f64 / 1e6)
            };
            json!({
                "level_iops": iops,
                "arrived": level_arrived[i],
                "completed": done,
                "iops": done as f64 / window_s,
                "latency_mean_ms": mean,
                "saturated": saturated_level == Some(i),
            })
        })
        .collect();
    Ok(json!({
        "uri": uri,
        "workload": exp.name,
        "workers": opts.workers,
        "requests": issued,
        "completed": measured.len(),
        "errors": errors.load(Ordering::Relaxed),
        "late": late,
        "elapsed_s": elapsed_s,
        "started_unix_s": started_unix_s,
        "iops": if span_s > 0.0 { measured.len() as f64 / span_s } else { 0.0 },
        "latency": lat(&|_| true),
        "read_latency": lat(&|r| r.read),
        "write_latency": lat(&|r| !r.read),
        "ramp": level_rows,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_is_backlogged_only_past_its_margin() {
        // Measured from 5 s to 15 s: the margin is 5% of 10 s, 0.5 s.
        let l = Level {
            start_ns: 0,
            measure_ns: 5_000_000_000,
            end_ns: 15_000_000_000,
        };
        let s = Duration::from_secs_f64;
        let last = 14_999_000_000;
        assert!(!backlogged(&l, s(15.001), last), "one arrival gap late");
        assert!(!backlogged(&l, s(15.499), last));
        assert!(backlogged(&l, s(15.5), last));
        // Arrivals outside the measured window are judged by their own level.
        assert!(!backlogged(&l, s(20.0), 4_000_000_000));
        assert!(!backlogged(&l, s(20.0), 15_000_000_000));
    }
}
