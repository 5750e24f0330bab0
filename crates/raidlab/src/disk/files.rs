//! Readers of the two DiskSim-style parameter files a `[disk]` table may name (the format of
//! `../shared/disks/`):
//! - a seek file: `Seek distances measured: N`, then N lines `distance_cylinders, time_ms`
//!   (comma and/or blanks between), distances strictly increasing from >= 1;
//! - a zone file: an optional header line, then `first_cylinder,last_cylinder,blocks_per_track`
//!   rows (512-byte blocks), ascending and non-overlapping.
//!
//! Blank lines are skipped. Every malformed line is an `Error::Trace` naming the file and the
//! 1-based line; a file that cannot be read is an `Error::Io`.

use std::path::Path;

use super::model::Zone;
use crate::error::{Error, Result};

/// Largest seek time accepted (compiled curves hold `u32` nanoseconds).
const MAX_SEEK_MS: f64 = 4294.0;

/// The non-blank lines of `data` with their 1-based numbers, as text.
fn lines<'a>(data: &'a [u8], file: &'a str) -> impl Iterator<Item = Result<(u64, &'a str)>> + 'a {
    data.split(|&b| b == b'\n')
        .enumerate()
        .filter_map(move |(i, raw)| {
            let line = i as u64 + 1;
            match std::str::from_utf8(raw) {
                Err(_) => Some(Err(Error::trace_line(file, line, "not UTF-8 text"))),
                Ok(s) if s.trim().is_empty() => None,
                Ok(s) => Some(Ok((line, s.trim()))),
            }
        })
}

/// Fields separated by commas and/or blanks.
fn fields(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|f| !f.is_empty())
}

/// Parse a seek file into `(distance_cylinders, time_ns)` points.
pub fn parse_seek(data: &[u8], file: &str) -> Result<Vec<(u64, u64)>> {
    let mut lines = lines(data, file);
    let (line, header) = match lines.next() {
        None => return Err(Error::trace_line(file, 1, "empty seek file")),
        Some(r) => r?,
    };
    const PREFIX: &str = "seek distances measured:";
    let announced = match header.get(..PREFIX.len()) {
        Some(p) if p.eq_ignore_ascii_case(PREFIX) => header[PREFIX.len()..]
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|&n| (1..=1_000_000).contains(&n)),
        _ => None,
    }
    .ok_or_else(|| {
        Error::trace_line(
            file,
            line,
            "expected the header `Seek distances measured: N` with 1 <= N <= 1000000",
        )
    })?;
    let mut points: Vec<(u64, u64)> = Vec::new();
    let mut last_line = line;
    for r in lines {
        let (line, text) = r?;
        last_line = line;
        let bad = |msg: String| Error::trace_line(file, line, msg);
        if points.len() as u64 == announced {
            return Err(bad(format!(
                "more points than the {announced} the header announces"
            )));
        }
        let f: Vec<&str> = fields(text).take(3).collect();
        let [d, ms] = f[..] else {
            return Err(bad(format!("expected `distance, time_ms`, got {text:?}")));
        };
        let d: u64 = d
            .parse()
            .ok()
            .filter(|&d| (1..=u32::MAX as u64).contains(&d))
            .ok_or_else(|| bad(format!("expected a distance >= 1 cylinder, got {d:?}")))?;
        if let Some(&(prev, _)) = points.last() {
            if d <= prev {
                return Err(bad(format!(
                    "distances must increase strictly; {d} follows {prev}"
                )));
            }
        }
        let ms: f64 = ms
            .parse()
            .ok()
            .filter(|t: &f64| t.is_finite() && *t > 0.0 && *t <= MAX_SEEK_MS)
            .ok_or_else(|| {
                bad(format!(
                    "expected a time in (0, {MAX_SEEK_MS}] ms, got {ms:?}"
                ))
            })?;
        let ns = (ms * 1e6).round() as u64;
        if ns == 0 {
            return Err(bad(format!("time {ms} ms rounds to 0 ns")));
        }
        points.push((d, ns));
    }
    if (points.len() as u64) < announced {
        return Err(Error::trace_line(
            file,
            last_line,
            format!(
                "the header announces {announced} points, the file has {}",
                points.len()
            ),
        ));
    }
    Ok(points)
}

