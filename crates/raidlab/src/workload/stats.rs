//! Streaming summary of a request stream, for `raidlab trace stats FILE`.
//!
//! One pass, memory proportional to the footprint (a set of the distinct blocks touched).
//!
//! The footprint has the definition the simulator uses (`capacity_fraction`): the distinct
//! blocks of `block_size` bytes that requests touch, and in bytes those blocks times
//! `block_size` (so it can exceed `total_bytes` when requests are smaller than a block or
//! straddle blocks). For keyed sources a "block" is a key, and its bytes add each distinct
//! key's size the first time it is seen (object mode's definition). Key streams without
//! sizes (`len = 0` throughout) have no byte figures: `total_bytes`, `footprint_bytes` and the
//! size histogram are absent from their JSON rather than made up.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use super::{block_span, Addressing, Op, Request, RequestSource};
use crate::error::Result;

/// Summary of a workload. Plain data: the CLI prints it, the Python layer converts it.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceStats {
    pub addressing: Addressing,
    /// Cache block size the footprint is counted in.
    pub block_size: u32,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    /// `reads / requests`, 0 when there are no requests.
    pub read_share: f64,
    /// Distinct blocks (keys, for keyed sources) touched.
    pub unique_blocks: u64,
    /// Bytes of those blocks (see the module doc for keyed sources).
    pub footprint_bytes: u64,
    /// Sum of request lengths.
    pub total_bytes: u64,
    /// `size_hist[i]` counts requests with `2^(i-1) < len <= 2^i` bytes (`size_hist[0]`:
    /// `len <= 1`, which includes zero-length requests). 65 buckets cover every `u64`.
    pub size_hist: Vec<u64>,
    pub first_time_ns: Option<u64>,
    pub last_time_ns: Option<u64>,
    /// `last - first` arrival, 0 when there are fewer than two requests.
    pub span_ns: u64,
    /// Requests with a length (`len > 0`).
    pub sized_requests: u64,
    /// Per-device counts of a multi-device trace read whole (all devices laid back to back),
    /// in ascending device number; empty otherwise.
    pub devices: Vec<DeviceCount>,
}

/// One device's share of a multi-device trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceCount {
    /// The device number as the trace writes it (ASU, disk, LUN, volume; `maj << 32 | min`
    /// for blkparse).
    pub device: u64,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    /// Sum of its request lengths.
    pub bytes: u64,
}

/// A fast, deterministic hasher for block numbers (Fx-style multiply-rotate); block numbers
/// are not attacker-chosen in a way that matters for a statistics pass.
#[derive(Default)]
pub struct BlockHasher(u64);

/// A set of block numbers with [`BlockHasher`].
pub type BlockSet = HashSet<u64, BuildHasherDefault<BlockHasher>>;

impl Hasher for BlockHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Builds a [`TraceStats`] one request at a time.
pub struct StatsBuilder {
    stats: TraceStats,
    seen: BlockSet,
}

impl StatsBuilder {
    /// `block_size` must be a power of two (it is validated by the config layer).
    pub fn new(addressing: Addressing, block_size: u32) -> StatsBuilder {
        StatsBuilder {
            stats: TraceStats {
                addressing,
                block_size,
                requests: 0,
                reads: 0,
                writes: 0,
                read_share: 0.0,
                unique_blocks: 0,
                footprint_bytes: 0,
                total_bytes: 0,
                size_hist: vec![0; 65],
                first_time_ns: None,
                last_time_ns: None,
                span_ns: 0,
                sized_requests: 0,
                devices: Vec::new(),
            },
            seen: HashSet::default(),
        }
    }

    /// Account for one request.
    pub fn add(&mut self, req: &Request) {
        let s = &mut self.stats;
        s.requests += 1;
        match req.op {
            Op::Read => s.reads += 1,
            Op::Write => s.writes += 1,
        }
        s.total_bytes = s.total_bytes.saturating_add(req.len);
        s.sized_requests += u64::from(req.len > 0);
        // Bucket i holds lengths in (2^(i-1), 2^i]: the bit length of len - 1.
        let bucket = (64 - req.len.saturating_sub(1).leading_zeros()) as usize;
        if let Some(c) = s.size_hist.get_mut(bucket) {
            *c += 1;
        }
        s.first_time_ns.get_or_insert(req.time_ns);
        s.last_time_ns = Some(req.time_ns);
        let (first, count) = block_span(req, s.addressing, s.block_size);
        for block in first..first.saturating_add(count) {
            if self.seen.insert(block) {
                s.unique_blocks += 1;
                let bytes = match (s.addressing, req.len) {
                    (Addressing::Keys, len) if len > 0 => len,
                    _ => u64::from(s.block_size),
                };
                s.footprint_bytes = s.footprint_bytes.saturating_add(bytes);
            }
        }
    }

