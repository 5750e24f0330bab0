//! The NBD front: a fixed-newstyle NBD server over a [`Backend`], and a small client.
//!
//! - `proto`: wire constants, option handling and request checks as pure functions;
//! - `server`: [`Server`] — a reader thread per connection parses requests and hands them to
//!   a bounded pool of worker threads, which run them on the backend and write each reply
//!   whole under the connection's write lock, so many requests can be in flight on one
//!   connection (fio's nbd engine, qemu) and replies never interleave;
//! - `client`: [`Client`] — blocking calls and a pipelined submit / `wait_any` API.
//!
//! Simple replies only (no structured replies, no TLS, no block status).

pub mod client;
mod pool;
pub mod proto;
pub mod server;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

pub use client::{Client, ClientError, Completion};
pub use server::Server;

/// An NBD error value, sent in the simple reply. The values are the spec's (Linux errno).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Errno(pub u32);

pub const EPERM: Errno = Errno(1);
pub const EIO: Errno = Errno(5);
pub const ENOMEM: Errno = Errno(12);
pub const EINVAL: Errno = Errno(22);
pub const ENOSPC: Errno = Errno(28);
pub const EOVERFLOW: Errno = Errno(75);
pub const ENOTSUP: Errno = Errno(95);
pub const ESHUTDOWN: Errno = Errno(108);

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match *self {
            EPERM => "EPERM",
            EIO => "EIO",
            ENOMEM => "ENOMEM",
            EINVAL => "EINVAL",
            ENOSPC => "ENOSPC",
            EOVERFLOW => "EOVERFLOW",
            ENOTSUP => "ENOTSUP",
            ESHUTDOWN => "ESHUTDOWN",
            _ => return write!(f, "NBD error {}", self.0),
        };
        f.write_str(name)
    }
}

impl std::error::Error for Errno {}

/// Block size constraints advertised with NBD_INFO_BLOCK_SIZE and enforced on requests.
/// `minimum` and `preferred` are powers of two (minimum ≤ 64 KiB, preferred ≥ 512 and ≥
/// minimum); `maximum` ≥ preferred. The server caps `maximum` at 32 MiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSize {
    pub minimum: u32,
    pub preferred: u32,
    pub maximum: u32,
}

impl BlockSize {
    /// Whether the constraints are valid per the spec.
    pub fn is_valid(&self) -> bool {
        self.minimum.is_power_of_two()
            && self.minimum <= 1 << 16
            && self.preferred.is_power_of_two()
            && self.preferred >= self.minimum.max(512)
            && self.maximum >= self.preferred
    }
}

/// What a served export does; the store's controller implements it. Errors are NBD error
/// values sent back in the simple reply. Every method may be called from many threads at once.
/// The server has checked each request (alignment to `block_size().minimum`, the export's
/// end, read-only) before calling.
pub trait Backend: Send + Sync + 'static {
    /// Export name (the array's name).
    fn name(&self) -> &str;
    /// Human-readable description (NBD_INFO_DESCRIPTION).
    fn description(&self) -> String;
    fn size_bytes(&self) -> u64;
    fn block_size(&self) -> BlockSize;
    fn read_only(&self) -> bool {
        false
    }
    /// Whether a flush (and FUA) on one connection covers writes completed on every
    /// connection (NBD_FLAG_CAN_MULTI_CONN).
    fn multi_conn(&self) -> bool {
        true
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), Errno>;
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), Errno>;
    fn flush(&self) -> Result<(), Errno>;
    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno>;
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno>;
}

/// Where a server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Listen {
    /// Parse "127.0.0.1:10809", "[::1]:0" or "unix:/path/sock".
    pub fn parse(text: &str) -> Result<Listen, String> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err("unix: needs a socket path".to_string());
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        text.parse::<SocketAddr>()
            .map(Listen::Tcp)
            .map_err(|e| format!("bad listen address {text:?} (want HOST:PORT or unix:PATH): {e}"))
    }
}

/// Totals of one `Server::run`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeStats {
    /// Connections accepted (including ones that never finished the handshake).
    pub connections: u64,
    /// Connections turned away because the connection limit was reached.
    pub refused: u64,
    /// Requests answered (success or error).
    pub requests: u64,
    /// Requests answered with an error.
    pub errors: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}
