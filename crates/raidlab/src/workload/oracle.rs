//! libCacheSim's oracleGeneral binary format: packed little-endian 24-byte records
//! `u32 time_s, u64 obj_id, u32 obj_size, i64 next_access_vtime`.
//!
//! Requests are keyed ([`Addressing::Keys`]): `offset` is the object id, `len` its size in
//! bytes. The format has no direction; every request is a read. `next_access_vtime` is the
//! oracle's future knowledge and is not carried into the request stream. Times are whole
//! seconds relative to the first record.

use std::io::Read;
use std::path::Path;

use super::binary::Records;
use super::decompress;
use super::{Addressing, Op, Request, RequestSource};
use crate::error::{Error, Result};

/// Bytes in one record.
pub const RECORD_BYTES: usize = 24;

/// Reader of oracleGeneral records.
pub struct OracleReader<R> {
    records: Records<R>,
    label: String,
    first_time_s: Option<u32>,
}

impl<R: Read> OracleReader<R> {
    pub fn new(input: R, label: &str) -> Self {
        OracleReader {
            records: Records::new(input),
            label: label.to_string(),
            first_time_s: None,
        }
    }

    /// A reader whose chunk buffer is small enough to stay in the CPU cache beside a cache
    /// simulation's metadata: for an input that does not buffer itself (a plain file, or a
    /// decoder), which it reads directly into the chunk.
    pub fn small_chunks(input: R, label: &str) -> Self {
        OracleReader {
            records: Records::with_chunk(input, FILE_CHUNK_BYTES),
            label: label.to_string(),
            first_time_s: None,
        }
    }
}

/// The oracleGeneral trace at `path` for [`OracleReader::next_keys`], decompressed as
/// `decompress::open_path` does (pipes included), through a buffer no larger than the
/// reader's chunk: an uncompressed file is then read straight into the (small) chunk, a
/// compressed one through its decoder, a chunk at a time, so the boxed input costs one
/// virtual call a chunk.
pub fn open_batched(path: &Path) -> Result<OracleReader<Box<dyn Read + Send>>> {
    let label = path.display().to_string();
    let input = decompress::open_path_with(path, FILE_CHUNK_BYTES)?;
    Ok(OracleReader::small_chunks(input, &label))
}

/// Read the oracleGeneral trace at `path` as the counting engine's fast path reads it
/// ([`open_batched`], [`OracleReader::next_keys`]) and do nothing else: the bare read rate a
/// counting run is measured against. Returns the records read and a checksum of their keys
/// (which keeps the decoding from being optimised away).
pub fn read_all(path: &Path) -> Result<(u64, u64)> {
    let mut reader = open_batched(path)?;
    let (mut keys, mut sizes) = ([0u64; 64], [0u32; 64]);
    let (mut records, mut sum) = (0u64, 0u64);
    // Bounded by the trace: every pass reads at least one record or ends the loop.
    loop {
        let n = reader.next_keys(&mut keys, &mut sizes)?;
        if n == 0 {
            return Ok((records, sum));
        }
        records += n as u64;
        sum = keys[..n].iter().fold(sum, |s, &k| s.wrapping_add(k));
    }
}

/// Chunk size of [`OracleReader::small_chunks`]: a multiple of the record size.
const FILE_CHUNK_BYTES: usize = 64 * 1024 / RECORD_BYTES * RECORD_BYTES;

#[inline]
fn decode(rec: &[u8; RECORD_BYTES]) -> (u32, u64, u32, i64) {
    let [t0, t1, t2, t3, i0, i1, i2, i3, i4, i5, i6, i7, s0, s1, s2, s3, n0, n1, n2, n3, n4, n5, n6, n7] =
        *rec;
    (
        u32::from_le_bytes([t0, t1, t2, t3]),
        u64::from_le_bytes([i0, i1, i2, i3, i4, i5, i6, i7]),
        u32::from_le_bytes([s0, s1, s2, s3]),
        i64::from_le_bytes([n0, n1, n2, n3, n4, n5, n6, n7]),
    )
}

/// Whether a decoded `next_access_vtime` is one libCacheSim writes: -1 or `i64::MAX` (no
/// next access) or a request index below 2^48. Anything else means the file is not
/// oracleGeneral (text read as records gives values above 2^60).
#[inline]
pub(crate) fn plausible_next(next: i64) -> bool {
    // -1 ..= 2^48 - 1 is one unsigned range once shifted by one.
    (next as u64).wrapping_add(1) <= 1 << 48 || next == i64::MAX
}

