//! One TLS session over a socket ([`TlsStream`]), whichever stack runs it (the module
//! comment of `nbd::tls` says how the reader and writers share it).

use std::io::{self, IoSlice, Read, Write};
use std::net::Shutdown;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection, ServerConnection};

use super::{ClientTls, ServerStack, ServerTls};
use crate::nbd::server::Stream;

/// Ciphertext read from the socket at once.
const READ_CHUNK: usize = 32 << 10;
/// How long a closing connection waits to send its close_notify alert.
const CLOSE_NOTIFY_TIMEOUT: Duration = Duration::from_millis(200);

/// One session's state, whichever stack runs it.
#[derive(Debug)]
enum Engine {
    /// Boxed: rustls's state is a kilobyte, OpenSSL's a pointer.
    Rustls(Box<Connection>),
    #[cfg(feature = "tls-psk")]
    OpenSsl(super::ossl::Session),
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

impl Engine {
    /// Move the handshake on; `Ok(true)` once it is done.
    fn handshake_step(&mut self) -> io::Result<bool> {
        match self {
            Engine::Rustls(c) => Ok(!c.is_handshaking()),
            #[cfg(feature = "tls-psk")]
            Engine::OpenSsl(s) => s.handshake(),
        }
    }

    /// Give the session received ciphertext; returns how much it took (0: it takes no
    /// more, the peer's close_notify came).
    fn feed(&mut self, data: &[u8]) -> io::Result<usize> {
        match self {
            Engine::Rustls(c) => {
                let mut d = data;
                let n = c.read_tls(&mut d)?;
                if n > 0 {
                    c.process_new_packets().map_err(tls_error)?;
                }
                Ok(n)
            }
            #[cfg(feature = "tls-psk")]
            Engine::OpenSsl(s) => s.feed(data),
        }
    }

    /// Plaintext: `Ok(Some(n))` (0 at the session's end), `Ok(None)` when ciphertext is
    /// needed first.
    fn read_plain(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match self {
            Engine::Rustls(c) => match c.reader().read(buf) {
                Ok(n) => Ok(Some(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(Some(0)),
                Err(e) => Err(e),
            },
            #[cfg(feature = "tls-psk")]
            Engine::OpenSsl(s) => s.read_plain(buf),
        }
    }

    fn write_plain(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Engine::Rustls(c) => c.writer().write(buf),
            #[cfg(feature = "tls-psk")]
            Engine::OpenSsl(s) => s.write_plain(buf),
        }
    }

    fn write_plain_vectored(
        &mut self,
        bufs: &[IoSlice<'_>],
        scratch: &mut Vec<u8>,
    ) -> io::Result<usize> {
        match self {
            Engine::Rustls(c) => {
                let _ = scratch;
                c.writer().write_vectored(bufs)
            }
            #[cfg(feature = "tls-psk")]
            Engine::OpenSsl(s) => {
                // One record for a reply's header and data, as rustls makes: gather them
                // (up to one piece) and encrypt once.
                scratch.clear();
                for b in bufs {
                    let room = super::ossl::WRITE_PIECE - scratch.len();
                    scratch.extend_from_slice(&b[..b.len().min(room)]);
                    if scratch.len() == super::ossl::WRITE_PIECE {
                        break;
                    }
                }
                s.write_plain(scratch)
            }
        }
    }

    /// Append the records waiting to be sent to `out`.
    fn take_output(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        match self {
            Engine::Rustls(c) => {
                while c.wants_write() {
                    c.write_tls(out)?;
                }
                Ok(())
            }
            #[cfg(feature = "tls-psk")]
            Engine::OpenSsl(s) => {
                s.take_output(out);
                Ok(())
            }
        }
    }

    fn send_close_notify(&mut self) {
        match self {
            Engine::Rustls(c) => c.send_close_notify(),
            #[cfg(feature = "tls-psk")]
            Engine::OpenSsl(s) => s.send_close_notify(),
        }
    }

    /// The protocol version and suite agreed, e.g. "TLSv1.3 TLS_AES_128_GCM_SHA256".
    fn describe(&self) -> String {
        match self {
            Engine::Rustls(c) => format!(
                "{} {}",
                c.protocol_version()
                    .map_or("none".into(), |v| format!("{v:?}")),
                c.negotiated_cipher_suite()
                    .map_or("none".into(), |s| format!("{:?}", s.suite()))
            ),
            #[cfg(feature = "tls-psk")]
            Engine::OpenSsl(s) => s.describe(),
        }
    }
}

/// One TLS session over a socket; clones share the session (see the module comment).
#[derive(Debug)]
pub(crate) struct TlsStream {
    raw: Stream,
    session: Arc<Mutex<Engine>>,
    /// Ciphertext read from the socket and not yet given to the session (the reader's own).
    rbuf: Vec<u8>,
    rpos: usize,
    /// The socket reached its end.
    eof: bool,
    /// Ciphertext to send (a writer's own, reused).
    wbuf: Vec<u8>,
    /// Plaintext gathered for one record (a writer's own, reused).
    gather: Vec<u8>,
}

fn lock(session: &Mutex<Engine>) -> MutexGuard<'_, Engine> {
    session.lock().unwrap_or_else(|e| e.into_inner())
}

/// Read from `raw` waiting at most until `until`.
fn read_until(raw: &mut Stream, buf: &mut [u8], until: Instant) -> io::Result<usize> {
    let left = until.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "TLS handshake not finished in time",
        ));
    }
    raw.set_read_timeout(Some(left))?;
    raw.read(buf)
}

