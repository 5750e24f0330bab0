//! NBD wire format (fixed newstyle, simple replies): constants, option handling and request
//! checks as pure functions over bytes, so the fuzz target can drive them without sockets.
//!
//! Numbers and rules follow `doc/proto.md` of the NetworkBlockDevice/nbd repository.

use std::io::{self, Read, Write};

use super::tls::TlsMode;
use super::{BlockSize, Errno, EINVAL, ENOSPC, EPERM};

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

/// The server's greeting: magic, IHAVEOPT and the handshake flags.
pub fn greeting() -> [u8; 18] {
    let mut g = [0u8; 18];
    g[..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    g[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    g[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    g
}

/// Whether the client flags are acceptable: only the two the server advertises.
pub fn client_flags_ok(flags: u32) -> bool {
    flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) == 0
}

/// Append one option reply (header and data) to `out`.
pub fn option_reply(out: &mut Vec<u8>, option: u32, reply: u32, data: &[&[u8]]) {
    let len: usize = data.iter().map(|d| d.len()).sum();
    out.extend_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&reply.to_be_bytes());
    // Replies are built from bounded names (export name, description): lengths fit.
    out.extend_from_slice(&(len.min(u32::MAX as usize) as u32).to_be_bytes());
    for d in data {
        out.extend_from_slice(d);
    }
}

/// Outcome of one option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptOutcome {
    /// Replies are in `out`; read the next option.
    Continue,
    /// Replies are in `out`; after sending them, enter transmission.
    Transmit,
    /// Send what is in `out` (maybe nothing), then close the connection.
    Close,
    /// Send what is in `out` (NBD_REP_ACK to NBD_OPT_STARTTLS), then do the TLS handshake
    /// and read the next option over TLS.
    StartTls,
}

/// What the option haggling of one connection has settled so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The server's TLS mode.
    pub tls: TlsMode,
    /// NBD_OPT_STARTTLS was acknowledged (and the TLS handshake done).
    pub tls_active: bool,
    /// The client negotiated NBD_FLAG_C_NO_ZEROES.
    pub no_zeroes: bool,
    /// The client has requested NBD_INFO_BLOCK_SIZE (set by NBD_OPT_INFO/GO, read by GO;
    /// forgotten at STARTTLS, as everything negotiated in plain text).
    pub asked_block: bool,
    /// Options handled (the handshake ends after `MAX_OPTIONS`).
    pub options: usize,
}

impl Session {
    pub fn new(tls: TlsMode, no_zeroes: bool) -> Session {
        Session {
            tls,
            tls_active: false,
            no_zeroes,
            asked_block: false,
            options: 0,
        }
    }
}

