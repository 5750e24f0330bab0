//! The worker pool of the NBD server: connections' reply sides, queued requests, payload
//! buffers recycled through a free list, and the workers that run requests on the backend.
//! See `server.rs` for the bounds and how the reader threads feed it.

use std::collections::{BTreeSet, VecDeque};
use std::net::Shutdown;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::proto::{simple_reply, Command, ExportInfo};
use super::server::{
    Stream, FREE_BUFFERS, FREE_BYTES, FREE_MAX_BUFFER, INLINE_SERVICE_NS_MAX, MAX_IN_FLIGHT,
    WAIT_SLICE,
};
use super::{Backend, Errno, Limits, EIO};

/// Write payloads are reserved and received in steps of this many bytes, so a client that
/// sends a 32 MiB WRITE header and stops holds nothing beyond one step.
pub(super) const PAYLOAD_PIECE: usize = 256 << 10;

/// One connection's reply side and counters.
pub(super) struct Conn {
    pub(super) id: u64,
    pub(super) writer: Mutex<Stream>,
    /// Requests queued or running; changed only under the pool lock.
    pub(super) in_flight: AtomicUsize,
    /// A reply could not be written: the connection is being torn down.
    pub(super) dead: AtomicBool,
    /// Still in the handshake (the accept loop evicts the oldest such when full).
    pub(super) handshaking: AtomicBool,
    /// Closed for a timeout (counted in the server's totals).
    pub(super) timed_out: AtomicBool,
    /// Payload bytes this connection holds; changed only under the pool lock.
    pub(super) held: AtomicUsize,
    /// Long TRIM / WRITE_ZEROES requests (more than one piece) queued or running; changed
    /// only under the pool lock.
    pub(super) heavy: AtomicUsize,
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
    /// Payload bytes held by queued and running requests and payloads being received.
    pub(super) held: usize,
    /// The part of `held` reserved by write payloads still being received.
    pub(super) incoming: usize,
    /// Tickets of the writes whose payload is being received; the smallest (oldest) may
    /// exceed the `incoming` cap, so receivers waiting on each other always progress.
    pub(super) partials: BTreeSet<u64>,
    pub(super) next_ticket: u64,
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
    /// Payload buffer (reads and writes), at least `len` long once received.
    pub(super) buf: Vec<u8>,
    /// Payload bytes reserved for this job (all of `len` once queued).
    pub(super) reserved: usize,
    /// While its payload is being received: its place among the receivers.
    pub(super) ticket: Option<u64>,
    /// A TRIM / WRITE_ZEROES longer than one piece.
    pub(super) heavy: bool,
}

impl Job {
    pub(super) fn new(conn: Arc<Conn>, cmd: Command, cookie: u64, offset: u64, len: u32) -> Job {
        Job {
            conn,
            cmd,
            cookie,
            offset,
            len,
            buf: Vec::new(),
            reserved: 0,
            ticket: None,
            heavy: false,
        }
    }

    /// Payload bytes this job holds while queued or running.
    pub(super) fn payload(&self) -> usize {
        match self.cmd {
            Command::Read | Command::Write { .. } => self.len as usize,
            _ => 0,
        }
    }
}

/// A finished job's reservations, given back under the pool lock.
pub(super) struct Finished {
    conn: Arc<Conn>,
    buf: Vec<u8>,
    reserved: usize,
    heavy: bool,
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
    pub(super) limits: Limits,
    /// Moving average of the backend's time per request, in ns (see `inline_ok`).
    pub(super) service_ns_avg: AtomicU64,
    /// TLS offered or required through NBD_OPT_STARTTLS (None: no TLS).
    pub(super) tls: Option<super::tls::ServerTls>,
}

impl Shared {
    /// Whether the connection's reader may run a request itself instead of handing it to a
    /// worker. The reader does so only while more requests are already buffered behind
    /// this one (it would not block on the socket anyway) and while the backend answers in
    /// memory time: then the handoff (a wakeup and two context switches) costs more than
    /// the request, and on two cores it was most of the time per request (4 KiB random
    /// reads at depth 32 on a RAID-0 in tmpfs: 149 K IOPS handing every request off, 200 K
    /// with this). The last request of a burst still goes to a worker, so the reader's next
    /// wait on the socket overlaps it, unless the client sends back to back and the reader
    /// polls for its next request (`session.rs`, `Poll`); a slow backend (real disks) always
    /// uses the workers, so one long request never holds up the requests behind it.
    pub(super) fn inline_ok(&self, cmd: Command) -> bool {
        !matches!(cmd, Command::Flush) && self.memory_speed()
    }

