//! One connection's life on the server: the handshake under its deadline, then the reader
//! loop (request headers, write payloads received piece by piece within the budgets, bad
//! requests answered in place, good ones run inline or queued to the workers).

use std::io::{self, BufReader, Read};
use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::pool::{Conn, Job, Shared, PAYLOAD_PIECE};
use super::proto::{
    decide, discard, parse_request, serve_greeting, serve_options, Command, Decision, Handshake,
    REQUEST_LEN,
};
use super::server::*;
use super::tls::{TlsMode, TlsStream};
use super::Errno;

/// A connection's thread: handshake, read requests until the client leaves, drain, close.
pub(super) fn connection(shared: &Shared, stream: Stream, conn: &Arc<Conn>) {
    if shared.debug {
        crate::info!("nbd: connection {} open", conn.id);
    }
    let peer = match &stream {
        Stream::Tcp(s) => s
            .peer_addr()
            .map_or_else(|_| "tcp".into(), |a| a.to_string()),
        Stream::Unix(_) => "unix".to_string(),
        // A connection starts in plain text; TLS begins later, with STARTTLS.
        Stream::Tls(_) => "tls".to_string(),
    };
    shared.backend.connected(conn.id, &peer);
    let outcome = serve_connection(shared, stream, conn);
    if let Err(e) = &outcome {
        if timed_out(e) {
            conn.timed_out.store(true, Ordering::Relaxed);
        }
    }
    shared.drain(conn);
    {
        let mut w = conn.writer.lock().unwrap_or_else(|e| e.into_inner());
        w.close_notify();
        w.shutdown(Shutdown::Both);
    }
    shared.backend.disconnected(
        conn.id,
        conn.requests.load(Ordering::Relaxed),
        conn.errors.load(Ordering::Relaxed),
        outcome.as_ref().err().map(|e| e.to_string()).as_deref(),
    );
    if shared.debug {
        let how = match &outcome {
            Ok(()) => "closed".to_string(),
            Err(e) => format!("closed: {e}"),
        };
        crate::info!(
            "nbd: connection {} {how} ({} requests, {} errors)",
            conn.id,
            conn.requests.load(Ordering::Relaxed),
            conn.errors.load(Ordering::Relaxed)
        );
    }
}

/// Whether an I/O error is a socket timeout (Linux reports `WouldBlock` for a blocking
/// socket's receive timeout).
fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// The reader during the handshake: every read waits at most until the deadline, so a
/// client trickling one byte at a time still cannot hold its connection past it.
struct Deadline<'a> {
    r: &'a mut BufReader<Stream>,
    until: Instant,
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.r.buffer().is_empty() {
            let left = self.until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "handshake not finished in time",
                ));
            }
            self.r.get_ref().set_read_timeout(Some(left))?;
        }
        self.r.read(buf)
    }
}

/// Polling before sleeping (`Limits::poll`). A client that sends its next request soon
/// after each reply (a queue depth of 1, or a client thread that runs one request after
/// another) would otherwise cost two sleeps and wake-ups per request: the reader's, on the
/// socket, and a worker's, handed the request. On two cores those were most of a 4 KiB read
/// from tmpfs, and polling alone saved little, since the handoff still slept. So while the
/// client's recent gaps were short, the reader polls the socket for up to the budget, and
/// runs a lone request itself, both only when the backend answers in memory time. A client
/// whose gaps are longer gets neither: its reader sleeps as before, and a slow backend
/// always uses the workers.
struct Poll {
    budget_ns: u64,
    /// Moving average (1/8 weight) of the time from the start of a wait for a request (its
    /// reader idle, nothing buffered) to the request's header, each capped at four budgets
    /// so one long pause does not stop polling for long.
    gap_ns_avg: u64,
}

impl Poll {
    fn new(budget: std::time::Duration) -> Poll {
        let budget_ns = budget.as_nanos() as u64;
        Poll {
            budget_ns,
            // Start as a slow client: a connection earns polling with a few short gaps.
            gap_ns_avg: budget_ns,
        }
    }

    /// Whether the client's recent requests came within the budget.
    fn active(&self) -> bool {
        self.gap_ns_avg < self.budget_ns
    }

    /// About to wait for a request with nothing buffered: poll first when active and the
    /// backend answers in memory time (`fast`; with a slow one the poll would save little
    /// and take a core from the requests in flight, or from disk-timed members' timing).
    /// Returns when the wait began (`None` with polling off: no clock read per request).
    fn before(&self, stream: &Stream, fast: bool) -> Option<Instant> {
        if self.budget_ns == 0 {
            return None;
        }
        let t0 = Instant::now();
        if fast && self.active() {
            stream.spin_for_data(self.budget_ns);
        }
        Some(t0)
    }

    /// The request's header arrived (the wait began at `t0`).
    fn after(&mut self, t0: Instant) {
        let ns = (t0.elapsed().as_nanos() as u64).min(4 * self.budget_ns);
        self.gap_ns_avg = self.gap_ns_avg - self.gap_ns_avg / 8 + ns / 8;
    }
}

