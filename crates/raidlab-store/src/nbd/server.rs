//! The NBD server: an accept loop, a reader thread per connection and a bounded pool of
//! worker threads shared by all connections.
//!
//! The reader thread does the handshake, then parses requests; it answers bad requests
//! itself (after discarding any write payload, so the stream stays in sync) and queues good
//! ones. A worker runs a request on the backend and writes its reply — header and data in one
//! vectored write under the connection's write lock — so replies never interleave.
//!
//! Bounds (most of them [`Limits`], options of `raidlab serve`): connections at once, the
//! oldest still in its handshake evicted for a newcomer when full; a deadline for the
//! handshake; an idle timeout for a request whose header or payload stops arriving;
//! `MAX_IN_FLIGHT` requests per connection; payload memory per connection and over all
//! connections, write payloads reserved piece by piece as they arrive; long TRIM and
//! WRITE_ZEROES run piece by piece; a reply write that makes no progress for
//! `WRITE_TIMEOUT` kills its connection. Payload buffers are recycled through a free list,
//! so steady traffic allocates nothing. The pool (reply sides, queued jobs, workers) is
//! `pool.rs`; one connection's reader loop is `session.rs`.

use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::pool::{worker, Conn, PoolState, Shared};
use super::proto::{ExportInfo, MAX_PAYLOAD};
use super::session::connection;
use super::tls::{ServerTls, TlsStream};
use super::{Backend, Errno, Limits, Listen, ServeStats, SubBlock};

/// The reader runs a request itself while the backend's average time per request is below
/// this (memory speed); above it, requests go to the workers (see `Shared::inline_ok`).
pub(super) const INLINE_SERVICE_NS_MAX: u64 = 50_000;
/// Largest payload the reader runs itself (larger ones use the workers' pooled buffers).
pub(super) const INLINE_BYTES_MAX: usize = 1 << 20;

/// Requests queued or running per connection; the reader stops reading beyond this.
pub const MAX_IN_FLIGHT: usize = 64;
/// Worker threads a server runs at most. A request on disk-timed members, or a write waiting
/// for a backup sync or a free cache frame, holds its worker; an open-loop replay of a cache
/// that fills may hold hundreds at once, and a request that finds every worker held waits
/// behind them whatever it needs (a read behind writes waiting for frames).
pub const WORKERS_MAX: usize = 1024;
/// Connections evicted (closed in their handshake) but not yet reaped that may exist beyond
/// the connection limit, so a flood of connections cannot grow the table without bound.
const EVICTED_MAX: usize = 16;
/// A reply write blocked this long (a client that stopped reading) ends the connection.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the accept loop checks the stop flag when idle.
const ACCEPT_POLL: Duration = Duration::from_millis(5);
/// Condition-variable waits re-check their exit conditions at least this often.
pub(super) const WAIT_SLICE: Duration = Duration::from_millis(100);
/// The reader's buffer: many pipelined request headers arrive per read system call.
pub(super) const READ_BUFFER: usize = 64 << 10;
/// Free-list limits: buffer count, total bytes, and the largest buffer kept.
pub(super) const FREE_BUFFERS: usize = 256;
pub(super) const FREE_BYTES: usize = 64 << 20;
pub(super) const FREE_MAX_BUFFER: usize = 4 << 20;

