//! The NBD server: an accept loop, a reader thread per connection and a bounded pool of
//! worker threads shared by all connections.
//!
//! The reader thread does the handshake, then parses requests; it answers bad requests
//! itself (after discarding any write payload, so the stream stays in sync) and queues good
//! ones. A worker runs a request on the backend and writes its reply — header and data in one
//! vectored write under the connection's write lock — so replies never interleave.
//!
//! Bounds: `MAX_CONNECTIONS` connections; `MAX_IN_FLIGHT` requests per connection; payload
//! memory held by queued and running requests at most `PAYLOAD_BUDGET` over all connections;
//! a reply write that makes no progress for `WRITE_TIMEOUT` kills its connection. Payload
//! buffers are recycled through a free list, so steady traffic allocates nothing.

use std::collections::VecDeque;
use std::io::{self, BufReader, IoSlice, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::proto::{
    decide, discard, parse_request, read_full, serve_handshake, simple_reply, Command, Decision,
    ExportInfo, Handshake, MAX_PAYLOAD, REQUEST_LEN,
};
use super::{Backend, Errno, Listen, ServeStats, EIO};

/// The reader runs a request itself while the backend's average time per request is below
/// this (memory speed); above it, requests go to the workers (see `Shared::inline_ok`).
const INLINE_SERVICE_NS_MAX: u64 = 50_000;
/// Largest payload the reader runs itself (larger ones use the workers' pooled buffers).
const INLINE_BYTES_MAX: usize = 1 << 20;

/// Connections served at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 128;
/// Requests queued or running per connection; the reader stops reading beyond this.
pub const MAX_IN_FLIGHT: usize = 64;
/// Payload bytes held by queued and running requests, over all connections (≥ 2 maximal
/// requests, so one connection can always make progress).
pub const PAYLOAD_BUDGET: usize = 128 << 20;
/// A reply write blocked this long (a client that stopped reading) ends the connection.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the accept loop checks the stop flag when idle.
const ACCEPT_POLL: Duration = Duration::from_millis(5);
/// Condition-variable waits re-check their exit conditions at least this often.
const WAIT_SLICE: Duration = Duration::from_millis(100);
/// The reader's buffer: many pipelined request headers arrive per read system call.
const READ_BUFFER: usize = 64 << 10;
/// Free-list limits: buffer count, total bytes, and the largest buffer kept.
const FREE_BUFFERS: usize = 256;
const FREE_BYTES: usize = 64 << 20;
const FREE_MAX_BUFFER: usize = 4 << 20;

/// A connected socket, TCP or Unix.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub(crate) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
        })
    }

    pub(crate) fn shutdown(&self, how: Shutdown) {
        // Fails only if already disconnected, which is what we want anyway.
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        };
    }

    pub(crate) fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(d),
            Stream::Unix(s) => s.set_write_timeout(d),
        }
    }

    /// Write `a` then `b` with as few system calls as possible.
    pub(crate) fn write_all2(&mut self, a: &[u8], b: &[u8]) -> io::Result<()> {
        let mut slices = [IoSlice::new(a), IoSlice::new(b)];
        let mut bufs = &mut slices[..];
        IoSlice::advance_slices(&mut bufs, 0);
        // Each pass writes at least one byte or fails (a stuck peer hits the write timeout).
        while !bufs.is_empty() {
            match self.write_vectored(bufs) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut bufs, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write_vectored(bufs),
            Stream::Unix(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// An NBD server bound to its address, not yet serving.
pub struct Server {
    listener: Listener,
    local: String,
    unix_path: Option<PathBuf>,
    workers: usize,
}

impl Server {
    /// Bind the listening socket. A Unix socket path left behind by a dead server (nothing
    /// accepts on it) is replaced; a live one is an `AddrInUse` error.
    pub fn bind(listen: &Listen) -> io::Result<Server> {
        let workers = default_workers();
        match listen {
            Listen::Tcp(addr) => {
                let l = TcpListener::bind(addr)?;
                let local = l.local_addr()?.to_string();
                Ok(Server {
                    listener: Listener::Tcp(l),
                    local,
                    unix_path: None,
                    workers,
                })
            }
            Listen::Unix(path) => {
                let l = match UnixListener::bind(path) {
                    Ok(l) => l,
                    Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                        let stale = UnixStream::connect(path).is_err()
                            && std::fs::symlink_metadata(path).is_ok_and(|m| {
                                use std::os::unix::fs::FileTypeExt;
                                m.file_type().is_socket()
                            });
                        if !stale {
                            return Err(e);
                        }
                        std::fs::remove_file(path)?;
                        UnixListener::bind(path)?
                    }
                    Err(e) => return Err(e),
                };
                Ok(Server {
                    listener: Listener::Unix(l),
                    local: format!("unix:{}", path.display()),
                    unix_path: Some(path.clone()),
                    workers,
                })
            }
        }
    }

    /// Set the number of worker threads (clamped to 1..=64; the default is twice the
    /// available parallelism, at least 4).
    pub fn with_workers(mut self, workers: usize) -> Server {
        self.workers = workers.clamp(1, 64);
        self
    }

    /// "127.0.0.1:PORT", "[::1]:PORT" or "unix:PATH".
    pub fn local_addr(&self) -> String {
        self.local.clone()
    }

    /// Serve until `stop` becomes true: accept connections, serve each; when stopped, stop
    /// accepting, let every request already received finish and its reply be sent (drain),
    /// then close the connections and return. `stop` is polled every few milliseconds.
    pub fn run(self, backend: Arc<dyn Backend>, stop: Arc<AtomicBool>) -> io::Result<ServeStats> {
        let mut block = backend.block_size();
        if !block.is_valid() || block.preferred > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid NBD block sizes {block:?}"),
            ));
        }
        block.maximum = block.maximum.min(MAX_PAYLOAD);
        let export = ExportInfo {
            name: backend.name().to_string(),
            description: backend.description(),
            size: backend.size_bytes(),
            flags: ExportInfo::flags_for(backend.read_only(), backend.multi_conn()),
            block,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(PoolState::default()),
            work: Condvar::new(),
            space: Condvar::new(),
            backend,
            export,
            debug: std::env::var_os("RAIDLAB_NBD_DEBUG").is_some(),
            service_ns_avg: AtomicU64::new(0),
        });
        match &self.listener {
            Listener::Tcp(l) => l.set_nonblocking(true)?,
            Listener::Unix(l) => l.set_nonblocking(true)?,
        }
        let mut workers = Vec::with_capacity(self.workers);
        for _ in 0..self.workers {
            let s = Arc::clone(&shared);
            match thread::Builder::new()
                .name("nbd-worker".into())
                .spawn(move || worker(&s))
            {
                Ok(h) => workers.push(h),
                Err(e) => {
                    shutdown_workers(&shared, workers);
                    return Err(e);
                }
            }
        }
        let mut stats = ServeStats::default();
        let mut conns: Vec<Live> = Vec::new();
        let mut next_id = 0u64;
        while !stop.load(Ordering::Relaxed) {
            reap(&mut conns, &mut stats, false);
            let accepted = match &self.listener {
                Listener::Tcp(l) => l.accept().map(|(s, _)| {
                    // Replies are whole messages: send them at once, no Nagle delay.
                    let _ = s.set_nodelay(true);
                    Stream::Tcp(s)
                }),
                Listener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
            };
            let stream = match accepted {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // WouldBlock when idle; transient failures (EMFILE, ECONNABORTED) also wait
                // a little rather than spin.
                Err(_) => {
                    thread::sleep(ACCEPT_POLL);
                    continue;
                }
            };
            stats.connections += 1;
            if conns.len() >= MAX_CONNECTIONS {
                stats.refused += 1;
                continue;
            }
            next_id += 1;
            match start_connection(&shared, stream, next_id) {
                Ok(live) => conns.push(live),
                Err(e) => eprintln!("nbd: cannot serve a connection: {e}"),
            }
        }
        // Drain: end every reader (a shut-down read side reads as end of stream); each waits
        // for its requests' replies before closing.
        for c in &conns {
            c.control.shutdown(Shutdown::Read);
        }
        reap(&mut conns, &mut stats, true);
        shutdown_workers(&shared, workers);
        Ok(stats)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(path) = &self.unix_path {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn default_workers() -> usize {
    let cpus = thread::available_parallelism().map_or(2, |n| n.get());
    (2 * cpus).clamp(4, 64)
}

/// A connection being served, as the accept loop sees it.
struct Live {
    conn: Arc<Conn>,
    control: Stream,
    thread: JoinHandle<()>,
}

fn start_connection(shared: &Arc<Shared>, stream: Stream, id: u64) -> io::Result<Live> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let control = stream.try_clone()?;
    let conn = Arc::new(Conn {
        id,
        writer: Mutex::new(stream.try_clone()?),
        in_flight: AtomicUsize::new(0),
        dead: AtomicBool::new(false),
        requests: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        bytes_read: AtomicU64::new(0),
        bytes_written: AtomicU64::new(0),
    });
    let (s, c) = (Arc::clone(shared), Arc::clone(&conn));
    let thread = thread::Builder::new()
        .name("nbd-conn".into())
        .spawn(move || connection(&s, stream, &c))?;
    Ok(Live {
        conn,
        control,
        thread,
    })
}

