//! `format = "auto"`: recognise a trace from its first few KiB (after decompression) and its
//! file name.
//!
//! Text and binary are told apart first (text is printable ASCII plus tabs and line ends).
//! Text candidates are tried in a fixed order by parsing every complete line of the head
//! with each format's own parser; the first that parses all of them, yielding at least one
//! record, wins. The order puts formats with distinctive shapes first (CloudPhysics needs its
//! header line, SYSTOR has six fields, blkparse starts with `maj,min`, MSR has seven); SPC
//! and Tencent differ in their op field (letters vs digits); MQSim (integer nanoseconds) is
//! tried before DiskSim (decimal milliseconds). A file name containing `mqsim` or `disksim`
//! moves that format to the front.
//!
//! A head that is mostly text (no NUL; UTF-8, or at least 95% printable ASCII) is treated as text
//! too, so that it is reported as an unrecognised text file rather than read as binary.
//!
//! Binary heads are oracleGeneral when every 24-byte record has a plausible
//! `next_access_vtime` (-1, `i64::MAX`, or below 2^48) and non-decreasing times; otherwise
//! u32 keys, whose byte order is read off where the zero bytes of small numbers fall (only
//! when the signal is clear, so random bytes are refused). Between the two, vscsi when the
//! first two records pass libCacheSim's version test (`vscsi.rs`). Names containing
//! `oraclegeneral`, `u32be`, `u32le` or `vscsi` decide directly.

use super::blkparse::Blkparse;
use super::cloudphysics::CloudPhysics;
use super::disksim::DiskSim;
use super::mqsim::MqSim;
use super::msr::Msr;
use super::spc::Spc;
use super::systor::Systor;
use super::tencent::TencentCbs;
use super::text::LineFormat;
use super::Format;
use crate::error::{Error, Result};

/// How many decompressed bytes sniffing looks at.
pub const SNIFF_BYTES: usize = 8192;
/// How many lines of a text head are parsed at most.
const SNIFF_LINES: usize = 64;

/// The format of a trace named `name` whose decompressed bytes begin with `head`.
/// `complete` says the head is the whole file (so its last line is complete too).
pub fn sniff(name: &str, head: &[u8], complete: bool) -> Result<Format> {
    let base = name
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(name)
        .to_ascii_lowercase();
    let fail = |msg: String| Error::Format {
        file: name.to_string(),
        msg,
    };
    if head.is_empty() {
        return Err(fail(
            "the trace is empty: no format to recognise".to_string(),
        ));
    }
    if base.contains("oraclegeneral") {
        return Ok(Format::OracleGeneral);
    }
    if base.contains("u32be") {
        return Ok(Format::KeysU32Be);
    }
    if base.contains("u32le") {
        return Ok(Format::KeysU32Le);
    }
    if base.contains("vscsi") {
        return Ok(Format::Vscsi);
    }
    if is_text(head) || looks_textual(head) {
        let cut = if complete {
            head
        } else {
            // Drop the partial last line; a head without any line end is one long line.
            match head.iter().rposition(|&b| b == b'\n') {
                Some(end) => head.get(..end).unwrap_or(head),
                None => head,
            }
        };
        let mut order = [
            Format::CloudPhysicsCsv,
            Format::Systor,
            Format::Blkparse,
            Format::Msr,
            Format::Spc,
            Format::TencentCbs,
            Format::MqSim,
            Format::DiskSim,
        ];
        if base.contains("disksim") {
            order.rotate_right(1); // DiskSim first
        } else if base.contains("mqsim") {
            let at = order.iter().position(|&f| f == Format::MqSim).unwrap_or(0);
            if let Some(front) = order.get_mut(..=at) {
                front.rotate_right(1); // MQSim first
            }
        }
        for fmt in order {
            if text_matches(fmt, cut) {
                return Ok(fmt);
            }
        }
        let tried: Vec<&str> = order.iter().map(|f| f.name()).collect();
        let odd = match head
            .iter()
            .position(|&b| !matches!(b, b'\t' | b'\n' | b'\r' | 0x20..=0x7e))
        {
            Some(at) => format!(" (byte {at} is not printable ASCII)"),
            None => String::new(),
        };
        return Err(fail(format!(
            "this is a text file, but not a text trace raidlab recognises from its first {} \
             bytes{odd}; tried {} (cloudphysics needs its `version,time,op,size,lbn` header); \
             set `format` explicitly",
            cut.len(),
            tried.join(", ")
        )));
    }
    if looks_like_oracle(head) {
        return Ok(Format::OracleGeneral);
    }
    if super::vscsi::detect(head).is_some() {
        return Ok(Format::Vscsi);
    }
    if let Some(fmt) = key_order(head) {
        return Ok(fmt);
    }
    Err(fail(
        "could not recognise this binary file as a trace; tried oracleGeneral (24-byte \
         records with plausible fields), vscsi (version 1 or 2 in its first two records) and \
         u32 keys (no clear byte order: small keys have \
         zero high bytes); set `format` explicitly"
            .to_string(),
    ))
}