/// A connected socket, TCP or Unix, or a TLS session over one (after NBD_OPT_STARTTLS).
/// Timeouts and shutdown act on the socket, so every bound holds over TLS as well.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    pub(crate) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tls(s) => Stream::Tls(Box::new(s.try_clone()?)),
        })
    }

    pub(crate) fn shutdown(&self, how: Shutdown) {
        // Fails only if already disconnected, which is what we want anyway.
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
            Stream::Tls(s) => {
                s.shutdown(how);
                Ok(())
            }
        };
    }

    /// Wait up to `spin_ns` for bytes to arrive without sleeping (a non-blocking peek in a
    /// loop). Plain sockets only (a TLS session returns at once).
    pub(crate) fn spin_for_data(&self, spin_ns: u64) {
        use std::os::fd::AsRawFd;
        let fd = match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tls(_) => return,
        };
        let t0 = std::time::Instant::now();
        let mut b = [0u8; 1];
        loop {
            // SAFETY: a one-byte buffer we own; the descriptor is this stream's.
            let n = unsafe {
                libc::recv(
                    fd,
                    b.as_mut_ptr().cast(),
                    1,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            if n != -1 || t0.elapsed().as_nanos() as u64 >= spin_ns {
                return;
            }
            std::hint::spin_loop();
        }
    }

    /// End a TLS session with close_notify (briefly waiting); nothing on a plain socket.
    pub(crate) fn close_notify(&mut self) {
        if let Stream::Tls(s) = self {
            s.close_notify();
        }
    }

    pub(crate) fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(d),
            Stream::Unix(s) => s.set_write_timeout(d),
            Stream::Tls(s) => s.raw().set_write_timeout(d),
        }
    }

    pub(crate) fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(d),
            Stream::Unix(s) => s.set_read_timeout(d),
            Stream::Tls(s) => s.raw().set_read_timeout(d),
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
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write_vectored(bufs),
            Stream::Unix(s) => s.write_vectored(bufs),
            Stream::Tls(s) => s.write_vectored(bufs),
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
    limits: Limits,
    tls: Option<ServerTls>,
}

