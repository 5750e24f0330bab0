//! TLS-PSK sessions on OpenSSL (the `tls-psk` feature): rustls has no external pre-shared
//! keys. A session is an `SslStream` over an in-memory buffer pair, never over the socket,
//! so it fits `TlsStream`'s design unchanged: the socket is read and written by
//! `TlsStream` with the session unlocked, and OpenSSL only turns ciphertext into plaintext
//! and back under the session lock.
//!
//! Protocols: TLS 1.3 with the SHA-256 suites (OpenSSL's PSK callbacks give TLS 1.3 a key
//! for SHA-256 only) and TLS 1.2 with ECDHE-PSK suites (forward secrecy; no plain-PSK or
//! RSA-PSK suite). No session tickets, no renegotiation, no certificates: a client that
//! does not know a key for its identity cannot finish the handshake.

use std::io::{self, Read, Write};
use std::sync::{Arc, OnceLock};

use openssl::error::ErrorStack;
use openssl::ssl::{
    ErrorCode, Ssl, SslContext, SslContextBuilder, SslMethod, SslOptions, SslRef, SslStream,
    SslVerifyMode, SslVersion,
};

use super::pskfile::{PskKey, PskKeys};
use super::TlsConfigError;

/// TLS 1.3 suites whose hash is SHA-256, the one a callback-given PSK is used with.
const TLS13_SUITES: &str = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256";
/// TLS 1.2 PSK suites with an ephemeral key exchange.
const TLS12_CIPHERS: &str =
    "ECDHE-PSK-CHACHA20-POLY1305:ECDHE-PSK-AES256-CBC-SHA384:ECDHE-PSK-AES128-CBC-SHA256";
/// Plaintext encrypted by one `write` (bounds the ciphertext a writer holds at once).
pub(super) const WRITE_PIECE: usize = 256 << 10;
/// Ciphertext held for OpenSSL at most. OpenSSL asks for more only once it has read all it
/// was given, and `TlsStream` feeds it one socket read (32 KiB) or, at the handshake, what
/// the NBD reader had buffered (64 KiB) at a time.
const INPUT_MAX: usize = 128 << 10;

/// What the server's PSK callback saw: the identity a client sent and whether it was known.
#[derive(Clone, Debug)]
struct Seen {
    identity: String,
    known: bool,
}

fn seen_index() -> Result<openssl::ex_data::Index<Ssl, Seen>, ErrorStack> {
    static INDEX: OnceLock<Result<openssl::ex_data::Index<Ssl, Seen>, ErrorStack>> =
        OnceLock::new();
    INDEX.get_or_init(Ssl::new_ex_index).clone()
}

fn setup_error(option: &'static str, e: ErrorStack) -> TlsConfigError {
    TlsConfigError::new(option, None, format!("OpenSSL setup: {e}"))
}

/// The settings shared by the server and the client.
fn base(method: SslMethod, option: &'static str) -> Result<SslContextBuilder, TlsConfigError> {
    let fail = |e| setup_error(option, e);
    let mut b = SslContextBuilder::new(method).map_err(fail)?;
    b.set_min_proto_version(Some(SslVersion::TLS1_2))
        .map_err(fail)?;
    b.set_ciphersuites(TLS13_SUITES).map_err(fail)?;
    b.set_cipher_list(TLS12_CIPHERS).map_err(fail)?;
    b.set_options(SslOptions::NO_TICKET | SslOptions::NO_RENEGOTIATION);
    b.set_num_tickets(0).map_err(fail)?;
    Ok(b)
}

/// The server's PSK context: keys looked up by the identity the client sends.
pub(crate) struct PskServer {
    ctx: SslContext,
    users: usize,
}

impl std::fmt::Debug for PskServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PskServer({} users)", self.users)
    }
}

