//! Web-server logs in the Common Log Format as file-level workloads (the X-RAY paper's
//! worldcup98 and NASA experiments):
//!
//! ```text
//! host ident authuser [10/Oct/2000:13:55:36 -0700] "GET /path HTTP/1.0" 200 2326
//! ```
//!
//! (trailing fields, as in the Combined format, are ignored). Every path is a static file; a
//! successful (2xx) request returning `b > 0` bytes reads the first `ceil(b / block)` blocks
//! of it (the paper: "if b bytes are returned, they are the first b bytes of the file"), at
//! the logged time. A file's size is the most bytes any request returned for it, found by a
//! first streaming pass; the second pass replays. Other requests (errors, 304 Not Modified,
//! `-` bytes) move no data and are counted as `no_data`. A malformed line is skipped and
//! counted, or stops the run with an error naming the file and line (`on_malformed`).

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use super::{FileOp, FileSource, OnMalformed};
use crate::error::{Error, Result};
use crate::workload::decompress;

/// Lines longer than this are malformed (bounds the line buffer).
const LINE_BYTES_MAX: usize = 1 << 16;

/// The fields of a log line the workload uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRecord<'a> {
    /// Seconds since 1970-01-01 UTC.
    pub time_s: i64,
    pub path: &'a str,
    pub status: u16,
    /// Bytes returned; `None` for `-`.
    pub bytes: Option<u64>,
}

/// Parse one Common Log Format line.
pub fn parse_line(line: &str) -> std::result::Result<LogRecord<'_>, &'static str> {
    let open = line.find('[').ok_or("no [date]")?;
    let close = open
        + line[open..]
            .find(']')
            .ok_or("no closing ] after the date")?;
    let time_s = parse_time(&line[open + 1..close])?;
    let rest = &line[close + 1..];
    let q1 = rest.find('"').ok_or("no quoted request")?;
    let q2 = q1 + 1 + rest[q1 + 1..].find('"').ok_or("unterminated request")?;
    let mut req = rest[q1 + 1..q2].split_ascii_whitespace();
    let _method = req.next().ok_or("empty request")?;
    let path = req.next().ok_or("request without a path")?;
    let mut tail = rest[q2 + 1..].split_ascii_whitespace();
    let status = tail.next().ok_or("no status")?;
    if status.len() != 3 {
        return Err("status is not a 3-digit code");
    }
    let status: u16 = status.parse().map_err(|_| "status is not a number")?;
    let bytes = match tail.next().ok_or("no byte count")? {
        "-" => None,
        b => Some(b.parse::<u64>().map_err(|_| "byte count is not a number")?),
    };
    Ok(LogRecord {
        time_s,
        path,
        status,
        bytes,
    })
}

/// `10/Oct/2000:13:55:36 -0700` -> seconds since the epoch (UTC).
fn parse_time(s: &str) -> std::result::Result<i64, &'static str> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let bad = "date is not dd/Mon/yyyy:HH:MM:SS +zzzz";
    let (stamp, zone) = s.split_once(' ').ok_or(bad)?;
    let b = stamp.as_bytes();
    if b.len() != 20 || b[2] != b'/' || b[6] != b'/' || b[11] != b':' || b[14] != b':' {
        return Err(bad);
    }
    let num = |r: std::ops::Range<usize>| -> std::result::Result<i64, &'static str> {
        let t = &stamp[r];
        if t.bytes().all(|c| c.is_ascii_digit()) {
            t.parse::<i64>().map_err(|_| bad)
        } else {
            Err(bad)
        }
    };
    let day = num(0..2)?;
    let month = MONTHS.iter().position(|m| *m == &stamp[3..6]).ok_or(bad)? as i64 + 1;
    let year = num(7..11)?;
    let (h, m, sec) = (num(12..14)?, num(15..17)?, num(18..20)?);
    if !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return Err(bad);
    }
    let z = zone.as_bytes();
    if z.len() != 5 || !(z[0] == b'+' || z[0] == b'-') || !z[1..].iter().all(u8::is_ascii_digit) {
        return Err(bad);
    }
    let zh = i64::from(z[1] - b'0') * 10 + i64::from(z[2] - b'0');
    let zm = i64::from(z[3] - b'0') * 10 + i64::from(z[4] - b'0');
    let offset = (zh * 60 + zm) * 60 * if z[0] == b'-' { -1 } else { 1 };
    Ok(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec - offset)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A data-moving request: status 2xx with bytes > 0.
