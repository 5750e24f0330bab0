//! Who runs the destage rounds (`destage.rs`): the destager thread, and on slow members a
//! pool of worker threads it feeds.
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
//! members ~70% busy. So the destages land on their own: the destager starts every destage
//! the rate allows, each a round of one group in its own `Batch`, sets the write-intent
//! bits of all it started with one bitmap write, and queues them; `max_destages` workers
//! (started the first time the members are slow) each take one, write it, sync the members,
//! release its records and free its pages, and give the batch back. A destage that lands
//! frees its slot in the cache at once and wakes the destager, which starts the next, as
//! the simulator keeps `max_destages` destages in flight. The bitmap write stays shared:
//! with one row per bitmap region (1 GiB members before md's 64 MiB regions became the
//! default, `ctrl::sync::REGION_BYTES_DEFAULT`) nearly every destage dirtied a new region,
//! and with a bitmap write (every member's, under the array's intent lock) per destage the
//! STOW ramp's LRW reached 397 IOPS at 20 ms; the destages that land during one bitmap
//! write are started together after it (647; 786 once a destage's own writes no longer
//! took the intent lock, `Controller::write_row_pages_begun`). Each worker's destage takes
//! its rows' partial parities from its parity update's own reads (`write_batch`).
//!
//! **Bounded.** There are `max_destages` batches (at most `setup::MAX_DESTAGES_MAX`), so
//! the queue holds at most that many, and the cache's own count of destages in flight
//! holds them to the rate's allowance. The destager alone carries a lost backup through
//! its states (`lost_backup_step`); when it stops, the workers finish what is queued and
//! are joined.

use std::collections::VecDeque;

use crate::sync::Instant;
use crate::sync::{thread, Arc, Condvar, Mutex, Ordering};
use std::time::Duration;

use super::destage::{Batch, Round};
use super::{warn, Mode, WriteBack, WAIT_SLICE};

/// Bytes of page data one destage round on fast members copies out of the cache at most.
const ROUND_BYTES_MAX: usize = 16 << 20;
/// How often a write-through controller tries to bring its backup back.
const PROBE_EVERY: Duration = Duration::from_secs(5);
/// The least time between the starts of two rounds the rate holds below its maximum.
const ROUND_GAP: Duration = Duration::from_millis(10);
/// Bound on the waits of one `pace` (each wakes at a notification or the deadline).
const PACE_WAITS_MAX: u32 = 1_000;

/// The destages started on slow members and the batches free for more.
#[derive(Default)]
struct Queue {
    /// Started, their intents begun: for the workers.
    ready: VecDeque<Batch>,
    /// Given back by the workers (with those in `ready` and in the workers' hands, there
    /// are `max_destages`).
    free: Vec<Batch>,
    stop: bool,
}

struct Pool {
    q: Mutex<Queue>,
    /// A destage was queued, or the pool stops.
    queued: Condvar,
}

impl Pool {
    fn lock(&self) -> crate::sync::MutexGuard<'_, Queue> {
        self.q.lock().unwrap_or_else(|e| e.into_inner())
    }
}

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
        let pool = Arc::new(Pool {
            q: Mutex::new(Queue::default()),
            queued: Condvar::new(),
        });
        // `max_destages` of them (bounded by `setup::MAX_DESTAGES_MAX`), started the first
        // time the members are slow.
        let mut workers: Vec<thread::JoinHandle<()>> = Vec::new();
        let mut last_probe = Instant::now();
        while !self.stop.load(Ordering::SeqCst) {
            let slow = self.ctl.fan_out(0..self.ctl.shape().disks);
            if slow && workers.is_empty() {
                let n = self.spec.max_destages.max(1);
                let mut q = pool.lock();
                for i in 0..n {
                    q.free.push(Batch::new(self.group_bytes()));
                    let (me, pool) = (Arc::clone(&self), Arc::clone(&pool));
                    workers.push(
                        thread::Builder::new()
                            .name(format!("raidlab-destage-{i}"))
                            .spawn(move || me.destage_worker(&pool))
                            .expect("spawning a thread"),
                    );
                }
            }
            let t0 = Instant::now();
            let round = if slow {
                self.start_destages(&pool)
            } else {
                self.destage_round(&mut big, usize::MAX, false, true)
            };
            match round {
                Round::Idle => self.lost_backup_step(&mut last_probe),
                Round::Ran { limited: true } if !slow => {
                    self.pace(ROUND_GAP.saturating_sub(t0.elapsed()))
                }
                Round::Ran { .. } => {}
            }
        }
        pool.lock().stop = true;
        pool.queued.notify_all();
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

    /// Slow members: start every destage the rate allows (each a round of one group), set
    /// their write intents with one bitmap write, and queue them for the workers. `Idle`
    /// (after waiting a little) when none started.
    fn start_destages(&self, pool: &Pool) -> Round {
        let mut started: Vec<Batch> = Vec::new();
        // Bounded: each pass takes a free batch, and there are `max_destages`.
        loop {
            let Some(mut b) = pool.lock().free.pop() else {
                if started.is_empty() {
                    // Every batch is in flight: wait for one to land (`settle` wakes us).
                    drop(self.wait(&self.work, self.lock()));
                }
                break;
            };
            if self.take(&mut b, 1, false, started.is_empty()) {
                started.push(b);
            } else {
                pool.lock().free.push(b);
                break;
            }
        }
        if started.is_empty() {
            return Round::Idle;
        }
        let per_row = self.ctl.geo.blocks_per_stripe();
        let rows: Vec<(u64, u64)> = started.iter().flat_map(|b| b.rows(per_row)).collect();
        let begun = self.ctl.intent_begin_all(&rows);
        let mut q = pool.lock();
        for mut b in started {
            b.intent = Some(begun.clone());
            q.ready.push_back(b);
        }
        drop(q);
        pool.queued.notify_all();
        // Not paced on slow members: `limited` does not matter.
        Round::Ran { limited: false }
    }

    /// A worker of the pool: destages queued by `start_destages`, one at a time, each
    /// written, synced, released and freed on its own.
    fn destage_worker(&self, pool: &Pool) {
        crate::member::timed::set_thread_class(raidlab::disk::Class::Destage);
        loop {
            let mut b = {
                let mut q = pool.lock();
                // Bounded: each wait ends at a notification or after a slice, and the
                // destager sets `stop` when it ends (what is queued still goes out).
                loop {
                    if let Some(b) = q.ready.pop_front() {
                        break b;
                    }
                    if q.stop {
                        return;
                    }
                    q = crate::sync::wait_timeout(&pool.queued, &pool.q, q, WAIT_SLICE);
                }
            };
            self.write_batch(&mut b);
            self.settle(&mut b);
            pool.lock().free.push(b);
            // `settle` woke the destager when the slot freed, maybe before this batch was
            // back: wake it again, or with every batch out it would wait a slice.
            self.work.notify_one();
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
