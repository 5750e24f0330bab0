//! Workloads: trace readers and seeded synthetic generators, all producing one stream of
//! [`Request`]s. Traces are streamed record by record, never loaded whole; compressed files
//! (`.gz .zst .bz2 .xz`) are decompressed on the fly.

use std::path::PathBuf;

use crate::error::Result;

mod binary;
mod open;
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
pub mod threaded;
pub mod vscsi;

#[cfg(test)]
mod malformed_tests;
#[cfg(test)]
pub(crate) mod real_traces_tests;
#[cfg(test)]
mod sniff_tests;

pub(crate) use open::Keep;
pub use open::{from_bytes, open, open_trace_file, sniff_path};
pub use stats::TraceStats;
pub use text::{Layout, LineFormat, Rec, TextReader, DEVICE_ALIGN_BYTES};

/// Direction of a request.
///
/// A word wide, so that `Request` and `DiskOp` have no padding: copies of them on the hot path
/// then move whole fields, where padding bytes were copied in overlapping pieces whose reloads
/// could not be forwarded from the stores just made (a stall per copy, seen in `perf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u64)]
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
    /// WebSearch-like with temporal locality: a drifting working set, hopping hot spots and
    /// two-rate arrivals (`synth/hotspots.rs`).
    Hotspots(synth::HotspotsSpec),
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
                SynthSpec::WebSearch { .. }
                | SynthSpec::Bursty(_)
                | SynthSpec::Hotspots(_)
                | SynthSpec::Spc1 { .. },
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
