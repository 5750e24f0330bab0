//! The handshake phase of the NBD wire format: the greeting, option handling and the
//! server's option haggling, up to transmission or NBD_OPT_STARTTLS. Kept apart from the
//! transmission phase in `proto` (requests, their checks, replies), with which it shares
//! only the constants and [`ExportInfo`]; re-exported from `proto`, so callers still name
//! it all `proto::...`.

use std::io::{self, Read, Write};

use super::{
    discard, read_full, ExportInfo, FLAG_C_FIXED_NEWSTYLE, FLAG_C_NO_ZEROES, FLAG_FIXED_NEWSTYLE,
    FLAG_NO_ZEROES, IHAVEOPT, INFO_BLOCK_SIZE, INFO_DESCRIPTION, INFO_EXPORT, INFO_NAME,
    MAX_OPTIONS, MAX_OPTION_LEN, NBDMAGIC, OPT_ABORT, OPT_EXPORT_NAME, OPT_GO, OPT_INFO, OPT_LIST,
    OPT_REPLY_MAGIC, OPT_STARTTLS, REP_ACK, REP_ERR_BLOCK_SIZE_REQD, REP_ERR_INVALID,
    REP_ERR_TLS_REQD, REP_ERR_TOO_BIG, REP_ERR_UNKNOWN, REP_ERR_UNSUP, REP_INFO, REP_SERVER,
};
use crate::nbd::tls::TlsMode;

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
