//! A member on another host: an NBD export (`nbd://HOST[:PORT]/EXPORT`,
//! `nbd+unix:///EXPORT?socket=PATH`, and their TLS forms), served by any NBD server.
//!
//! - **Several requests in flight.** Callers on many threads share one connection: each
//!   request is sent under the writer's lock with a cookie of its own, and one reader
//!   thread hands every reply to the caller waiting for that cookie.
//! - **Durability.** `sync` is NBD_CMD_FLUSH: the server's promise is the member's (`nbdkit
//!   file` answers a flush with fdatasync of its file, so an acknowledged flush is on its
//!   disk; `nbdkit memory` keeps nothing across a restart). A server that does not
//!   advertise flush is taken to write through.
//! - **Host failures.** Every request has a deadline (`set_request_timeout`, 5 s by
//!   default). A request past it, a reset or closed connection, or a broken reply ends
//!   the connection: every request in flight and every later one fails at once with
//!   ENOTCONN or ETIMEDOUT, and [`Link::connected`] is false, so the controller takes the
//!   member out as *missing* (its host is away), not faulty. [`Link::reconnect`] makes a new
//!   connection (the controller calls it with backoff); a server error (EIO from the
//!   export) keeps the connection and is an ordinary member error.

use std::collections::HashMap;
use std::io::{self, BufReader, Read};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{DevId, Member};
use crate::nbd::client::{parse_uri_full, Client, Target};
use crate::nbd::proto::{
    parse_simple_reply, read_full, Request, CMD_FLUSH, CMD_READ, CMD_WRITE, FLAG_SEND_FLUSH,
    REPLY_LEN,
};
use crate::nbd::server::Stream;

/// Requests in flight on one member connection at most; a caller past it waits.
pub const IN_FLIGHT_MAX: usize = 64;
/// The largest request sent; larger transfers are split (and the server's maximum applies).
const REQUEST_BYTES_MAX: u32 = 4 << 20;
/// Linux errno values a lost connection is reported with.
const ENOTCONN: i32 = 107;
const ETIMEDOUT: i32 = 110;
/// NBD_ESHUTDOWN (the NBD protocol's value, Linux's too).
const ESHUTDOWN: u32 = 108;

/// The request deadline of every remote member, in ms (the `serve --member-timeout` option).
static REQUEST_TIMEOUT_MS: AtomicU64 = AtomicU64::new(5000);

/// Set the deadline of every remote member's requests and connection attempts.
pub fn set_request_timeout(d: Duration) {
    let ms = d.as_millis().clamp(1, 3_600_000) as u64;
    REQUEST_TIMEOUT_MS.store(ms, Ordering::Relaxed);
}

pub fn request_timeout() -> Duration {
    Duration::from_millis(REQUEST_TIMEOUT_MS.load(Ordering::Relaxed))
}

