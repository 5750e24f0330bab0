//! Workloads: trace readers and seeded synthetic generators, all producing one stream of
//! [`Request`]s. Traces are streamed record by record, never loaded whole; compressed files
//! (`.gz .zst .bz2 .xz`) are decompressed on the fly.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

mod binary;
mod parse;
mod text;

pub mod blkparse;
pub mod cloudphysics;
pub mod csvtrace;
pub mod decompress;
pub mod disksim;
pub mod files;
pub mod keys;
pub mod mqsim;
pub mod msr;
pub mod oracle;
pub mod overlay;
pub mod sniff;
pub mod spc;
pub mod stats;
pub mod synth;
pub mod systor;
pub mod tencent;
pub mod vscsi;

#[cfg(test)]
mod malformed_tests;
#[cfg(test)]
pub(crate) mod real_traces_tests;
#[cfg(test)]
mod sniff_tests;

pub use stats::TraceStats;
pub use text::{Layout, LineFormat, Rec, TextReader, DEVICE_ALIGN_BYTES};

/// Direction of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Read,
    Write,
}

/// How a source addresses data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addressing {
    /// `offset` and `len` are bytes in one flat logical address space (block traces).
    Bytes,
    /// `offset` is an opaque key (object id, block number of a key stream) and `len` the
    /// object's size in bytes, 0 when the format carries none. In block mode a keyed request is
    /// exactly one block whose number is the key.
    Keys,
}

/// One request of a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Arrival time since the start of the trace, in nanoseconds (0 where the format has none).
    pub time_ns: u64,
    pub op: Op,
    /// Byte offset (or key, see [`Addressing`]).
    pub offset: u64,
    /// Length in bytes (or object size, see [`Addressing`]).
    pub len: u64,
}

/// A stream of requests.
pub trait RequestSource {
    /// The next request, `Ok(None)` at the end. A malformed record is an `Err` naming the file
    /// and line (or record); after an error the source is finished.
    fn next_request(&mut self) -> Result<Option<Request>>;
    /// How this source's `offset`/`len` are to be read.
    fn addressing(&self) -> Addressing;
    /// A label for reports: the file name or the generator kind.
    fn label(&self) -> &str;
    /// For a multi-device trace laid out back to back: `(device, base_bytes)` sorted by base,
    /// so a request's device is the last entry whose base is at most its offset. `None` for
    /// single-device sources and for a reader that keeps one device.
    fn device_bases(&self) -> Option<&[(u64, u64)]> {
        None
    }
    /// The driver now offers `iops` (each ramp level, when it starts). A generator whose
    /// streams scale with load (SPC-1's BSUs) adapts; others ignore it.
    fn set_load(&mut self, _iops: f64) -> Result<()> {
        Ok(())
    }
}

/// Trace formats raidlab reads. See `docs/formats.md` for each one's fields and units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Sniff from the first bytes (after decompression) and the file name.
    Auto,
    /// UMass SPC CSV: `ASU,LBA,Size,Opcode,Timestamp`.
    Spc,
    /// MSR Cambridge CSV: `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
    Msr,
    /// libCacheSim oracleGeneral binary (24-byte little-endian records).
    OracleGeneral,
    /// CloudPhysics CSV: `version,time,op,size,lbn`.
    CloudPhysicsCsv,
    /// MQSim text: `arrival_ns device lba_sectors size_sectors type`.
    MqSim,
    /// DiskSim ASCII: `time_ms devno blkno bcount flags`.
    DiskSim,
    /// SNIA SYSTOR'17 CSV: `Timestamp,Response,IOType,LUN,Offset,Size`.
    Systor,
    /// Tencent CBS CSV: `timestamp_s,offset_sectors,size_sectors,type,volume`.
    TencentCbs,
    /// Big-endian u32 keys, 4 bytes a request.
    KeysU32Be,
    /// Little-endian u32 keys, 4 bytes a request.
    KeysU32Le,
    /// Linux blkparse default text output, `Q` (queued) events.
    Blkparse,
    /// Linux blkparse default text output, `D` (dispatched) events.
    BlkparseDispatch,
    /// libCacheSim's `vscsi` binary (VMware vscsiStats, V1 32-byte or V2 40-byte records).
    Vscsi,
    /// libCacheSim's generic CSV reader with its column parameters (`[workload.csv]`).
    Csv(csvtrace::CsvSpec),
}

