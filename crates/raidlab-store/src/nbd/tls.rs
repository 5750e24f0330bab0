//! TLS for the NBD front, as `nbdkit --tls`: NBD_OPT_STARTTLS in the fixed-newstyle option
//! haggling, then the TLS session carries the rest of the handshake and the transmission
//! phase. Two stacks run a session: rustls (ring provider) for X.509 certificates, and
//! OpenSSL for pre-shared keys (`--tls-psk`, the `tls-psk` feature: rustls has no external
//! PSK), behind one [`TlsStream`] so the NBD code does not know which.
//!
//! - [`TlsMode`]: `off`, `on` (STARTTLS allowed) or `require` (every option but STARTTLS and
//!   ABORT refused with NBD_REP_ERR_TLS_REQD before TLS: nbdkit's `--tls=require`, the spec's
//!   FORCEDTLS mode);
//! - [`ServerTls::load`]: the server's certificate directory (`server-cert.pem`,
//!   `server-key.pem`, and `ca-cert.pem` to verify client certificates); [`ServerTls::load_psk`]:
//!   its PSK file (GnuTLS's `username:hexkey` lines, [`pskfile`]);
//! - [`client_config`]: a client's trust anchors (a CA file) and optional certificate;
//!   [`ClientTls`]: what a client connects with;
//! - [`TlsStream`]: one TLS session over a socket, cloned into the connection's reader and
//!   its writer. The two share the session state under a mutex held only to decrypt received
//!   bytes or to encrypt a reply, never across a blocking socket call: the reader reads
//!   ciphertext from the socket unlocked, and a writer (already holding the connection's
//!   write lock, which orders replies) encrypts under the mutex, then sends unlocked. So the
//!   socket timeouts (handshake deadline, idle timeout, reply write timeout) bound every
//!   wait exactly as on a plain socket, and a stuck reply never blocks the reader.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::{ClientConfig, ServerConfig};

#[cfg(feature = "tls-psk")]
pub(crate) mod ossl;
pub mod pskfile;
mod stream;
mod x509;

pub use pskfile::PskKeys;
pub(crate) use stream::TlsStream;
pub use x509::client_config;

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

/// A TLS setting that cannot be used: the option at fault, the file and line if there are
/// such, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfigError {
    /// The command-line option to change, e.g. "--tls-certificates".
    pub option: &'static str,
    pub file: Option<PathBuf>,
    /// The line of `file` at fault (1-based), for a file read line by line.
    pub line: Option<usize>,
    pub message: String,
}

impl TlsConfigError {
    pub(crate) fn new(
        option: &'static str,
        file: Option<&Path>,
        message: impl Into<String>,
    ) -> Self {
        TlsConfigError {
            option,
            file: file.map(Path::to_path_buf),
            line: None,
            message: message.into(),
        }
    }

    pub(crate) fn at_line(
        option: &'static str,
        file: &Path,
        line: usize,
        message: impl Into<String>,
    ) -> Self {
        TlsConfigError {
            line: Some(line),
            ..TlsConfigError::new(option, Some(file), message)
        }
    }
}

impl fmt::Display for TlsConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(p), Some(l)) => write!(f, "{}:{l}: {}", p.display(), self.message),
            (Some(p), None) => write!(f, "{}: {}", p.display(), self.message),
            (None, _) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for TlsConfigError {}

/// Whether this build has TLS-PSK (the `tls-psk` feature).
pub const PSK_BUILT: bool = cfg!(feature = "tls-psk");

/// What to say when `--tls-psk` or `tls-psk-file` meets a build without the feature.
pub const NO_PSK_BUILD: &str = "this build of raidlab has no TLS-PSK: it needs the `tls-psk` cargo feature, which links OpenSSL (install libssl-dev and pkg-config, then rebuild with `make`, which turns the feature on where pkg-config finds OpenSSL)";

/// The stack that runs the server's sessions.
#[derive(Clone)]
pub(crate) enum ServerStack {
    X509(Arc<ServerConfig>),
    #[cfg(feature = "tls-psk")]
    Psk(Arc<ossl::PskServer>),
}

