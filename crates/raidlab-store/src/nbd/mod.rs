//! The NBD front: a fixed-newstyle NBD server over a [`Backend`], and a small client.
//!
//! - `proto`: wire constants, option handling and request checks as pure functions;
//! - `server`: [`Server`] — a reader thread per connection parses requests and hands them to
//!   a bounded pool of worker threads, which run them on the backend and write each reply
//!   whole under the connection's write lock, so many requests can be in flight on one
//!   connection (fio's nbd engine, qemu) and replies never interleave;
//! - `client`: [`Client`] — blocking calls and a pipelined submit / `wait_any` API;
//! - `rmw`: [`SubBlock`] — sub-block requests over a 4 KiB backend by read-modify-write;
//! - `uri`: NBD URIs as libnbd reads them (`nbd://`, `nbds://USER@HOST/?tls-psk-file=...`);
//! - `tls`: TLS through NBD_OPT_STARTTLS ([`TlsMode`], [`ServerTls`]): X.509 certificates
//!   (rustls) or pre-shared keys (OpenSSL, the `tls-psk` feature);
//! - [`Limits`]: the bounds against slow, stuck and hostile clients.
//!
//! Simple replies only (no structured replies, no block status).

pub mod client;
mod pool;
pub mod proto;
pub mod rmw;
pub mod server;
mod session;
#[cfg(test)]
mod tests;
pub mod tls;
mod uri;

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use client::{Client, ClientError, Completion};
pub use rmw::SubBlock;
pub use server::Server;
pub use tls::{PskKeys, ServerTls, TlsConfigError, TlsMode};

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
    /// A client connected from `peer` (an address, or `unix`); `id` numbers the server's
    /// connections from 1. For the server's log; the default does nothing.
    fn connected(&self, _id: u64, _peer: &str) {}
    /// Connection `id` ended after `requests` requests (`errors` of them answered with an
    /// error); `why` says what ended it when it was not the client's disconnect.
    fn disconnected(&self, _id: u64, _requests: u64, _errors: u64, _why: Option<&str>) {}
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

/// What a server tolerates from its clients: timeouts, connection and memory bounds, and
/// the block sizes it accepts. `raidlab serve` exposes each as an option (docs/store.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A connection that has not entered transmission this long after it was accepted is
    /// closed (a client that connects and says nothing, or haggles forever).
    pub handshake_timeout: Duration,
    /// A request whose header or write payload stops arriving for this long (no byte at
    /// all) closes its connection. Silence between requests is not limited: an idle client
    /// holds only its connection slot.
    pub idle_timeout: Duration,
    /// Connections at once. When full, a new connection evicts the oldest one still in its
    /// handshake; if every connection is past its handshake, the new one is refused.
    pub max_connections: usize,
    /// Payload bytes held over all connections: requests queued or running and write
    /// payloads being received. Write payloads being received may hold at most half of it
    /// (so stalled senders cannot starve reads), and are reserved as they arrive, in
    /// `PAYLOAD_PIECE` steps, never in full at the header.
    pub payload_budget: usize,
    /// Payload bytes one connection may hold (queued, running and being received).
    pub conn_payload_budget: usize,
    /// TRIM and WRITE_ZEROES run in pieces of at most this many bytes, each queued behind
    /// the requests that arrived meanwhile, and one such long request per connection at a
    /// time: a 28-byte request cannot occupy a worker for a whole export's parity work.
    pub zero_piece: u64,
    /// The minimum block size advertised. Below the backend's own minimum, the backend is
    /// wrapped in [`SubBlock`] (read-modify-write); `None` keeps the backend's minimum and
    /// refuses unaligned requests with EINVAL.
    pub min_block: Option<u32>,
    /// How long a connection's reader polls its socket (spinning, not sleeping) for the
    /// next request after one, while the client's recent requests came within this time of
    /// the previous one; such a client's requests then run on the reader when the backend
    /// answers in memory time. Zero: always sleep, hand every lone request to a worker.
    /// At most [`POLL_MAX`].
    pub poll: Duration,
}

/// The longest [`Limits::poll`].
pub const POLL_MAX: Duration = Duration::from_millis(1);

impl Default for Limits {
    fn default() -> Self {
        Limits {
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            max_connections: 128,
            payload_budget: 128 << 20,
            conn_payload_budget: 32 << 20,
            zero_piece: 4 << 20,
            min_block: None,
            poll: Duration::from_micros(50),
        }
    }
}

impl Limits {
    /// Check the values; the message names the bad one.
    pub fn validate(&self) -> Result<(), String> {
        if self.handshake_timeout.is_zero() {
            return Err("handshake timeout must be positive".into());
        }
        if self.idle_timeout.is_zero() {
            return Err("idle timeout must be positive".into());
        }
        if self.poll > POLL_MAX {
            return Err(format!(
                "poll time {} µs is more than {} µs",
                self.poll.as_micros(),
                POLL_MAX.as_micros()
            ));
        }
        if !(1..=4096).contains(&self.max_connections) {
            return Err(format!(
                "max connections must be 1 to 4096, got {}",
                self.max_connections
            ));
        }
        if self.conn_payload_budget < 1 << 20 {
            return Err(format!(
                "per-connection payload budget must be at least 1 MiB, got {} bytes",
                self.conn_payload_budget
            ));
        }
        if self.payload_budget < 4 << 20 {
            return Err(format!(
                "payload budget must be at least 4 MiB, got {} bytes",
                self.payload_budget
            ));
        }
        if !self.zero_piece.is_power_of_two() || self.zero_piece < 1 << 20 {
            return Err(format!(
                "zero piece must be a power of two of at least 1 MiB, got {} bytes",
                self.zero_piece
            ));
        }
        if let Some(m) = self.min_block {
            if !m.is_power_of_two() || m > 1 << 16 {
                return Err(format!(
                    "minimum block must be a power of two up to 64 KiB, got {m}"
                ));
            }
        }
        Ok(())
    }

    /// The largest READ or WRITE payload a server with these limits accepts: a request
    /// must fit in one connection's budget, and four maximal requests in the whole budget
    /// (half of it for payloads being received, plus one more for the oldest sender, which
    /// may exceed that half so receivers cannot deadlock, still leaves a maximal read room).
    pub fn max_payload(&self) -> u32 {
        let cap = self.conn_payload_budget.min(self.payload_budget / 4);
        let cap = u32::try_from(cap)
            .unwrap_or(u32::MAX)
            .min(proto::MAX_PAYLOAD);
        // A power of two, so the result is a multiple of any minimum block.
        1 << (31 - cap.leading_zeros())
    }
}

/// Totals of one `Server::run`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeStats {
    /// Connections accepted (including ones that never finished the handshake).
    pub connections: u64,
    /// Connections turned away because the connection limit was reached.
    pub refused: u64,
    /// Connections closed in their handshake to make room for a new one.
    pub evicted: u64,
    /// Connections closed for a timeout (handshake, or a request that stopped arriving).
    pub timed_out: u64,
    /// Requests answered (success or error).
    pub requests: u64,
    /// Requests answered with an error.
    pub errors: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}