impl Format {
    /// Every name [`Format::from_name`] accepts, in the canonical spelling.
    pub const NAMES: &'static [&'static str] = &[
        "auto",
        "spc",
        "msr",
        "oracleGeneral",
        "cloudphysics",
        "mqsim",
        "disksim",
        "systor",
        "tencent",
        "keys-u32be",
        "keys-u32le",
        "blkparse",
        "blkparse-d",
        "vscsi",
        "csv",
    ];

    pub(crate) const ALL: [Format; 15] = [
        Format::Auto,
        Format::Spc,
        Format::Msr,
        Format::OracleGeneral,
        Format::CloudPhysicsCsv,
        Format::MqSim,
        Format::DiskSim,
        Format::Systor,
        Format::TencentCbs,
        Format::KeysU32Be,
        Format::KeysU32Le,
        Format::Blkparse,
        Format::BlkparseDispatch,
        Format::Vscsi,
        Format::Csv(csvtrace::CsvSpec::DEFAULT),
    ];

    /// The canonical name (one of [`Format::NAMES`]).
    pub fn name(self) -> &'static str {
        match self {
            Format::Auto => "auto",
            Format::Spc => "spc",
            Format::Msr => "msr",
            Format::OracleGeneral => "oracleGeneral",
            Format::CloudPhysicsCsv => "cloudphysics",
            Format::MqSim => "mqsim",
            Format::DiskSim => "disksim",
            Format::Systor => "systor",
            Format::TencentCbs => "tencent",
            Format::KeysU32Be => "keys-u32be",
            Format::KeysU32Le => "keys-u32le",
            Format::Blkparse => "blkparse",
            Format::BlkparseDispatch => "blkparse-d",
            Format::Vscsi => "vscsi",
            Format::Csv(_) => "csv",
        }
    }

    /// The format called `name`: a canonical name, compared ignoring ASCII case and treating
    /// `_` as `-`. `None` for anything else (the config layer turns that into an error that
    /// lists [`Format::NAMES`]).
    pub fn from_name(name: &str) -> Option<Format> {
        let norm = name.trim().to_ascii_lowercase().replace('_', "-");
        // Short alias used in docs and examples.
        if norm == "oracle" {
            return Some(Format::OracleGeneral);
        }
        Format::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(&norm))
    }

    /// Whether records carry a device number (ASU, disk, LUN, volume) to lay out or select.
    pub fn has_devices(self) -> bool {
        !matches!(
            self,
            Format::Auto
                | Format::OracleGeneral
                | Format::CloudPhysicsCsv
                | Format::KeysU32Be
                | Format::KeysU32Le
                | Format::Vscsi
                | Format::Csv(_)
        )
    }
}

/// Which requests reach the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpsFilter {
    Reads,
    All,
}

/// A seeded synthetic generator.
#[derive(Debug, Clone, PartialEq)]
pub enum SynthSpec {
    /// Zipf(alpha) over `keys` keys, one block each; ranks are scattered over the key space by
    /// a seeded bijection so hot keys do not all land on the first stripes.
    Zipf {
        keys: u64,
        alpha: f64,
        requests: u64,
        seed: u64,
    },
    /// Uniform over `keys` keys.
    Uniform { keys: u64, requests: u64, seed: u64 },
    /// Calibrated to the published UMass WebSearch characteristics (see `synth/websearch.rs`).
    WebSearch {
        /// Logical address space in bytes.
        space_bytes: u64,
        requests: u64,
        /// Mean of the exponential inter-arrival time.
        mean_interarrival_ns: u64,
        seed: u64,
        /// Bytes of one popularity cluster: consecutive Zipf ranks stay together in
        /// clusters of this size (32 KiB, one chunk, scatters every chunk).
        cluster_bytes: u64,
    },
    /// The RAPID-Cache paper's bursty generator with LRU history tables (`synth/bursty.rs`).
    Bursty(synth::BurstySpec),
    /// SPC-1-like (three ASUs, eight streams; see `synth/spc1.rs`), Poisson at `iops`.
    Spc1 {
        /// The full backend in bytes.
        space_bytes: u64,
        /// Use 1/100 of it (the STOW paper's "partial backend").
        partial: bool,
        iops: f64,
        /// IOPS per business scaling unit (one set of the eight streams); 0 = one set.
        bsu_iops: f64,
        requests: u64,
        seed: u64,
    },
}