/// The error for record number `record_no`, whose `next_access_vtime` is `next`, which is
/// not [`plausible_next`].
#[cold]
fn not_oracle(label: &str, record_no: u64, rec: &[u8; RECORD_BYTES], next: i64) -> Error {
    let text = rec
        .iter()
        .all(|&b| matches!(b, b'\t' | b'\n' | b'\r' | 0x20..=0x7e));
    Error::trace_record(
        label,
        record_no,
        format!(
            "not an oracleGeneral record: next_access_vtime {next} is neither -1, i64::MAX nor \
             a request index{}; set `format` to this file's format",
            if text { " (the bytes are text)" } else { "" }
        ),
    )
}

impl<R: Read> OracleReader<R> {
    /// The object ids and sizes of the next requests, up to `keys.len()` of them (which
    /// must equal `sizes.len()` and be > 0), decoded in place from the chunk buffer: the
    /// same requests in the same order as [`RequestSource::next_request`] yields, without a
    /// copy or a virtual call per request. Returns how many it wrote, 0 at the end. A
    /// malformed record ends the batch before it and is the next call's error (the same
    /// error `next_request` returns for it).
    #[inline]
    pub fn next_keys(&mut self, keys: &mut [u64], sizes: &mut [u32]) -> Result<usize> {
        assert!(!keys.is_empty() && keys.len() == sizes.len());
        let Some(bytes) = self
            .records
            .buffered::<RECORD_BYTES>(&self.label, "record")?
        else {
            return Ok(0);
        };
        if self.first_time_s.is_none() {
            let first: &[u8; RECORD_BYTES] = bytes[..RECORD_BYTES].try_into().expect("a record");
            self.first_time_s = Some(decode(first).0);
        }
        let mut n = 0;
        let mut bad = None;
        for (rec, (key, size)) in bytes
            .chunks_exact(RECORD_BYTES)
            .zip(keys.iter_mut().zip(sizes.iter_mut()))
        {
            let rec: &[u8; RECORD_BYTES] = rec.try_into().expect("chunks are records");
            let (_, id, s, next) = decode(rec);
            if !plausible_next(next) {
                bad = Some((*rec, next));
                break;
            }
            *key = id;
            *size = s;
            n += 1;
        }
        match bad {
            Some((rec, next)) if n == 0 => {
                self.records.consume::<RECORD_BYTES>(1);
                Err(not_oracle(
                    &self.label,
                    self.records.record_no(),
                    &rec,
                    next,
                ))
            }
            _ => {
                self.records.consume::<RECORD_BYTES>(n);
                Ok(n)
            }
        }
    }
}

impl<R: Read> RequestSource for OracleReader<R> {
    #[inline]
    fn next_request(&mut self) -> Result<Option<Request>> {
        let Some(rec) = self.records.record::<RECORD_BYTES>(&self.label, "record")? else {
            return Ok(None);
        };
        let (time_s, id, size, next) = decode(&rec);
        if !plausible_next(next) {
            return Err(not_oracle(
                &self.label,
                self.records.record_no(),
                &rec,
                next,
            ));
        }
        let first = *self.first_time_s.get_or_insert(time_s);
        let time_ns = u64::from(time_s.saturating_sub(first)) * 1_000_000_000;
        Ok(Some(Request {
            time_ns,
            op: Op::Read,
            offset: id,
            len: u64::from(size),
        }))
    }

    fn addressing(&self) -> Addressing {
        Addressing::Keys
    }

    fn label(&self) -> &str {
        &self.label
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(time: u32, id: u64, size: u32, next: i64) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&time.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
        v.extend_from_slice(&size.to_le_bytes());
        v.extend_from_slice(&next.to_le_bytes());
        v
    }

    #[test]
    fn worked_example() {
        let mut bytes = rec(100, 7, 4096, 2);
        bytes.extend(rec(102, 1 << 40, 512, -1));
        bytes.extend(rec(101, 7, 4096, i64::MAX));
        let mut r = OracleReader::new(&bytes[..], "t.bin");
        let r0 = r.next_request().unwrap().unwrap();
        assert_eq!(
            (r0.time_ns, r0.op, r0.offset, r0.len),
            (0, Op::Read, 7, 4096)
        );
        let r1 = r.next_request().unwrap().unwrap();
        assert_eq!(
            (r1.time_ns, r1.offset, r1.len),
            (2_000_000_000, 1 << 40, 512)
        );
        let r2 = r.next_request().unwrap().unwrap();
        assert_eq!(r2.time_ns, 1_000_000_000);
        assert_eq!(r.next_request().unwrap(), None);
        assert_eq!(r.addressing(), Addressing::Keys);
    }