/// Read a request header. Waiting for its first byte has no limit (an idle client is
/// fine); once it has started, each read must bring a byte within the socket's timeout (the
/// idle timeout). `Ok(false)` on a clean end of stream between requests.
fn read_header(reader: &mut BufReader<Stream>, head: &mut [u8; REQUEST_LEN]) -> io::Result<bool> {
    let mut done = 0;
    // Each pass either makes progress, ends, or (idle, between requests) waits once more
    // for the idle timeout; the connection's end (EOF, shutdown at drain) ends the loop.
    while done < REQUEST_LEN {
        match reader.read(&mut head[done..]) {
            Ok(0) if done == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if done == 0 && timed_out(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn serve_connection(shared: &Shared, stream: Stream, conn: &Arc<Conn>) -> io::Result<()> {
    let limits = &shared.limits;
    let mut reader = BufReader::with_capacity(READ_BUFFER, stream);
    {
        let until = Instant::now() + limits.handshake_timeout;
        let mode = shared.tls.as_ref().map_or(TlsMode::Off, |t| t.mode);
        let (mut scratch, mut out) = (Vec::new(), Vec::new());
        let mut session = {
            let mut w = conn.writer.lock().unwrap_or_else(|e| e.into_inner());
            let mut r = Deadline {
                r: &mut reader,
                until,
            };
            match serve_greeting(&mut r, &mut *w, mode)? {
                Some(s) => s,
                None => return Ok(()),
            }
        };
        loop {
            let mut w = conn.writer.lock().unwrap_or_else(|e| e.into_inner());
            let mut r = Deadline {
                r: &mut reader,
                until,
            };
            let export = &shared.export;
            match serve_options(
                &mut r,
                &mut *w,
                export,
                &mut session,
                &mut scratch,
                &mut out,
            )? {
                Handshake::Transmit => break,
                Handshake::Closed => return Ok(()),
                Handshake::StartTls => {}
            }
            // NBD_REP_ACK is sent: the TLS handshake, within the NBD handshake's deadline,
            // then the reader and the writer both go through the session.
            let Some(tls) = &shared.tls else {
                return Err(io::Error::other("STARTTLS acknowledged without TLS"));
            };
            let early = reader.buffer().to_vec();
            let raw = reader.into_inner();
            let session_stream = TlsStream::accept(raw, &early, tls, until)?;
            if shared.debug {
                crate::info!(
                    "nbd: connection {} TLS: {}",
                    conn.id,
                    session_stream.describe()
                );
            }
            *w = Stream::Tls(Box::new(session_stream.try_clone()?));
            reader = BufReader::with_capacity(READ_BUFFER, Stream::Tls(Box::new(session_stream)));
            session.tls_active = true;
        }
    }
    conn.handshaking.store(false, Ordering::Relaxed);
    // From now on a read that brings nothing for the idle timeout fails; `read_header`
    // tolerates that between requests.
    reader
        .get_ref()
        .set_read_timeout(Some(limits.idle_timeout))?;
    let mut head = [0u8; REQUEST_LEN];
    // The payload of requests the reader runs itself (grown to the largest, then reused).
    let mut inline_buf: Vec<u8> = Vec::new();
    let mut poll = Poll::new(limits.poll);
    // One pass per request; ends with the client (end of stream, DISC) or a protocol error.
    while !conn.dead.load(Ordering::Relaxed) {
        let waited = if reader.buffer().is_empty() {
            poll.before(reader.get_ref(), shared.memory_speed())
        } else {
            None
        };
        if !read_header(&mut reader, &mut head)? {
            return Ok(());
        }
        if let Some(t0) = waited {
            poll.after(t0);
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
                    && (!reader.buffer().is_empty() || poll.active()) =>
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
                let job = Job::new(Arc::clone(conn), cmd, req.cookie, req.offset, req.len);
                if let Some(mut job) = shared.admit(job) {
                    if let Err(e) = receive(shared, &mut reader, &mut job) {
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

/// Receive a write's payload piece by piece, reserving each piece as it comes.
fn receive(shared: &Shared, reader: &mut BufReader<Stream>, job: &mut Job) -> io::Result<()> {
    let len = job.payload();
    let mut got = 0;
    while got < len {
        if got == job.reserved {
            shared.grow(job);
        }
        let n = (job.reserved - got).min(PAYLOAD_PIECE);
        if job.buf.len() < got + n {
            job.buf.resize(got + n, 0);
        }
        reader.read_exact(&mut job.buf[got..got + n])?;
        got += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Poll;
    use std::time::{Duration, Instant};

    fn gap(p: &mut Poll, us: u64) {
        p.after(Instant::now() - Duration::from_micros(us));
    }

    #[test]
    fn polling_is_earned_by_short_gaps_and_lost_by_long_ones() {
        let mut p = Poll::new(Duration::from_micros(50));
        // A new connection counts as a slow client.
        assert!(!p.active());
        gap(&mut p, 10);
        assert!(p.active(), "one short gap: 50 - 50/8 + 10/8 = 45 µs");
        for _ in 0..20 {
            gap(&mut p, 10);
        }
        assert!(p.active());
        // A long pause counts as four budgets: one is not enough to stop...
        gap(&mut p, 10_000);
        assert!(p.active(), "about 11 + 25 µs");
        // ...a client that keeps pausing stops it, and short gaps bring it back.
        gap(&mut p, 10_000);
        gap(&mut p, 10_000);
        assert!(!p.active());
        for _ in 0..8 {
            gap(&mut p, 10);
        }
        assert!(p.active());
        // Gaps just over the budget never turn it on.
        let mut p = Poll::new(Duration::from_micros(50));
        for _ in 0..50 {
            gap(&mut p, 60);
        }
        assert!(!p.active());
        // A zero budget never polls.
        let mut p = Poll::new(Duration::ZERO);
        gap(&mut p, 0);
        assert!(!p.active());
    }
}