/// Where requests come from.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceSpec {
    Trace {
        path: PathBuf,
        format: Format,
    },
    Synthetic(SynthSpec),
    /// Several trace or synthetic sources merged by arrival time (`overlay.rs`).
    Overlay(Vec<SourceSpec>),
    /// A file-level workload (`[workload.files]`), replayed through the host model only.
    Files(files::FilesSpec),
}

impl SourceSpec {
    /// Whether the source is known to carry no arrival times (key streams and the zipf and
    /// uniform generators); `false` when it has them or may have them (a sniffed trace).
    pub fn lacks_timestamps(&self) -> bool {
        match self {
            SourceSpec::Synthetic(SynthSpec::Zipf { .. } | SynthSpec::Uniform { .. }) => true,
            SourceSpec::Synthetic(
                SynthSpec::WebSearch { .. } | SynthSpec::Bursty(_) | SynthSpec::Spc1 { .. },
            ) => false,
            SourceSpec::Trace { format, .. } => {
                matches!(format, Format::KeysU32Be | Format::KeysU32Le)
            }
            SourceSpec::Overlay(parts) => parts.iter().any(SourceSpec::lacks_timestamps),
            SourceSpec::Files(f) => !matches!(f.kind, files::FilesKind::WebLog { .. }),
        }
    }
}

/// The `[workload]` table, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    pub source: SourceSpec,
    pub ops: OpsFilter,
    /// Stop after this many requests (counted after the `ops` filter).
    pub limit: Option<u64>,
    /// Cache block size in bytes (power of two, >= 512).
    pub block_size: u32,
    /// For multi-device traces: keep only this device's requests, at the device's own
    /// offsets. `None` lays all devices back to back (see `docs/formats.md`).
    pub device: Option<u64>,
    /// Split requests into every block they touch (`true`, the default), or count each
    /// request as one access to its first block (libCacheSim's one-key-per-request reading of
    /// block traces).
    pub split: bool,
}

impl WorkloadSpec {
    /// The cache blocks request `req` accesses: [`block_span`], or its first block alone when
    /// `split` is off.
    #[inline]
    pub fn span(&self, req: &Request, addressing: Addressing) -> (u64, u64) {
        let (first, count) = block_span(req, addressing, self.block_size);
        (first, if self.split { count } else { 1 })
    }
}

/// Open the workload: the reader or generator, with the `ops` filter and `limit` applied.
pub fn open(spec: &WorkloadSpec) -> Result<Box<dyn RequestSource>> {
    let keep = Keep::of(spec);
    match &spec.source {
        SourceSpec::Overlay(parts) => {
            let parts = parts
                .iter()
                .map(|p| open_source(p, spec.device, Keep::ALL))
                .collect::<Result<Vec<_>>>()?;
            Ok(keep.apply(overlay::Overlay::new(parts)?))
        }
        one => open_source(one, spec.device, keep),
    }
}

/// Open one trace or generator (an overlay's parts are opened one by one).
fn open_source(
    source: &SourceSpec,
    device: Option<u64>,
    keep: Keep,
) -> Result<Box<dyn RequestSource>> {
    match source {
        SourceSpec::Trace { path, format } => open_trace(path, *format, device, keep),
        SourceSpec::Synthetic(synth) => {
            if device.is_some() {
                return Err(Error::config(
                    "workload.device",
                    "a synthetic workload has no devices to select from",
                ));
            }
            synth::open(synth, keep)
        }
        SourceSpec::Overlay(_) => Err(Error::config(
            "workload.overlay",
            "an overlay part cannot itself be an overlay",
        )),
        SourceSpec::Files(_) => Err(Error::config(
            "workload.files",
            "a file-level workload is replayed through a host file system: add a [host] table",
        )),
    }
}

