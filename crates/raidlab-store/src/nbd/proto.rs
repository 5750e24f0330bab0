//! NBD wire format (fixed newstyle, simple replies): constants, option handling and request
//! checks as pure functions over bytes, so the fuzz target can drive them without sockets.
//! The option handling (the handshake phase) is in `handshake`, re-exported here; this file
//! holds the constants, the export's description, the read helpers and the transmission
//! phase (request headers, their checks, simple replies).
//!
//! Numbers and rules follow `doc/proto.md` of the NetworkBlockDevice/nbd repository.

use std::io::{self, Read};

use super::{BlockSize, Errno, EINVAL, ENOSPC, EPERM};

mod handshake;

pub use handshake::{
    client_flags_ok, greeting, handle_option, option_reply, parse_info_request, serve_greeting,
    serve_handshake, serve_options, Handshake, OptOutcome, Session,
};

pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

// Transmission flags.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
pub const FLAG_READ_ONLY: u16 = 1 << 1;
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub const FLAG_SEND_FUA: u16 = 1 << 3;
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;

// Option replies.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
pub const REP_ERR_TLS_REQD: u32 = (1 << 31) + 5;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = (1 << 31) + 8;
pub const REP_ERR_TOO_BIG: u32 = (1 << 31) + 9;

// Information types of NBD_REP_INFO.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

// Commands and command flags.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;

/// Largest option payload read into memory; the spec caps strings at 4096 bytes, so a GO
/// with a full-length name and every information request fits well inside.
pub const MAX_OPTION_LEN: u32 = 8192;
/// Options accepted in one handshake before the server hangs up (a client looping on
/// options is a denial of service; real clients send a handful).
pub const MAX_OPTIONS: usize = 256;
/// Hard cap on the maximum payload whatever the backend asks, bounding request memory.
pub const MAX_PAYLOAD: u32 = 32 << 20;
/// Request header length.
pub const REQUEST_LEN: usize = 28;
/// Simple reply header length.
pub const REPLY_LEN: usize = 16;

/// What the handshake tells a client about the export, fixed when serving starts.
#[derive(Clone, Debug)]
pub struct ExportInfo {
    pub name: String,
    pub description: String,
    pub size: u64,
    pub flags: u16,
    pub block: BlockSize,
}

impl ExportInfo {
    /// Transmission flags for an export with these properties.
    pub fn flags_for(read_only: bool, multi_conn: bool) -> u16 {
        let mut flags = FLAG_HAS_FLAGS
            | FLAG_SEND_FLUSH
            | FLAG_SEND_FUA
            | FLAG_SEND_TRIM
            | FLAG_SEND_WRITE_ZEROES;
        if read_only {
            flags |= FLAG_READ_ONLY;
        }
        if multi_conn {
            flags |= FLAG_CAN_MULTI_CONN;
        }
        flags
    }

    fn matches(&self, name: &[u8]) -> bool {
        name.is_empty() || name == self.name.as_bytes()
    }

    fn read_only(&self) -> bool {
        self.flags & FLAG_READ_ONLY != 0
    }
}

