//! TLS for the NBD front, as `nbdkit --tls`: NBD_OPT_STARTTLS in the fixed-newstyle option
//! haggling, then the TLS session carries the rest of the handshake and the transmission
//! phase. X.509 certificates only (rustls, ring provider); TLS-PSK is not offered (rustls
//! has no external PSK support, see docs/store.md).
//!
//! - [`TlsMode`]: `off`, `on` (STARTTLS allowed) or `require` (every option but STARTTLS and
//!   ABORT refused with NBD_REP_ERR_TLS_REQD before TLS: nbdkit's `--tls=require`, the spec's
//!   FORCEDTLS mode);
//! - [`ServerTls::load`]: the server's certificate directory (`server-cert.pem`,
//!   `server-key.pem`, and `ca-cert.pem` to verify client certificates);
//! - [`client_config`]: a client's trust anchors (a CA file) and optional certificate;
//! - [`TlsStream`]: one TLS session over a socket, cloned into the connection's reader and
//!   its writer. The two share the rustls state under a mutex held only to decrypt received
//!   bytes or to encrypt a reply, never across a blocking socket call: the reader reads
//!   ciphertext from the socket unlocked, and a writer (already holding the connection's
//!   write lock, which orders replies) encrypts under the mutex, then sends unlocked. So the
//!   socket timeouts (handshake deadline, idle timeout, reply write timeout) bound every
//!   wait exactly as on a plain socket, and a stuck reply never blocks the reader.

use std::fmt;
use std::io::{self, IoSlice, Read, Write};
use std::net::Shutdown;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig, ServerConnection,
};

use super::server::Stream;

/// Ciphertext read from the socket at once.
const READ_CHUNK: usize = 32 << 10;
/// Largest PEM file read (a certificate chain or a key is a few KiB).
const PEM_MAX: u64 = 1 << 20;
/// How long a closing connection waits to send its close_notify alert.
const CLOSE_NOTIFY_TIMEOUT: Duration = Duration::from_millis(200);

/// When the server offers or requires TLS (`raidlab serve --tls`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsMode {
    /// No TLS: NBD_OPT_STARTTLS is answered NBD_REP_ERR_UNSUP.
    #[default]
    Off,
    /// A client may upgrade with NBD_OPT_STARTTLS, or stay in plain text.
    On,
    /// Every option before NBD_OPT_STARTTLS except NBD_OPT_ABORT is refused with
    /// NBD_REP_ERR_TLS_REQD (NBD_OPT_EXPORT_NAME, which cannot fail, closes the connection).
    Require,
}

