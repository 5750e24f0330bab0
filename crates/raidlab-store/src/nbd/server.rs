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
//! buffers are recycled through a free list, so steady traffic allocates nothing. The pool
//! (reply sides, queued jobs, workers) is `pool.rs`.

use std::io::{self, BufReader, IoSlice, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::pool::{worker, Conn, Job, PoolState, Shared};
use super::proto::{
    decide, discard, parse_request, read_full, serve_handshake, Command, Decision, ExportInfo,
    Handshake, MAX_PAYLOAD, REQUEST_LEN,
};
use super::{Backend, Errno, Listen, ServeStats};

/// The reader runs a request itself while the backend's average time per request is below
/// this (memory speed); above it, requests go to the workers (see `Shared::inline_ok`).
pub(super) const INLINE_SERVICE_NS_MAX: u64 = 50_000;
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
pub(super) const WAIT_SLICE: Duration = Duration::from_millis(100);
/// The reader's buffer: many pipelined request headers arrive per read system call.
const READ_BUFFER: usize = 64 << 10;
/// Free-list limits: buffer count, total bytes, and the largest buffer kept.
pub(super) const FREE_BUFFERS: usize = 256;
pub(super) const FREE_BYTES: usize = 64 << 20;
pub(super) const FREE_MAX_BUFFER: usize = 4 << 20;

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
