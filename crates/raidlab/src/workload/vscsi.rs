//! VMware vscsiStats traces in libCacheSim's `vscsi` binary format (the CloudPhysics traces
//! as first published): packed little-endian records of one of two versions.
//!
//! | version | size | fields (byte offset)                                                         |
//! | ------- | ---- | ---------------------------------------------------------------------------- |
//! | V1      | 32   | `u32 sn` 0, `u32 len` 4, `u32 nSG` 8, `u16 cmd` 12, `u16 ver` 14, `u64 lbn` 16, `u64 ts` 24 |
//! | V2      | 40   | `u16 cmd` 0, `u16 ver` 2, `u32 sn` 4, `u32 len` 8, `u32 nSG` 12, `u64 lbn` 16, `u64 ts` 24, `u64 rt` 32 |
//!
//! The version is the high byte of `ver`. As libCacheSim's reader does, the first two records
//! decide it: read as V2, both must say 2; else read as V1, both must say 1; a file shorter
//! than two V2 records (80 bytes) or with neither is not vscsi. `ts` is in microseconds,
//! `len` in bytes and `lbn` in 512-byte sectors (the same units as the CloudPhysics CSV).
//!
//! Requests are byte-addressed: `offset = lbn x 512`, `len` bytes, times relative to the first
//! record. The direction comes from the SCSI opcode in `cmd`'s low byte, as in the CloudPhysics
//! CSV: the READ family reads, the WRITE family writes, and any other command (no user data)
//! is skipped. (libCacheSim does not decode `cmd`: it counts every record as a request.)
//!
//! Every record is checked: one whose version byte is not the file's stops the read with an
//! error naming the record, so a file that is plainly not vscsi fails at record 1 or 2.

use std::io::{Cursor, Read};

use super::binary::Records;
use super::cloudphysics::scsi_op;
use super::{Addressing, Request, RequestSource};
use crate::error::{Error, Result};

/// Bytes of a V1 record.
pub const V1_BYTES: usize = 32;
/// Bytes of a V2 record.
pub const V2_BYTES: usize = 40;
/// Bytes the version test needs: two records of the larger version.
pub const HEAD_BYTES: usize = 2 * V2_BYTES;

/// The record version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    fn number(self) -> u8 {
        match self {
            Version::V1 => 1,
            Version::V2 => 2,
        }
    }
}

#[inline]
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The version byte of a record of version `v`.
#[inline]
fn version_byte(rec: &[u8], v: Version) -> u8 {
    let ver = match v {
        Version::V1 => u16_at(rec, 14),
        Version::V2 => u16_at(rec, 2),
    };
    (ver >> 8) as u8
}

/// libCacheSim's version test on the first [`HEAD_BYTES`] bytes of a file.
pub fn detect(head: &[u8]) -> Option<Version> {
    if head.len() < HEAD_BYTES {
        return None;
    }
    for (v, size) in [(Version::V2, V2_BYTES), (Version::V1, V1_BYTES)] {
        if (0..2).all(|i| version_byte(&head[i * size..(i + 1) * size], v) == v.number()) {
            return Some(v);
        }
    }
    None
}

/// `(cmd, len, lbn, ts)` of a record of version `v`.
#[inline]
fn fields(rec: &[u8], v: Version) -> (u16, u32, u64, u64) {
    match v {
        Version::V1 => (
            u16_at(rec, 12),
            u32_at(rec, 4),
            u64_at(rec, 16),
            u64_at(rec, 24),
        ),
        Version::V2 => (
            u16_at(rec, 0),
            u32_at(rec, 8),
            u64_at(rec, 16),
            u64_at(rec, 24),
        ),
    }
}

/// Reader of vscsi records.
pub struct VscsiReader<R> {
    records: Records<std::io::Chain<Cursor<Vec<u8>>, R>>,
    version: Version,
    label: String,
    first_us: Option<u64>,
}

impl<R: Read> VscsiReader<R> {
    /// Read the head of `input` and decide its version; an error names `label` when the
    /// file is too short or its first two records are neither V1 nor V2.
    pub fn new(mut input: R, label: &str) -> Result<Self> {
        let mut head = Vec::with_capacity(HEAD_BYTES);
        (&mut input)
            .take(HEAD_BYTES as u64)
            .read_to_end(&mut head)
            .map_err(|e| Error::io(label, &e))?;
        let version = match detect(&head) {
            Some(v) => v,
            None if head.len() < HEAD_BYTES => {
                return Err(Error::trace_record(
                    label,
                    1,
                    format!(
                        "not a vscsi trace: {} bytes, fewer than the {HEAD_BYTES} of the two \
                         records its version test reads",
                        head.len()
                    ),
                ))
            }
            None => {
                return Err(Error::trace_record(
                    label,
                    1,
                    "not a vscsi trace: the first two records are neither version 1 nor \
                     version 2 (the high byte of `ver`); set `format` to this file's format",
                ))
            }
        };
        Ok(VscsiReader {
            records: Records::new(Cursor::new(head).chain(input)),
            version,
            label: label.to_string(),
            first_us: None,
        })
    }

