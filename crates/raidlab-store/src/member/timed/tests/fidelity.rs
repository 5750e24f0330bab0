//! The disk-timed member against its own model run in virtual time: one member, random and
//! sequential 4 KiB reads and writes (and sequential 64 KiB reads), closed loops at depths
//! 1 to 32. `cargo test -p raidlab-store --lib fidelity_table -- --ignored --nocapture`
//! prints the table of `docs/store.md` ("Fidelity").
//!
//! The model's side is the same `raidlab::disk::Device` driven by a discrete-event loop:
//! `depth` clients, each submitting its next operation the instant the last one completes,
//! the offsets from the same generator. The member's side is `depth` threads doing the
//! same through a `TimedMember` over an inner member with no bytes, in real time.

use std::collections::BinaryHeap;
use std::sync::atomic::AtomicU64;

use raidlab::disk::{Device, DiskIo};
use raidlab::workload::Op;

use super::*;

/// The span the random patterns cover (and the sequential ones wrap at).
const SPAN_BYTES: u64 = 1 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pattern {
    RandRead,
    RandWrite,
    SeqRead,
    SeqWrite,
    /// Sequential 64 KiB reads.
    SeqRead64,
}

impl Pattern {
    fn op(self) -> Op {
        match self {
            Pattern::RandRead | Pattern::SeqRead | Pattern::SeqRead64 => Op::Read,
            Pattern::RandWrite | Pattern::SeqWrite => Op::Write,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Pattern::RandRead => "random read",
            Pattern::RandWrite => "random write",
            Pattern::SeqRead => "sequential read",
            Pattern::SeqWrite => "sequential write",
            Pattern::SeqRead64 => "sequential read 64 KiB",
        }
    }

    /// Bytes per operation.
    fn bytes(self) -> u64 {
        if self == Pattern::SeqRead64 {
            64 << 10
        } else {
            4 << 10
        }
    }
}

/// The offsets of a run: the k-th operation issued (in issue order) goes to `offset(k)`.
/// Sequential: consecutive blocks of one stream, whichever client issues them. Random: a
/// fixed xorshift sequence, so both sides see the same offsets in the same issue order.
fn offset(p: Pattern, k: u64) -> u64 {
    let blocks = SPAN_BYTES / p.bytes();
    match p {
        Pattern::SeqRead | Pattern::SeqWrite | Pattern::SeqRead64 => (k % blocks) * p.bytes(),
        Pattern::RandRead | Pattern::RandWrite => {
            let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ k.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x ^= x >> 31;
            x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^= x >> 29;
            (x % blocks) * p.bytes()
        }
    }
}

/// The model alone: (IOPS, mean latency µs) of `ops` operations from `depth` clients.
fn model_run(spec: &TimingSpec, p: Pattern, depth: u64, ops: u64) -> (f64, f64) {
    let mut dev = Device::new(spec.disk.build().unwrap(), spec.queue);
    let io = |k: u64| DiskIo {
        op: p.op(),
        sector: offset(p, k) / raidlab::disk::SECTOR_BYTES,
        sectors: (p.bytes() / raidlab::disk::SECTOR_BYTES) as u32,
    };
    let mut arrival = vec![0u64; depth as usize];
    // Completions pending: (Reverse(done_ns), token).
    let mut events = BinaryHeap::new();
    let mut issued = 0u64;
    for c in 0..depth {
        dev.submit(0, io(issued), Class::Foreground, c as u32);
        issued += 1;
    }
    let start_all = |dev: &mut Device, now: u64, ev: &mut BinaryHeap<_>| {
        while let Some(s) = dev.start(now) {
            ev.push((std::cmp::Reverse(s.done_ns), s.token));
        }
    };
    start_all(&mut dev, 0, &mut events);
    let (mut done, mut lat_ns, mut end_ns) = (0u64, 0u128, 0u64);
    // Bounded: each pass completes one of `ops` operations.
    while done < ops {
        let (std::cmp::Reverse(t), tok) = events.pop().expect("an operation in service");
        dev.complete(t, tok);
        done += 1;
        lat_ns += u128::from(t - arrival[tok as usize]);
        end_ns = t;
        if issued < ops {
            dev.submit(t, io(issued), Class::Foreground, tok);
            arrival[tok as usize] = t;
            issued += 1;
        }
        start_all(&mut dev, t, &mut events);
    }
    (
        ops as f64 / (end_ns as f64 / 1e9),
        lat_ns as f64 / ops as f64 / 1e3,
    )
}

