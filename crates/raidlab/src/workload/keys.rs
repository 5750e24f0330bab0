//! Streams of unsigned 32-bit keys, one 4-byte word a request, big- or little-endian (the
//! ARC paper's traces and block-number dumps).
//!
//! Requests are keyed ([`Addressing::Keys`]) with `len = 0` (no size in the format), `op =
//! Read` and `time_ns = 0` (no time either).

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

/// Reader of u32 key streams.
pub struct KeysReader<R> {
    records: Records<R>,
    endian: Endian,
    label: String,
}

impl<R: Read> KeysReader<R> {
    pub fn new(input: R, endian: Endian, label: &str) -> Self {
        KeysReader {
            records: Records::new(input),
            endian,
            label: label.to_string(),
        }
    }
}

impl<R: Read> RequestSource for KeysReader<R> {
    #[inline]
    fn next_request(&mut self) -> Result<Option<Request>> {
        let Some(word) = self.records.record::<4>(&self.label, "key")? else {
            return Ok(None);
        };
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
    fn trailing_bytes_are_a_truncated_record() {
        let e = keys(&[0, 0, 0, 1, 9, 9], Endian::Big).unwrap_err();
        assert_eq!(
            e.to_string(),
            "k: record 2: truncated key: expected 4 bytes, found 2"
        );
    }
}