    /// The summary so far.
    pub fn finish(mut self) -> TraceStats {
        let s = &mut self.stats;
        if s.requests > 0 {
            s.read_share = s.reads as f64 / s.requests as f64;
        }
        if let (Some(a), Some(b)) = (s.first_time_ns, s.last_time_ns) {
            s.span_ns = b.saturating_sub(a);
        }
        self.stats
    }
}

impl TraceStats {
    /// Drain `source` and summarise it in blocks of `block_size` bytes.
    pub fn compute(source: &mut dyn RequestSource, block_size: u32) -> Result<TraceStats> {
        TraceStats::compute_limit(source, block_size, None)
    }

    /// [`TraceStats::compute`] over the first `limit` requests only (all if `None`).
    pub fn compute_limit(
        source: &mut dyn RequestSource,
        block_size: u32,
        limit: Option<u64>,
    ) -> Result<TraceStats> {
        let mut b = StatsBuilder::new(source.addressing(), block_size);
        let mut left = limit.unwrap_or(u64::MAX);
        // The layout is fixed by the reader's pre-pass, before the first request; a copy
        // frees `source` for the loop.
        let bases: Vec<(u64, u64)> = source.device_bases().unwrap_or_default().to_vec();
        let mut devices: Vec<DeviceCount> = bases
            .iter()
            .map(|&(device, _)| DeviceCount {
                device,
                requests: 0,
                reads: 0,
                writes: 0,
                bytes: 0,
            })
            .collect();
        while left > 0 {
            let Some(req) = source.next_request()? else {
                break;
            };
            b.add(&req);
            left -= 1;
            // Bases ascend, so the request's device is the last one starting at or before it.
            let at = bases.partition_point(|&(_, base)| base <= req.offset);
            if let Some(d) = at.checked_sub(1).and_then(|i| devices.get_mut(i)) {
                d.requests += 1;
                match req.op {
                    Op::Read => d.reads += 1,
                    Op::Write => d.writes += 1,
                }
                d.bytes = d.bytes.saturating_add(req.len);
            }
        }
        let mut stats = b.finish();
        stats.devices = devices;
        Ok(stats)
    }

    /// Whether the requests carry sizes (byte-addressed traces always do; key streams may
    /// not).
    pub fn sized(&self) -> bool {
        self.addressing == Addressing::Bytes || self.sized_requests > 0
    }

    /// The non-empty histogram buckets as `(upper_bound_bytes, count)`; the last bucket's
    /// bound saturates at `u64::MAX`.
    pub fn size_buckets(&self) -> Vec<(u64, u64)> {
        self.size_hist
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(|(i, &c)| (1u64.checked_shl(i as u32).unwrap_or(u64::MAX), c))
            .collect()
    }
}

/// `raidlab trace stats`: sniff (for `"auto"`) and summarise the trace at `path`. Returns the
/// format actually read with the summary.
pub fn file_stats(
    path: &std::path::Path,
    format: &str,
    block_size: u32,
) -> Result<(super::Format, TraceStats)> {
    file_stats_of(path, format, block_size, None, None)
}

/// [`file_stats`] of the first `limit` requests of one `device` (both optional).
pub fn file_stats_of(
    path: &std::path::Path,
    format: &str,
    block_size: u32,
    limit: Option<u64>,
    device: Option<u64>,
) -> Result<(super::Format, TraceStats)> {
    use crate::error::Error;
    let fmt = super::Format::from_name(format).ok_or_else(|| {
        Error::config(
            "format",
            format!("expected one of {:?}, got {format:?}", super::Format::NAMES),
        )
    })?;
    if !block_size.is_power_of_two() || block_size < 512 {
        return Err(Error::config(
            "block_size",
            format!("expected a power of two >= 512, got {block_size}"),
        ));
    }
    let fmt = match fmt {
        super::Format::Auto => super::sniff_path(path)?,
        f => f,
    };
    if device.is_some() && !fmt.has_devices() {
        return Err(Error::config(
            "device",
            format!("format {} has no devices to select from", fmt.name()),
        ));
    }
    let mut src = super::open_trace_file(path, fmt, device)?;
    Ok((
        fmt,
        TraceStats::compute_limit(src.as_mut(), block_size, limit)?,
    ))
}