/// A peer's name for log lines: its address, or "unix".
fn peer_name(raw: &Stream) -> String {
    match raw {
        Stream::Tcp(s) => s
            .peer_addr()
            .map_or_else(|_| "tcp".into(), |a| a.to_string()),
        _ => "unix".into(),
    }
}

impl TlsStream {
    /// The server side of the TLS handshake on `raw`, which must be a plain socket, after
    /// NBD_REP_ACK to NBD_OPT_STARTTLS. `early` is what the NBD reader had buffered past the
    /// option (a client may send its ClientHello without waiting). The handshake must end
    /// by `until` (the NBD handshake's deadline).
    pub(crate) fn accept(
        raw: Stream,
        early: &[u8],
        tls: &ServerTls,
        until: Instant,
    ) -> io::Result<TlsStream> {
        let engine = match &tls.stack {
            ServerStack::X509(config) => Engine::Rustls(Box::new(Connection::Server(
                ServerConnection::new(Arc::clone(config)).map_err(tls_error)?,
            ))),
            #[cfg(feature = "tls-psk")]
            ServerStack::Psk(server) => Engine::OpenSsl(server.session()?),
        };
        let peer = peer_name(&raw);
        TlsStream::handshake(raw, engine, early, until).inspect_err(|e| {
            // A client offering a key the server does not have: worth an operator's eye.
            if e.kind() == io::ErrorKind::PermissionDenied {
                crate::warn!(
                    { "event": "TlsPskRefused", "peer": peer, "why": e.to_string() },
                    "TLS-PSK client {peer} refused: {e}"
                );
            }
        })
    }