/// Collect finished connections (all of them, waiting, if `all`).
fn reap(conns: &mut Vec<Live>, stats: &mut ServeStats, all: bool) {
    let mut i = 0;
    while i < conns.len() {
        if !all && !conns[i].thread.is_finished() {
            i += 1;
            continue;
        }
        let live = conns.swap_remove(i);
        // A connection thread catches its own failures; a panic is a bug, already printed.
        let _ = live.thread.join();
        let c = &live.conn;
        stats.requests += c.requests.load(Ordering::Relaxed);
        stats.errors += c.errors.load(Ordering::Relaxed);
        stats.bytes_read += c.bytes_read.load(Ordering::Relaxed);
        stats.bytes_written += c.bytes_written.load(Ordering::Relaxed);
    }
}

fn shutdown_workers(shared: &Shared, workers: Vec<JoinHandle<()>>) {
    shared.lock().stopping = true;
    shared.work.notify_all();
    for w in workers {
        let _ = w.join();
    }
}

/// One connection's reply side and counters.
struct Conn {
    id: u64,
    writer: Mutex<Stream>,
    /// Requests queued or running; changed only under the pool lock.
    in_flight: AtomicUsize,
    /// A reply could not be written: the connection is being torn down.
    dead: AtomicBool,
    requests: AtomicU64,
    errors: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

impl Conn {
    /// Send one reply whole (header and data in one writev), so replies never interleave.
    /// (Coalescing replies finished meanwhile into one write was tried: far fewer system
    /// calls, but on 2 cores no better in CPU per request or IOPS, so the simple way stays.)
    fn reply(&self, error: Errno, cookie: u64, data: &[u8]) {
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
struct PoolState {
    jobs: VecDeque<Job>,
    free: Vec<Vec<u8>>,
    free_bytes: usize,
    /// Payload bytes held by queued and running requests.
    held: usize,
    stopping: bool,
    /// Threads waiting on `work` / `space`: notifying a condition variable costs a system
    /// call even with nobody waiting, so it is skipped then.
    idle_workers: usize,
    space_waiters: usize,
}

struct Job {
    conn: Arc<Conn>,
    cmd: Command,
    cookie: u64,
    offset: u64,
    len: u32,
    /// Payload buffer (reads and writes), at least `len` long.
    buf: Vec<u8>,
}

impl Job {
    /// Payload bytes this job holds while queued or running.
    fn held(&self) -> usize {
        match self.cmd {
            Command::Read | Command::Write { .. } => self.len as usize,
            _ => 0,
        }
    }
}

struct Shared {
    state: Mutex<PoolState>,
    /// Signalled when a job is queued (workers wait on it).
    work: Condvar,
    /// Signalled when a job finishes (readers wait on it for budget or to drain).
    space: Condvar,
    backend: Arc<dyn Backend>,
    export: ExportInfo,
    debug: bool,
    /// Moving average of the backend's time per request, in ns (see `inline_ok`).
    service_ns_avg: AtomicU64,
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
    fn inline_ok(&self, cmd: Command) -> bool {
        !matches!(cmd, Command::Flush)
            && self.service_ns_avg.load(Ordering::Relaxed) < INLINE_SERVICE_NS_MAX
    }

    /// Run one request on the backend and send its reply.
    fn execute(
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

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserve a request slot on `job.conn` and the job's payload bytes, and give it a
    /// buffer. A job without a payload to receive is queued at once, in the same critical
    /// section (`None`); a write is returned to have its payload read, then `submit`ted.
    /// Waits while the connection or the server is at its bound.
    fn admit(&self, mut job: Job) -> Option<Job> {
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
    fn release(st: &mut PoolState, conn: &Conn, buf: Vec<u8>, len: usize) -> bool {
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
    fn abandon(&self, job: Job) {
        let len = job.held();
        let mut st = self.lock();
        if Self::release(&mut st, &job.conn, job.buf, len) {
            self.space.notify_all();
        }
    }

    fn queue(&self, mut st: MutexGuard<'_, PoolState>, job: Job) {
        st.jobs.push_back(job);
        let wake = st.idle_workers > 0;
        drop(st);
        if wake {
            self.work.notify_one();
        }
    }

    fn submit(&self, job: Job) {
        self.queue(self.lock(), job);
    }

    fn wait_space<'a>(&'a self, mut st: MutexGuard<'a, PoolState>) -> MutexGuard<'a, PoolState> {
        st.space_waiters += 1;
        let (mut st, _) = self
            .space
            .wait_timeout(st, WAIT_SLICE)
            .unwrap_or_else(|e| e.into_inner());
        st.space_waiters -= 1;
        st
    }

    /// Wait until none of `conn`'s requests is queued or running.
    fn drain(&self, conn: &Conn) {
        let mut st = self.lock();
        while conn.in_flight.load(Ordering::Relaxed) > 0 {
            st = self.wait_space(st);
        }
    }
}

/// A connection's thread: handshake, read requests until the client leaves, drain, close.
fn connection(shared: &Shared, stream: Stream, conn: &Arc<Conn>) {
    if shared.debug {
        eprintln!("nbd: connection {} open", conn.id);
    }
    let outcome = serve_connection(shared, stream, conn);
    shared.drain(conn);
    conn.writer
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .shutdown(Shutdown::Both);
    if shared.debug {
        let how = match &outcome {
            Ok(()) => "closed".to_string(),
            Err(e) => format!("closed: {e}"),
        };
        eprintln!(
            "nbd: connection {} {how} ({} requests, {} errors)",
            conn.id,
            conn.requests.load(Ordering::Relaxed),
            conn.errors.load(Ordering::Relaxed)
        );
    }
}

fn serve_connection(shared: &Shared, stream: Stream, conn: &Arc<Conn>) -> io::Result<()> {
    let mut reader = BufReader::with_capacity(READ_BUFFER, stream);
    {
        let mut w = conn.writer.lock().unwrap_or_else(|e| e.into_inner());
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        match serve_handshake(&mut reader, &mut *w, &shared.export, &mut scratch, &mut out)? {
            Handshake::Transmit => {}
            Handshake::Closed => return Ok(()),
        }
    }
    let mut head = [0u8; REQUEST_LEN];
    // The payload of requests the reader runs itself (grown to the largest, then reused).
    let mut inline_buf: Vec<u8> = Vec::new();
    // One pass per request; ends with the client (end of stream, DISC) or a protocol error.
    while !conn.dead.load(Ordering::Relaxed) {
        if !read_full(&mut reader, &mut head)? {
            return Ok(());
        }
        let Some(req) = parse_request(&head) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "bad request magic",
            ));
        };
        match decide(&req, &shared.export) {
            Decision::Disconnect => return Ok(()),
            Decision::Done => conn.reply(Errno(0), req.cookie, &[]),
            Decision::Reject(e) => {
                discard(&mut reader, u64::from(req.payload_len()))?;
                conn.reply(e, req.cookie, &[]);
            }
            Decision::Run(cmd)
                if shared.inline_ok(cmd)
                    && req.len as usize <= INLINE_BYTES_MAX
                    && !reader.buffer().is_empty() =>
            {
                let n = match cmd {
                    Command::Read | Command::Write { .. } => req.len as usize,
                    _ => 0,
                };
                if inline_buf.len() < n {
                    inline_buf.resize(n, 0);
                }
                if matches!(cmd, Command::Write { .. }) {
                    reader.read_exact(&mut inline_buf[..n])?;
                }
                shared.execute(
                    conn,
                    cmd,
                    req.cookie,
                    req.offset,
                    req.len,
                    &mut inline_buf[..n],
                );
            }
            Decision::Run(cmd) => {
                let job = Job {
                    conn: Arc::clone(conn),
                    cmd,
                    cookie: req.cookie,
                    offset: req.offset,
                    len: req.len,
                    buf: Vec::new(),
                };
                if let Some(mut job) = shared.admit(job) {
                    let n = job.held();
                    if let Err(e) = reader.read_exact(&mut job.buf[..n]) {
                        shared.abandon(job);
                        return Err(e);
                    }
                    shared.submit(job);
                }
            }
        }
    }
    Ok(())
}

/// A worker: run queued requests on the backend and send their replies, until stopped.
fn worker(shared: &Shared) {
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
