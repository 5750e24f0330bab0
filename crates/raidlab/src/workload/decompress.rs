//! Transparent decompression: gzip, zstd, bzip2 and xz, recognised by magic bytes first and
//! by file extension second (a `.gz` whose bytes are not gzip is reported as such by the
//! decoder rather than silently read as text). All decoders are pure Rust.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use crate::error::{Error, Result};

/// Buffer between the file and a decoder, and between a decoder and a text parser.
pub const BUF_BYTES: usize = 256 * 1024;

/// A compression container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
    Bzip2,
    Xz,
}

impl Compression {
    /// Recognise a container from the first bytes of a file.
    pub fn from_magic(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else if head.starts_with(b"BZh") {
            Compression::Bzip2
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00]) {
            Compression::Xz
        } else {
            Compression::None
        }
    }

    /// Recognise a container from a file name's extension.
    pub fn from_name(name: &str) -> Compression {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".gz") {
            Compression::Gzip
        } else if lower.ends_with(".zst") {
            Compression::Zstd
        } else if lower.ends_with(".bz2") {
            Compression::Bzip2
        } else if lower.ends_with(".xz") {
            Compression::Xz
        } else {
            Compression::None
        }
    }

    /// Magic bytes win; the extension decides only when the bytes carry no known magic.
    pub fn detect(name: &str, head: &[u8]) -> Compression {
        match Compression::from_magic(head) {
            Compression::None => Compression::from_name(name),
            found => found,
        }
    }

    /// The name a trace has once this container's extension is removed (for sniffing).
    pub fn strip_extension(name: &str) -> &str {
        for ext in [".gz", ".zst", ".bz2", ".xz"] {
            if let Some(cut) = name.len().checked_sub(ext.len()) {
                if name.get(cut..).is_some_and(|e| e.eq_ignore_ascii_case(ext)) {
                    return name.get(..cut).unwrap_or(name);
                }
            }
        }
        name
    }
}

/// The decompressed bytes of `input` under `kind`.
pub fn decoder<'a, R: BufRead + Send + 'a>(
    input: R,
    kind: Compression,
) -> io::Result<Box<dyn Read + Send + 'a>> {
    Ok(match kind {
        Compression::None => Box::new(input),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
        Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(input)),
        Compression::Xz => Box::new(lzma_rust2::XzReader::new(input, true)),
        Compression::Zstd => Box::new(ZstdFrames::new(input)?),
    })
}

/// Open `path` and return its decompressed bytes, unbuffered on the output side (binary
/// readers buffer in big chunks themselves; text readers wrap it in a [`BufReader`]).
pub fn open_path(path: &Path) -> Result<Box<dyn Read + Send>> {
    open_path_with(path, BUF_BYTES)
}

/// [`open_path`] with a buffer of `buf_bytes`. An uncompressed input's reads of at least
/// `buf_bytes` go straight to the file once the head is consumed (`BufReader` skips its
/// buffer for them), so a reader with its own chunk of that size copies only the head twice.
pub fn open_path_with(path: &Path, buf_bytes: usize) -> Result<Box<dyn Read + Send>> {
    let label = path.display().to_string();
    let file = File::open(path).map_err(|e| Error::io(&label, &e))?;
    let mut input = BufReader::with_capacity(buf_bytes, file);
    let head = input.fill_buf().map_err(|e| Error::io(&label, &e))?;
    let kind = Compression::detect(&label, head);
    if kind == Compression::None {
        // Skip the decoder layer and the extra buffer copy: the readers buffer themselves.
        return Ok(Box::new(input));
    }
    decoder(input, kind).map_err(|e| Error::Format {
        file: label,
        msg: format!("cannot start {kind:?} decompression: {e}"),
    })
}

/// Open `path` decompressed and buffered for line reading.
pub fn open_buffered(path: &Path) -> Result<BufReader<Box<dyn Read + Send>>> {
    Ok(BufReader::with_capacity(BUF_BYTES, open_path(path)?))
}

/// zstd with any number of concatenated frames (ruzstd's decoder stops after one).
struct ZstdFrames<R: BufRead> {
    dec: Option<ruzstd::decoding::StreamingDecoder<R, ruzstd::decoding::FrameDecoder>>,
}

impl<R: BufRead> ZstdFrames<R> {
    fn new(input: R) -> io::Result<Self> {
        let dec = ruzstd::decoding::StreamingDecoder::new(input).map_err(io::Error::other)?;
        Ok(ZstdFrames { dec: Some(dec) })
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(dec) = self.dec.as_mut() else {
                return Ok(0);
            };
            let n = dec.read(out)?;
            if n > 0 || out.is_empty() {
                return Ok(n);
            }
            // This frame is done: start the next one if more bytes follow.
            let Some(dec) = self.dec.take() else {
                return Ok(0);
            };
            let (mut input, frame) = dec.into_parts();
            if input.fill_buf()?.is_empty() {
                return Ok(0);
            }
            let next = ruzstd::decoding::StreamingDecoder::new_with_decoder(input, frame)
                .map_err(io::Error::other)?;
            self.dec = Some(next);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;

    /// `data` compressed as `kind`, with the same crates the reader uses.
    pub(crate) fn compress(data: &[u8], kind: Compression) -> Vec<u8> {
        match kind {
            Compression::None => data.to_vec(),
            Compression::Gzip => {
                let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                w.write_all(data).unwrap();
                w.finish().unwrap()
            }
            Compression::Bzip2 => {
                let mut w = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
                w.write_all(data).unwrap();
                w.finish().unwrap()
            }
            Compression::Xz => {
                let mut w =
                    lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(1))
                        .unwrap();
                w.write_all(data).unwrap();
                w.finish().unwrap()
            }
            Compression::Zstd => {
                ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
            }
        }
    }

    pub(crate) const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Zstd,
        Compression::Bzip2,
        Compression::Xz,
    ];

    #[test]
    fn round_trips_by_magic() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for kind in ALL {
            let packed = compress(&data, kind);
            assert_eq!(Compression::from_magic(&packed), kind, "{kind:?}");
            let mut out = Vec::new();
            decoder(&packed[..], kind)
                .unwrap()
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, data, "{kind:?}");
        }
    }

    #[test]
    fn concatenated_members_and_frames() {
        for kind in [
            Compression::Gzip,
            Compression::Zstd,
            Compression::Bzip2,
            Compression::Xz,
        ] {
            let mut packed = compress(b"first,", kind);
            packed.extend(compress(b"second", kind));
            let mut out = Vec::new();
            decoder(&packed[..], kind)
                .unwrap()
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, b"first,second", "{kind:?}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(Compression::from_name("a.CSV.GZ"), Compression::Gzip);
        assert_eq!(Compression::detect("a.txt", b"BZh9"), Compression::Bzip2);
        assert_eq!(Compression::detect("a.zst", b"plain"), Compression::Zstd);
        assert_eq!(Compression::strip_extension("w.csv.xz"), "w.csv");
        assert_eq!(Compression::strip_extension("w.csv"), "w.csv");
    }
}