impl TraceStats {
    /// A flat JSON record (times in seconds, histogram as `[upper_bound_bytes, count]` pairs).
    pub fn to_json(&self) -> serde_json::Value {
        let secs = |ns: Option<u64>| ns.map(|t| t as f64 / 1e9);
        let sized = self.sized();
        let bytes = |b: u64| if sized { Some(b) } else { None };
        serde_json::json!({
            "addressing": match self.addressing {
                Addressing::Bytes => "bytes",
                Addressing::Keys => "keys",
            },
            "requests": self.requests,
            "reads": self.reads,
            "writes": self.writes,
            "read_share": self.read_share,
            "block_size": self.block_size,
            "footprint_blocks": self.unique_blocks,
            "footprint_bytes": bytes(self.footprint_bytes),
            "total_bytes": bytes(self.total_bytes),
            "sized": sized,
            "first_time_s": secs(self.first_time_ns),
            "last_time_s": secs(self.last_time_ns),
            "span_s": self.span_ns as f64 / 1e9,
            "size_histogram": if sized { self.size_buckets() } else { Vec::new() },
            "devices": self.devices.iter().map(|d| serde_json::json!({
                "device": d.device,
                "requests": d.requests,
                "reads": d.reads,
                "writes": d.writes,
                "bytes": d.bytes,
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(time_ns: u64, op: Op, offset: u64, len: u64) -> Request {
        Request {
            time_ns,
            op,
            offset,
            len,
        }
    }

    #[test]
    fn worked_example_bytes() {
        let mut b = StatsBuilder::new(Addressing::Bytes, 4096);
        b.add(&req(10, Op::Read, 0, 8192)); // blocks 0, 1
        b.add(&req(20, Op::Write, 4096, 4096)); // block 1 again
        b.add(&req(50, Op::Read, 2048, 512)); // block 0 again
        b.add(&req(70, Op::Read, 1 << 20, 0)); // block 256
        let s = b.finish();
        assert_eq!((s.requests, s.reads, s.writes), (4, 3, 1));
        assert_eq!(s.read_share, 0.75);
        assert_eq!((s.unique_blocks, s.footprint_bytes), (3, 3 * 4096));
        assert_eq!(s.total_bytes, 8192 + 4096 + 512);
        assert_eq!(
            s.size_buckets(),
            vec![(1, 1), (512, 1), (4096, 1), (8192, 1)]
        );
        assert_eq!(
            (s.first_time_ns, s.last_time_ns, s.span_ns),
            (Some(10), Some(70), 60)
        );
    }

    #[test]
    fn worked_example_keys() {
        let mut b = StatsBuilder::new(Addressing::Keys, 4096);
        b.add(&req(0, Op::Read, 7, 100));
        b.add(&req(0, Op::Read, 7, 100));
        b.add(&req(0, Op::Read, 9, 0));
        let s = b.finish();
        assert_eq!((s.unique_blocks, s.footprint_bytes), (2, 100 + 4096));
        let empty = StatsBuilder::new(Addressing::Keys, 4096).finish();
        assert_eq!(
            (empty.requests, empty.read_share, empty.span_ns),
            (0, 0.0, 0)
        );
    }

    #[test]
    fn per_device_counts_of_a_multi_device_trace() {
        // Two MSR disks, listed out of order; disk 2's offsets lie past disk 0's footprint.
        let csv = b"100,h,2,Read,0,4096,1\n\
                    200,h,0,Write,8192,512,1\n\
                    300,h,2,Write,4096,4096,1\n\
                    400,h,2,Read,1048576,8192,1\n";
        let mut src = super::super::from_bytes(super::super::Format::Msr, "t.csv", csv, None)
            .expect("valid trace");
        let s = TraceStats::compute(src.as_mut(), 4096).expect("reads");
        let dc = |device, requests, reads, writes, bytes| DeviceCount {
            device,
            requests,
            reads,
            writes,
            bytes,
        };
        assert_eq!(s.devices, vec![dc(0, 1, 0, 1, 512), dc(2, 3, 2, 1, 16384)]);
        // One device selected: its own offsets, no per-device split.
        let mut one = super::super::from_bytes(super::super::Format::Msr, "t.csv", csv, Some(2))
            .expect("valid trace");
        let s = TraceStats::compute(one.as_mut(), 4096).expect("reads");
        assert_eq!((s.requests, s.devices.len()), (3, 0));
    }
}