/// Parse a zone file.
pub fn parse_zones(data: &[u8], file: &str) -> Result<Vec<Zone>> {
    let mut zones: Vec<Zone> = Vec::new();
    let mut first_row = true;
    for r in lines(data, file) {
        let (line, text) = r?;
        let bad = |msg: String| Error::trace_line(file, line, msg);
        let f: Vec<&str> = fields(text).take(4).collect();
        if std::mem::take(&mut first_row) && f.first().is_some_and(|s| s.parse::<u64>().is_err()) {
            // A header line (`first_cylinder,last_cylinder,blocks_per_track`).
            continue;
        }
        let [a, b, c] = f[..] else {
            return Err(bad(format!(
                "expected `first_cylinder,last_cylinder,blocks_per_track`, got {text:?}"
            )));
        };
        let num = |s: &str, what: &str, max: u64| {
            s.parse::<u64>()
                .ok()
                .filter(|&v| v <= max)
                .map(|v| v as u32)
                .ok_or_else(|| bad(format!("expected {what} in [0, {max}], got {s:?}")))
        };
        let first = num(a, "a first cylinder", u32::MAX as u64 - 1)?;
        let last = num(b, "a last cylinder", u32::MAX as u64 - 1)?;
        let spt = num(c, "blocks per track", 1 << 16)?;
        if first > last {
            return Err(bad(format!(
                "first cylinder {first} is after last cylinder {last}"
            )));
        }
        if let Some(prev) = zones.last() {
            if first <= prev.last_cyl {
                return Err(bad(format!(
                    "zones must be ascending and not overlap; cylinder {first} is not after {}",
                    prev.last_cyl
                )));
            }
        }
        if spt == 0 {
            return Err(bad("expected blocks per track >= 1, got 0".into()));
        }
        zones.push(Zone {
            first_cyl: first,
            last_cyl: last,
            sectors_per_track: spt,
        });
    }
    if zones.is_empty() {
        return Err(Error::trace_line(file, 1, "no zones in the file"));
    }
    Ok(zones)
}

fn read(path: &Path) -> Result<(Vec<u8>, String)> {
    let name = path.display().to_string();
    let data = std::fs::read(path).map_err(|e| Error::io(&name, &e))?;
    Ok((data, name))
}

/// Read and parse a seek file.
pub fn read_seek(path: &Path) -> Result<Vec<(u64, u64)>> {
    let (data, name) = read(path)?;
    parse_seek(&data, &name)
}

/// Read and parse a zone file.
pub fn read_zones(path: &Path) -> Result<Vec<Zone>> {
    let (data, name) = read(path)?;
    parse_zones(&data, &name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line_of(e: Error) -> u64 {
        match e {
            Error::Trace { line, .. } => line,
            other => panic!("expected a trace error, got {other}"),
        }
    }

    #[test]
    fn seek_file() {
        let text = b"Seek distances measured: 3\n1,\t1.24500\n\n2,   1.5\n10 3.0\n";
        assert_eq!(
            parse_seek(text, "s").unwrap(),
            vec![(1, 1_245_000), (2, 1_500_000), (10, 3_000_000)]
        );
        let err = |t: &[u8]| line_of(parse_seek(t, "s").unwrap_err());
        assert_eq!(err(b""), 1);
        assert_eq!(err(b"Seeks: 3\n1, 1\n"), 1);
        assert_eq!(err(b"Seek distances measured: 2\n1, 1\n1, 2\n"), 3);
        assert_eq!(err(b"Seek distances measured: 2\n1, 1\n2\n"), 3);
        assert_eq!(err(b"Seek distances measured: 2\n0, 1\n"), 2);
        assert_eq!(err(b"Seek distances measured: 2\n1, -1\n"), 2);
        assert_eq!(err(b"Seek distances measured: 2\n1, NaN\n"), 2);
        assert_eq!(err(b"Seek distances measured: 1\n1, 1\n2, 2\n"), 3);
        assert_eq!(err(b"Seek distances measured: 3\n1, 1\n2, 2\n"), 3);
        assert_eq!(err(b"Seek distances measured: 1\n\xff\n"), 2);
        let e = parse_seek(b"Seek distances measured: 1\n1, x\n", "a.seek").unwrap_err();
        assert_eq!(
            e.to_string(),
            "a.seek: line 2: expected a time in (0, 4294] ms, got \"x\""
        );
    }

    #[test]
    fn zone_file() {
        let text = b"first_cylinder,last_cylinder,blocks_per_track\n0,10,100\n12,20,90\n";
        let z = parse_zones(text, "z").unwrap();
        assert_eq!(z.len(), 2);
        assert_eq!(
            (z[1].first_cyl, z[1].last_cyl, z[1].sectors_per_track),
            (12, 20, 90)
        );
        // No header is fine too.
        assert_eq!(parse_zones(b"0,1,5", "z").unwrap().len(), 1);
        let err = |t: &[u8]| line_of(parse_zones(t, "z").unwrap_err());
        assert_eq!(err(b"h\n"), 1);
        assert_eq!(err(b"h\n0,10\n"), 2);
        assert_eq!(err(b"0,10,1\n5,20,1\n"), 2);
        assert_eq!(err(b"0,10,1\n20,15,1\n"), 2);
        assert_eq!(err(b"0,10,0\n"), 1);
        assert_eq!(err(b"0,10,1\nx,y,z\n"), 2);
        assert_eq!(err(b"0,10,1,4\n"), 1);
    }

    #[test]
    fn missing_file_is_io() {
        let e = read_zones(Path::new("no/such/file.csv")).unwrap_err();
        assert_eq!(e.kind(), "io");
    }
}