    /// Whether the backend answers in memory time (its recent requests' average).
    pub(super) fn memory_speed(&self) -> bool {
        self.service_ns_avg.load(Ordering::Relaxed) < INLINE_SERVICE_NS_MAX
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

    /// One piece of a long TRIM / WRITE_ZEROES.
    pub(super) fn run_piece(&self, cmd: Command, offset: u64, len: u64) -> Result<(), Errno> {
        let backend = &*self.backend;
        catch_unwind(AssertUnwindSafe(|| match cmd {
            Command::Trim { fua } => backend.trim(offset, len, fua),
            Command::WriteZeroes { fua } => backend.write_zeroes(offset, len, fua),
            _ => Err(EIO),
        }))
        .unwrap_or(Err(EIO))
        .map_err(|e| if e.0 == 0 { EIO } else { e })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `amount` more payload bytes fit for `conn`: its own budget, the global one
    /// and, for a payload being received (`ticket`), the receivers' half of the global one,
    /// which the oldest receiver may exceed (by at most one request) so receivers never
    /// wait only on each other.
    fn fits(&self, st: &PoolState, conn: &Conn, amount: usize, ticket: Option<u64>) -> bool {
        let l = &self.limits;
        if conn.held.load(Ordering::Relaxed) + amount > l.conn_payload_budget {
            return false;
        }
        match ticket {
            None => st.held + amount <= l.payload_budget,
            Some(t) => {
                st.partials.first() == Some(&t)
                    || (st.incoming + amount <= l.payload_budget / 2
                        && st.held + amount <= l.payload_budget)
            }
        }
    }

    fn reserve(st: &mut PoolState, conn: &Conn, amount: usize, receiving: bool) {
        st.held += amount;
        if receiving {
            st.incoming += amount;
        }
        conn.held.fetch_add(amount, Ordering::Relaxed);
    }

    /// Reserve a request slot on `job.conn` and payload bytes, and give it a buffer. A job
    /// without a payload to receive is queued at once, in the same critical section
    /// (`None`); a write is returned with its first payload piece reserved, to be received
    /// with `receive` and then `submit`ted. Waits while the connection or the server is at
    /// its bound (every wait ends when a running request finishes or a receiver advances).
    pub(super) fn admit(&self, mut job: Job) -> Option<Job> {
        let writes = matches!(job.cmd, Command::Write { .. });
        job.heavy = matches!(job.cmd, Command::Trim { .. } | Command::WriteZeroes { .. })
            && u64::from(job.len) > self.limits.zero_piece;
        let first = if writes {
            job.payload().min(PAYLOAD_PIECE)
        } else {
            job.payload()
        };
        let mut st = self.lock();
        let ticket = writes.then_some(st.next_ticket);
        if writes {
            // Taken now so this write's age counts from its header; released on exit.
            st.next_ticket += 1;
            st.partials.insert(ticket.unwrap_or_default());
        }
        while job.conn.in_flight.load(Ordering::Relaxed) >= MAX_IN_FLIGHT
            || (job.heavy && job.conn.heavy.load(Ordering::Relaxed) > 0)
            || !self.fits(&st, &job.conn, first, ticket)
        {
            st = self.wait_space(st);
        }
        job.conn.in_flight.fetch_add(1, Ordering::Relaxed);
        if job.heavy {
            job.conn.heavy.fetch_add(1, Ordering::Relaxed);
        }
        Self::reserve(&mut st, &job.conn, first, writes);
        job.reserved = first;
        job.ticket = ticket;
        let len = job.payload();
        if len > 0 {
            job.buf = st.free.pop().unwrap_or_default();
            st.free_bytes -= job.buf.len();
        }
        if writes {
            drop(st);
            // Address space only: pages are touched as the payload arrives.
            job.buf.reserve_exact(len.saturating_sub(job.buf.len()));
            return Some(job);
        }
        // Only when no recycled buffer is big enough; zero-fill happens once per growth.
        if job.buf.len() < len {
            job.buf.resize(len, 0);
        }
        self.queue(st, job);
        None
    }

    /// Reserve the next piece of `job`'s payload (up to `PAYLOAD_PIECE`); returns how many
    /// bytes may now be received beyond those already reserved.
    pub(super) fn grow(&self, job: &mut Job) {
        let amount = (job.payload() - job.reserved).min(PAYLOAD_PIECE);
        if amount == 0 {
            return;
        }
        let mut st = self.lock();
        while !self.fits(&st, &job.conn, amount, job.ticket) {
            st = self.wait_space(st);
        }
        Self::reserve(&mut st, &job.conn, amount, true);
        job.reserved += amount;
    }

    /// Give back what `admit` (and `grow`) reserved; the caller holds the lock. Returns
    /// whether readers wait for it.
    fn release(st: &mut PoolState, f: Finished) -> bool {
        st.held -= f.reserved;
        f.conn.held.fetch_sub(f.reserved, Ordering::Relaxed);
        f.conn.in_flight.fetch_sub(1, Ordering::Relaxed);
        if f.heavy {
            f.conn.heavy.fetch_sub(1, Ordering::Relaxed);
        }
        let buf = f.buf;
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

    /// A write's payload is no longer being received (in full, or abandoned): its bytes
    /// leave the receivers' share and its ticket the receivers' queue.
    fn received(st: &mut PoolState, job: &mut Job) {
        if let Some(t) = job.ticket.take() {
            st.partials.remove(&t);
            st.incoming -= job.reserved;
        }
    }

    /// Give back a job that was admitted and will not run (its payload never came).
    pub(super) fn abandon(&self, mut job: Job) {
        let mut st = self.lock();
        Self::received(&mut st, &mut job);
        let f = Finished {
            conn: job.conn,
            buf: job.buf,
            reserved: job.reserved,
            heavy: job.heavy,
        };
        if Self::release(&mut st, f) {
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

    /// Queue a write whose payload has been received in full.
    pub(super) fn submit(&self, mut job: Job) {
        let mut st = self.lock();
        Self::received(&mut st, &mut job);
        // Receivers may wait on the share this one held.
        if st.space_waiters > 0 {
            self.space.notify_all();
        }
        self.queue(st, job);
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
    let mut finished: Option<Finished> = None;
    // A long TRIM / WRITE_ZEROES with pieces left, queued again when taking the next job.
    let mut again: Option<Job> = None;
    loop {
        let mut job = {
            let mut st = shared.lock();
            if let Some(f) = finished.take() {
                if Shared::release(&mut st, f) {
                    shared.space.notify_all();
                }
            }
            if let Some(j) = again.take() {
                // Behind everything that arrived meanwhile: other clients' requests wait
                // for one piece, not for the whole range.
                st.jobs.push_back(j);
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
        let piece = shared.limits.zero_piece;
        if job.heavy && job.conn.dead.load(Ordering::Relaxed) {
            // Nobody to answer: the rest of the range is not worth the work.
            finished = Some(Finished {
                conn: job.conn,
                buf: job.buf,
                reserved: job.reserved,
                heavy: job.heavy,
            });
            continue;
        }
        if job.heavy && u64::from(job.len) > piece {
            // One piece now; the reply waits for the last piece (or the first error).
            match shared.run_piece(job.cmd, job.offset, piece) {
                Ok(()) => {
                    job.offset += piece;
                    job.len -= piece as u32;
                    again = Some(job);
                    continue;
                }
                Err(e) => {
                    job.conn.reply(e, job.cookie, &[]);
                    finished = Some(Finished {
                        conn: job.conn,
                        buf: job.buf,
                        reserved: job.reserved,
                        heavy: job.heavy,
                    });
                    continue;
                }
            }
        }
        let Job {
            conn,
            cmd,
            cookie,
            offset,
            len,
            mut buf,
            reserved,
            heavy,
            ..
        } = job;
        shared.execute(&conn, cmd, cookie, offset, len, &mut buf);
        finished = Some(Finished {
            conn,
            buf,
            reserved,
            heavy,
        });
    }
}
