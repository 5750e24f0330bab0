//! Throughput of the parity arithmetic, one core, buffers in cache.
//!
//! `cargo run --release -p raidlab-store --example parity_speed`
//!
//! Each line: the operation, then GB/s (10^9 bytes per second) of input read per second —
//! for xor_into and mul_xor_into the source chunk, for gen_pq and reconstruct the whole
//! stripe's data. For reconstruct the per-member rate (one chunk of each member per call) is
//! printed too, since the rebuild target is stated per member.

use raidlab_store::parity;
use std::hint::black_box;
use std::time::{Duration, Instant};

const CHUNK: usize = 64 * 1024;
const NDATA: usize = 4;
/// Each measurement runs for about this long (after one warm-up call).
const RUN: Duration = Duration::from_millis(400);

/// Calls per second of `f`, best of three runs (the machine is shared).
fn rate(mut f: impl FnMut()) -> f64 {
    f();
    let mut best = 0f64;
    for _ in 0..3 {
        let start = Instant::now();
        let mut calls = 0u64;
        // Bounded by time: at most RUN per run.
        while start.elapsed() < RUN {
            for _ in 0..16 {
                f();
            }
            calls += 16;
        }
        best = best.max(calls as f64 / start.elapsed().as_secs_f64());
    }
    best
}

fn fill(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}

fn main() {
    let gb = |calls: f64, bytes: usize| calls * bytes as f64 / 1e9;
    let data: Vec<Vec<u8>> = (0..NDATA).map(|i| fill(i as u64 + 1, CHUNK)).collect();
    let mut dst = fill(99, CHUNK);

    let r = rate(|| parity::xor_into(black_box(&mut dst), black_box(&data[0])));
    println!(
        "xor_into            {:6.2} GB/s ({} KiB)",
        gb(r, CHUNK),
        CHUNK / 1024
    );

    // k = 1 and 6: the fastest and slowest lane-doubling paths; k = 13: the table path.
    for k in [1usize, 6, 13] {
        let r = rate(|| parity::mul_xor_into(black_box(&mut dst), black_box(&data[0]), k));
        println!("mul_xor_into k={k:<3}  {:6.2} GB/s", gb(r, CHUNK));
    }

    let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    let (mut p, mut q) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    let r = rate(|| parity::gen_pq(black_box(&refs), &mut p, Some(&mut q)));
    println!(
        "gen_pq P+Q          {:6.2} GB/s of data ({NDATA} x {} KiB)",
        gb(r, NDATA * CHUNK),
        CHUNK / 1024
    );

    let mut stripe: Vec<Vec<u8>> = data.clone();
    stripe.push(p.clone());
    stripe.push(q.clone());
    let r = rate(|| {
        let mut refs: Vec<&mut [u8]> = stripe.iter_mut().map(|b| b.as_mut_slice()).collect();
        parity::reconstruct(NDATA, black_box(&mut refs), &[0, 2]);
    });
    assert_eq!(stripe[0], data[0], "reconstruct gave wrong bytes");
    println!(
        "reconstruct 2 data  {:6.2} GB/s of data, {:6.2} GB/s per member ({NDATA}+2)",
        gb(r, NDATA * CHUNK),
        gb(r, CHUNK)
    );

    let r = rate(|| {
        let mut refs: Vec<&mut [u8]> = stripe.iter_mut().map(|b| b.as_mut_slice()).collect();
        parity::reconstruct(NDATA, black_box(&mut refs), &[1, NDATA]);
    });
    println!(
        "reconstruct D+P     {:6.2} GB/s of data, {:6.2} GB/s per member ({NDATA}+2)",
        gb(r, NDATA * CHUNK),
        gb(r, CHUNK)
    );
}