    #[test]
    fn plausible_next_bounds() {
        let ok = [-1, 0, 1, (1 << 48) - 1, i64::MAX];
        let bad = [i64::MIN, -2, 1 << 48, (1 << 48) + 1, i64::MAX - 1];
        assert!(ok.iter().all(|&n| plausible_next(n)));
        assert!(!bad.iter().any(|&n| plausible_next(n)));
    }

    /// The batch decoder yields what `next_request` yields, batch size by batch size.
    #[test]
    fn next_keys_matches_next_request() {
        let mut bytes = Vec::new();
        for i in 0..1000u64 {
            bytes.extend(rec(
                7 + i as u32 / 10,
                i * 31 % 97,
                (i % 5) as u32 * 512,
                -1,
            ));
        }
        let mut one = OracleReader::new(&bytes[..], "t.bin");
        let mut want = Vec::new();
        while let Some(r) = one.next_request().unwrap() {
            want.push((r.offset, r.len as u32));
        }
        for batch in [1, 7, 64, 1000, 4096] {
            let mut r = OracleReader::small_chunks(&bytes[..], "t.bin");
            let (mut keys, mut sizes) = (vec![0; batch], vec![0; batch]);
            let mut got = Vec::new();
            loop {
                let n = r.next_keys(&mut keys, &mut sizes).unwrap();
                if n == 0 {
                    break;
                }
                got.extend(keys[..n].iter().copied().zip(sizes[..n].iter().copied()));
            }
            assert_eq!(got, want, "batch {batch}");
            assert_eq!(r.first_time_s, Some(7));
        }
    }

    #[test]
    fn text_is_not_records() {
        let csv = b"128166372003061629,hm,0,Read,383496192,32768,1331\n".repeat(4);
        let mut r = OracleReader::new(&csv[..], "t.csv");
        let e = r.next_request().unwrap_err().to_string();
        assert!(
            e.starts_with("t.csv: record 1: not an oracleGeneral record") && e.contains("text"),
            "{e}"
        );
        let mut bad = rec(1, 1, 1, 1);
        bad.extend(rec(2, 2, 2, 1 << 50));
        let mut r = OracleReader::new(&bad[..], "t.bin");
        assert!(r.next_request().unwrap().is_some());
        let e = r.next_request().unwrap_err().to_string();
        assert!(
            e.starts_with("t.bin: record 2: not an oracleGeneral"),
            "{e}"
        );
    }

    #[test]
    fn truncated_record_names_its_number() {
        let mut bytes = rec(1, 1, 1, 1);
        bytes.extend(rec(1, 2, 1, 1));
        bytes.truncate(24 + 10);
        let mut r = OracleReader::new(&bytes[..], "t.bin");
        assert!(r.next_request().unwrap().is_some());
        let e = r.next_request().unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.bin: record 2: truncated record: expected 24 bytes, found 10"
        );
        assert_eq!(r.next_request().unwrap(), None);
    }
}

/// Throughput check: `RAIDLAB_ORACLE_BENCH=FILE cargo test --release -p raidlab
/// oracle_read_speed -- --ignored --nocapture` drains FILE through [`super::open`] (the same
/// path the engine uses) and prints records per second.
#[cfg(test)]
mod speed {
    use crate::workload::{open, Format, OpsFilter, SourceSpec, WorkloadSpec};

    #[test]
    #[ignore = "benchmark; needs RAIDLAB_ORACLE_BENCH=FILE and a release build"]
    fn oracle_read_speed() {
        let Some(path) = std::env::var_os("RAIDLAB_ORACLE_BENCH") else {
            eprintln!("note: RAIDLAB_ORACLE_BENCH not set; skipped");
            return;
        };
        let spec = WorkloadSpec {
            source: SourceSpec::Trace {
                path: path.clone().into(),
                format: Format::OracleGeneral,
            },
            ops: OpsFilter::All,
            limit: None,
            block_size: 4096,
            device: None,
            split: true,
        };
        for _ in 0..3 {
            let start = std::time::Instant::now();
            let mut src = open(&spec).unwrap();
            let (mut n, mut sum) = (0u64, 0u64);
            while let Some(r) = src.next_request().unwrap() {
                n += 1;
                sum = sum.wrapping_add(r.offset);
            }
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "{n} records in {secs:.3} s: {:.1} M records/s (checksum {sum})",
                n as f64 / secs / 1e6
            );
        }
        // The batch decoder the counting engine's fast path uses.
        for _ in 0..3 {
            let start = std::time::Instant::now();
            let (n, sum) = super::read_all(std::path::Path::new(&path)).unwrap();
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "batches: {n} records in {secs:.3} s: {:.1} M records/s (checksum {sum})",
                n as f64 / secs / 1e6
            );
        }
    }
}