fn data_bytes(r: &LogRecord<'_>) -> Option<u64> {
    r.bytes.filter(|&b| (200..300).contains(&r.status) && b > 0)
}

/// One line from `reader` into `buf`: `Ok(None)` at the end, `Ok(Some(Err))` for a line that
/// is too long or not UTF-8.
fn next_line<'b>(
    reader: &mut dyn BufRead,
    buf: &'b mut Vec<u8>,
    label: &str,
    line_no: u64,
) -> Result<Option<std::result::Result<&'b str, &'static str>>> {
    buf.clear();
    let n = std::io::Read::take(&mut *reader, LINE_BYTES_MAX as u64 + 1)
        .read_until(b'\n', buf)
        .map_err(|e| Error::trace_line(label, line_no, format!("read failed: {e}")))?;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() > LINE_BYTES_MAX {
        // Drop the rest of the overlong line.
        let mut sink = Vec::new();
        reader
            .read_until(b'\n', &mut sink)
            .map_err(|e| Error::trace_line(label, line_no, format!("read failed: {e}")))?;
        return Ok(Some(Err("line too long")));
    }
    Ok(Some(
        std::str::from_utf8(buf)
            .map(|s| s.trim_end_matches(['\n', '\r']))
            .map_err(|_| "not UTF-8 text"),
    ))
}

/// A web log replayed as file reads.
pub struct WebLog<'a> {
    label: String,
    reader: Option<Box<dyn BufRead + Send + 'a>>,
    ids: HashMap<String, u32>,
    sizes: Vec<u32>,
    block_size: u64,
    t0_s: i64,
    time_scale: f64,
    warm_next: u32,
    warmup: bool,
    line_no: u64,
    buf: Vec<u8>,
    malformed: u64,
    no_data: u64,
    first_malformed: Option<u64>,
}

impl WebLog<'static> {
    /// Scan the log at `path` and get ready to replay it.
    pub fn open(
        path: &Path,
        on_malformed: OnMalformed,
        time_scale: f64,
        block_size: u32,
        warmup: bool,
    ) -> Result<WebLog<'static>> {
        let label = path.display().to_string();
        let first = Box::new(decompress::open_buffered(path)?);
        let second = Box::new(decompress::open_buffered(path)?);
        WebLog::scan(
            label,
            first,
            second,
            on_malformed,
            time_scale,
            block_size,
            warmup,
        )
    }
}