impl Server {
    /// Bind the listening socket. A Unix socket path left behind by a dead server (nothing
    /// accepts on it) is replaced; a live one is an `AddrInUse` error.
    /// Serve on a listening socket inherited as `fd` (systemd's socket activation: fd 3),
    /// TCP or Unix; the socket file, if any, is the service manager's and is left in place.
    pub fn from_inherited_fd(fd: std::os::fd::RawFd) -> io::Result<Server> {
        use std::os::fd::FromRawFd;
        // SAFETY: getsockname writes at most `len` bytes into the zeroed storage.
        let family = unsafe {
            let mut addr: libc::sockaddr_storage = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            if libc::getsockname(
                fd,
                (&mut addr as *mut libc::sockaddr_storage).cast(),
                &mut len,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            i32::from(addr.ss_family)
        };
        let workers = default_workers();
        let (listener, local) = if family == libc::AF_UNIX {
            // SAFETY: the fd is a socket handed to this process, owned from here on.
            let l = unsafe { UnixListener::from_raw_fd(fd) };
            let local = l
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| format!("unix:{}", p.display())))
                .unwrap_or_else(|| "unix:(inherited)".into());
            (Listener::Unix(l), local)
        } else {
            // SAFETY: as above.
            let l = unsafe { TcpListener::from_raw_fd(fd) };
            let local = l.local_addr()?.to_string();
            (Listener::Tcp(l), local)
        };
        Ok(Server {
            listener,
            local,
            unix_path: None,
            workers,
            limits: Limits::default(),
            tls: None,
        })
    }

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
                    limits: Limits::default(),
                    tls: None,
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
                    limits: Limits::default(),
                    tls: None,
                })
            }
        }
    }

    /// Set the number of worker threads (clamped to 1..=`WORKERS_MAX`; `serve --workers`
    /// refuses a value outside it; the default is twice the available parallelism, 4 to 64).
    pub fn with_workers(mut self, workers: usize) -> Server {
        self.workers = workers.clamp(1, WORKERS_MAX);
        self
    }

    /// Set the bounds against slow and hostile clients (checked by `run`).
    pub fn with_limits(mut self, limits: Limits) -> Server {
        self.limits = limits;
        self
    }

    /// Offer (`TlsMode::On`) or require (`TlsMode::Require`) TLS through NBD_OPT_STARTTLS;
    /// `None` (the default) answers NBD_OPT_STARTTLS with NBD_REP_ERR_UNSUP.
    pub fn with_tls(mut self, tls: Option<ServerTls>) -> Server {
        self.tls = tls;
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
        let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        let limits = self.limits.clone();
        limits.validate().map_err(invalid)?;
        let mut backend = backend;
        let own = backend.block_size();
        match limits.min_block {
            Some(m) if m < own.minimum => {
                backend = Arc::new(SubBlock::new(backend, m).map_err(invalid)?);
            }
            // A stricter minimum than the backend's needs nothing but the check.
            Some(m) => {
                let b = own;
                backend = Arc::new(Stricter {
                    inner: backend,
                    block: super::BlockSize {
                        minimum: m,
                        preferred: b.preferred.max(m),
                        maximum: b.maximum.max(m),
                    },
                });
            }
            None => {}
        }
        let mut block = backend.block_size();
        if !block.is_valid() || block.preferred > MAX_PAYLOAD {
            return Err(invalid(format!("invalid NBD block sizes {block:?}")));
        }
        block.maximum = block.maximum.min(limits.max_payload());
        if block.maximum < block.preferred {
            return Err(invalid(format!(
                "payload budgets allow requests of {} bytes, less than the preferred block {}",
                block.maximum, block.preferred
            )));
        }
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
            limits: limits.clone(),
            service_ns_avg: AtomicU64::new(0),
            tls: self.tls.clone(),
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
            if conns.len() >= limits.max_connections {
                // Room for the newcomer: close the oldest connection still in its handshake
                // (a client that connected and stalled); refuse if every one is serving.
                let evicted = conns.iter().filter(|c| c.evicted).count();
                let victim = conns
                    .iter_mut()
                    .filter(|c| !c.evicted && c.conn.handshaking.load(Ordering::Relaxed))
                    .min_by_key(|c| c.conn.id);
                match victim {
                    Some(v) if evicted < EVICTED_MAX => {
                        v.control.shutdown(Shutdown::Both);
                        v.evicted = true;
                        stats.evicted += 1;
                    }
                    _ => {
                        stats.refused += 1;
                        continue;
                    }
                }
            }
            next_id += 1;
            match start_connection(&shared, stream, next_id) {
                Ok(live) => conns.push(live),
                Err(e) => {
                    crate::warn!({ "error": e.to_string() }, "nbd: cannot serve a connection: {e}")
                }
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
    /// Closed to make room for a newer connection; its thread is ending.
    evicted: bool,
}

/// A backend advertised with a larger minimum block than its own (the server then refuses
/// smaller requests); everything else passes through.
struct Stricter {
    inner: Arc<dyn Backend>,
    block: super::BlockSize,
}

impl Backend for Stricter {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> String {
        self.inner.description()
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn block_size(&self) -> super::BlockSize {
        self.block
    }
    fn read_only(&self) -> bool {
        self.inner.read_only()
    }
    fn multi_conn(&self) -> bool {
        self.inner.multi_conn()
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
        self.inner.read(offset, buf)
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), Errno> {
        self.inner.write(offset, data, fua)
    }
    fn flush(&self) -> Result<(), Errno> {
        self.inner.flush()
    }
    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
        self.inner.trim(offset, len, fua)
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
        self.inner.write_zeroes(offset, len, fua)
    }
    fn connected(&self, id: u64, peer: &str) {
        self.inner.connected(id, peer)
    }
    fn disconnected(&self, id: u64, requests: u64, errors: u64, why: Option<&str>) {
        self.inner.disconnected(id, requests, errors, why)
    }
}

fn start_connection(shared: &Arc<Shared>, stream: Stream, id: u64) -> io::Result<Live> {
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let control = stream.try_clone()?;
    let conn = Arc::new(Conn {
        id,
        writer: Mutex::new(stream.try_clone()?),
        in_flight: AtomicUsize::new(0),
        dead: AtomicBool::new(false),
        handshaking: AtomicBool::new(true),
        timed_out: AtomicBool::new(false),
        held: AtomicUsize::new(0),
        heavy: AtomicUsize::new(0),
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
        evicted: false,
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
        stats.timed_out += u64::from(c.timed_out.load(Ordering::Relaxed));
    }
}

fn shutdown_workers(shared: &Shared, workers: Vec<JoinHandle<()>>) {
    shared.lock().stopping = true;
    shared.work.notify_all();
    for w in workers {
        let _ = w.join();
    }
}