/// Handle one option whose payload `data` has been read in full, per the session's TLS
/// mode (`Require`: the spec's FORCEDTLS; `On`: STARTTLS allowed, never required).
pub fn handle_option(
    option: u32,
    data: &[u8],
    export: &ExportInfo,
    session: &mut Session,
    out: &mut Vec<u8>,
) -> OptOutcome {
    if option == OPT_STARTTLS && session.tls != TlsMode::Off {
        if session.tls_active {
            option_reply(out, option, REP_ERR_INVALID, &[b"TLS is already active"]);
            return OptOutcome::Continue;
        }
        if !data.is_empty() {
            option_reply(
                out,
                option,
                REP_ERR_INVALID,
                &[b"NBD_OPT_STARTTLS takes no data"],
            );
            return OptOutcome::Continue;
        }
        option_reply(out, option, REP_ACK, &[]);
        session.asked_block = false;
        return OptOutcome::StartTls;
    }
    if session.tls == TlsMode::Require && !session.tls_active && option != OPT_ABORT {
        // NBD_OPT_EXPORT_NAME cannot be answered with an error: the session ends.
        if option == OPT_EXPORT_NAME {
            return OptOutcome::Close;
        }
        option_reply(
            out,
            option,
            REP_ERR_TLS_REQD,
            &[b"this server requires TLS: send NBD_OPT_STARTTLS first"],
        );
        return OptOutcome::Continue;
    }
    let no_zeroes = session.no_zeroes;
    let asked_block = &mut session.asked_block;
    match option {
        OPT_EXPORT_NAME => {
            // No way to report an error here: an unknown name ends the session.
            if !export.matches(data) {
                return OptOutcome::Close;
            }
            out.extend_from_slice(&export.size.to_be_bytes());
            out.extend_from_slice(&export.flags.to_be_bytes());
            if !no_zeroes {
                out.extend_from_slice(&[0u8; 124]);
            }
            OptOutcome::Transmit
        }
        OPT_ABORT => {
            option_reply(out, option, REP_ACK, &[]);
            OptOutcome::Close
        }
        OPT_LIST => {
            if !data.is_empty() {
                option_reply(
                    out,
                    option,
                    REP_ERR_INVALID,
                    &[b"NBD_OPT_LIST takes no data"],
                );
                return OptOutcome::Continue;
            }
            let name = export.name.as_bytes();
            let len = (name.len() as u32).to_be_bytes();
            option_reply(out, option, REP_SERVER, &[&len, name]);
            option_reply(out, option, REP_ACK, &[]);
            OptOutcome::Continue
        }
        OPT_INFO | OPT_GO => {
            let Some((name, infos)) = parse_info_request(data) else {
                option_reply(
                    out,
                    option,
                    REP_ERR_INVALID,
                    &[b"malformed NBD_OPT_INFO/GO"],
                );
                return OptOutcome::Continue;
            };
            if !export.matches(name) {
                option_reply(out, option, REP_ERR_UNKNOWN, &[b"no such export"]);
                return OptOutcome::Continue;
            }
            let wants = |t: u16| infos.chunks_exact(2).any(|c| c == t.to_be_bytes());
            *asked_block |= wants(INFO_BLOCK_SIZE);
            // The spec's default constraints are a minimum of 1 byte: a client that never
            // asked for the real ones would send requests this export refuses, so GO says
            // so now (the client may retry asking) rather than failing every request later.
            if option == OPT_GO && !*asked_block && export.block.minimum > 1 {
                option_reply(
                    out,
                    option,
                    REP_ERR_BLOCK_SIZE_REQD,
                    &[b"this export needs NBD_INFO_BLOCK_SIZE (its minimum block is larger than 1 byte)"],
                );
                return OptOutcome::Continue;
            }
            let mut export_info = [0u8; 12];
            export_info[..2].copy_from_slice(&INFO_EXPORT.to_be_bytes());
            export_info[2..10].copy_from_slice(&export.size.to_be_bytes());
            export_info[10..].copy_from_slice(&export.flags.to_be_bytes());
            option_reply(out, option, REP_INFO, &[&export_info]);
            if wants(INFO_NAME) {
                option_reply(
                    out,
                    option,
                    REP_INFO,
                    &[&INFO_NAME.to_be_bytes(), export.name.as_bytes()],
                );
            }
            if wants(INFO_DESCRIPTION) {
                option_reply(
                    out,
                    option,
                    REP_INFO,
                    &[
                        &INFO_DESCRIPTION.to_be_bytes(),
                        export.description.as_bytes(),
                    ],
                );
            }
            // Always sent: the constraints are enforced whether or not the client asked
            // (the spec lets a server send unrequested information).
            let mut bs = [0u8; 14];
            bs[..2].copy_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
            bs[2..6].copy_from_slice(&export.block.minimum.to_be_bytes());
            bs[6..10].copy_from_slice(&export.block.preferred.to_be_bytes());
            bs[10..].copy_from_slice(&export.block.maximum.to_be_bytes());
            option_reply(out, option, REP_INFO, &[&bs]);
            option_reply(out, option, REP_ACK, &[]);
            if option == OPT_GO {
                OptOutcome::Transmit
            } else {
                OptOutcome::Continue
            }
        }
        // STARTTLS without TLS, STRUCTURED_REPLY, meta contexts, extended headers and
        // unknown options.
        _ => {
            option_reply(out, option, REP_ERR_UNSUP, &[]);
            OptOutcome::Continue
        }
    }
}

