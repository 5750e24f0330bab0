//! Streams of unsigned 32-bit keys, one 4-byte word a request, big- or little-endian (the
//! ARC paper's traces and block-number dumps).
//!
//! Requests are keyed ([`Addressing::Keys`]) with `len = 0` (no size in the format), `op =
//! Read` and `time_ns = 0` (no time either).
//!
//! Any 4 bytes are a key, so the only check is on the start of the stream: when the first
//! [`TEXT_CHECK_KEYS`] keys are all printable text with a line end among them, the file is
//! text (a CSV given the wrong `format`), and reading stops at record 1.

use std::io::Read;

use super::binary::Records;
use super::{Addressing, Op, Request, RequestSource};
use crate::error::Result;

/// Byte order of the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    Big,
    Little,
}

/// Keys at the start of a stream checked for being text.
pub const TEXT_CHECK_KEYS: usize = 64;

/// Reader of u32 key streams.
pub struct KeysReader<R> {
    records: Records<R>,
    endian: Endian,
    label: String,
    /// The first keys' bytes, until [`TEXT_CHECK_KEYS`] have been seen (then the check
    /// is done and this is emptied for good).
    head: Vec<u8>,
    checked: bool,
}

impl<R: Read> KeysReader<R> {
    pub fn new(input: R, endian: Endian, label: &str) -> Self {
        KeysReader {
            records: Records::new(input),
            endian,
            label: label.to_string(),
            head: Vec::with_capacity(TEXT_CHECK_KEYS * 4),
            checked: false,
        }
    }
}

impl<R: Read> RequestSource for KeysReader<R> {
    #[inline]
    fn next_request(&mut self) -> Result<Option<Request>> {
        let Some(word) = self.records.record::<4>(&self.label, "key")? else {
            return Ok(None);
        };
        if !self.checked {
            self.head.extend_from_slice(&word);
            if self.head.len() >= TEXT_CHECK_KEYS * 4 {
                self.checked = true;
                let text = self
                    .head
                    .iter()
                    .all(|&b| matches!(b, b'\t' | b'\n' | b'\r' | 0x20..=0x7e));
                if text && self.head.contains(&b'\n') {
                    return Err(crate::error::Error::trace_record(
                        &self.label,
                        1,
                        "not a u32 key stream: the file starts with lines of text; set `format` to this file's format",
                    ));
                }
                self.head = Vec::new();
            }
        }
        let key = match self.endian {
            Endian::Big => u32::from_be_bytes(word),
            Endian::Little => u32::from_le_bytes(word),
        };
        Ok(Some(Request {
            time_ns: 0,
            op: Op::Read,
            offset: u64::from(key),
            len: 0,
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

    fn keys(bytes: &[u8], endian: Endian) -> Result<Vec<u64>> {
        let mut r = KeysReader::new(bytes, endian, "k");
        let mut out = Vec::new();
        while let Some(req) = r.next_request()? {
            assert_eq!((req.len, req.op, req.time_ns), (0, Op::Read, 0));
            out.push(req.offset);
        }
        Ok(out)
    }

    #[test]
    fn both_byte_orders() {
        let bytes = [0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef];
        assert_eq!(keys(&bytes, Endian::Big).unwrap(), vec![1, 0xdead_beef]);
        assert_eq!(
            keys(&bytes, Endian::Little).unwrap(),
            vec![0x0100_0000, 0xefbe_adde]
        );
        assert_eq!(keys(&[], Endian::Big).unwrap(), Vec::<u64>::new());
    }

    #[test]
    fn text_is_not_keys() {
        let csv = b"128166372003061629,hm,0,Read,383496192,32768,1331\n".repeat(8);
        let e = keys(&csv, Endian::Big).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "k: record 1: not a u32 key stream: the file starts with lines of text"
            ),
            "{e}"
        );
    }

    #[test]
    fn trailing_bytes_are_a_truncated_record() {
        let e = keys(&[0, 0, 0, 1, 9, 9], Endian::Big).unwrap_err();
        assert_eq!(
            e.to_string(),
            "k: record 2: truncated key: expected 4 bytes, found 2"
        );
    }
}
