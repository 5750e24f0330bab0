//! `check` and `repair` as a background job, like md's `sync_action`: `ctl DIR check`
//! starts one (`echo check > sync_action`), `ctl status` shows its progress, its mismatch
//! count (md's `mismatch_cnt`, in rows) and the first mismatching rows, and `ctl DIR repair`
//! also rewrites the redundancy of those rows from their data (`echo repair`).
//!
//! The job runs row by row on a thread of its own with `Controller::sync_row`, which locks
//! each row, so it runs while the array serves. One job at a time; the last one stays
//! visible in the status until the next starts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{Controller, IoFail};

/// Mismatching rows listed at most.
pub const FIRST_MISMATCHES: usize = 16;

/// How a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Running,
    Done,
    /// Stopped by `ctl check --cancel` or by the server's stop.
    Cancelled,
    /// The array failed under it.
    Failed,
}

impl JobState {
    pub fn name(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Cancelled => "cancelled",
            JobState::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone)]
struct Progress {
    state: JobState,
    rows_done: u64,
    mismatches: u64,
    skipped: u64,
    first: Vec<u64>,
    error: Option<String>,
    elapsed: Option<Duration>,
}

/// One check or repair.
#[derive(Debug)]
pub struct CheckJob {
    pub id: u64,
    pub repair: bool,
    rows: u64,
    /// Rate limit in KiB/s per member (md's `sync_speed_max`); 0: none.
    max_kib_s: u64,
    chunk_bytes: u64,
    data_disks: u64,
    data_offset_bytes: u64,
    started: Instant,
    cancel: AtomicBool,
    progress: Mutex<Progress>,
}

impl CheckJob {
    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn state(&self) -> JobState {
        self.lock().state
    }

    pub fn is_running(&self) -> bool {
        self.state() == JobState::Running
    }

