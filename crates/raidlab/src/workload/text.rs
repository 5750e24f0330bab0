//! The machinery shared by every line-oriented trace format: reading lines into one reused
//! buffer, numbering them, turning format-specific records into [`Request`]s with times
//! relative to the first record, and laying multi-device traces out in one flat byte space.
//!
//! A format only says how one line parses ([`LineFormat`]); everything else lives here so
//! that each reader file stays about its format.

use std::collections::BTreeMap;
use std::io::BufRead;

use super::{Addressing, Op, Request, RequestSource};
use crate::error::{Error, Result};

/// One parsed record, in the format's own units except that offsets and lengths are bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rec {
    /// Time in the format's ticks (see [`LineFormat::TICK_NS`]).
    pub time: u64,
    /// Device (ASU, disk, LUN, volume); 0 for single-device formats.
    pub dev: u64,
    pub op: Op,
    pub offset_bytes: u64,
    pub len_bytes: u64,
}

/// How one text format parses a line.
pub trait LineFormat {
    /// Nanoseconds per tick of [`Rec::time`].
    const TICK_NS: u64 = 1;
    /// Whether records carry a device number worth laying out.
    const MULTI_DEVICE: bool;
    /// Whether `offset_bytes` is an object key and `len_bytes` its size
    /// ([`Addressing::Keys`]) rather than a byte range.
    const KEYED: bool = false;
    /// Parse one line (terminator stripped). `Ok(None)` means "not a record" (a header,
    /// a blank line, an action the reader ignores); `Err` says what was expected and found.
    fn parse(&self, line_no: u64, line: &[u8]) -> Result<Option<Rec>, String>;
}

/// Granularity to which each device's footprint is rounded before the next device starts,
/// so that no cache block or stripe unit (both at most 1 MiB) straddles two devices.
pub const DEVICE_ALIGN_BYTES: u64 = 1 << 20;

/// Largest request a block trace may carry. Real I/Os are at most a few MiB; anything near
/// this is a corrupt record, and passing it on would make the cache split one request into
/// millions of blocks.
pub const MAX_REQUEST_BYTES: u64 = 1 << 32;

/// Reject absurd lengths (shared by the pre-pass and the main pass).
fn check_len(rec: &Rec) -> Result<(), String> {
    if rec.len_bytes > MAX_REQUEST_BYTES {
        Err(format!(
            "request length {} bytes exceeds the {MAX_REQUEST_BYTES}-byte limit of one request",
            rec.len_bytes
        ))
    } else {
        Ok(())
    }
}

/// Where each device of a multi-device trace lands in the flat address space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// Offsets are used as they are (single-device formats).
    Native,
    /// Devices back to back in ascending device number: `(device, base_bytes)`, sorted.
    Flat(Vec<(u64, u64)>),
    /// Keep only this device's records, at their own offsets.
    Only(u64),
}

impl Layout {
    /// Lay out devices whose footprints (highest byte end seen) are given: device k starts at
    /// the sum of the rounded-up footprints of the devices numbered below it.
    pub fn back_to_back(footprints: &BTreeMap<u64, u64>) -> Option<Layout> {
        let mut base = 0u64;
        let mut out = Vec::with_capacity(footprints.len());
        for (&dev, &end) in footprints {
            out.push((dev, base));
            let rounded = end
                .div_ceil(DEVICE_ALIGN_BYTES)
                .checked_mul(DEVICE_ALIGN_BYTES)?;
            base = base.checked_add(rounded)?;
        }
        Some(Layout::Flat(out))
    }

    /// The base of `dev`, `None` when the device is not laid out.
    #[inline]
    fn base_of(bases: &[(u64, u64)], dev: u64) -> Option<u64> {
        bases
            .binary_search_by_key(&dev, |&(d, _)| d)
            .ok()
            .and_then(|i| bases.get(i))
            .map(|&(_, b)| b)
    }
}

