//! The worker pool of the NBD server: connections' reply sides, queued requests, payload
//! buffers recycled through a free list, and the workers that run requests on the backend.
//! See `server.rs` for the bounds and how the reader threads feed it.

use std::collections::VecDeque;
use std::net::Shutdown;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::proto::{simple_reply, Command, ExportInfo};
use super::server::{
    Stream, FREE_BUFFERS, FREE_BYTES, FREE_MAX_BUFFER, INLINE_SERVICE_NS_MAX, MAX_IN_FLIGHT,
    PAYLOAD_BUDGET, WAIT_SLICE,
};
use super::{Backend, Errno, EIO};

/// One connection's reply side and counters.
pub(super) struct Conn {
    pub(super) id: u64,
    pub(super) writer: Mutex<Stream>,
    /// Requests queued or running; changed only under the pool lock.
    pub(super) in_flight: AtomicUsize,
    /// A reply could not be written: the connection is being torn down.
    pub(super) dead: AtomicBool,
    pub(super) requests: AtomicU64,
    pub(super) errors: AtomicU64,
    pub(super) bytes_read: AtomicU64,
    pub(super) bytes_written: AtomicU64,
}

impl Conn {
    /// Send one reply whole (header and data in one writev), so replies never interleave.
    /// (Coalescing replies finished meanwhile into one write was tried: far fewer system
    /// calls, but on 2 cores no better in CPU per request or IOPS, so the simple way stays.)
    pub(super) fn reply(&self, error: Errno, cookie: u64, data: &[u8]) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if error.0 != 0 {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        if self.dead.load(Ordering::Relaxed) {
            return;
        }
        let header = simple_reply(error, cookie);
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if w.write_all2(&header, data).is_err() {
            // The client is gone or stuck: stop serving it (the reader sees end of stream).
            self.dead.store(true, Ordering::Relaxed);
            w.shutdown(Shutdown::Both);
        }
    }
}

#[derive(Default)]
pub(super) struct PoolState {
    pub(super) jobs: VecDeque<Job>,
    pub(super) free: Vec<Vec<u8>>,
    pub(super) free_bytes: usize,
    /// Payload bytes held by queued and running requests.
    pub(super) held: usize,
    pub(super) stopping: bool,
    /// Threads waiting on `work` / `space`: notifying a condition variable costs a system
    /// call even with nobody waiting, so it is skipped then.
    pub(super) idle_workers: usize,
    pub(super) space_waiters: usize,
}

pub(super) struct Job {
    pub(super) conn: Arc<Conn>,
    pub(super) cmd: Command,
    pub(super) cookie: u64,
    pub(super) offset: u64,
    pub(super) len: u32,
    /// Payload buffer (reads and writes), at least `len` long.
    pub(super) buf: Vec<u8>,
}

impl Job {
    /// Payload bytes this job holds while queued or running.
    pub(super) fn held(&self) -> usize {
        match self.cmd {
            Command::Read | Command::Write { .. } => self.len as usize,
            _ => 0,
        }
    }
}

pub(super) struct Shared {
    pub(super) state: Mutex<PoolState>,
    /// Signalled when a job is queued (workers wait on it).
    pub(super) work: Condvar,
    /// Signalled when a job finishes (readers wait on it for budget or to drain).
    pub(super) space: Condvar,
    pub(super) backend: Arc<dyn Backend>,
    pub(super) export: ExportInfo,
    pub(super) debug: bool,
    /// Moving average of the backend's time per request, in ns (see `inline_ok`).
    pub(super) service_ns_avg: AtomicU64,
}

impl Shared {
    /// Whether the connection's reader may run a request itself instead of handing it to a
    /// worker. The reader does so only while more requests are already buffered behind
    /// this one (it would not block on the socket anyway) and while the backend answers in
    /// memory time: then the handoff (a wakeup and two context switches) costs more than
    /// the request, and on two cores it was most of the time per request (4 KiB random
    /// reads at depth 32 on a RAID-0 in tmpfs: 149 K IOPS handing every request off, 200 K
    /// with this). The last request of a burst still goes to a worker, so the reader's next
    /// wait on the socket overlaps it; a slow backend (real disks) always uses the workers,
    /// so one long request never holds up the requests behind it.
    pub(super) fn inline_ok(&self, cmd: Command) -> bool {
        !matches!(cmd, Command::Flush)
            && self.service_ns_avg.load(Ordering::Relaxed) < INLINE_SERVICE_NS_MAX
    }