/// Open the trace at `path` (decompressing transparently, sniffing when `format` is
/// [`Format::Auto`]). No `ops` filter or limit.
pub fn open_trace_file(
    path: &Path,
    format: Format,
    device: Option<u64>,
) -> Result<Box<dyn RequestSource>> {
    open_trace(path, format, device, Keep::ALL)
}

/// The format of the trace at `path`: sniffed from its first [`sniff::SNIFF_BYTES`]
/// decompressed bytes and its name.
pub fn sniff_path(path: &Path) -> Result<Format> {
    let label = path.display().to_string();
    let mut head = Vec::with_capacity(sniff::SNIFF_BYTES);
    decompress::open_path(path)?
        .take(sniff::SNIFF_BYTES as u64 + 1)
        .read_to_end(&mut head)
        .map_err(|e| Error::io(&label, &e))?;
    let complete = head.len() <= sniff::SNIFF_BYTES;
    head.truncate(sniff::SNIFF_BYTES);
    let name = decompress::Compression::strip_extension(&label);
    sniff::sniff(name, &head, complete).map_err(|e| match e {
        Error::Format { msg, .. } => Error::Format { file: label, msg },
        other => other,
    })
}

/// A reader over in-memory, uncompressed trace bytes (tests, fuzzing, embedding). `label`
/// names the data in errors and is the file name for sniffing.
pub fn from_bytes<'a>(
    format: Format,
    label: &str,
    bytes: &'a [u8],
    device: Option<u64>,
) -> Result<Box<dyn RequestSource + 'a>> {
    let format = match format {
        Format::Auto => sniff::sniff(
            label,
            bytes.get(..sniff::SNIFF_BYTES).unwrap_or(bytes),
            bytes.len() <= sniff::SNIFF_BYTES,
        )?,
        f => f,
    };
    build(format, label, device, || Ok(bytes), Keep::ALL)
}

fn open_trace(
    path: &Path,
    format: Format,
    device: Option<u64>,
    keep: Keep,
) -> Result<Box<dyn RequestSource>> {
    let format = match format {
        Format::Auto => sniff_path(path)?,
        f => f,
    };
    let label = path.display().to_string();
    build(format, &label, device, || decompress::open_path(path), keep)
}

/// The reader for `format`, whose input `reopen` yields (twice for multi-device text
/// formats: once for the layout pre-pass, once to read).
fn build<'a, R: Read + Send + 'a>(
    format: Format,
    label: &str,
    device: Option<u64>,
    mut reopen: impl FnMut() -> Result<R>,
    keep: Keep,
) -> Result<Box<dyn RequestSource + 'a>> {
    let no_devices = |device: Option<u64>| match device {
        None => Ok(()),
        Some(_) => Err(Error::config(
            "workload.device",
            format!(
                "trace format `{}` has no device numbers to select from",
                format.name()
            ),
        )),
    };
    match format {
        Format::Spc => text_source(spc::Spc, label, device, reopen, keep),
        Format::Msr => text_source(msr::Msr, label, device, reopen, keep),
        Format::CloudPhysicsCsv => {
            text_source(cloudphysics::CloudPhysics, label, device, reopen, keep)
        }
        Format::MqSim => text_source(mqsim::MqSim, label, device, reopen, keep),
        Format::DiskSim => text_source(disksim::DiskSim, label, device, reopen, keep),
        Format::Systor => text_source(systor::Systor, label, device, reopen, keep),
        Format::TencentCbs => text_source(tencent::TencentCbs, label, device, reopen, keep),
        Format::Blkparse => text_source(blkparse::Blkparse::queue(), label, device, reopen, keep),
        Format::BlkparseDispatch => {
            text_source(blkparse::Blkparse::dispatch(), label, device, reopen, keep)
        }
        Format::OracleGeneral => {
            no_devices(device)?;
            Ok(keep.apply(oracle::OracleReader::new(reopen()?, label)))
        }
        Format::Csv(spec) => {
            no_devices(device)?;
            text_source(spec, label, None, reopen, keep)
        }
        Format::Vscsi => {
            no_devices(device)?;
            Ok(keep.apply(vscsi::VscsiReader::new(reopen()?, label)?))
        }
        Format::KeysU32Be => {
            no_devices(device)?;
            Ok(keep.apply(keys::KeysReader::new(reopen()?, keys::Endian::Big, label)))
        }
        Format::KeysU32Le => {
            no_devices(device)?;
            Ok(keep.apply(keys::KeysReader::new(
                reopen()?,
                keys::Endian::Little,
                label,
            )))
        }
        Format::Auto => Err(Error::Format {
            file: label.to_string(),
            msg: "format `auto` must be resolved by sniffing before a reader is built".to_string(),
        }),
    }
}