impl<'a> WebLog<'a> {
    /// A log held in memory (tests, fuzzing); `label` names it in errors.
    pub fn from_bytes(
        label: &str,
        bytes: &'a [u8],
        on_malformed: OnMalformed,
        time_scale: f64,
        block_size: u32,
        warmup: bool,
    ) -> Result<WebLog<'a>> {
        WebLog::scan(
            label.to_string(),
            Box::new(bytes),
            Box::new(bytes),
            on_malformed,
            time_scale,
            block_size,
            warmup,
        )
    }

    /// First pass over `first`: the files, their sizes, the start time, the bad lines.
    fn scan(
        label: String,
        mut first: Box<dyn BufRead + Send + 'a>,
        second: Box<dyn BufRead + Send + 'a>,
        on_malformed: OnMalformed,
        time_scale: f64,
        block_size: u32,
        warmup: bool,
    ) -> Result<WebLog<'a>> {
        let bs = u64::from(block_size.max(1));
        let mut w = WebLog {
            label,
            reader: Some(second),
            ids: HashMap::new(),
            sizes: Vec::new(),
            block_size: bs,
            t0_s: 0,
            time_scale,
            warm_next: 0,
            warmup,
            line_no: 0,
            buf: Vec::new(),
            malformed: 0,
            no_data: 0,
            first_malformed: None,
        };
        let mut buf = Vec::new();
        let mut line_no = 0u64;
        let mut t0: Option<i64> = None;
        while let Some(line) = next_line(first.as_mut(), &mut buf, &w.label, line_no + 1)? {
            line_no += 1;
            let line = match line {
                Ok(l) if l.trim().is_empty() => continue,
                Ok(l) => l,
                Err(why) => {
                    w.bad_line(line_no, why, on_malformed)?;
                    continue;
                }
            };
            let rec = match parse_line(line) {
                Ok(r) => r,
                Err(why) => {
                    w.bad_line(line_no, why, on_malformed)?;
                    continue;
                }
            };
            t0 = Some(t0.map_or(rec.time_s, |t: i64| t.min(rec.time_s)));
            let Some(bytes) = data_bytes(&rec) else {
                w.no_data += 1;
                continue;
            };
            let blocks = u32::try_from(bytes.div_ceil(bs)).unwrap_or(u32::MAX);
            match w.ids.get(rec.path) {
                Some(&id) => {
                    let s = &mut w.sizes[id as usize];
                    *s = (*s).max(blocks);
                }
                None => {
                    if w.sizes.len() >= u32::MAX as usize {
                        return Err(Error::trace_line(&w.label, line_no, "too many files"));
                    }
                    w.ids.insert(rec.path.to_string(), w.sizes.len() as u32);
                    w.sizes.push(blocks);
                }
            }
        }
        if w.sizes.is_empty() {
            return Err(Error::Trace {
                file: w.label.clone(),
                line: line_no,
                record: false,
                msg: "no request returning data: the log describes no files".into(),
            });
        }
        w.t0_s = t0.unwrap_or(0);
        Ok(w)
    }

    fn bad_line(&mut self, line_no: u64, why: &str, on: OnMalformed) -> Result<()> {
        if on == OnMalformed::Fail {
            return Err(Error::trace_line(
                &self.label,
                line_no,
                format!("malformed Common Log Format line: {why}"),
            ));
        }
        self.malformed += 1;
        self.first_malformed.get_or_insert(line_no);
        Ok(())
    }
}

impl FileSource for WebLog<'_> {
    fn file_blocks(&self) -> &[u32] {
        &self.sizes
    }

    fn skipped(&self) -> (u64, u64, Option<u64>) {
        (self.malformed, self.no_data, self.first_malformed)
    }

    fn next_op(&mut self) -> Result<Option<FileOp>> {
        if self.warmup && (self.warm_next as usize) < self.sizes.len() {
            let file = self.warm_next;
            self.warm_next += 1;
            return Ok(Some(FileOp::warmup_read(file, self.sizes[file as usize])));
        }
        let Some(reader) = self.reader.as_mut() else {
            return Ok(None);
        };
        loop {
            let Some(line) = next_line(
                reader.as_mut(),
                &mut self.buf,
                &self.label,
                self.line_no + 1,
            )?
            else {
                self.reader = None;
                return Ok(None);
            };
            self.line_no += 1;
            // Bad lines were reported (or failed the run) by the first pass.
            let Ok(rec) = line.and_then(parse_line) else {
                continue;
            };
            let Some(bytes) = data_bytes(&rec) else {
                continue;
            };
            let Some(&file) = self.ids.get(rec.path) else {
                continue;
            };
            let blocks = u32::try_from(bytes.div_ceil(self.block_size)).unwrap_or(u32::MAX);
            let offset_s = (rec.time_s - self.t0_s).max(0) as f64;
            return Ok(Some(FileOp {
                arrival_ns: Some((offset_s * self.time_scale * 1e9).round() as u64),
                file,
                write: false,
                blocks: blocks.min(self.sizes[file as usize]),
                warmup: false,
            }));
        }
    }
}

#[cfg(test)]
mod tests;