/// Text that is not pure ASCII: no NUL bytes, line ends, and valid UTF-8 or at least 95%
/// printable ASCII, tabs and line ends. Such a file is reported as
/// an unrecognised text file, never read as binary records.
fn looks_textual(head: &[u8]) -> bool {
    let plain = head
        .iter()
        .filter(|&&b| matches!(b, b'\t' | b'\n' | b'\r' | 0x20..=0x7e))
        .count();
    // UTF-8 throughout, but for a character cut at the end of the head.
    let utf8 = match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    !head.contains(&0) && head.contains(&b'\n') && (utf8 || plain * 20 >= head.len() * 19)
}

/// Printable ASCII, tabs and line ends only.
fn is_text(head: &[u8]) -> bool {
    head.iter()
        .all(|&b| matches!(b, b'\t' | b'\n' | b'\r' | 0x20..=0x7e))
}

/// Every complete line parses under `fmt` and at least one is a record.
fn text_matches(fmt: Format, head: &[u8]) -> bool {
    match fmt {
        Format::CloudPhysicsCsv => {
            let first = head.split(|&b| b == b'\n').next().unwrap_or(b"");
            first.trim_ascii() == b"version,time,op,size,lbn" && lines_parse(&CloudPhysics, head)
        }
        Format::Systor => lines_parse(&Systor, head),
        // blkparse skips lines that are not events, so ask for at least one event line, of
        // any action, besides a clean parse.
        Format::Blkparse => {
            let has_event = head.split(|&b| b == b'\n').any(|l| {
                let mut f = [&b""[..]; 1];
                super::parse::split_ws(l, &mut f) >= 7
                    && f[0].contains(&b',')
                    && f[0].iter().all(|&b| b == b',' || b.is_ascii_digit())
            });
            has_event && lines_parse_allow_empty(&Blkparse::queue(), head)
        }
        Format::Msr => lines_parse(&Msr, head),
        Format::Spc => lines_parse(&Spc, head),
        Format::TencentCbs => lines_parse(&TencentCbs, head),
        Format::MqSim => lines_parse(&MqSim, head),
        Format::DiskSim => lines_parse(&DiskSim, head),
        _ => false,
    }
}

fn parse_count<F: LineFormat>(fmt: &F, head: &[u8]) -> Option<usize> {
    let mut records = 0;
    for (i, line) in head.split(|&b| b == b'\n').take(SNIFF_LINES).enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match fmt.parse(i as u64 + 1, line) {
            Ok(Some(_)) => records += 1,
            Ok(None) => {}
            Err(_) => return None,
        }
    }
    Some(records)
}

fn lines_parse<F: LineFormat>(fmt: &F, head: &[u8]) -> bool {
    parse_count(fmt, head).is_some_and(|n| n > 0)
}

fn lines_parse_allow_empty<F: LineFormat>(fmt: &F, head: &[u8]) -> bool {
    parse_count(fmt, head).is_some()
}

/// Plausible oracleGeneral records throughout the head.
fn looks_like_oracle(head: &[u8]) -> bool {
    let mut records = head.chunks_exact(super::oracle::RECORD_BYTES);
    let mut prev_time = 0u32;
    let mut seen = 0;
    for rec in records.by_ref() {
        let [t0, t1, t2, t3, _, _, _, _, _, _, _, _, _, _, _, _, n0, n1, n2, n3, n4, n5, n6, n7] =
            <[u8; 24]>::try_from(rec).unwrap_or([0xff; 24]);
        let time = u32::from_le_bytes([t0, t1, t2, t3]);
        let next = i64::from_le_bytes([n0, n1, n2, n3, n4, n5, n6, n7]);
        let next_ok = super::oracle::plausible_next(next);
        if !next_ok || time < prev_time {
            return false;
        }
        prev_time = time;
        seen += 1;
    }
    seen > 0
}

/// Big- or little-endian keys, from the position of zero bytes in the first words: small
/// numbers have their zero high bytes first in big-endian, last in little-endian. Only a
/// clear signal counts: at least a quarter of the words have the zero byte at one end, and
/// four times as many as at the other end. Random bytes (a zero byte in 1 of 256) never
/// qualify.
fn key_order(head: &[u8]) -> Option<Format> {
    let (mut zero_first, mut zero_last, mut words) = (0usize, 0usize, 0usize);
    for w in head.chunks_exact(4) {
        if let [a, _, _, d] = *w {
            zero_first += usize::from(a == 0);
            zero_last += usize::from(d == 0);
            words += 1;
        }
    }
    let clear = |hi: usize, lo: usize| hi * 4 >= words && hi >= lo * 4;
    if clear(zero_first, zero_last) {
        Some(Format::KeysU32Be)
    } else if clear(zero_last, zero_first) {
        Some(Format::KeysU32Le)
    } else {
        None
    }
}