/// Read one line into `buf` (cleared first), without its `\n` / `\r\n`. `Ok(false)` at EOF.
pub(crate) fn read_line<R: BufRead + ?Sized>(
    input: &mut R,
    buf: &mut Vec<u8>,
) -> std::io::Result<bool> {
    buf.clear();
    if input.read_until(b'\n', buf)? == 0 {
        return Ok(false);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(true)
}

/// The pre-pass over a multi-device trace: every line is parsed (so errors carry the same
/// line numbers as in the main pass) and each device's footprint recorded.
pub(crate) fn scan_layout<R: BufRead, F: LineFormat>(
    mut input: R,
    fmt: &F,
    label: &str,
) -> Result<Layout> {
    let mut footprints: BTreeMap<u64, u64> = BTreeMap::new();
    let mut buf = Vec::with_capacity(256);
    let mut line_no = 0u64;
    while read_line(&mut input, &mut buf).map_err(|e| Error::io(label, &e))? {
        line_no += 1;
        let rec = match fmt
            .parse(line_no, &buf)
            .and_then(|r| r.map(|r| check_len(&r).map(|()| r)).transpose())
        {
            Ok(Some(rec)) => rec,
            Ok(None) => continue,
            Err(msg) => return Err(Error::trace_line(label, line_no, msg)),
        };
        let end = rec
            .offset_bytes
            .checked_add(rec.len_bytes)
            .ok_or_else(|| Error::trace_line(label, line_no, "offset + size overflows 64 bits"))?;
        let slot = footprints.entry(rec.dev).or_insert(0);
        *slot = (*slot).max(end);
    }
    Layout::back_to_back(&footprints).ok_or_else(|| Error::Format {
        file: label.to_string(),
        msg: "devices laid back to back exceed a 64-bit byte space".to_string(),
    })
}

/// A [`RequestSource`] over any line format.
pub struct TextReader<R, F> {
    input: R,
    fmt: F,
    label: String,
    buf: Vec<u8>,
    line_no: u64,
    first_time: Option<u64>,
    layout: Layout,
    done: bool,
}

impl<R: BufRead, F: LineFormat> TextReader<R, F> {
    pub(crate) fn new(input: R, fmt: F, label: &str, layout: Layout) -> Self {
        TextReader {
            input,
            fmt,
            label: label.to_string(),
            buf: Vec::with_capacity(256),
            line_no: 0,
            first_time: None,
            layout,
            done: false,
        }
    }

    fn fail(&mut self, msg: impl Into<String>) -> Error {
        self.done = true;
        Error::trace_line(&self.label, self.line_no, msg)
    }

    fn step(&mut self) -> Result<Option<Request>> {
        loop {
            let more = match read_line(&mut self.input, &mut self.buf) {
                Ok(more) => more,
                Err(e) => {
                    self.done = true;
                    return Err(Error::io(&self.label, &e));
                }
            };
            if !more {
                self.done = true;
                return Ok(None);
            }
            self.line_no += 1;
            let parsed = self.fmt.parse(self.line_no, &self.buf);
            let rec = match parsed.and_then(|r| r.map(|r| check_len(&r).map(|()| r)).transpose()) {
                Ok(Some(rec)) => rec,
                Ok(None) => continue,
                Err(msg) => return Err(self.fail(msg)),
            };
            // Times are relative to the trace's first record (kept or not); a record stamped
            // earlier than it (traces are not always sorted) is clamped to 0 rather than
            // wrapped.
            let first = *self.first_time.get_or_insert(rec.time);
            let time_ns = rec.time.saturating_sub(first).saturating_mul(F::TICK_NS);
            let offset = match &self.layout {
                Layout::Native => rec.offset_bytes,
                Layout::Only(dev) if *dev == rec.dev => rec.offset_bytes,
                Layout::Only(_) => continue,
                Layout::Flat(bases) => match Layout::base_of(bases, rec.dev) {
                    Some(base) => match base.checked_add(rec.offset_bytes) {
                        Some(o) => o,
                        None => return Err(self.fail("device base + offset overflows 64 bits")),
                    },
                    None => {
                        let msg = format!("device {} was not seen by the layout pre-pass", rec.dev);
                        return Err(self.fail(msg));
                    }
                },
            };
            return Ok(Some(Request {
                time_ns,
                op: rec.op,
                offset,
                len: rec.len_bytes,
            }));
        }
    }
}

impl<R: BufRead, F: LineFormat> RequestSource for TextReader<R, F> {
    fn next_request(&mut self) -> Result<Option<Request>> {
        if self.done {
            return Ok(None);
        }
        self.step()
    }

    fn addressing(&self) -> Addressing {
        if F::KEYED {
            Addressing::Keys
        } else {
            Addressing::Bytes
        }
    }

    fn label(&self) -> &str {
        &self.label
    }

    fn device_bases(&self) -> Option<&[(u64, u64)]> {
        match &self.layout {
            Layout::Flat(bases) => Some(bases),
            Layout::Native | Layout::Only(_) => None,
        }
    }
}

/// Build a reader over in-memory bytes, running the layout pre-pass over the same bytes when
/// the format has devices and no device is selected.
#[cfg(test)]
pub(crate) fn from_slice<'a, F: LineFormat + 'a>(
    bytes: &'a [u8],
    fmt: F,
    label: &str,
    device: Option<u64>,
) -> Result<TextReader<&'a [u8], F>> {
    let layout = layout_for::<F>(device, || scan_layout(bytes, &fmt, label))?;
    Ok(TextReader::new(bytes, fmt, label, layout))
}