/// Whether a member name is an NBD URI rather than a path.
pub fn is_uri(name: &str) -> bool {
    ["nbd://", "nbds://", "nbd+unix://", "nbds+unix://"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// The identity of the export a URI names: its target and export name (query parameters
/// other than the socket do not change which bytes it is).
pub fn uri_identity(uri: &str) -> io::Result<DevId> {
    use std::hash::{Hash, Hasher};
    let u = parse_uri_full(uri)?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match &u.target {
        Target::Tcp(a) => ("tcp", a.as_str()).hash(&mut h),
        Target::Unix(p) => ("unix", p.as_str()).hash(&mut h),
    }
    u.export.hash(&mut h);
    Ok(DevId::Remote(h.finish()))
}

/// A remote member's connection state, seen through any wrapper (`Member::link`).
pub trait Link: Send + Sync {
    /// The connection is up (false from the first lost request until a reconnect).
    fn connected(&self) -> bool;
    /// Connect again if the connection is down; `Ok` when it is up. The export must have
    /// the size it had.
    fn reconnect(&self) -> io::Result<()>;
    /// Connections lost so far.
    fn drops(&self) -> u64;
}

/// What a waiting caller gets back: the NBD error (0 for none) and a read's data.
type Reply = Result<(u32, Vec<u8>), io::Error>;

#[derive(Default)]
struct Table {
    /// Cookie → (command, length, reply once it came).
    pending: HashMap<u64, (u16, u32, Option<Reply>)>,
    next_cookie: u64,
    /// Why the connection is down; every request fails with it from then on.
    broken: Option<(i32, String)>,
}

/// One connection: the writer under a lock, the reply table, the reader thread.
struct Conn {
    writer: Mutex<Stream>,
    table: Mutex<Table>,
    replied: Condvar,
    /// A clone of the socket, to shut it down from any thread (unblocks the reader).
    socket: Stream,
}

impl Conn {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// End the connection: every request waiting, and every later one, fails with `why`.
    fn break_with(&self, errno: i32, why: String) {
        let mut t = self.lock();
        if t.broken.is_none() {
            t.broken = Some((errno, why));
        }
        drop(t);
        // Abortive: requests still in the socket's send queue must never reach the server
        // later (a write landing after the member's re-add would be stale data nobody
        // resyncs). With linger 0 the last close discards the queue and sends a reset;
        // shutting down only the read side wakes the reader without sending a FIN after
        // the queued bytes.
        set_linger_zero(&self.socket);
        self.socket.shutdown(Shutdown::Read);
        self.replied.notify_all();
    }

    /// The reader thread: replies to their cookies until the connection ends.
    fn read_replies(&self, mut reader: BufReader<Stream>) {
        let why = loop {
            let mut head = [0u8; REPLY_LEN];
            match read_full(&mut reader, &mut head) {
                Ok(true) => {}
                Ok(false) => break "the server closed the connection".to_string(),
                Err(e) => break format!("reading a reply: {e}"),
            }
            let Some((error, cookie)) = parse_simple_reply(&head) else {
                break "a reply with a bad magic".to_string();
            };
            let entry = self.lock().pending.get(&cookie).map(|&(k, l, _)| (k, l));
            let Some((kind, len)) = entry else {
                break format!("a reply to no request (cookie {cookie})");
            };
            let mut data = Vec::new();
            if error.0 == 0 && kind == CMD_READ {
                data.resize(len as usize, 0);
                if let Err(e) = reader.read_exact(&mut data) {
                    break format!("reading a reply's data: {e}");
                }
            }
            if let Some(slot) = self.lock().pending.get_mut(&cookie) {
                slot.2 = Some(Ok((error.0, data)));
            }
            self.replied.notify_all();
        };
        self.break_with(ENOTCONN, why);
    }

    /// Send one request and wait for its reply, at most `timeout`.
    fn call(&self, kind: u16, offset: u64, len: u32, payload: &[u8], timeout: Duration) -> Reply {
        let deadline = Instant::now() + timeout;
        let lost = |(errno, why): &(i32, String)| {
            io::Error::from_raw_os_error(*errno).to_string() + ": " + why
        };
        let cookie = {
            let mut t = self.lock();
            // Bounded by the deadline: a full table waits for replies or times out.
            while t.broken.is_none() && t.pending.len() >= IN_FLIGHT_MAX {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    drop(t);
                    return Err(self.timed_out(timeout));
                }
                t = self
                    .replied
                    .wait_timeout(t, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            if let Some(b) = &t.broken {
                return Err(conn_error(b.0, lost(b)));
            }
            t.next_cookie = t.next_cookie.wrapping_add(1);
            let c = t.next_cookie;
            t.pending.insert(c, (kind, len, None));
            c
        };
        let head = Request {
            flags: 0,
            kind,
            cookie,
            offset,
            len,
        }
        .encode();
        let sent = self
            .writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_all2(&head, payload);
        if let Err(e) = sent {
            self.lock().pending.remove(&cookie);
            self.break_with(ENOTCONN, format!("sending a request: {e}"));
        }
        let mut t = self.lock();
        // Bounded by the deadline.
        loop {
            if let Some((_, _, Some(_))) = t.pending.get(&cookie) {
                let (_, _, r) = t.pending.remove(&cookie).expect("present");
                drop(t);
                self.replied.notify_all();
                return r.expect("present");
            }
            if let Some(b) = t.broken.clone() {
                t.pending.remove(&cookie);
                return Err(conn_error(b.0, lost(&b)));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                t.pending.remove(&cookie);
                drop(t);
                return Err(self.timed_out(timeout));
            }
            t = self
                .replied
                .wait_timeout(t, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A request past its deadline: the host is taken as away and the connection ended (a
    /// reply still on its way would otherwise be matched to nothing).
    fn timed_out(&self, timeout: Duration) -> io::Error {
        let why = format!("no reply within {} ms", timeout.as_millis());
        self.break_with(ETIMEDOUT, why.clone());
        conn_error(ETIMEDOUT, why)
    }
}

/// SO_LINGER on, 0 s: closing the socket resets the connection and drops unsent bytes.
fn set_linger_zero(s: &Stream) {
    use std::os::fd::AsRawFd;
    let fd = match s {
        Stream::Tcp(t) => t.as_raw_fd(),
        Stream::Tls(t) => match t.raw() {
            Stream::Tcp(t) => t.as_raw_fd(),
            _ => return,
        },
        // A Unix socket's bytes are in the peer's queue once written: nothing to drop.
        Stream::Unix(_) => return,
    };
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt on a descriptor `s` owns, with a pointer to a local of the size
    // passed. A failure leaves the ordinary close, no worse than before.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

fn conn_error(errno: i32, why: String) -> io::Error {
    let kind = io::Error::from_raw_os_error(errno).kind();
    io::Error::new(kind, why)
}

/// A member that is an NBD export.
pub struct NbdMember {
    uri: String,
    id: DevId,
    len_bytes: u64,
    /// The largest request the server takes (its advertised maximum, capped); set at
    /// every connection.
    request_max: AtomicU32,
    /// The server takes NBD_CMD_FLUSH; set at every connection.
    flush: AtomicBool,
    /// Opened while its host was away: any export at least `len_bytes` long is taken at
    /// the first connection (its superblock then says whose it is).
    offline: AtomicBool,
    conn: Mutex<Option<Arc<Conn>>>,
    drops: AtomicU64,
    /// This member's request deadline in ms (the global one when it was opened).
    timeout_ms: AtomicU64,
}

impl std::fmt::Debug for NbdMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NbdMember")
            .field("uri", &self.uri)
            .field("len_bytes", &self.len_bytes)
            .finish()
    }
}

/// Connect to `uri` within the request timeout; the connection, the export's size and
/// flags, and the largest request it takes.
fn connect(uri: &str, timeout: Duration) -> io::Result<(Arc<Conn>, u64, u16, u32)> {
    let client = Client::connect_within(uri, Some(timeout))?;
    let (reader, writer, size, flags, block) = client.into_parts();
    let request_max = block.maximum.clamp(4096, REQUEST_BYTES_MAX);
    // A stuck peer must not hold the writer's lock forever.
    writer.set_write_timeout(Some(timeout))?;
    let conn = Arc::new(Conn {
        socket: writer.try_clone()?,
        writer: Mutex::new(writer),
        table: Mutex::new(Table::default()),
        replied: Condvar::new(),
    });
    let c = Arc::clone(&conn);
    std::thread::Builder::new()
        .name("raidlab-nbd-member".into())
        .spawn(move || c.read_replies(reader))?;
    Ok((conn, size, flags, request_max))
}

impl NbdMember {
    /// Connect to the export `uri` names.
    pub fn open(uri: &str) -> io::Result<NbdMember> {
        let id = uri_identity(uri)?;
        let timeout = request_timeout();
        let (conn, len_bytes, flags, request_max) = connect(uri, timeout)?;
        Ok(NbdMember {
            uri: uri.to_string(),
            id,
            len_bytes,
            request_max: AtomicU32::new(request_max),
            flush: AtomicBool::new(flags & FLAG_SEND_FLUSH != 0),
            offline: AtomicBool::new(false),
            conn: Mutex::new(Some(conn)),
            drops: AtomicU64::new(0),
            timeout_ms: AtomicU64::new(timeout.as_millis() as u64),
        })
    }

    /// A member whose host cannot be reached now (at assembly): not connected until
    /// [`Link::reconnect`] succeeds; `len_bytes` is what the array needs of it.
    pub fn offline(uri: &str, len_bytes: u64) -> io::Result<NbdMember> {
        let timeout = request_timeout();
        Ok(NbdMember {
            uri: uri.to_string(),
            id: uri_identity(uri)?,
            len_bytes,
            request_max: AtomicU32::new(REQUEST_BYTES_MAX),
            flush: AtomicBool::new(true),
            offline: AtomicBool::new(true),
            conn: Mutex::new(None),
            drops: AtomicU64::new(0),
            timeout_ms: AtomicU64::new(timeout.as_millis() as u64),
        })
    }

    /// This member's request deadline (and of its connection attempts).
    pub fn set_timeout(&self, d: Duration) {
        let ms = d.as_millis().clamp(1, 3_600_000) as u64;
        self.timeout_ms.store(ms, Ordering::Relaxed);
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    /// The live connection, or the error every request gets while it is down.
    fn conn(&self) -> io::Result<Arc<Conn>> {
        let mut g = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = g.as_ref() {
            let broken = c.lock().broken.clone();
            match broken {
                None => return Ok(Arc::clone(c)),
                Some((errno, why)) => {
                    // Counted once, when the loss is first seen here.
                    *g = None;
                    self.drops.fetch_add(1, Ordering::Relaxed);
                    return Err(conn_error(errno, why));
                }
            }
        }
        Err(conn_error(
            ENOTCONN,
            format!("{}: not connected (host away)", self.uri),
        ))
    }

    fn request(&self, kind: u16, offset: u64, len: u32, payload: &[u8]) -> Reply {
        let c = self.conn()?;
        let r = c.call(kind, offset, len, payload, self.timeout());
        if r.is_err() {
            // Let `connected` see the loss at once.
            let _ = self.conn();
        }
        r
    }

    fn checked(&self, r: Reply) -> io::Result<Vec<u8>> {
        let (errno, data) =
            r.map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.uri)))?;
        if errno == ESHUTDOWN {
            // The server is going away (nbdkit on SIGTERM): its host, not its disk.
            if let Ok(c) = self.conn() {
                c.break_with(ENOTCONN, "the server is shutting down (ESHUTDOWN)".into());
            }
            let _ = self.conn();
            return Err(conn_error(
                ENOTCONN,
                format!("{}: the server is shutting down", self.uri),
            ));
        }
        if errno != 0 {
            // The server's errno (EIO from a failing disk, ENOSPC...), as a local disk's.
            return Err(io::Error::from_raw_os_error(errno as i32));
        }
        Ok(data)
    }
}

impl Member for NbdMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if offset.saturating_add(buf.len() as u64) > self.len_bytes {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let step = self.request_max.load(Ordering::Relaxed) as usize;
        for (i, part) in buf.chunks_mut(step).enumerate() {
            let at = offset + (i * step) as u64;
            let data = self.checked(self.request(CMD_READ, at, part.len() as u32, &[]))?;
            part.copy_from_slice(&data);
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if offset.saturating_add(buf.len() as u64) > self.len_bytes {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "write past the end",
            ));
        }
        let step = self.request_max.load(Ordering::Relaxed) as usize;
        for (i, part) in buf.chunks(step).enumerate() {
            let at = offset + (i * step) as u64;
            self.checked(self.request(CMD_WRITE, at, part.len() as u32, part))?;
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        if !self.flush.load(Ordering::Relaxed) {
            // Still checks the connection: a sync of a member that is away must fail.
            return self.conn().map(drop);
        }
        self.checked(self.request(CMD_FLUSH, 0, 0, &[])).map(drop)
    }

    fn len_bytes(&self) -> u64 {
        self.len_bytes
    }

    fn path(&self) -> &str {
        &self.uri
    }

    fn identity(&self) -> DevId {
        self.id
    }

    fn link(&self) -> Option<&dyn Link> {
        Some(self)
    }
}

impl Link for NbdMember {
    fn connected(&self) -> bool {
        self.conn().is_ok()
    }

    fn reconnect(&self) -> io::Result<()> {
        if self.connected() {
            return Ok(());
        }
        let (conn, size, flags, request_max) = connect(&self.uri, self.timeout())?;
        let offline = self.offline.load(Ordering::Relaxed);
        if (offline && size < self.len_bytes) || (!offline && size != self.len_bytes) {
            conn.break_with(ENOTCONN, "wrong size".into());
            return Err(io::Error::other(format!(
                "{}: the export is {size} bytes now, {} before: not the same device",
                self.uri, self.len_bytes
            )));
        }
        self.flush
            .store(flags & FLAG_SEND_FLUSH != 0, Ordering::Relaxed);
        self.request_max.store(request_max, Ordering::Relaxed);
        self.offline.store(false, Ordering::Relaxed);
        *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = Some(conn);
        Ok(())
    }

    fn drops(&self) -> u64 {
        self.drops.load(Ordering::Relaxed)
    }
}

impl Drop for NbdMember {
    fn drop(&mut self) {
        // Ends the reader thread (it holds its own reference to the connection).
        if let Some(c) = self.conn.lock().unwrap_or_else(|e| e.into_inner()).take() {
            c.break_with(ENOTCONN, "closed".into());
        }
    }
}

#[cfg(test)]
#[path = "nbd_tests.rs"]
mod tests;