impl TlsMode {
    /// "off", "on" or "require" (nbdkit's words).
    pub fn parse(text: &str) -> Result<TlsMode, String> {
        match text {
            "off" => Ok(TlsMode::Off),
            "on" => Ok(TlsMode::On),
            "require" => Ok(TlsMode::Require),
            _ => Err(format!(
                "unknown TLS mode {text:?} (want off, on or require)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Off => "off",
            TlsMode::On => "on",
            TlsMode::Require => "require",
        }
    }
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A TLS setting that cannot be used: the option at fault, the file if one is, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfigError {
    /// The command-line option to change, e.g. "--tls-certificates".
    pub option: &'static str,
    pub file: Option<PathBuf>,
    pub message: String,
}

impl TlsConfigError {
    fn new(option: &'static str, file: Option<&Path>, message: impl Into<String>) -> Self {
        TlsConfigError {
            option,
            file: file.map(Path::to_path_buf),
            message: message.into(),
        }
    }
}

impl fmt::Display for TlsConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(p) => write!(f, "{}: {}", p.display(), self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for TlsConfigError {}

/// The server's TLS: its mode (never `Off`) and its rustls configuration.
#[derive(Clone)]
pub struct ServerTls {
    pub mode: TlsMode,
    pub(crate) config: Arc<ServerConfig>,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_pem_file(option: &'static str, path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    let fail = |m: String| TlsConfigError::new(option, Some(path), m);
    let f = std::fs::File::open(path).map_err(|e| fail(format!("cannot open: {e}")))?;
    let mut data = Vec::new();
    f.take(PEM_MAX + 1)
        .read_to_end(&mut data)
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    if data.len() as u64 > PEM_MAX {
        return Err(fail(format!("larger than {PEM_MAX} bytes: not a PEM file")));
    }
    Ok(data)
}

/// Every certificate of a PEM file (a chain: the leaf first).
fn load_certs(
    option: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let data = read_pem_file(option, path)?;
    let certs = CertificateDer::pem_slice_iter(&data)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsConfigError::new(option, Some(path), format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(TlsConfigError::new(
            option,
            Some(path),
            "no CERTIFICATE found (want PEM X.509 certificates)",
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 RSA or SEC1 EC).
fn load_key(option: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    let data = read_pem_file(option, path)?;
    PrivateKeyDer::from_pem_slice(&data).map_err(|e| {
        let why = match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "no private key found (want PEM PKCS#8, RSA or EC PRIVATE KEY)".to_string()
            }
            e => format!("bad PEM: {e}"),
        };
        TlsConfigError::new(option, Some(path), why)
    })
}

/// Trust anchors from a PEM file of CA certificates.
fn load_roots(option: &'static str, path: &Path) -> Result<RootCertStore, TlsConfigError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(option, path)? {
        roots.add(cert).map_err(|e| {
            TlsConfigError::new(option, Some(path), format!("unusable CA certificate: {e}"))
        })?;
    }
    Ok(roots)
}

impl ServerTls {
    /// The server's TLS for `mode`, from the certificate directory `dir` as nbdkit's
    /// `--tls-certificates`: `server-cert.pem` (the certificate chain, leaf first),
    /// `server-key.pem` (its key) and, with `verify_peer`, `ca-cert.pem` (the CA that signs
    /// client certificates; a client without a valid one is refused in the TLS handshake).
    /// `Ok(None)` for `TlsMode::Off` (then `dir` and `verify_peer` must be unset). Each error
    /// names the option and the file at fault.
    pub fn load(
        mode: TlsMode,
        dir: Option<&Path>,
        verify_peer: bool,
    ) -> Result<Option<ServerTls>, TlsConfigError> {
        const OPT: &str = "--tls-certificates";
        if mode == TlsMode::Off {
            if let Some(d) = dir {
                return Err(TlsConfigError::new(
                    OPT,
                    Some(d),
                    "certificates given but TLS is off: add --tls on or --tls require",
                ));
            }
            if verify_peer {
                return Err(TlsConfigError::new(
                    "--tls-verify-peer",
                    None,
                    "--tls-verify-peer needs --tls on or --tls require",
                ));
            }
            return Ok(None);
        }
        let Some(dir) = dir else {
            return Err(TlsConfigError::new(
                OPT,
                None,
                format!(
                    "--tls {mode} needs --tls-certificates DIR (with server-cert.pem and server-key.pem)"
                ),
            ));
        };
        if !dir.is_dir() {
            return Err(TlsConfigError::new(
                OPT,
                Some(dir),
                "not a directory (want one holding server-cert.pem and server-key.pem)",
            ));
        }
        let cert_path = dir.join("server-cert.pem");
        let key_path = dir.join("server-key.pem");
        let certs = load_certs(OPT, &cert_path)?;
        let key = load_key(OPT, &key_path)?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsConfigError::new(OPT, None, format!("TLS setup: {e}")))?;
        let builder = if verify_peer {
            let ca_path = dir.join("ca-cert.pem");
            let roots = load_roots("--tls-verify-peer", &ca_path)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| {
                    TlsConfigError::new(
                        "--tls-verify-peer",
                        Some(&ca_path),
                        format!("cannot verify clients with it: {e}"),
                    )
                })?;
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let config = builder.with_single_cert(certs, key).map_err(|e| {
            TlsConfigError::new(
                OPT,
                Some(&key_path),
                format!("unusable with server-cert.pem: {e}"),
            )
        })?;
        Ok(Some(ServerTls {
            mode,
            config: Arc::new(config),
        }))
    }
}

/// A client's TLS configuration: trust the CA certificates of `ca_file`; present
/// `client` (certificate chain file, key file) if the server asks for one.
pub fn client_config(
    ca_file: &Path,
    client: Option<(&Path, &Path)>,
) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let roots = load_roots("tls-ca", ca_file)?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsConfigError::new("tls-ca", None, format!("TLS setup: {e}")))?
        .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = load_certs("tls-cert", cert)?;
            let key_der = load_key("tls-key", key)?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| TlsConfigError::new("tls-key", Some(key), e.to_string()))?
        }
    };
    Ok(Arc::new(config))
}

/// One TLS session over a socket; clones share the session (see the module comment).
#[derive(Debug)]
pub(crate) struct TlsStream {
    raw: Stream,
    session: Arc<Mutex<Connection>>,
    /// Ciphertext read from the socket and not yet given to rustls (the reader's own).
    rbuf: Vec<u8>,
    rpos: usize,
    /// The socket reached its end.
    eof: bool,
    /// Ciphertext to send (a writer's own, reused).
    wbuf: Vec<u8>,
}