/// The layout a format needs: native for single-device formats, `Only` when a device is
/// selected, otherwise whatever the pre-pass `scan` finds.
pub(crate) fn layout_for<F: LineFormat>(
    device: Option<u64>,
    scan: impl FnOnce() -> Result<Layout>,
) -> Result<Layout> {
    match (F::MULTI_DEVICE, device) {
        (false, None) => Ok(Layout::Native),
        (false, Some(_)) => Err(Error::config(
            "workload.device",
            "this trace format has no device numbers to select from",
        )),
        (true, Some(dev)) => Ok(Layout::Only(dev)),
        (true, None) => scan(),
    }
}

/// Test helper: every request of `bytes` under `fmt`, or the first error.
#[cfg(test)]
pub(crate) fn drain<F: LineFormat>(
    bytes: &[u8],
    fmt: F,
    device: Option<u64>,
) -> Result<Vec<Request>> {
    let mut r = from_slice(bytes, fmt, "t", device)?;
    let mut out = Vec::new();
    while let Some(req) = r.next_request()? {
        out.push(req);
    }
    Ok(out)
}

/// Test helper: the error of `bytes` under `fmt` as text.
#[cfg(test)]
pub(crate) fn error_of<F: LineFormat>(bytes: &[u8], fmt: F) -> String {
    match drain(bytes, fmt, None) {
        Ok(v) => panic!("expected an error, got {} requests", v.len()),
        Err(e) => e.to_string(),
    }
}

/// Test helper: a request literal.
#[cfg(test)]
pub(crate) fn rq(time_ns: u64, op: Op, offset: u64, len: u64) -> Request {
    Request {
        time_ns,
        op,
        offset,
        len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_back_to_back_rounded_to_a_mebibyte() {
        let fp = BTreeMap::from([(0, 5000), (3, 1 << 20), (7, 1)]);
        assert_eq!(
            Layout::back_to_back(&fp),
            Some(Layout::Flat(vec![(0, 0), (3, 1 << 20), (7, 2 << 20)]))
        );
        let huge = BTreeMap::from([(0, u64::MAX), (1, 1)]);
        assert_eq!(Layout::back_to_back(&huge), None);
    }

    #[test]
    fn absurd_lengths_are_rejected() {
        let e = super::error_of(b"0,0,4294967297,r,0\n", crate::workload::spc::Spc);
        assert_eq!(
            e,
            "t: line 1: request length 4294967297 bytes exceeds the 4294967296-byte limit of one request"
        );
    }

    #[test]
    fn lines_lose_their_terminators() {
        let mut input: &[u8] = b"a\r\nb\n\nc";
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while read_line(&mut input, &mut buf).unwrap() {
            got.push(buf.clone());
        }
        assert_eq!(
            got,
            vec![b"a".to_vec(), b"b".to_vec(), vec![], b"c".to_vec()]
        );
    }
}