    /// Ask the job to stop after the row it is on.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::SeqCst);
    }

    /// Wait until the job ends or `stop` is set; whether it ended.
    pub fn wait(&self, stop: &AtomicBool) -> bool {
        while self.is_running() {
            if stop.load(Ordering::SeqCst) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Mismatches found so far.
    pub fn mismatches(&self) -> u64 {
        self.lock().mismatches
    }

    /// The job as `ctl status` shows it (`"check"`), and as `ctl check --wait` reports it.
    pub fn status(&self) -> Value {
        let p = self.lock().clone();
        let elapsed = p.elapsed.unwrap_or_else(|| self.started.elapsed());
        let first: Vec<Value> = p
            .first
            .iter()
            .map(|&row| {
                json!({
                    "row": row,
                    "array_offset_bytes": row * self.chunk_bytes * self.data_disks,
                    "member_offset_bytes": self.data_offset_bytes + row * self.chunk_bytes,
                })
            })
            .collect();
        json!({
            "id": self.id,
            "kind": if self.repair { "repair" } else { "check" },
            "state": p.state.name(),
            "rows": self.rows,
            "rows_done": p.rows_done,
            "fraction": if self.rows == 0 { 1.0 } else { p.rows_done as f64 / self.rows as f64 },
            "mismatches": p.mismatches,
            "repaired": if self.repair { p.mismatches } else { 0 },
            "skipped": p.skipped,
            "first_mismatches": first,
            "elapsed_s": elapsed.as_secs_f64(),
            "max_kib_s": self.max_kib_s,
            "error": p.error,
        })
    }

    fn run(&self, ctl: &Controller) {
        // Check and repair I/O may wait behind everything else on disk-timed members.
        crate::member::timed::set_thread_class(raidlab::disk::Class::Background);
        let per_row_kib = self.chunk_bytes as f64 / 1024.0;
        for row in 0..self.rows {
            if self.cancel.load(Ordering::SeqCst) || ctl.stopping() {
                self.finish(JobState::Cancelled, None);
                return;
            }
            let r = ctl.sync_row(row, self.repair);
            {
                let mut p = self.lock();
                match r {
                    Ok(Some(true)) => {
                        p.mismatches += 1;
                        if p.first.len() < FIRST_MISMATCHES {
                            p.first.push(row);
                        }
                    }
                    Ok(Some(false)) => {}
                    Ok(None) => p.skipped += 1,
                    Err(IoFail::Failed(e)) => {
                        drop(p);
                        self.finish(JobState::Failed, Some(e));
                        return;
                    }
                    Err(_) => p.skipped += 1,
                }
                p.rows_done = row + 1;
            }
            if self.max_kib_s > 0 {
                // Pace rows so the job reads at most max_kib_s per member.
                let due =
                    Duration::from_secs_f64((row + 1) as f64 * per_row_kib / self.max_kib_s as f64);
                let ahead = due.saturating_sub(self.started.elapsed());
                if !ahead.is_zero() {
                    std::thread::sleep(ahead.min(Duration::from_millis(200)));
                    // Long waits are taken in slices so a cancel is seen.
                    while due > self.started.elapsed() {
                        if self.cancel.load(Ordering::SeqCst) || ctl.stopping() {
                            break;
                        }
                        std::thread::sleep(
                            due.saturating_sub(self.started.elapsed())
                                .min(Duration::from_millis(200)),
                        );
                    }
                }
            }
        }
        self.finish(JobState::Done, None);
    }

    fn finish(&self, state: JobState, error: Option<String>) {
        let mut p = self.lock();
        p.state = state;
        p.error = error;
        p.elapsed = Some(self.started.elapsed());
    }
}

/// The server's check jobs: the one running, or the last one.
#[derive(Debug, Default)]
pub struct Checks {
    last: Mutex<Option<Arc<CheckJob>>>,
    ids: AtomicU64,
}

impl Checks {
    /// The running job, or the last one.
    pub fn current(&self) -> Option<Arc<CheckJob>> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Start a check (`repair`: and rewrite the redundancy of mismatching rows), at most
    /// `max_kib_s` KiB/s per member (0: unlimited). Refused while another job runs or
    /// the array has failed.
    pub fn start(
        &self,
        ctl: &Arc<Controller>,
        repair: bool,
        max_kib_s: u64,
    ) -> Result<Arc<CheckJob>, String> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(j) = last.as_ref().filter(|j| j.is_running()) {
            return Err(format!(
                "a {} is already running ({} of {} rows; `ctl status` shows it, `ctl check --cancel` stops it)",
                if j.repair { "repair" } else { "check" },
                j.lock().rows_done,
                j.rows
            ));
        }
        if ctl.is_dead() {
            return Err("the array has failed: nothing to check".into());
        }
        if repair {
            // Repair writes the members: the array is dirty until the next clean stop, so
            // a crash in the middle of a row's rewrite is resynced.
            ctl.set_clean(false);
        }
        let shape = ctl.shape();
        let job = Arc::new(CheckJob {
            id: self.ids.fetch_add(1, Ordering::SeqCst) + 1,
            repair,
            rows: shape.rows(),
            max_kib_s,
            chunk_bytes: shape.chunk_bytes,
            data_disks: shape.data_disks(),
            data_offset_bytes: shape.data_offset_bytes,
            started: Instant::now(),
            cancel: AtomicBool::new(false),
            progress: Mutex::new(Progress {
                state: JobState::Running,
                rows_done: 0,
                mismatches: 0,
                skipped: 0,
                first: Vec::new(),
                error: None,
                elapsed: None,
            }),
        });
        let (j, c) = (Arc::clone(&job), Arc::clone(ctl));
        std::thread::Builder::new()
            .name("raidlab-check".into())
            .spawn(move || j.run(&c))
            .map_err(|e| format!("cannot start the check thread: {e}"))?;
        *last = Some(Arc::clone(&job));
        Ok(job)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{controller, mem_members, shape};
    use super::*;
    use crate::member::Member;
    use raidlab::array::Level;

    #[test]
    fn a_repair_job_finds_and_fixes_a_planted_parity_mismatch() {
        let sh = shape(Level::Raid5, 4, 4);
        let m = mem_members(&sh, "ck", 4);
        let (c, _) = controller(&sh, &m, Default::default());
        let ctl = Arc::new(c);
        let data = crate::ctrl::tests_pattern::pattern(7, ctl.size_bytes() as usize);
        ctl.write(0, &data, false).unwrap();
        let checks = Checks::default();
        let never = AtomicBool::new(false);
        let j = checks.start(&ctl, false, 0).unwrap();
        assert!(j.wait(&never));
        assert_eq!(j.status()["mismatches"], 0);
        // Plant a mismatch: one byte of row 2's unit on member 0 (parity or data, either
        // way the row no longer adds up).
        let row = 2u64;
        let off = sh.data_offset_bytes + row * sh.chunk_bytes + 100;
        let mut b = [0u8; 1];
        m[0].read_at(&mut b, off).unwrap();
        b[0] ^= 0x5a;
        m[0].write_at(&b, off).unwrap();
        let j = checks.start(&ctl, false, 0).unwrap();
        assert!(j.wait(&never));
        let st = j.status();
        assert_eq!(
            (st["state"].as_str(), st["mismatches"].as_u64()),
            (Some("done"), Some(1))
        );
        assert_eq!(st["first_mismatches"][0]["row"], row);
        assert_eq!(st["rows_done"], sh.rows());
        let j = checks.start(&ctl, true, 0).unwrap();
        assert!(j.wait(&never));
        assert_eq!(j.status()["repaired"], 1);
        let j = checks.start(&ctl, false, 0).unwrap();
        assert!(j.wait(&never));
        assert_eq!(j.status()["mismatches"], 0, "repaired");
    }

    #[test]
    fn a_paced_job_shows_progress_refuses_a_second_and_can_be_cancelled() {
        let sh = shape(Level::Raid1, 2, 8);
        let m = mem_members(&sh, "cp", 2);
        let (c, _) = controller(&sh, &m, Default::default());
        let ctl = Arc::new(c);
        let checks = Checks::default();
        // One row per 100 ms.
        let kib = sh.chunk_bytes / 1024 * 10;
        let j = checks.start(&ctl, false, kib).unwrap();
        std::thread::sleep(Duration::from_millis(250));
        let st = j.status();
        assert_eq!(st["state"], "running");
        assert!(st["rows_done"].as_u64().unwrap() >= 1);
        assert!(checks
            .start(&ctl, true, 0)
            .unwrap_err()
            .contains("already running"));
        j.cancel();
        assert!(j.wait(&AtomicBool::new(false)));
        assert_eq!(j.state(), JobState::Cancelled);
        assert_eq!(checks.current().unwrap().id, j.id);
    }
}