impl PskServer {
    pub(crate) fn new(keys: PskKeys) -> Result<PskServer, TlsConfigError> {
        const OPT: &str = "--tls-psk";
        let users = keys.len();
        let index = seen_index().map_err(|e| setup_error(OPT, e))?;
        let mut b = base(SslMethod::tls_server(), OPT)?;
        b.set_options(SslOptions::CIPHER_SERVER_PREFERENCE);
        // No client certificate is asked for: the key authenticates the client.
        b.set_verify(SslVerifyMode::NONE);
        b.set_psk_server_callback(
            move |ssl: &mut SslRef, identity: Option<&[u8]>, out: &mut [u8]| {
                let name = String::from_utf8_lossy(identity.unwrap_or_default()).into_owned();
                let key = std::str::from_utf8(identity.unwrap_or_default())
                    .ok()
                    .and_then(|u| keys.get(u))
                    .filter(|k| k.bytes().len() <= out.len());
                ssl.set_ex_data(
                    index,
                    Seen {
                        identity: name,
                        known: key.is_some(),
                    },
                );
                // 0: no key, so the handshake fails (no certificate to fall back on).
                Ok(key.map_or(0, |k| {
                    out[..k.bytes().len()].copy_from_slice(k.bytes());
                    k.bytes().len()
                }))
            },
        );
        Ok(PskServer {
            ctx: b.build(),
            users,
        })
    }

    pub(crate) fn session(&self) -> io::Result<Session> {
        let mut ssl = Ssl::new(&self.ctx).map_err(io::Error::other)?;
        ssl.set_accept_state();
        Session::new(ssl)
    }
}

/// A client's PSK context: one identity and its key.
pub(crate) struct PskClient {
    ctx: SslContext,
}

impl std::fmt::Debug for PskClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PskClient")
    }
}

impl PskClient {
    /// `option` names the setting in errors (e.g. "tls-psk-file").
    pub(crate) fn new(
        option: &'static str,
        user: &str,
        key: &PskKey,
    ) -> Result<PskClient, TlsConfigError> {
        PskClient::build(option, user, key, false)
    }

    /// A client that speaks TLS 1.2 at most (tests of the server's TLS 1.2 suites).
    #[cfg(test)]
    pub(crate) fn tls12(user: &str, key: &PskKey) -> Result<PskClient, TlsConfigError> {
        PskClient::build("tls-psk-file", user, key, true)
    }

    fn build(
        option: &'static str,
        user: &str,
        key: &PskKey,
        tls12_only: bool,
    ) -> Result<PskClient, TlsConfigError> {
        let mut b = base(SslMethod::tls_client(), option)?;
        // No certificate is ever accepted: a server that answers with one instead of a PSK
        // handshake fails verification against an empty trust store.
        b.set_verify(SslVerifyMode::PEER);
        if tls12_only {
            b.set_max_proto_version(Some(SslVersion::TLS1_2))
                .map_err(|e| setup_error(option, e))?;
        }
        let identity: Arc<[u8]> = user.as_bytes().into();
        // A copy that is overwritten when the context is dropped, as the file's keys are.
        let key = key.clone();
        b.set_psk_client_callback(move |_ssl, _hint, id_out: &mut [u8], key_out: &mut [u8]| {
            let k = key.bytes();
            // The identity as a C string (its NUL within `id_out`).
            if identity.len() >= id_out.len() || k.len() > key_out.len() {
                return Ok(0);
            }
            id_out[..identity.len()].copy_from_slice(&identity);
            id_out[identity.len()] = 0;
            key_out[..k.len()].copy_from_slice(k);
            Ok(k.len())
        });
        Ok(PskClient { ctx: b.build() })
    }

    pub(crate) fn session(&self) -> io::Result<Session> {
        let mut ssl = Ssl::new(&self.ctx).map_err(io::Error::other)?;
        ssl.set_connect_state();
        Session::new(ssl)
    }
}