/// Split an NBD_OPT_INFO/GO payload into (name, information requests as big-endian u16
/// pairs); `None` if the lengths do not add up.
pub fn parse_info_request(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let name_len = u32::from_be_bytes(data.get(..4)?.try_into().ok()?) as usize;
    let rest = data.get(4..)?;
    let name = rest.get(..name_len)?;
    let rest = &rest[name_len..];
    let count = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?) as usize;
    let infos = &rest[2..];
    (infos.len() == count * 2).then_some((name, infos))
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

/// How a handshake ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// Transmission phase entered.
    Transmit,
    /// The client aborted, broke the protocol or went away; close the connection.
    Closed,
    /// NBD_OPT_STARTTLS was acknowledged: do the TLS handshake, then haggle on over TLS.
    StartTls,
}

/// Run the server side of the fixed newstyle handshake without TLS (NBD_OPT_STARTTLS is
/// answered NBD_REP_ERR_UNSUP). `scratch` is reused for option data and replies. I/O
/// errors (including a client vanishing mid-option) are returned as is.
pub fn serve_handshake<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    export: &ExportInfo,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> io::Result<Handshake> {
    let Some(mut session) = serve_greeting(r, w, TlsMode::Off)? else {
        return Ok(Handshake::Closed);
    };
    serve_options(r, w, export, &mut session, scratch, out)
}

/// Send the greeting and read the client flags; `None` if the client went away or sent
/// flags the server did not offer (close the connection).
pub fn serve_greeting<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    tls: TlsMode,
) -> io::Result<Option<Session>> {
    w.write_all(&greeting())?;
    w.flush()?;
    let mut flags = [0u8; 4];
    if !read_full(r, &mut flags)? {
        return Ok(None);
    }
    let flags = u32::from_be_bytes(flags);
    if !client_flags_ok(flags) {
        return Ok(None);
    }
    // TLS needs fixed newstyle on both sides: without it, `On` means no TLS at all, while
    // `Require` still refuses everything (such a client can only be turned away).
    let fixed = flags & FLAG_C_FIXED_NEWSTYLE != 0;
    let tls = if tls == TlsMode::On && !fixed {
        TlsMode::Off
    } else {
        tls
    };
    Ok(Some(Session::new(tls, flags & FLAG_C_NO_ZEROES != 0)))
}

/// Haggle options until the client enters transmission, leaves, or asks for TLS
/// (`Handshake::StartTls`: the caller does the TLS handshake, marks the session's TLS
/// active and calls again over TLS). At most `MAX_OPTIONS` options in all.
pub fn serve_options<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    export: &ExportInfo,
    session: &mut Session,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> io::Result<Handshake> {
    while session.options < MAX_OPTIONS {
        session.options += 1;
        let mut head = [0u8; 16];
        if !read_full(r, &mut head)? {
            return Ok(Handshake::Closed);
        }
        let magic = u64::from_be_bytes(head[..8].try_into().unwrap_or_default());
        let option = u32::from_be_bytes(head[8..12].try_into().unwrap_or_default());
        let len = u32::from_be_bytes(head[12..].try_into().unwrap_or_default());
        if magic != IHAVEOPT {
            return Ok(Handshake::Closed);
        }
        out.clear();
        if len > MAX_OPTION_LEN {
            discard(r, u64::from(len))?;
            if option == OPT_EXPORT_NAME {
                return Ok(Handshake::Closed);
            }
            option_reply(out, option, REP_ERR_TOO_BIG, &[b"option data too long"]);
            w.write_all(out)?;
            w.flush()?;
            continue;
        }
        scratch.clear();
        scratch.resize(len as usize, 0);
        if len > 0 && !read_full(r, scratch)? {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let outcome = handle_option(option, scratch, export, session, out);
        w.write_all(out)?;
        w.flush()?;
        match outcome {
            OptOutcome::Continue => {}
            OptOutcome::Transmit => return Ok(Handshake::Transmit),
            OptOutcome::Close => return Ok(Handshake::Closed),
            OptOutcome::StartTls => return Ok(Handshake::StartTls),
        }
    }
    Ok(Handshake::Closed)
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
