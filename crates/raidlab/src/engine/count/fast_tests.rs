//! The fast path (`fast.rs`) against the general loop: the same metrics, counter for counter,
//! on every online policy, in block and object mode, with warm-up and limit, the same
//! progress calls and the same errors.

use std::path::{Path, PathBuf};

use super::*;
use crate::cache::read::PolicySpec;
use crate::config;

/// A skewed oracleGeneral trace of `n` requests over `keys` keys (a hot tenth takes most
/// requests), sizes 1..=8192 bytes fixed per key, written to a fresh file.
fn oracle_trace(name: &str, n: u64, keys: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("raidlab-fast-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.oracleGeneral.bin");
    let mut bytes = Vec::with_capacity(n as usize * 24);
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for i in 0..n {
        // xorshift64: deterministic, no dependency.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = if x % 10 < 7 {
            x % (keys / 10)
        } else {
            x % keys
        };
        let size = (key.wrapping_mul(2_654_435_761) % 8192) as u32 + 1;
        bytes.extend_from_slice(&((i / 1000) as u32).to_le_bytes());
        bytes.extend_from_slice(&(key * 7 + 3).to_le_bytes());
        bytes.extend_from_slice(&size.to_le_bytes());
        bytes.extend_from_slice(&(-1i64).to_le_bytes());
    }
    std::fs::write(&path, bytes).unwrap();
    path
}

fn experiment(trace: &Path, format: &str, extra: &str) -> Experiment {
    let text = format!(
        "[workload]\ntrace = {:?}\nformat = \"{format}\"\n{extra}",
        trace.display().to_string()
    );
    let mut exps = config::from_toml(&text, "t.toml", None).unwrap();
    assert_eq!(exps.len(), 1);
    exps.remove(0)
}

/// The metrics of both paths, with the progress calls each made; wall times zeroed.
type Both = (
    (Result<CountMetrics>, Vec<u64>),
    (Result<CountMetrics>, Vec<u64>),
);

fn both(exp: &Experiment) -> Both {
    assert!(
        fast::oracle_trace(exp).is_some(),
        "the fast path must apply"
    );
    let go = |fast_path: bool| {
        let mut calls = Vec::new();
        let mut progress = |n: u64| {
            calls.push(n);
            true
        };
        let (capacity, pre) = resolve_capacity(exp, None).unwrap();
        let m = if fast_path {
            run(exp, pre, false, &mut progress)
        } else {
            // The general loop drawing the trace on its own thread: the same stream.
            general(exp, capacity, pre, true, &mut progress)
        };
        let m = m.map(|mut m| {
            m.wall_ns = 0;
            m
        });
        (m, calls)
    };
    (go(true), go(false))
}

/// The online policies the fast path replays: every policy but X-RAY (which needs the host
/// model's hints).
fn policies() -> impl Iterator<Item = &'static str> {
    PolicySpec::NAMES.iter().copied().filter(|&n| n != "xray")
}

#[test]
fn every_policy_counts_as_the_general_loop() {
    let path = oracle_trace("all", 30_000, 4_000);
    for policy in policies() {
        for cache in [
            "capacity_blocks = 300",
            "capacity_fraction = 0.05",
            "unit = \"object\"\ncapacity_bytes = 1200000",
        ] {
            for run in ["", "[run]\nwarmup_requests = 5000\n"] {
                let extra = format!("[cache]\npolicy = \"{policy}\"\n{cache}\n{run}");
                let exp = experiment(&path, "oracleGeneral", &extra);
                let ((fast_m, fast_calls), (gen_m, gen_calls)) = both(&exp);
                let (fast_m, gen_m) = (fast_m.unwrap(), gen_m.unwrap());
                assert_eq!(fast_m, gen_m, "{extra}");
                assert_eq!(fast_calls, gen_calls, "{extra}");
                assert!(fast_m.misses > 0 && fast_m.hits > 0, "{extra}");
            }
        }
    }
}

