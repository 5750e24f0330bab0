//! Cross-check against libCacheSim: exact miss counts on the CloudPhysics trace, as listed in
//! the shared traces README (they are the expectations of libCacheSim's own test suite).
//!
//! The trace files are not part of the repository; when the shared traces directory is absent
//! the tests print a note and pass.

use std::path::PathBuf;

use super::{build_in, Access, PolicySpec, ReadPolicy, UniformCost, Units};

const MIB: u64 = 1024 * 1024;

fn traces_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces"
    ));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "note: {} not found; skipping the libCacheSim cross-check",
            dir.display()
        );
        None
    }
}

/// `(obj_id, obj_size)` of every 24-byte oracleGeneral record:
/// `u32 time, u64 obj_id, u32 obj_size, i64 next_access_vtime`, little-endian.
fn oracle_records(bytes: &[u8]) -> Vec<(u64, u32)> {
    assert_eq!(bytes.len() % 24, 0, "truncated oracleGeneral trace");
    bytes
        .chunks_exact(24)
        .map(|r| {
            let id = u64::from_le_bytes(r[4..12].try_into().expect("8 bytes"));
            let size = u32::from_le_bytes(r[12..16].try_into().expect("4 bytes"));
            (id, size)
        })
        .collect()
}

fn misses(policy: &mut dyn ReadPolicy, reqs: &[(u64, u32)]) -> u64 {
    let mut evicted = Vec::new();
    let mut n = 0;
    for (i, &(key, size)) in reqs.iter().enumerate() {
        let acc = Access {
            key,
            size: size.max(1),
            now: i as u64,
            cost: &UniformCost,
        };
        if !policy.get(&acc) {
            n += 1;
            evicted.clear();
            policy.insert(&acc, &mut evicted);
        }
    }
    n
}

#[test]
fn libcachesim_object_mode_miss_counts() {
    let Some(dir) = traces_dir() else { return };
    let bytes = std::fs::read(dir.join("cloudphysics/cloudPhysicsIO.oracleGeneral.bin"))
        .expect("read oracleGeneral trace");
    let reqs = oracle_records(&bytes);
    assert_eq!(reqs.len(), 113_872);
    let expected: [(&str, [u64; 8]); 5] = [
        (
            "lru",
            [93374, 89783, 83572, 81722, 72494, 72104, 71972, 71704],
        ),
        (
            "fifo",
            [93403, 89386, 84387, 84025, 72498, 72228, 72182, 72140],
        ),
        (
            "clock",
            [93313, 89775, 83411, 81328, 74815, 72283, 71927, 64456],
        ),
        (
            "lfu",
            [91699, 86720, 78578, 76707, 69945, 66221, 64445, 64376],
        ),
        (
            "arc",
            [90252, 85861, 78168, 74297, 67381, 65685, 64439, 64772],
        ),
    ];
    let mut failures = Vec::new();
    for (name, want) in expected {
        let spec = PolicySpec::from_name(name).expect("known policy");
        for (i, &w) in want.iter().enumerate() {
            let cap = 128 * MIB * (i as u64 + 1);
            let Ok(mut p) = build_in(&spec, cap, Units::Bytes) else {
                continue;
            };
            let got = misses(p.as_mut(), &reqs);
            if got != w {
                failures.push(format!("{name} @ {} MiB: {got} != {w}", cap / MIB));
            }
        }
    }
    assert!(failures.is_empty(), "mismatches: {failures:#?}");
}

#[test]
fn libcachesim_block_mode_lru_miss_counts() {
    let Some(dir) = traces_dir() else { return };
    let text = std::fs::read_to_string(dir.join("cloudphysics/cloudPhysicsIO.csv"))
        .expect("read csv trace");
    // `version,time,op,size,lbn`; key = lbn, every object of size 1.
    let reqs: Vec<(u64, u32)> = text
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let lbn = l.rsplit(',').next().expect("lbn column");
            (lbn.trim().parse::<u64>().expect("numeric lbn"), 1)
        })
        .collect();
    assert_eq!(reqs.len(), 113_872);
    let want = [99411, 96397, 95652, 95370, 95182, 94997, 94891, 94816];
    let got: Vec<u64> = (1..=8u64)
        .map(|i| {
            let mut p = build_in(&PolicySpec::Lru, 128 * i, Units::Blocks).expect("build");
            misses(p.as_mut(), &reqs)
        })
        .collect();
    assert_eq!(got, want);
}