    /// Run one request on the backend and send its reply.
    pub(super) fn execute(
        &self,
        conn: &Conn,
        cmd: Command,
        cookie: u64,
        offset: u64,
        len: u32,
        buf: &mut [u8],
    ) {
        let n = len as usize;
        let backend = &*self.backend;
        let t0 = std::time::Instant::now();
        // A panicking backend must not take the thread (and the drain) with it.
        let result = catch_unwind(AssertUnwindSafe(|| match cmd {
            Command::Read => backend.read(offset, &mut buf[..n]),
            Command::Write { fua } => backend.write(offset, &buf[..n], fua),
            Command::Flush => backend.flush(),
            Command::Trim { fua } => backend.trim(offset, u64::from(len), fua),
            Command::WriteZeroes { fua } => backend.write_zeroes(offset, u64::from(len), fua),
        }))
        .unwrap_or(Err(EIO));
        if !matches!(cmd, Command::Flush) {
            // A racy moving average (1/8 weight) is enough to tell memory from disk speed.
            let ns = t0.elapsed().as_nanos().min(u128::from(u32::MAX)) as u64;
            let avg = self.service_ns_avg.load(Ordering::Relaxed);
            self.service_ns_avg
                .store(avg - avg / 8 + ns / 8, Ordering::Relaxed);
        }
        if result.is_ok() {
            match cmd {
                Command::Read => conn.bytes_read.fetch_add(u64::from(len), Ordering::Relaxed),
                Command::Write { .. } => conn
                    .bytes_written
                    .fetch_add(u64::from(len), Ordering::Relaxed),
                _ => 0,
            };
        }
        match result {
            Ok(()) if cmd == Command::Read => conn.reply(Errno(0), cookie, &buf[..n]),
            Ok(()) => conn.reply(Errno(0), cookie, &[]),
            Err(e) => conn.reply(if e.0 == 0 { EIO } else { e }, cookie, &[]),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserve a request slot on `job.conn` and the job's payload bytes, and give it a
    /// buffer. A job without a payload to receive is queued at once, in the same critical
    /// section (`None`); a write is returned to have its payload read, then `submit`ted.
    /// Waits while the connection or the server is at its bound.
    pub(super) fn admit(&self, mut job: Job) -> Option<Job> {
        let len = job.held();
        let queue_now = !matches!(job.cmd, Command::Write { .. });
        let mut st = self.lock();
        // Every wait ends when a running request finishes, and requests always finish.
        while job.conn.in_flight.load(Ordering::Relaxed) >= MAX_IN_FLIGHT
            || st.held + len > PAYLOAD_BUDGET
        {
            st = self.wait_space(st);
        }
        job.conn.in_flight.fetch_add(1, Ordering::Relaxed);
        st.held += len;
        if len > 0 {
            job.buf = st.free.pop().unwrap_or_default();
            st.free_bytes -= job.buf.len();
            if job.buf.len() < len && !queue_now {
                drop(st);
                job.buf.resize(len, 0);
                return Some(job);
            }
            // Only when no recycled buffer is big enough; zero-fill happens once per growth.
            job.buf.resize(job.buf.len().max(len), 0);
        }
        if !queue_now {
            return Some(job);
        }
        self.queue(st, job);
        None
    }

    /// Give back what `admit` reserved; the caller holds the lock. Returns whether readers
    /// wait for it.
    pub(super) fn release(st: &mut PoolState, conn: &Conn, buf: Vec<u8>, len: usize) -> bool {
        st.held -= len;
        conn.in_flight.fetch_sub(1, Ordering::Relaxed);
        if !buf.is_empty()
            && buf.len() <= FREE_MAX_BUFFER
            && st.free.len() < FREE_BUFFERS
            && st.free_bytes + buf.len() <= FREE_BYTES
        {
            st.free_bytes += buf.len();
            st.free.push(buf);
        }
        st.space_waiters > 0
    }

    /// Give back a job that was admitted and will not run (its payload never came).
    pub(super) fn abandon(&self, job: Job) {
        let len = job.held();
        let mut st = self.lock();
        if Self::release(&mut st, &job.conn, job.buf, len) {
            self.space.notify_all();
        }
    }

    pub(super) fn queue(&self, mut st: MutexGuard<'_, PoolState>, job: Job) {
        st.jobs.push_back(job);
        let wake = st.idle_workers > 0;
        drop(st);
        if wake {
            self.work.notify_one();
        }
    }

    pub(super) fn submit(&self, job: Job) {
        self.queue(self.lock(), job);
    }

    pub(super) fn wait_space<'a>(
        &'a self,
        mut st: MutexGuard<'a, PoolState>,
    ) -> MutexGuard<'a, PoolState> {
        st.space_waiters += 1;
        let (mut st, _) = self
            .space
            .wait_timeout(st, WAIT_SLICE)
            .unwrap_or_else(|e| e.into_inner());
        st.space_waiters -= 1;
        st
    }

    /// Wait until none of `conn`'s requests is queued or running.
    pub(super) fn drain(&self, conn: &Conn) {
        let mut st = self.lock();
        while conn.in_flight.load(Ordering::Relaxed) > 0 {
            st = self.wait_space(st);
        }
    }
}

/// A worker: run queued requests on the backend and send their replies, until stopped.
pub(super) fn worker(shared: &Shared) {
    // The finished job's reservation, given back when taking the next job (one lock).
    let mut finished: Option<(Arc<Conn>, Vec<u8>, usize)> = None;
    loop {
        let job = {
            let mut st = shared.lock();
            if let Some((conn, buf, held)) = finished.take() {
                if Shared::release(&mut st, &conn, buf, held) {
                    shared.space.notify_all();
                }
            }
            loop {
                if let Some(job) = st.jobs.pop_front() {
                    break job;
                }
                if st.stopping {
                    return;
                }
                st.idle_workers += 1;
                st = shared
                    .work
                    .wait_timeout(st, WAIT_SLICE)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                st.idle_workers -= 1;
            }
        };
        let held = job.held();
        let Job {
            conn,
            cmd,
            cookie,
            offset,
            len,
            mut buf,
        } = job;
        shared.execute(&conn, cmd, cookie, offset, len, &mut buf);
        finished = Some((conn, buf, held));
    }
}