    /// The file's record version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The next raw record, checked for the file's version.
    fn record(&mut self) -> Result<Option<(u16, u32, u64, u64)>> {
        // One stack buffer for either size: no allocation per record.
        let mut buf = [0u8; V2_BYTES];
        let size = match self.version {
            Version::V1 => self
                .records
                .record::<V1_BYTES>(&self.label, "vscsi V1 record")?
                .map(|r| buf[..V1_BYTES].copy_from_slice(&r))
                .map(|()| V1_BYTES),
            Version::V2 => self
                .records
                .record::<V2_BYTES>(&self.label, "vscsi V2 record")?
                .map(|r| buf.copy_from_slice(&r))
                .map(|()| V2_BYTES),
        };
        let Some(size) = size else {
            return Ok(None);
        };
        let rec = &buf[..size];
        let found = version_byte(rec, self.version);
        if found != self.version.number() {
            return Err(Error::trace_record(
                &self.label,
                self.records.record_no(),
                format!(
                    "not a vscsi V{} record: its version byte is {found}",
                    self.version.number()
                ),
            ));
        }
        Ok(Some(fields(rec, self.version)))
    }
}

impl<R: Read> RequestSource for VscsiReader<R> {
    fn next_request(&mut self) -> Result<Option<Request>> {
        // Skips commands without user data; each turn consumes a record, so the loop ends
        // with the file.
        while let Some((cmd, len, lbn, ts)) = self.record()? {
            let Some(op) = scsi_op(u64::from(cmd & 0xff)) else {
                continue;
            };
            let first = *self.first_us.get_or_insert(ts);
            let offset = lbn.checked_mul(512).ok_or_else(|| {
                Error::trace_record(
                    &self.label,
                    self.records.record_no(),
                    format!("lbn {lbn} sectors overflows a byte offset"),
                )
            })?;
            return Ok(Some(Request {
                time_ns: ts.saturating_sub(first).saturating_mul(1000),
                op,
                offset,
                len: u64::from(len),
            }));
        }
        Ok(None)
    }

    fn addressing(&self) -> Addressing {
        Addressing::Bytes
    }

    fn label(&self) -> &str {
        &self.label
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::workload::Op;

    /// One record of version `v`.
    pub(crate) fn rec(v: Version, cmd: u8, len: u32, lbn: u64, ts: u64) -> Vec<u8> {
        let mut r = vec![0u8; if v == Version::V1 { V1_BYTES } else { V2_BYTES }];
        let (cmd_at, ver_at, len_at) = match v {
            Version::V1 => (12, 14, 4),
            Version::V2 => (0, 2, 8),
        };
        r[cmd_at..cmd_at + 2].copy_from_slice(&u16::from(cmd).to_le_bytes());
        r[ver_at..ver_at + 2].copy_from_slice(&(u16::from(v.number()) << 8).to_le_bytes());
        r[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
        r[16..24].copy_from_slice(&lbn.to_le_bytes());
        r[24..32].copy_from_slice(&ts.to_le_bytes());
        r
    }

    fn drain(bytes: &[u8]) -> Result<Vec<(u64, Op, u64, u64)>> {
        let mut r = VscsiReader::new(bytes, "t.vscsi")?;
        let mut out = Vec::new();
        while let Some(q) = r.next_request()? {
            out.push((q.time_ns, q.op, q.offset, q.len));
        }
        Ok(out)
    }

    #[test]
    fn worked_example_both_versions() {
        // READ(10) of 4 KiB at sector 8 at t = 1 s, TEST UNIT READY (skipped), WRITE(10) of
        // 512 B at sector 100 at t = 1.5 s.
        for v in [Version::V1, Version::V2] {
            let mut b = rec(v, 0x28, 4096, 8, 1_000_000);
            b.extend(rec(v, 0x00, 0, 0, 1_200_000));
            b.extend(rec(v, 0x2a, 512, 100, 1_500_000));
            let r = VscsiReader::new(&b[..], "t").unwrap();
            assert_eq!(r.version(), v);
            assert_eq!(
                drain(&b).unwrap(),
                [
                    (0, Op::Read, 8 * 512, 4096),
                    (500_000_000, Op::Write, 100 * 512, 512)
                ]
            );
        }
    }

    #[test]
    fn what_is_not_vscsi_is_a_located_error() {
        let err = |b: &[u8]| drain(b).unwrap_err().to_string();
        assert_eq!(
            err(&[0u8; 10]),
            "t.vscsi: record 1: not a vscsi trace: 10 bytes, fewer than the 80 of the two \
             records its version test reads"
        );
        assert!(err(&[b'a'; 200]).contains("record 1: not a vscsi trace: the first two"));
        // A V1 file whose third record's version byte is wrong.
        let mut b = rec(Version::V1, 0x28, 512, 0, 0);
        b.extend(rec(Version::V1, 0x28, 512, 1, 1));
        b.extend(vec![0u8; V1_BYTES]);
        assert_eq!(
            err(&b),
            "t.vscsi: record 3: not a vscsi V1 record: its version byte is 0"
        );
        // Cut inside the third record.
        let mut b = rec(Version::V2, 0x28, 512, 0, 0);
        b.extend(rec(Version::V2, 0x28, 512, 1, 1));
        b.extend([2u8; 7]);
        assert_eq!(
            err(&b),
            "t.vscsi: record 3: truncated vscsi V2 record: expected 40 bytes, found 7"
        );
    }
}