/// The server's TLS: its mode (never `Off`) and the stack and keys its sessions use.
#[derive(Clone)]
pub struct ServerTls {
    pub mode: TlsMode,
    pub(crate) stack: ServerStack,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stack = match &self.stack {
            ServerStack::X509(_) => "x509",
            #[cfg(feature = "tls-psk")]
            ServerStack::Psk(_) => "psk",
        };
        f.debug_struct("ServerTls")
            .field("mode", &self.mode)
            .field("stack", &stack)
            .finish()
    }
}

/// `Ok(None)` for `TlsMode::Off` when nothing else is set; the error of `option` if it is.
fn off_check(
    mode: TlsMode,
    option: &'static str,
    file: Option<&Path>,
    verify_peer: bool,
) -> Result<(), TlsConfigError> {
    if mode != TlsMode::Off {
        return Ok(());
    }
    if let Some(f) = file {
        return Err(TlsConfigError::new(
            option,
            Some(f),
            format!("{option} given but TLS is off: add --tls on or --tls require"),
        ));
    }
    if verify_peer {
        return Err(TlsConfigError::new(
            "--tls-verify-peer",
            None,
            "--tls-verify-peer needs --tls on or --tls require",
        ));
    }
    Ok(())
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
        off_check(mode, OPT, dir, verify_peer)?;
        if mode == TlsMode::Off {
            return Ok(None);
        }
        let Some(dir) = dir else {
            return Err(TlsConfigError::new(
                OPT,
                None,
                format!(
                    "--tls {mode} needs --tls-certificates DIR (with server-cert.pem and server-key.pem) or --tls-psk FILE"
                ),
            ));
        };
        Ok(Some(ServerTls {
            mode,
            stack: ServerStack::X509(x509::server_config(dir, verify_peer)?),
        }))
    }

    /// The server's TLS for `mode` with the pre-shared keys of `file` (nbdkit's
    /// `--tls-psk`: GnuTLS's `username:hexkey` lines); a client is let in only by a key the
    /// file has for the identity it sends. `Ok(None)` for `TlsMode::Off` without a file.
    /// The file is checked even in a build without TLS-PSK, which then refuses it.
    pub fn load_psk(
        mode: TlsMode,
        file: Option<&Path>,
    ) -> Result<Option<ServerTls>, TlsConfigError> {
        const OPT: &str = "--tls-psk";
        off_check(mode, OPT, file, false)?;
        if mode == TlsMode::Off {
            return Ok(None);
        }
        let Some(file) = file else {
            return Err(TlsConfigError::new(
                OPT,
                None,
                format!("--tls {mode} needs --tls-psk FILE or --tls-certificates DIR"),
            ));
        };
        let keys = PskKeys::load(OPT, file)?;
        #[cfg(feature = "tls-psk")]
        {
            Ok(Some(ServerTls {
                mode,
                stack: ServerStack::Psk(Arc::new(ossl::PskServer::new(keys)?)),
            }))
        }
        #[cfg(not(feature = "tls-psk"))]
        {
            drop(keys);
            Err(TlsConfigError::new(OPT, Some(file), NO_PSK_BUILD))
        }
    }
}

/// What a client connects with: a server certificate to check (rustls), or an identity
/// and its pre-shared key (OpenSSL).
#[derive(Clone, Debug)]
pub(crate) enum ClientTls {
    X509 {
        config: Arc<ClientConfig>,
        /// The name the server's certificate must carry.
        hostname: String,
    },
    #[cfg(feature = "tls-psk")]
    Psk(Arc<ossl::PskClient>),
}

impl ClientTls {
    /// A PSK client as user `user`, with that user's key from `file` (libnbd's
    /// `tls-psk-file`); `option` names the setting in errors.
    pub(crate) fn psk(
        option: &'static str,
        file: &Path,
        user: &str,
    ) -> Result<ClientTls, TlsConfigError> {
        let keys = PskKeys::load(option, file)?;
        let Some(key) = keys.get(user) else {
            return Err(TlsConfigError::new(
                option,
                Some(file),
                format!("no key for user {user:?}"),
            ));
        };
        #[cfg(feature = "tls-psk")]
        {
            Ok(ClientTls::Psk(Arc::new(ossl::PskClient::new(
                option, user, key,
            )?)))
        }
        #[cfg(not(feature = "tls-psk"))]
        {
            let _ = key;
            Err(TlsConfigError::new(option, Some(file), NO_PSK_BUILD))
        }
    }
}