/// The ciphertext between OpenSSL and `TlsStream`: what came from the socket (`input`,
/// consumed from `ipos`) and what is to go to it (`output`). Reads past the input say
/// `WouldBlock`, so OpenSSL returns WANT_READ instead of waiting.
#[derive(Debug, Default)]
struct Memory {
    input: Vec<u8>,
    ipos: usize,
    output: Vec<u8>,
}

impl Read for Memory {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = &self.input[self.ipos..];
        if left.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = left.len().min(buf.len());
        buf[..n].copy_from_slice(&left[..n]);
        self.ipos += n;
        Ok(n)
    }
}

impl Write for Memory {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One OpenSSL session over memory.
#[derive(Debug)]
pub(crate) struct Session {
    stream: SslStream<Memory>,
}

fn session_error(e: openssl::ssl::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

impl Session {
    fn new(ssl: Ssl) -> io::Result<Session> {
        let stream = SslStream::new(ssl, Memory::default()).map_err(io::Error::other)?;
        Ok(Session { stream })
    }

    /// Take received ciphertext, as much as the input bound leaves room for (OpenSSL reads
    /// it from memory as it needs it).
    pub(crate) fn feed(&mut self, data: &[u8]) -> io::Result<usize> {
        let mem = self.stream.get_mut();
        mem.input.drain(..mem.ipos);
        mem.ipos = 0;
        let n = data.len().min(INPUT_MAX - mem.input.len());
        if n == 0 && !data.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "TLS: more ciphertext than a session holds",
            ));
        }
        mem.input.extend_from_slice(&data[..n]);
        Ok(n)
    }

    /// Move the handshake on: `Ok(true)` once it is done, `Ok(false)` while it waits for
    /// the peer's bytes.
    pub(crate) fn handshake(&mut self) -> io::Result<bool> {
        match self.stream.do_handshake() {
            Ok(()) => Ok(true),
            Err(e) if e.code() == ErrorCode::WANT_READ => Ok(false),
            Err(e) => Err(self.explain(e)),
        }
    }

    /// A handshake failure, said with the identity the client sent when the server did not
    /// know it.
    fn explain(&self, e: openssl::ssl::Error) -> io::Error {
        let seen = seen_index()
            .ok()
            .and_then(|i| self.stream.ssl().ex_data(i).cloned());
        match seen {
            Some(Seen {
                identity,
                known: false,
            }) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("TLS-PSK: unknown identity {identity:?}"),
            ),
            Some(Seen {
                identity,
                known: true,
            }) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("TLS-PSK handshake of identity {identity:?} failed (wrong key?): {e}"),
            ),
            None => session_error(e),
        }
    }

    /// Decrypted bytes: `Ok(Some(n))` (0 at the peer's close_notify), `Ok(None)` when more
    /// ciphertext is needed.
    pub(crate) fn read_plain(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        match self.stream.ssl_read(buf) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.code() == ErrorCode::ZERO_RETURN => Ok(Some(0)),
            Err(e) if e.code() == ErrorCode::WANT_READ => Ok(None),
            Err(e) => Err(session_error(e)),
        }
    }

    /// Encrypt up to `WRITE_PIECE` bytes of `buf`; the records wait in the output.
    pub(crate) fn write_plain(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let n = buf.len().min(WRITE_PIECE);
        self.stream.ssl_write(&buf[..n]).map_err(session_error)
    }

    /// Append what waits to be sent to `out`.
    pub(crate) fn take_output(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.stream.get_mut().output);
    }

    pub(crate) fn send_close_notify(&mut self) {
        // Queues the alert in the output; the answer is not waited for.
        let _ = self.stream.shutdown();
    }

    /// The protocol and suite agreed (for tests and logs).
    pub(crate) fn describe(&self) -> String {
        let ssl = self.stream.ssl();
        let suite = ssl.current_cipher().map_or("none", |c| c.name());
        format!("{} {suite}", ssl.version_str())
    }
}
