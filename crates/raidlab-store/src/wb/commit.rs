//! Group commit: many writers, one sync at a time, each writer waiting for a sync that
//! started after its own write. The first waiter with no sync running becomes the leader
//! and runs the commit (write what is staged, fdatasync); the others wait for it, so under
//! load one fdatasync covers every write staged before it started.
//!
//! Waiters sleep on one of two condition variables by the parity of the commit they need,
//! so a finished commit wakes only the writers it covers, and one writer to lead the next
//! commit: with one variable, every writer waiting for the next commit woke at the end of
//! each commit only to sleep again, and on two cores the server spent most of its time
//! switching threads.

use crate::sync::{AtomicU64, Condvar, Mutex, MutexGuard, Ordering};
use std::io;

#[derive(Debug, Default)]
struct State {
    /// Commits started and finished (a commit's number is `started` when it began).
    started: u64,
    finished: u64,
    running: bool,
    /// The last commit's error, sticky: every later waiter sees it too.
    failed: Option<String>,
}

/// The coordinator of one backup's commits.
#[derive(Debug, Default)]
pub struct GroupCommit {
    state: Mutex<State>,
    /// `done[n % 2]`: the writers waiting for commit `n`.
    done: [Condvar; 2],
    /// Calls to `commit` (statistics: calls per sync is how well commits group).
    calls: std::sync::atomic::AtomicU64,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl GroupCommit {
    /// Make durable everything staged before this call: returns once a commit that started
    /// after the call finished. `commit` (the leader's work) writes the staged records and
    /// syncs; it runs with no lock held. Bounded: at most two commits are waited for.
    pub fn commit(&self, commit: &dyn Fn() -> io::Result<()>) -> io::Result<()> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut st = lock(&self.state);
        // A commit already running may have missed our records: wait for the next one.
        let need = st.started + 1;
        loop {
            if let Some(e) = &st.failed {
                return Err(io::Error::other(e.clone()));
            }
            if st.finished >= need {
                return Ok(());
            }
            if !st.running {
                st.running = true;
                st.started += 1;
                let me = st.started;
                drop(st);
                let r = commit();
                st = lock(&self.state);
                st.running = false;
                st.finished = me;
                if let Err(e) = &r {
                    st.failed = Some(e.to_string());
                }
                let [covered, next] = [me % 2, (me + 1) % 2].map(|i| &self.done[i as usize]);
                covered.notify_all();
                if r.is_err() {
                    next.notify_all();
                } else {
                    // A writer waiting for the next commit leads it.
                    next.notify_one();
                }
                r?;
                continue;
            }
            st = self.done[(need % 2) as usize]
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Calls to `commit` so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Forget a failure (the backup was replaced).
    pub fn reset(&self) {
        lock(&self.state).failed = None;
    }
}

/// A flush generation: writes that reached the members without a sync are counted as they
/// complete, and a FLUSH runs a member sync unless one that began after those writes has
/// finished. The count a finished sync covers is kept under a lock held across the sync,
/// so a second FLUSH waits for a sync in progress rather than answering before it (a
/// boolean "something was written" flag, cleared by the first FLUSH before its sync, let
/// the second one return at once).
#[derive(Debug, Default)]
pub struct FlushGen {
    written: AtomicU64,
    synced: Mutex<u64>,
}

impl FlushGen {
    /// A write reached the members without a sync (call after it completed).
    pub fn wrote(&self) {
        self.written.fetch_add(1, Ordering::SeqCst);
    }

    /// Make every write counted before this call durable, running `sync` if no finished
    /// sync covers them. Bounded: at most one sync, after waiting for one in progress.
    pub fn flush<E>(&self, sync: impl FnOnce() -> Result<(), E>) -> Result<(), E> {
        let target = self.written.load(Ordering::SeqCst);
        let mut synced = self.synced.lock().unwrap_or_else(|e| e.into_inner());
        if *synced < target {
            // Every write counted before the sync begins is covered by it.
            let covers = self.written.load(Ordering::SeqCst);
            sync()?;
            *synced = covers;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn concurrent_writers_share_syncs_and_each_sees_one_after_its_write() {
        let gc = Arc::new(GroupCommit::default());
        let staged = Arc::new(AtomicU64::new(0));
        let synced = Arc::new(AtomicU64::new(0));
        let syncs = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (gc, staged, synced, syncs) =
                    (gc.clone(), staged.clone(), synced.clone(), syncs.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let mine = staged.fetch_add(1, Ordering::SeqCst) + 1;
                        gc.commit(&|| {
                            let upto = staged.load(Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_micros(50));
                            synced.fetch_max(upto, Ordering::SeqCst);
                            syncs.fetch_add(1, Ordering::SeqCst);
                            Ok(())
                        })
                        .unwrap();
                        assert!(synced.load(Ordering::SeqCst) >= mine);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(syncs.load(Ordering::SeqCst) <= 800);
        assert_eq!(gc.calls(), 800);
    }

    #[test]
    fn a_failed_commit_fails_every_later_wait() {
        let gc = GroupCommit::default();
        assert!(gc.commit(&|| Err(io::Error::other("eio"))).is_err());
        assert!(gc.commit(&|| Ok(())).is_err());
        gc.reset();
        assert!(gc.commit(&|| Ok(())).is_ok());
    }
}