    /// The client side of the TLS handshake on `raw` (a plain socket), checking the server's
    /// certificate against `name`.
    pub(crate) fn connect(
        raw: Stream,
        config: &Arc<ClientConfig>,
        name: &str,
        until: Instant,
    ) -> io::Result<TlsStream> {
        let name = ServerName::try_from(name.to_string()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad TLS server name {name:?}: {e}"),
            )
        })?;
        let conn = ClientConnection::new(Arc::clone(config), name).map_err(tls_error)?;
        TlsStream::handshake(
            raw,
            Engine::Rustls(Box::new(Connection::Client(conn))),
            &[],
            until,
        )
    }

    /// The client side of the TLS handshake with `tls`'s certificate check or key.
    pub(crate) fn connect_with(
        raw: Stream,
        tls: &ClientTls,
        until: Instant,
    ) -> io::Result<TlsStream> {
        match tls {
            ClientTls::X509 { config, hostname } => {
                TlsStream::connect(raw, config, hostname, until)
            }
            #[cfg(feature = "tls-psk")]
            ClientTls::Psk(client) => {
                TlsStream::handshake(raw, Engine::OpenSsl(client.session()?), &[], until)
            }
        }
    }

    /// Run the handshake to its end: send what the session has queued, read what it needs.
    /// Every read waits at most until `until`, so the loop ends by then; writes are bounded
    /// by the socket's write timeout (the server's reply write timeout). A failure sends the
    /// alert saying why, if the socket takes it.
    fn handshake(
        mut raw: Stream,
        mut engine: Engine,
        early: &[u8],
        until: Instant,
    ) -> io::Result<TlsStream> {
        let mut input = early.to_vec();
        let mut pos = 0;
        let mut out = Vec::new();
        let result = (|| loop {
            while pos < input.len() {
                match engine.feed(&input[pos..])? {
                    0 => {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "TLS peer closed during the handshake",
                        ))
                    }
                    n => pos += n,
                }
                if engine.handshake_step()? {
                    break;
                }
            }
            let done = engine.handshake_step()?;
            out.clear();
            engine.take_output(&mut out)?;
            raw.write_all(&out)?;
            if done {
                return Ok(());
            }
            input.resize(READ_CHUNK, 0);
            let n = read_until(&mut raw, &mut input, until)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "TLS peer closed during the handshake",
                ));
            }
            input.truncate(n);
            pos = 0;
        })();
        if let Err(e) = result {
            out.clear();
            if engine.take_output(&mut out).is_ok() && !out.is_empty() {
                let _ = raw.set_write_timeout(Some(CLOSE_NOTIFY_TIMEOUT));
                let _ = raw.write_all(&out);
            }
            return Err(e);
        }
        // Ciphertext past the handshake (the peer's first records) is the reader's.
        input.drain(..pos.min(input.len()));
        Ok(TlsStream {
            raw,
            session: Arc::new(Mutex::new(engine)),
            rbuf: input,
            rpos: 0,
            eof: false,
            wbuf: Vec::new(),
            gather: Vec::new(),
        })
    }

    /// Another handle on the same session and socket (the reader's or the writer's).
    pub(crate) fn try_clone(&self) -> io::Result<TlsStream> {
        Ok(TlsStream {
            raw: self.raw.try_clone()?,
            session: Arc::clone(&self.session),
            rbuf: Vec::new(),
            rpos: 0,
            eof: false,
            wbuf: Vec::new(),
            gather: Vec::new(),
        })
    }

    pub(crate) fn raw(&self) -> &Stream {
        &self.raw
    }

    /// The protocol version and suite the session agreed on.
    pub(crate) fn describe(&self) -> String {
        lock(&self.session).describe()
    }

    /// Send what the session has queued (encrypted records, alerts), the session lock
    /// released before the socket write. Callers hold the connection's write lock (or are
    /// its only user), so records go out in the order they were made.
    fn send_queued(&mut self, mut engine: MutexGuard<'_, Engine>) -> io::Result<()> {
        let mut out = std::mem::take(&mut self.wbuf);
        out.clear();
        engine.take_output(&mut out)?;
        drop(engine);
        let sent = self.raw.write_all(&out);
        self.wbuf = out;
        sent
    }

    /// Send a close_notify alert, waiting briefly at most (a stuck peer may not read it).
    pub(crate) fn close_notify(&mut self) {
        let session = Arc::clone(&self.session);
        let mut engine = lock(&session);
        engine.send_close_notify();
        let _ = self.raw.set_write_timeout(Some(CLOSE_NOTIFY_TIMEOUT));
        let _ = self.send_queued(engine);
    }

    pub(crate) fn shutdown(&self, how: Shutdown) {
        self.raw.shutdown(how);
    }
}

impl Read for TlsStream {
    /// Plaintext of the session. Waits on the socket (its read timeout applies) only when
    /// no plaintext is ready; the end of the socket reads as the end of the stream, with or
    /// without close_notify (NBD frames its messages, so a truncated one is an error anyway).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // Each pass feeds the session or waits once on the socket (bounded by its timeout);
        // the socket's end ends the loop.
        loop {
            {
                let session = Arc::clone(&self.session);
                let mut engine = lock(&session);
                // Plaintext first; then feed received ciphertext one piece at a time until
                // some comes out (the session bounds the plaintext it holds).
                loop {
                    if let Some(n) = engine.read_plain(buf)? {
                        return Ok(n);
                    }
                    if self.rpos >= self.rbuf.len() {
                        break;
                    }
                    let n = engine.feed(&self.rbuf[self.rpos..])?;
                    // Nothing taken: the peer's close_notify came; the rest is ignored.
                    self.rpos = if n == 0 {
                        self.rbuf.len()
                    } else {
                        self.rpos + n
                    };
                }
                // A session message (a KeyUpdate) that wants an answer gets it with the next
                // reply, sent by a writer under the connection's write lock.
                if self.eof {
                    return Ok(0);
                }
            }
            // No plaintext: wait for ciphertext, the session unlocked.
            self.rbuf.resize(READ_CHUNK, 0);
            self.rpos = 0;
            let n = match self.raw.read(&mut self.rbuf) {
                Ok(n) => n,
                Err(e) => {
                    self.rbuf.clear();
                    return Err(e);
                }
            };
            self.rbuf.truncate(n);
            if n == 0 {
                self.eof = true;
            }
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let session = Arc::clone(&self.session);
        let mut engine = lock(&session);
        let n = engine.write_plain(buf)?;
        self.send_queued(engine)?;
        Ok(n)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let session = Arc::clone(&self.session);
        let mut engine = lock(&session);
        let mut gather = std::mem::take(&mut self.gather);
        let n = engine.write_plain_vectored(bufs, &mut gather);
        self.gather = gather;
        self.send_queued(engine)?;
        n
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