/// Read exactly `buf.len()` bytes; `Ok(false)` on a clean end of stream before the first
/// byte, an `UnexpectedEof` error on an end in the middle.
pub fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<bool> {
    let mut done = 0;
    while done < buf.len() {
        match r.read(&mut buf[done..]) {
            Ok(0) if done == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Read and drop `len` bytes in bounded pieces (no allocation sized by the peer).
pub fn discard<R: Read>(r: &mut R, len: u64) -> io::Result<()> {
    let copied = io::copy(&mut r.take(len), &mut io::sink())?;
    if copied < len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// One request header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub kind: u16,
    pub cookie: u64,
    pub offset: u64,
    pub len: u32,
}

impl Request {
    /// Bytes of payload that follow the header on the wire, whatever the checks say.
    pub fn payload_len(&self) -> u32 {
        if self.kind == CMD_WRITE {
            self.len
        } else {
            0
        }
    }

    pub fn encode(&self) -> [u8; REQUEST_LEN] {
        let mut h = [0u8; REQUEST_LEN];
        h[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        h[4..6].copy_from_slice(&self.flags.to_be_bytes());
        h[6..8].copy_from_slice(&self.kind.to_be_bytes());
        h[8..16].copy_from_slice(&self.cookie.to_be_bytes());
        h[16..24].copy_from_slice(&self.offset.to_be_bytes());
        h[24..].copy_from_slice(&self.len.to_be_bytes());
        h
    }
}

/// Parse a request header; `None` for a bad magic (the server then closes).
pub fn parse_request(h: &[u8; REQUEST_LEN]) -> Option<Request> {
    let be16 = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
    let be32 = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let be64 = |i: usize| (u64::from(be32(i)) << 32) | u64::from(be32(i + 4));
    if be32(0) != REQUEST_MAGIC {
        return None;
    }
    Some(Request {
        flags: be16(4),
        kind: be16(6),
        cookie: be64(8),
        offset: be64(16),
        len: be32(24),
    })
}

/// A checked command, ready for the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Read,
    Write { fua: bool },
    Flush,
    Trim { fua: bool },
    WriteZeroes { fua: bool },
}

/// What to do with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// NBD_CMD_DISC: finish what is in flight, then close; no reply.
    Disconnect,
    /// Reply success at once (a zero-length request: nothing to do).
    Done,
    /// Run it on the backend.
    Run(Command),
    /// Reply with this error (after discarding any write payload).
    Reject(Errno),
}

/// Check a request against the export: flags, alignment to the minimum block size, the
/// maximum payload, the export's end and read-only-ness, in the spec's errno terms.
pub fn decide(req: &Request, export: &ExportInfo) -> Decision {
    let fua = req.flags & CMD_FLAG_FUA != 0;
    // FUA is valid on every command once SEND_FUA is advertised; NO_HOLE on WRITE_ZEROES.
    let allowed = match req.kind {
        CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
        CMD_READ | CMD_WRITE | CMD_DISC | CMD_FLUSH | CMD_TRIM => CMD_FLAG_FUA,
        _ => return Decision::Reject(EINVAL),
    };
    if req.flags & !allowed != 0 {
        return Decision::Reject(EINVAL);
    }
    let cmd = match req.kind {
        CMD_DISC => return Decision::Disconnect,
        // Offset and length are reserved (zero) for FLUSH; tolerate anything.
        CMD_FLUSH => return Decision::Run(Command::Flush),
        CMD_READ => Command::Read,
        CMD_WRITE => Command::Write { fua },
        CMD_TRIM => Command::Trim { fua },
        _ => Command::WriteZeroes { fua },
    };
    let writes = !matches!(cmd, Command::Read);
    if matches!(cmd, Command::Read | Command::Write { .. }) && req.len > export.block.maximum {
        return Decision::Reject(EINVAL);
    }
    if writes && export.read_only() {
        return Decision::Reject(EPERM);
    }
    let min = u64::from(export.block.minimum.max(1));
    if !req.offset.is_multiple_of(min) || !u64::from(req.len).is_multiple_of(min) {
        return Decision::Reject(EINVAL);
    }
    match req.offset.checked_add(u64::from(req.len)) {
        Some(end) if end <= export.size => {}
        _ if matches!(cmd, Command::Write { .. } | Command::WriteZeroes { .. }) => {
            return Decision::Reject(ENOSPC)
        }
        _ => return Decision::Reject(EINVAL),
    }
    if req.len == 0 {
        return Decision::Done;
    }
    Decision::Run(cmd)
}

/// A simple reply header.
pub fn simple_reply(error: Errno, cookie: u64) -> [u8; REPLY_LEN] {
    let mut r = [0u8; REPLY_LEN];
    r[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    r[4..8].copy_from_slice(&error.0.to_be_bytes());
    r[8..].copy_from_slice(&cookie.to_be_bytes());
    r
}

/// Parse a simple reply header into (error, cookie); `None` for a bad magic.
pub fn parse_simple_reply(h: &[u8; REPLY_LEN]) -> Option<(Errno, u64)> {
    let magic = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    if magic != SIMPLE_REPLY_MAGIC {
        return None;
    }
    let error = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
    let cookie = u64::from_be_bytes(h[8..].try_into().unwrap_or_default());
    Some((Errno(error), cookie))
}
