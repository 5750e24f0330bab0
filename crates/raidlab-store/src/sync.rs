//! The store's one seam for concurrency (DESIGN §9): every thread, lock, condition variable
//! and shared atomic of the controller, the write-back cache, the backups and the metadata
//! sink comes from here.
//!
//! In a normal build these are `std`'s. Built with the `shuttle` feature they are the
//! `shuttle` crate's, so a test can run the real controller, destager, rebuild, resync and
//! control threads under a deterministic, seeded scheduler that chooses the interleaving at
//! every lock, wait, atomic and member I/O (`tests/sched.rs`). Shuttle does not model time:
//! `sleep` is a context switch and a timed wait may time out at any point, which is exactly
//! the freedom a real scheduler has.
//!
//! Obligations of the code that uses it: no `std::sync` lock held across a call that can
//! switch (a seam lock, a member I/O); thread-local scratch space declared with this
//! module's `thread_local!` (shuttle's tasks share one OS thread).

#[cfg(not(feature = "shuttle"))]
mod imp {
    pub use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
    pub use std::sync::{
        Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError,
    };
    pub use std::thread;
    pub use std::thread_local;
    pub use std::time::Instant;

    /// A point where the scheduler may switch tasks (a no-op outside the test scheduler).
    #[inline(always)]
    pub fn switch() {}

    /// Wait on `cv` for a notification or at most `dur`, then hold `m` again.
    pub fn wait_timeout<'a, T>(
        cv: &Condvar,
        m: &'a Mutex<T>,
        g: MutexGuard<'a, T>,
        dur: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        wait_timeout_woken(cv, m, g, dur).0
    }

    /// [`wait_timeout`], and whether the wait ended before `dur` (a notification, or a
    /// spurious wake-up) rather than by timing out.
    pub fn wait_timeout_woken<'a, T>(
        cv: &Condvar,
        _m: &'a Mutex<T>,
        g: MutexGuard<'a, T>,
        dur: std::time::Duration,
    ) -> (MutexGuard<'a, T>, bool) {
        let (g, r) = cv.wait_timeout(g, dur).unwrap_or_else(|e| e.into_inner());
        (g, !r.timed_out())
    }
}

#[cfg(feature = "shuttle")]
mod imp {
    pub use shuttle::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
    pub use shuttle::sync::{
        Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard,
    };
    pub use shuttle::thread;
    pub use shuttle::thread_local;
    pub use std::sync::TryLockError;

    /// A point where the scheduler may switch tasks: member I/O and other effects that
    /// another thread can observe.
    pub fn switch() {
        shuttle::thread::yield_now();
    }

    /// Wait on `cv` for a notification or at most `dur`, then hold `m` again. Shuttle's own
    /// timed wait never times out, so a wake-up the code tolerates missing (it looks again
    /// after `dur`) would block a scheduled run for ever; here the wait may end at any
    /// point the scheduler picks, as a timeout can: the lock is released, other threads
    /// run, and it is taken again.
    pub fn wait_timeout<'a, T>(
        _cv: &Condvar,
        m: &'a Mutex<T>,
        g: MutexGuard<'a, T>,
        _dur: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        drop(g);
        shuttle::thread::yield_now();
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`wait_timeout`]; under the scheduler no wait is a wake-up (there is no time to
    /// tell one from a timeout).
    pub fn wait_timeout_woken<'a, T>(
        cv: &Condvar,
        m: &'a Mutex<T>,
        g: MutexGuard<'a, T>,
        dur: std::time::Duration,
    ) -> (MutexGuard<'a, T>, bool) {
        (wait_timeout(cv, m, g, dur), false)
    }

    /// The virtual clock: every reading advances it by one millisecond, so time-driven
    /// decisions (rebuild checkpoints, bitmap clearing, the backup probe) happen at points
    /// the schedule decides, and a replayed seed sees the same times.
    static CLOCK_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    const TICK_NS: u64 = 1_000_000;

    /// Start every scheduled run at time zero (a replay then reads the same clock).
    pub fn reset_clock() {
        CLOCK_NS.store(0, std::sync::atomic::Ordering::SeqCst);
    }

    /// `std::time::Instant`'s methods the store uses, on the virtual clock.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    pub struct Instant(u64);

    impl Instant {
        pub fn now() -> Instant {
            Instant(CLOCK_NS.fetch_add(TICK_NS, std::sync::atomic::Ordering::SeqCst) + TICK_NS)
        }
        pub fn duration_since(&self, earlier: Instant) -> std::time::Duration {
            std::time::Duration::from_nanos(self.0.saturating_sub(earlier.0))
        }
        pub fn elapsed(&self) -> std::time::Duration {
            Instant::now().duration_since(*self)
        }
    }
}

pub use imp::*;
pub use std::sync::atomic::Ordering;
pub use std::sync::Arc;