/// LRU of 3 blocks over keys 1 2 3 1 4 2 1 3 (the LRU worked example of
/// `cache/read/lru.rs`): hits at the 4th and 7th request, evictions of 2, 3 and 4.
#[test]
fn lru_worked_example() {
    let dir = std::env::temp_dir().join(format!("raidlab-fast-{}-lru", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.bin");
    let mut bytes = Vec::new();
    for key in [1u64, 2, 3, 1, 4, 2, 1, 3] {
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&key.to_le_bytes());
        bytes.extend_from_slice(&4096u32.to_le_bytes());
        bytes.extend_from_slice(&(-1i64).to_le_bytes());
    }
    std::fs::write(&path, bytes).unwrap();
    let exp = experiment(
        &path,
        "oracleGeneral",
        "[cache]\npolicy = \"lru\"\ncapacity_blocks = 3\n",
    );
    let ((m, calls), _) = both(&exp);
    let m = m.unwrap();
    assert_eq!((m.requests, m.lookups, m.hits, m.misses), (8, 8, 2, 6));
    assert_eq!((m.evictions, m.miss_disk_blocks), (3, 6));
    assert_eq!((m.disk_reads, m.disk_writes), (vec![6], vec![0]));
    assert_eq!(calls, [8]);
}

/// Exact counts, so that the two paths cannot drift together: LRU of 300 blocks and ARC of
/// 1.2 MB in object mode over the trace above (values from the general loop).
#[test]
fn worked_counts() {
    let path = oracle_trace("exact", 30_000, 4_000);
    let exp = experiment(
        &path,
        "oracleGeneral",
        "[cache]\npolicy = \"lru\"\ncapacity_blocks = 300\n",
    );
    let ((m, _), _) = both(&exp);
    let m = m.unwrap();
    assert_eq!((m.requests, m.hits, m.misses), (30_000, 14_250, 15_750));
    assert_eq!((m.evictions, m.metadata_bytes), (15_450, 10_476));
    let exp = experiment(
        &path,
        "oracleGeneral",
        "[cache]\npolicy = \"arc\"\nunit = \"object\"\ncapacity_bytes = 1200000\n",
    );
    let ((m, _), _) = both(&exp);
    let m = m.unwrap();
    assert_eq!((m.requests, m.hits, m.misses), (30_000, 17_298, 12_702));
    assert_eq!(m.evictions, 12_401);
    assert_eq!(m.object_bytes, Some((122_221_699, 52_344_428)));
}

#[test]
fn limit_sniffing_and_progress_match() {
    // More than one progress period, so the periodic calls are compared too.
    let n = PROGRESS_EVERY + 70_001;
    let path = oracle_trace("long", n, 50_000);
    for extra in [
        "[cache]\npolicy = \"lru\"\ncapacity_blocks = 2000\n",
        "[cache]\npolicy = \"sieve\"\ncapacity_blocks = 2000\n[run]\nwarmup_requests = 100000\n",
        "limit = 1048577\n[cache]\npolicy = \"clock\"\ncapacity_blocks = 2000\n",
        "limit = 65\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 2000\n",
        "limit = 1\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 2000\n",
        // The warm-up outlasts the stream: nothing is measured.
        "[cache]\npolicy = \"lru\"\ncapacity_blocks = 20\n[run]\nwarmup_requests = 2000000\n",
    ] {
        let exp = experiment(&path, "auto", extra);
        let ((fast_m, fast_calls), (gen_m, gen_calls)) = both(&exp);
        assert_eq!(fast_m.unwrap(), gen_m.unwrap(), "{extra}");
        assert_eq!(fast_calls, gen_calls, "{extra}");
    }
}

#[test]
fn cancelling_and_errors_match() {
    let path = oracle_trace("err", PROGRESS_EVERY + 10, 1_000);
    let exp = experiment(
        &path,
        "oracleGeneral",
        "[cache]\npolicy = \"lru\"\ncapacity_blocks = 100\n",
    );
    let mut no = |_: u64| false;
    assert!(matches!(
        run(&exp, None, false, &mut no),
        Err(Error::Cancelled)
    ));

    // A malformed record in the middle and a truncated one at the end: the same error from
    // both paths, naming the same record.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(24 * 5_000 + 10);
    bytes[24 * 3_000 + 16..24 * 3_000 + 24].copy_from_slice(&(1i64 << 50).to_le_bytes());
    let bad = path.with_file_name("bad.oracleGeneral.bin");
    std::fs::write(&bad, &bytes).unwrap();
    let exp = experiment(
        &bad,
        "oracleGeneral",
        "[cache]\npolicy = \"lru\"\ncapacity_blocks = 100\n",
    );
    let fe = same_error(&exp);
    assert!(
        fe.contains("record 3001: not an oracleGeneral record"),
        "{fe}"
    );
    bytes[24 * 3_000 + 16..24 * 3_000 + 24].copy_from_slice(&(-1i64).to_le_bytes());
    std::fs::write(&bad, &bytes).unwrap();
    let fe = same_error(&exp);
    assert!(
        fe.ends_with("record 5001: truncated record: expected 24 bytes, found 10"),
        "{fe}"
    );
}

/// The error both loops give on `exp`, checked equal.
fn same_error(exp: &Experiment) -> String {
    let ((fast_m, _), (gen_m, _)) = both(exp);
    let (fe, ge) = (
        fast_m.unwrap_err().to_string(),
        gen_m.unwrap_err().to_string(),
    );
    assert_eq!(fe, ge);
    fe
}

#[test]
fn only_plain_caches_over_oracle_traces_take_the_fast_path() {
    let path = oracle_trace("which", 100, 10);
    let with =
        |format: &str, extra: &str| fast::oracle_trace(&experiment(&path, format, extra)).is_some();
    let lru = "[cache]\npolicy = \"lru\"\ncapacity_blocks = 4\n";
    assert!(with("oracleGeneral", lru));
    assert!(with("auto", lru));
    assert!(!with("keys-u32le", lru));
    let raid = "[array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 4096\n";
    assert!(!with("oracleGeneral", &format!("{lru}{raid}")));
    assert!(!with(
        "oracleGeneral",
        "[cache]\npolicy = \"opt\"\ncapacity_blocks = 4\n"
    ));
}

/// Counting from a pipe (`trace = "/dev/stdin"`, a process substitution): the fast path
/// cannot rewind it after sniffing its head, so it reads it as a stream, with the metrics of
/// the same trace read from a file.
#[cfg(unix)]
#[test]
fn a_named_pipe_counts_as_its_file() {
    let path = oracle_trace("pipe", 20_000, 3_000);
    let fifo = path.with_file_name("t.fifo");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: mkfifo is not available");
        return;
    }
    let cache = "[cache]\npolicy = \"lru\"\ncapacity_blocks = 300\n";
    let count = |trace: &Path| {
        let exp = experiment(trace, "oracleGeneral", cache);
        assert!(fast::oracle_trace(&exp).is_some());
        let (_, pre) = resolve_capacity(&exp, None).unwrap();
        let mut m = run(&exp, pre, false, &mut |_| true).unwrap();
        m.wall_ns = 0;
        m
    };
    let bytes = std::fs::read(&path).unwrap();
    let writer = {
        let fifo = fifo.clone();
        // Opening a pipe for writing waits for its reader: the count below.
        std::thread::spawn(move || std::fs::write(fifo, bytes).unwrap())
    };
    let from_pipe = count(&fifo);
    writer.join().unwrap();
    std::fs::remove_file(&fifo).unwrap();
    assert_eq!(from_pipe, count(&path));
    assert_eq!(from_pipe.requests, 20_000);
}
