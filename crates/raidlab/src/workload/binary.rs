//! Fixed-size binary records read in big chunks: one `read` per few hundred KiB and a copy of
//! one record per request, so the binary readers run at memory speed rather than at the
//! speed of per-record virtual calls into a `BufRead`.

use std::io::{ErrorKind, Read};

use crate::error::{Error, Result};

/// Size of the chunk buffer. Large enough that syscalls and decompressor calls amortise, and
/// twice the `BufReader` an uncompressed file is opened with (`decompress::open_path`): a
/// refill asks for more than that reader buffers (the chunk less a partial record), so the
/// reader passes it straight to the file instead of copying every byte through its buffer.
pub(crate) const CHUNK_BYTES: usize = 2 * super::decompress::BUF_BYTES;

/// What the next fixed-size record is.
pub(crate) enum Next<const N: usize> {
    Record([u8; N]),
    /// Clean end of input.
    End,
    /// The input ended inside a record, after this many bytes of it.
    Truncated(usize),
}

/// A chunked reader of `N`-byte records.
pub(crate) struct Records<R> {
    input: R,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    eof: bool,
    /// Records handed out (1-based number of the last one), for error messages.
    record_no: u64,
    /// Set after the end or an error: the stream yields nothing more.
    done: bool,
}

impl<R: Read> Records<R> {
    pub(crate) fn new(input: R) -> Self {
        Records::with_chunk(input, CHUNK_BYTES)
    }

    /// A reader whose chunk buffer holds `bytes` (at least one record of any reader, at
    /// most [`CHUNK_BYTES`]). A reader straight over a file (no `BufReader` to bypass) keeps
    /// its chunk small so that it stays in the CPU cache with the caller's data.
    pub(crate) fn with_chunk(input: R, bytes: usize) -> Self {
        assert!((64..=CHUNK_BYTES).contains(&bytes));
        Records {
            input,
            buf: vec![0u8; bytes].into_boxed_slice(),
            pos: 0,
            end: 0,
            eof: false,
            record_no: 0,
            done: false,
        }
    }

    /// The next record for a [`RequestSource`](super::RequestSource): `Ok(None)` at a clean
    /// end; a record cut short by the end of input (`what` names it in the message) or an I/O
    /// error is an error naming `label` and the record number. After either, the stream stays
    /// finished.
    #[inline]
    pub(crate) fn record<const N: usize>(
        &mut self,
        label: &str,
        what: &str,
    ) -> Result<Option<[u8; N]>> {
        if self.done {
            return Ok(None);
        }
        self.record_no += 1;
        let next = self.next::<N>();
        if !matches!(next, Ok(Next::Record(_))) {
            self.done = true;
        }
        match next {
            Ok(Next::Record(rec)) => Ok(Some(rec)),
            Ok(Next::End) => Ok(None),
            Ok(Next::Truncated(n)) => Err(Error::trace_record(
                label,
                self.record_no,
                format!("truncated {what}: expected {N} bytes, found {n}"),
            )),
            Err(e) => Err(Error::io(label, &e)),
        }
    }

    /// 1-based number of the last record handed out.
    pub(crate) fn record_no(&self) -> u64 {
        self.record_no
    }

    /// The whole `N`-byte records buffered, refilling first when none is: a non-empty slice
    /// of a multiple of `N` bytes, or `Ok(None)` at a clean end. Nothing is handed out until
    /// [`Records::consume`] says how many of them the caller took, so a batch reader decodes
    /// in place, with no copy per record. A record cut short by the end of input or an I/O
    /// error is an error as in [`Records::record`], and the stream stays finished.
    #[inline]
    pub(crate) fn buffered<const N: usize>(
        &mut self,
        label: &str,
        what: &str,
    ) -> Result<Option<&[u8]>> {
        debug_assert!(N > 0 && N <= self.buf.len());
        if self.done {
            return Ok(None);
        }
        if self.end - self.pos < N {
            if let Err(e) = self.refill(N) {
                self.done = true;
                return Err(Error::io(label, &e));
            }
            let left = self.end - self.pos;
            if left == 0 {
                self.done = true;
                return Ok(None);
            }
            if left < N {
                self.done = true;
                self.pos = self.end;
                return Err(Error::trace_record(
                    label,
                    self.record_no + 1,
                    format!("truncated {what}: expected {N} bytes, found {left}"),
                ));
            }
        }
        let whole = (self.end - self.pos) / N * N;
        debug_assert!(whole >= N);
        Ok(Some(&self.buf[self.pos..self.pos + whole]))
    }

    /// Hand out the first `records` records of the last [`Records::buffered`] slice.
    #[inline]
    pub(crate) fn consume<const N: usize>(&mut self, records: usize) {
        let bytes = records * N;
        assert!(
            bytes <= self.end - self.pos,
            "consuming records not buffered"
        );
        self.pos += bytes;
        self.record_no += records as u64;
    }

    /// The next record.
    #[inline]
    pub(crate) fn next<const N: usize>(&mut self) -> std::io::Result<Next<N>> {
        debug_assert!(N > 0 && N <= self.buf.len());
        debug_assert!(self.pos <= self.end && self.end <= self.buf.len());
        if let Some(rec) = self.buf.get(self.pos..self.pos + N) {
            if self.pos + N <= self.end {
                let mut out = [0u8; N];
                out.copy_from_slice(rec);
                self.pos += N;
                return Ok(Next::Record(out));
            }
        }
        self.refill(N)?;
        match self.buf.get(self.pos..self.pos + N) {
            Some(rec) if self.pos + N <= self.end => {
                let mut out = [0u8; N];
                out.copy_from_slice(rec);
                self.pos += N;
                Ok(Next::Record(out))
            }
            _ if self.end == self.pos => Ok(Next::End),
            _ => {
                let partial = self.end - self.pos;
                self.pos = self.end;
                Ok(Next::Truncated(partial))
            }
        }
    }

    /// Move the unread tail to the front and read until at least `want` bytes are buffered
    /// or the input ends.
    #[cold]
    fn refill(&mut self, want: usize) -> std::io::Result<()> {
        self.buf.copy_within(self.pos..self.end, 0);
        self.end -= self.pos;
        self.pos = 0;
        while !self.eof && self.end < want {
            let Some(space) = self.buf.get_mut(self.end..) else {
                break;
            };
            match self.input.read(space) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n.min(space.len()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out one byte per call, to exercise records split across reads.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            match (self.0.split_first(), out.first_mut()) {
                (Some((&b, rest)), Some(slot)) => {
                    *slot = b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn records_survive_short_reads_and_report_truncation() {
        let data = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        let mut r = Records::new(Trickle(&data));
        assert!(matches!(r.next::<4>().unwrap(), Next::Record([1, 2, 3, 4])));
        assert!(matches!(r.next::<4>().unwrap(), Next::Record([5, 6, 7, 8])));
        assert!(matches!(r.next::<4>().unwrap(), Next::Truncated(2)));
        assert!(matches!(r.next::<4>().unwrap(), Next::End));
    }
}
