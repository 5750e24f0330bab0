//! Who runs the destage rounds (`destage.rs`): the destager thread, and on slow members a
//! pool of threads beside it.
//!
//! **Fast members** (tmpfs, the page cache): one thread runs rounds of every destage the
//! rate allows. A round's fixed costs (a backup commit for its partial parities, a sync of
//! every member, a bitmap write) then dominate, so they are shared by the round's groups,
//! and `pace` spaces rounds out while the rate is below its maximum.
//!
//! **Slow members** (`Controller::fan_out`: a disk-timed member, or one whose operations
//! take at least `fanout::SLOW_NS_MIN`; always under the scheduled tests): a round is as
//! long as its slowest group, and the next could start only after it: measured with
//! disk-timed members under STOW's ramp, rounds of ~20 destages took 350-450 ms and left the
//! members ~70% busy. So up to `max_destages` threads (the destager and `max_destages - 1`
//! workers, started the first time the members are slow) each run rounds of one group: a
//! destage that lands frees its pages and its slot in the cache at once, and its thread
//! starts the next, as the simulator keeps `max_destages` destages in flight. The cache's
//! own count of destages in flight still bounds them by the rate's allowance.
//!
//! The destager thread alone carries a lost backup through its states (`lost_backup_step`)
//! and joins the workers when it stops.

use crate::sync::Instant;
use crate::sync::{thread, Arc, Ordering};
use std::time::Duration;

use super::destage::{Batch, Round};
use super::{warn, Mode, WriteBack};

/// Bytes of page data one destage round on fast members copies out of the cache at most.
const ROUND_BYTES_MAX: usize = 16 << 20;
/// How often a write-through controller tries to bring its backup back.
const PROBE_EVERY: Duration = Duration::from_secs(5);
/// The least time between the starts of two rounds the rate holds below its maximum.
const ROUND_GAP: Duration = Duration::from_millis(10);
/// Bound on the waits of one `pace` (each wakes at a notification or the deadline).
const PACE_WAITS_MAX: u32 = 1_000;

impl WriteBack {
    /// Start the destager thread (which starts its workers); it ends, after them, after
    /// `stop`.
    pub fn spawn_destager(self: &Arc<Self>) -> thread::JoinHandle<()> {
        let me = Arc::clone(self);
        thread::Builder::new()
            .name("raidlab-destage".into())
            .spawn(move || me.destage_loop())
            .expect("spawning a thread")
    }

    fn destage_loop(self: Arc<Self>) {
        // Destage I/O queues behind user I/O on disk-timed members.
        crate::member::timed::set_thread_class(raidlab::disk::Class::Destage);
        let mut big = Batch::new(ROUND_BYTES_MAX.max(self.group_bytes()));
        // At most `max_destages - 1` (bounded by `setup::MAX_DESTAGES_MAX`): with the
        // destager, one thread per destage the rate may have in flight.
        let mut workers: Vec<thread::JoinHandle<()>> = Vec::new();
        let mut last_probe = Instant::now();
        while !self.stop.load(Ordering::SeqCst) {
            let slow = self.ctl.fan_out(0..self.ctl.shape().disks);
            if slow && workers.is_empty() {
                for i in 1..self.spec.max_destages.max(1) {
                    let me = Arc::clone(&self);
                    workers.push(
                        thread::Builder::new()
                            .name(format!("raidlab-destage-{i}"))
                            .spawn(move || me.destage_worker())
                            .expect("spawning a thread"),
                    );
                }
            }
            let t0 = Instant::now();
            // On slow members the destager is one of the pool: rounds of one group.
            let groups_max = if slow { 1 } else { usize::MAX };
            match self.destage_round(&mut big, groups_max, false, true) {
                Round::Idle => self.lost_backup_step(&mut last_probe),
                Round::Ran { limited: true } if !slow => {
                    self.pace(ROUND_GAP.saturating_sub(t0.elapsed()))
                }
                Round::Ran { .. } => {}
            }
        }
        let mut panicked = None;
        for w in workers {
            if let Err(e) = w.join() {
                panicked = Some(e);
            }
        }
        if let Some(e) = panicked {
            std::panic::resume_unwind(e);
        }
    }

