//! `raidlab replay URI WORKLOAD`: a trace or generator replayed against a served export —
//! timed mode's counterpart on real bytes.
//!
//! Each request becomes the block-aligned byte span counting mode splits it into
//! (`WorkloadSpec::span`), so with one request in flight the server's read cache sees the
//! very block sequence counting mode's does. Spans past the export's end wrap around (modulo
//! its size, in whole blocks); spans above the NBD maximum are sent in pieces. Writes carry
//! deterministic bytes. Requests go as fast as possible at a queue depth, or at the trace's
//! timestamps scaled by a factor (open loop, still at most `qd` in flight).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use raidlab::config::Experiment;
use raidlab::workload::{self, Op};
use raidlab::{Error, Result};
use serde_json::{json, Value};

use crate::nbd::Client;

/// The deepest queue replay keeps (the server serves 64 in flight per connection).
pub const QD_MAX: u32 = 64;

#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    pub qd: u32,
    /// `None`: as fast as possible; `Some(s)`: issue at trace time x `s`.
    pub time_scale: Option<f64>,
    /// Stop after this many requests.
    pub requests_max: Option<u64>,
}

struct Lat {
    hist: hdrhistogram::Histogram<u64>,
}

impl Lat {
    fn new() -> Lat {
        // 1 us .. 100 s at 3 significant digits; values are clamped into range.
        Lat {
            hist: hdrhistogram::Histogram::new_with_bounds(1_000, 100_000_000_000, 3)
                .expect("valid bounds"),
        }
    }
    fn record(&mut self, ns: u64) {
        let _ = self.hist.record(ns.clamp(1_000, 100_000_000_000));
    }
    fn json(&self) -> Value {
        let ms = |q: f64| self.hist.value_at_quantile(q) as f64 / 1e6;
        if self.hist.is_empty() {
            return json!(null);
        }
        json!({
            "mean_ms": self.hist.mean() / 1e6,
            "p50_ms": ms(0.5),
            "p90_ms": ms(0.9),
            "p99_ms": ms(0.99),
            "p999_ms": ms(0.999),
            "max_ms": self.hist.max() as f64 / 1e6,
        })
    }
}

/// Deterministic bytes for a write (a xorshift stream from `seed`), shared with
/// `replay --schedule`.
pub(crate) fn fill(buf: &mut [u8], seed: u64) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
}

/// Replay `exp`'s workload against `uri`; returns the report as JSON.
pub fn replay(uri: &str, exp: &Experiment, opts: &ReplayOptions) -> Result<Value> {
    if opts.qd == 0 || opts.qd > QD_MAX {
        return Err(Error::config(
            "--qd",
            format!("expected 1 to {QD_MAX}, got {}", opts.qd),
        ));
    }
    if let Some(s) = opts.time_scale {
        if !(s.is_finite() && s > 0.0) {
            return Err(Error::config(
                "--timestamps",
                format!("expected a scale > 0, got {s}"),
            ));
        }
    }
    let io = |e: std::io::Error| Error::store(uri.to_string(), e.to_string());
    let mut client = Client::connect(uri).map_err(io)?;
    let size = client.size_bytes();
    let bs = u64::from(exp.workload.block_size);
    let max_piece = u64::from(client.block_size().maximum).clamp(bs, 32 << 20) / bs * bs;
    let blocks = size / bs;
    if blocks == 0 {
        return Err(Error::store(
            uri.to_string(),
            format!("the export ({size} bytes) is smaller than one {bs}-byte block"),
        ));
    }
    let mut src = workload::open(&exp.workload)?;
    let addressing = src.addressing();
    let mut payload = vec![0u8; max_piece as usize];
    // Handle -> (issue time, is_read, bytes) of each piece in flight.
    let mut inflight: HashMap<u64, (Instant, bool, u64)> =
        HashMap::with_capacity(opts.qd as usize * 2);
    let (mut lat_r, mut lat_w) = (Lat::new(), Lat::new());
    let (mut reads, mut writes, mut bytes_r, mut bytes_w, mut errors, mut late) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut requests = 0u64;
    let started = Instant::now();
    let mut complete_one =
        |client: &mut Client, inflight: &mut HashMap<u64, (Instant, bool, u64)>| -> Result<()> {
            let c = client.wait_any().map_err(io)?;
            if let Some((t, is_read, _)) = inflight.remove(&c.handle) {
                let ns = t.elapsed().as_nanos() as u64;
                if is_read {
                    lat_r.record(ns);
                } else {
                    lat_w.record(ns);
                }
            }
            if c.result.is_err() {
                errors += 1;
            }
            Ok(())
        };
    while let Some(req) = src.next_request()? {
        if opts.requests_max.is_some_and(|m| requests >= m) {
            break;
        }
        requests += 1;
        if let Some(scale) = opts.time_scale {
            let due = Duration::from_nanos((req.time_ns as f64 * scale) as u64);
            let now = started.elapsed();
            if due > now {
                std::thread::sleep(due - now);
            } else if now - due > Duration::from_millis(1) {
                late += 1;
            }
        }
        let (first, count) = exp.workload.span(&req, addressing);
        let is_read = req.op == Op::Read;
        let mut block = first % blocks;
        let mut left = count;
        // Bounded: every piece sends at least one block.
        while left > 0 {
            let n = left.min(blocks - block).min(max_piece / bs);
            let (off, len) = (block * bs, n * bs);
            while inflight.len() >= opts.qd as usize {
                complete_one(&mut client, &mut inflight)?;
            }
            let h = if is_read {
                reads += 1;
                bytes_r += len;
                client.submit_read(off, len as u32).map_err(io)?
            } else {
                writes += 1;
                bytes_w += len;
                fill(&mut payload[..len as usize], requests ^ block);
                client
                    .submit_write(off, &payload[..len as usize], false)
                    .map_err(io)?
            };
            inflight.insert(h, (Instant::now(), is_read, len));
            left -= n;
            block = (block + n) % blocks;
        }
    }
    while !inflight.is_empty() {
        complete_one(&mut client, &mut inflight)?;
    }
    let elapsed_s = started.elapsed().as_secs_f64().max(1e-9);
    let _ = client.disconnect();
    let ops = reads + writes;
    Ok(json!({
        "uri": uri,
        "workload": exp.name,
        "qd": opts.qd,
        "time_scale": opts.time_scale,
        "requests": requests,
        "nbd_reads": reads,
        "nbd_writes": writes,
        "bytes_read": bytes_r,
        "bytes_written": bytes_w,
        "errors": errors,
        "late": late,
        "elapsed_s": elapsed_s,
        "iops": ops as f64 / elapsed_s,
        "mb_s": (bytes_r + bytes_w) as f64 / elapsed_s / 1e6,
        "read_latency": lat_r.json(),
        "write_latency": lat_w.json(),
    }))
}
