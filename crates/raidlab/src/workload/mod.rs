//! Workloads: trace readers and seeded synthetic generators, all producing one stream of
//! [`Request`]s. Traces are streamed record by record, never loaded whole; compressed files
//! (`.gz .zst .bz2 .xz`) are decompressed on the fly.

use std::path::PathBuf;

use crate::error::Result;

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
    /// Linux blkparse default text output.
    Blkparse,
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
    },
}

/// Where requests come from.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceSpec {
    Trace { path: PathBuf, format: Format },
    Synthetic(SynthSpec),
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
}

/// Open the workload: the reader or generator, with the `ops` filter and `limit` applied.
pub fn open(spec: &WorkloadSpec) -> Result<Box<dyn RequestSource>> {
    let _ = spec;
    Err(crate::error::Error::config("workload", "not implemented yet"))
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