    /// A worker of the pool: rounds of one group while the members are slow; while they
    /// are fast the destager's rounds take everything, and the worker only waits.
    fn destage_worker(self: Arc<Self>) {
        crate::member::timed::set_thread_class(raidlab::disk::Class::Destage);
        let mut b = Batch::new(self.group_bytes());
        while !self.stop.load(Ordering::SeqCst) {
            if self.ctl.fan_out(0..self.ctl.shape().disks) {
                self.destage_round(&mut b, 1, false, true);
            } else {
                // Not on `work`: a writer's `notify_one` there must reach the destager.
                drop(self.wait(&self.room, self.lock()));
            }
        }
    }

    /// After a round the rate held below its maximum: wait out the rest of `gap` unless
    /// the rate rises to its maximum, a FLUSH or drain wants everything, or the cache stops.
    /// On fast members a round takes well under `ROUND_GAP` and is mostly its fixed costs
    /// (a backup commit for its partial parities, a sync of every member it wrote, the
    /// release): started back to back at a low rate, rounds of one small group each paid
    /// them ~1,600 times a second at depth 1 and took the disk's flushes from the writers.
    /// Not called when the members are slow (their mean operation at or above
    /// `fanout::SLOW_NS_MIN`, as for disk-timed members): a round is then long anyway.
    fn pace(&self, gap: Duration) {
        if gap.is_zero() {
            return;
        }
        let start = Instant::now();
        let mut g = self.lock();
        for _ in 0..PACE_WAITS_MAX {
            let spent = start.elapsed();
            if spent >= gap
                || self.stop.load(Ordering::SeqCst)
                || g.flushing > 0
                || g.mode != Mode::Backed
                || g.cache.allowed() >= g.cache.rate().max()
            {
                return;
            }
            g = crate::sync::wait_timeout(&self.work, &self.inner, g, gap - spent);
        }
    }

    /// A lost backup: once the drain is over, void the backup and write through; while
    /// writing through, try now and then to bring the backup back (a fresh epoch).
    fn lost_backup_step(&self, last_probe: &mut Instant) {
        let Some(b) = &self.backup else {
            return;
        };
        let mut g = self.lock();
        match g.mode.clone() {
            Mode::Backed => {}
            Mode::Draining(why) => {
                // Every destage of every thread has landed once nothing is left.
                if g.cache.occupied() > 0 {
                    return;
                }
                // Everything is on the members: the backup's records must never be replayed
                // over what is now written straight to the array.
                if let Err(e) = b.reset() {
                    let epoch = b.epoch();
                    let voided = match &self.void_hook {
                        Some(h) => h(epoch).map_err(|e2| e2.to_string()),
                        None => Err("no place to record it".to_string()),
                    };
                    if let Err(e2) = voided {
                        // Neither worked: refuse writes rather than risk a stale replay.
                        g.failed = Some(format!(
                            "the write-cache backup failed ({why}) and could be neither reset ({e}) nor voided ({e2})"
                        ));
                        self.room.notify_all();
                        return;
                    }
                }
                warn(&format!("write cache drained; writing through ({why})"));
                g.mode = Mode::WriteThrough(why);
                *last_probe = Instant::now();
                self.room.notify_all();
            }
            Mode::WriteThrough(_) => {
                if last_probe.elapsed() < PROBE_EVERY {
                    return;
                }
                *last_probe = Instant::now();
                if b.reset().is_ok() {
                    warn("write-cache backup is writable again; write-back resumed");
                    g.mode = Mode::Backed;
                    self.room.notify_all();
                }
            }
        }
    }
}