/// The timed member in real time: (IOPS, mean latency µs).
fn member_run(spec: &str, p: Pattern, depth: u64, ops: u64) -> (f64, f64) {
    let m = timed(Gate::new(SPAN_BYTES, false), spec);
    let next = Arc::new(AtomicU64::new(0));
    let lat_ns = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let hs: Vec<_> = (0..depth)
        .map(|_| {
            let (m, next, lat_ns) = (m.clone(), next.clone(), lat_ns.clone());
            std::thread::spawn(move || {
                let mut b = vec![0u8; p.bytes() as usize];
                // Bounded: the counter reaches `ops`.
                loop {
                    let k = next.fetch_add(1, Ordering::SeqCst);
                    if k >= ops {
                        return;
                    }
                    let t0 = Instant::now();
                    match p.op() {
                        Op::Read => m.read_at(&mut b, offset(p, k)).unwrap(),
                        Op::Write => m.write_at(&b, offset(p, k)).unwrap(),
                    }
                    lat_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let secs = t.elapsed().as_secs_f64();
    (
        ops as f64 / secs,
        lat_ns.load(Ordering::Relaxed) as f64 / ops as f64 / 1e3,
    )
}

#[test]
fn the_model_loop_runs_a_depth_one_stream_at_the_models_pace() {
    // Worked check of the virtual-time loop: a constant 1 ms disk does 1,000 IOPS at any
    // depth, and a depth-d client waits d ms.
    let spec = TimingSpec::parse("constant,read-ms=1,write-ms=1").unwrap();
    for (depth, lat_us) in [(1, 1000.0), (4, 4000.0)] {
        let (iops, lat) = model_run(&spec, Pattern::RandRead, depth, 400);
        assert!((iops - 1000.0).abs() < 1e-6, "{iops}");
        // The first `depth` operations wait less (the queue fills from empty).
        assert!(
            (lat - lat_us).abs() <= lat_us * depth as f64 / 400.0,
            "{lat}"
        );
    }
}

#[test]
#[ignore]
fn fidelity_table() {
    let specs = ["wd10eals", "wd10eals,scheduler=clook", "cheetah9lp"];
    let patterns = [
        Pattern::RandRead,
        Pattern::RandWrite,
        Pattern::SeqRead,
        Pattern::SeqWrite,
        Pattern::SeqRead64,
    ];
    println!("| model | pattern | depth | ops | model IOPS | member IOPS | member / model | model mean ms | member mean ms | member / model |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for spec_text in specs {
        let spec = TimingSpec::parse(spec_text).unwrap();
        for p in patterns {
            for depth in [1u64, 4, 16, 32] {
                // About 2 s of model time per cell, at most 5,000 operations (a member far slower
                // than its model takes minutes for them).
                let (probe, _) = model_run(&spec, p, depth, 200);
                let ops = ((probe * 2.0) as u64).clamp(200, 5_000);
                let (mi, ml) = model_run(&spec, p, depth, ops);
                let (ri, rl) = member_run(spec_text, p, depth, ops);
                println!(
                    "| `{spec_text}` | {} | {depth} | {ops} | {mi:.0} | {ri:.0} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    p.name(),
                    ri / mi,
                    ml / 1e3,
                    rl / 1e3,
                    rl / ml
                );
            }
        }
    }
}