/// Socket I/O for the TLS handshake: each read waits at most until the deadline.
struct DeadlineIo<'a> {
    raw: &'a mut Stream,
    until: Instant,
}

impl Read for DeadlineIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "TLS handshake not finished in time",
            ));
        }
        self.raw.set_read_timeout(Some(left))?;
        self.raw.read(buf)
    }
}

impl Write for DeadlineIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.raw.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn lock(session: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    session.lock().unwrap_or_else(|e| e.into_inner())
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

impl TlsStream {
    /// The server side of the TLS handshake on `raw`, which must be a plain socket, after
    /// NBD_REP_ACK to NBD_OPT_STARTTLS. `early` is what the NBD reader had buffered past the
    /// option (a client may send its ClientHello without waiting). The handshake must end
    /// by `until` (the NBD handshake's deadline).
    pub(crate) fn accept(
        mut raw: Stream,
        early: &[u8],
        config: &Arc<ServerConfig>,
        until: Instant,
    ) -> io::Result<TlsStream> {
        let mut conn = ServerConnection::new(Arc::clone(config)).map_err(tls_error)?;
        let mut early = early;
        while !early.is_empty() {
            if conn.read_tls(&mut early)? == 0 {
                break;
            }
            if let Err(e) = conn.process_new_packets() {
                // The alert saying why, if the socket takes it.
                let _ = conn.write_tls(&mut DeadlineIo {
                    raw: &mut raw,
                    until,
                });
                return Err(tls_error(e));
            }
        }
        TlsStream::handshake(raw, Connection::Server(conn), until)
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
        TlsStream::handshake(raw, Connection::Client(conn), until)
    }

    fn handshake(mut raw: Stream, mut conn: Connection, until: Instant) -> io::Result<TlsStream> {
        {
            let mut io = DeadlineIo {
                raw: &mut raw,
                until,
            };
            while conn.is_handshaking() {
                conn.complete_io(&mut io)?;
            }
            // Session tickets and the like, queued as the handshake ended.
            while conn.wants_write() {
                conn.write_tls(&mut io)?;
            }
        }
        Ok(TlsStream {
            raw,
            session: Arc::new(Mutex::new(conn)),
            rbuf: Vec::new(),
            rpos: 0,
            eof: false,
            wbuf: Vec::new(),
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
        })
    }

    pub(crate) fn raw(&self) -> &Stream {
        &self.raw
    }

    /// Send what rustls has queued (encrypted records, alerts), the session lock released
    /// before the socket write. Callers hold the connection's write lock (or are its only
    /// user), so records go out in the order they were made.
    fn send_queued(&mut self, mut conn: MutexGuard<'_, Connection>) -> io::Result<()> {
        let mut out = std::mem::take(&mut self.wbuf);
        out.clear();
        while conn.wants_write() {
            conn.write_tls(&mut out)?;
        }
        drop(conn);
        let sent = self.raw.write_all(&out);
        self.wbuf = out;
        sent
    }

    /// Send a close_notify alert, waiting briefly at most (a stuck peer may not read it).
    pub(crate) fn close_notify(&mut self) {
        let session = Arc::clone(&self.session);
        let mut conn = lock(&session);
        conn.send_close_notify();
        let _ = self.raw.set_write_timeout(Some(CLOSE_NOTIFY_TIMEOUT));
        let _ = self.send_queued(conn);
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
        loop {
            {
                let session = Arc::clone(&self.session);
                let mut conn = lock(&session);
                // Plaintext first; then feed received ciphertext one piece at a time until
                // some comes out (rustls bounds the plaintext it holds).
                loop {
                    match conn.reader().read(buf) {
                        Ok(n) => return Ok(n),
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                        Err(e) => return Err(e),
                    }
                    if self.rpos >= self.rbuf.len() {
                        break;
                    }
                    let mut pending = &self.rbuf[self.rpos..];
                    let n = conn.read_tls(&mut pending)?;
                    // Nothing taken: the peer's close_notify came; the rest is ignored.
                    self.rpos = if n == 0 {
                        self.rbuf.len()
                    } else {
                        self.rpos + n
                    };
                    conn.process_new_packets().map_err(tls_error)?;
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
        let mut conn = lock(&session);
        let n = conn.writer().write(buf)?;
        self.send_queued(conn)?;
        Ok(n)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let session = Arc::clone(&self.session);
        let mut conn = lock(&session);
        let n = conn.writer().write_vectored(bufs)?;
        self.send_queued(conn)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