fn text_source<'a, R: Read + Send + 'a, F: text::LineFormat + 'a>(
    fmt: F,
    label: &str,
    device: Option<u64>,
    mut reopen: impl FnMut() -> Result<R>,
    keep: Keep,
) -> Result<Box<dyn RequestSource + 'a>> {
    let buffered = |r: R| BufReader::with_capacity(decompress::BUF_BYTES, r);
    let layout = text::layout_for::<F>(device, || {
        text::scan_layout(buffered(reopen()?), &fmt, label)
    })?;
    let reader = TextReader::new(buffered(reopen()?), fmt, label, layout);
    Ok(keep.apply(reader))
}

/// The `ops` filter and `limit`, applied around a source.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keep {
    reads_only: bool,
    limit: Option<u64>,
}

impl Keep {
    pub(crate) const ALL: Keep = Keep {
        reads_only: false,
        limit: None,
    };

    fn of(spec: &WorkloadSpec) -> Keep {
        Keep {
            reads_only: spec.ops == OpsFilter::Reads,
            limit: spec.limit,
        }
    }

    /// Box `source`, wrapped only when something is filtered, so the plain case costs one
    /// virtual call per request.
    pub(crate) fn apply<'a, S: RequestSource + 'a>(self, source: S) -> Box<dyn RequestSource + 'a> {
        if !self.reads_only && self.limit.is_none() {
            return Box::new(source);
        }
        Box::new(Kept {
            inner: source,
            reads_only: self.reads_only,
            left: self.limit.unwrap_or(u64::MAX),
        })
    }
}

struct Kept<S> {
    inner: S,
    reads_only: bool,
    /// Requests still to hand out (after filtering).
    left: u64,
}

impl<S: RequestSource> RequestSource for Kept<S> {
    #[inline]
    fn next_request(&mut self) -> Result<Option<Request>> {
        if self.left == 0 {
            return Ok(None);
        }
        while let Some(req) = self.inner.next_request()? {
            if self.reads_only && req.op == Op::Write {
                continue;
            }
            self.left -= 1;
            return Ok(Some(req));
        }
        self.left = 0;
        Ok(None)
    }

    fn addressing(&self) -> Addressing {
        self.inner.addressing()
    }

    fn label(&self) -> &str {
        self.inner.label()
    }

    fn set_load(&mut self, iops: f64) -> Result<()> {
        self.inner.set_load(iops)
    }

    fn device_bases(&self) -> Option<&[(u64, u64)]> {
        self.inner.device_bases()
    }
}

/// The cache blocks a request touches: `(first_block, count)`. A zero-length byte request
/// touches one block (its offset's); a keyed request is the one block numbered by its key.
#[inline]
pub fn block_span(req: &Request, addressing: Addressing, block_size: u32) -> (u64, u64) {
    debug_assert!(block_size.is_power_of_two());
    match addressing {
        Addressing::Keys => (req.offset, 1),
        Addressing::Bytes => {
            let shift = block_size.trailing_zeros();
            let first = req.offset >> shift;
            let end = req.offset.saturating_add(req.len.max(1) - 1) >> shift;
            (first, end - first + 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_split_at_block_boundaries() {
        let r = |offset, len| Request {
            time_ns: 0,
            op: Op::Read,
            offset,
            len,
        };
        // 8 KiB starting mid-block touches three 4 KiB blocks: 0..4096 part, 1, 2 part.
        assert_eq!(block_span(&r(2048, 8192), Addressing::Bytes, 4096), (0, 3));
        assert_eq!(block_span(&r(4096, 4096), Addressing::Bytes, 4096), (1, 1));
        assert_eq!(block_span(&r(4095, 0), Addressing::Bytes, 4096), (0, 1));
        assert_eq!(block_span(&r(77, 9999), Addressing::Keys, 4096), (77, 1));
    }
}
