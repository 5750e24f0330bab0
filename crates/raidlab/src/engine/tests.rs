//! Worked examples of counting mode, computed by hand.

use super::*;
use crate::config;

/// Write `lines` to a fresh MQSim trace file (`arrival_ns device lba_sectors size_sectors
/// type`, type 1 = read) and return its path.
fn mqsim_trace(name: &str, lines: &[&str]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("raidlab-engine-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.mqsim.txt");
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

/// Counting-mode counters of one run.
fn counts(exp: &Experiment) -> Result<crate::metrics::CountMetrics> {
    run(exp).map(|m| m.counts().clone())
}

fn experiment(trace: &std::path::Path, extra: &str) -> Experiment {
    let text = format!(
        "[workload]\ntrace = {:?}\nformat = \"mqsim\"\nops = \"all\"\n{extra}",
        trace.display().to_string()
    );
    let mut exps = config::from_toml(&text, "t.toml", None).unwrap();
    assert_eq!(exps.len(), 1);
    exps.remove(0)
}

/// RAID-5 of 3 disks, one-block stripe units, left-symmetric: row 0 holds lba 0 on disk 0,
/// lba 1 on disk 1, parity on disk 2; row 1 holds lba 2 on disk 2, lba 3 on disk 0, parity on
/// disk 1. Disk 0 has failed. LRU of 2 blocks; reads of blocks 0 1 0 2 3 1:
///
/// | access | result | disk blocks read          | cache after |
/// | ------ | ------ | ------------------------- | ----------- |
/// | 0      | miss   | d1 + d2 (reconstruct)     | 0           |
/// | 1      | miss   | d1                        | 1 0         |
/// | 0      | hit    |                           | 0 1         |
/// | 2      | miss   | d2                        | 2 0         |
/// | 3      | miss   | d1 (parity) + d2 (lba 2)  | 3 2         |
/// | 1      | miss   | d1                        | 1 3         |
///
/// hits 1, misses 5, disk reads [0, 4, 3], RGR = 7 / 6.
#[test]
fn degraded_raid5_lru_worked_example() {
    let lines: Vec<String> = [0u64, 1, 0, 2, 3, 1]
        .iter()
        .enumerate()
        .map(|(i, b)| format!("{} 0 {} 8 1", i * 1000, b * 8))
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = mqsim_trace("lru", &refs);
    let exp = experiment(
        &path,
        "[cache]\npolicy = \"lru\"\ncapacity_blocks = 2\n\
         [array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 4096\nfailed = [0]\n",
    );
    let m = counts(&exp).unwrap();
    assert_eq!((m.requests, m.block_requests), (6, 6));
    assert_eq!((m.hits, m.misses, m.evictions), (1, 5, 3));
    assert_eq!(m.disk_reads, vec![0, 4, 3]);
    assert_eq!(m.disk_writes, vec![0, 0, 0]);
    assert_eq!(m.miss_disk_blocks, 7);
    assert_eq!(m.rgr(), 7.0 / 6.0);
}

/// Healthy 3-disk RAID-5 as above. Read lba 1 (cached), write lba 1, read lba 1 again.
/// `writes = "invalidate"`: the write drops the cached copy; a one-block write to row 0 costs
/// reconstruct-write (read lba 0 on d0, write d1 and parity d2: 1 read) rather than
/// read-modify-write (2 reads). The second read misses again.
#[test]
fn writes_invalidate_and_pay_the_planner() {
    let path = mqsim_trace("inv", &["0 0 8 8 1", "1000 0 8 8 0", "2000 0 8 8 1"]);
    let cfg = "[cache]\npolicy = \"lru\"\ncapacity_blocks = 4\nwrites = \"invalidate\"\n\
               [array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 4096\n";
    let m = counts(&experiment(&path, cfg)).unwrap();
    assert_eq!((m.read_requests, m.write_requests), (2, 1));
    assert_eq!((m.hits, m.misses, m.invalidations), (0, 2, 1));
    assert_eq!(m.disk_reads, vec![1, 2, 0]);
    assert_eq!(m.disk_writes, vec![0, 1, 1]);
    // RGR counts read misses only: two one-block reads
    assert_eq!(m.miss_disk_blocks, 2);

    // With writes ignored, the second read hits and no disk is written.
    let m = counts(&experiment(&path, &cfg.replace("invalidate", "ignore"))).unwrap();
    assert_eq!((m.hits, m.misses, m.invalidations), (1, 1, 0));
    assert_eq!(m.disk_writes, vec![0, 0, 0]);

    // With writes looked up like reads (libCacheSim), the write and the second read both hit.
    let m = counts(&experiment(&path, &cfg.replace("invalidate", "access"))).unwrap();
    assert_eq!((m.lookups, m.hits, m.misses), (3, 2, 1));
    assert_eq!((m.read_blocks, m.write_blocks), (2, 1));
    assert_eq!(m.disk_writes, vec![0, 0, 0]);
}

/// A request spanning blocks is split at block boundaries: 12 KiB from byte 2048 touches
/// blocks 0..=3.
#[test]
fn requests_are_split_into_blocks() {
    let path = mqsim_trace("split", &["0 0 4 24 1"]);
    let m = counts(&experiment(
        &path,
        "[cache]\npolicy = \"fifo\"\ncapacity_blocks = 8\n",
    ))
    .unwrap();
    assert_eq!((m.requests, m.block_requests, m.misses), (1, 4, 4));
    assert_eq!(m.disk_reads, vec![4]);
}

/// Pre-pass: footprint and the compulsory floor on the degraded array of the first example:
/// unique read blocks 0 1 2 3 cost 2 + 1 + 1 + 2.
#[test]
fn prepass_counts_footprint_and_cold_misses() {
    let path = mqsim_trace(
        "pre",
        &["0 0 0 8 1", "1 0 8 8 1", "2 0 0 8 1", "3 0 16 16 1"],
    );
    let exp = experiment(
        &path,
        "[cache]\npolicy = \"lru\"\ncapacity_fraction = 0.5\n\
         [array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 4096\nfailed = [0]\n",
    );
    let pre = count::prepass(&exp.workload, exp.array.as_ref(), exp.cache.writes, 0).unwrap();
    assert_eq!(pre.footprint_blocks, 4);
    assert_eq!(pre.cold_miss_disk_blocks, 6);
    let m = counts(&exp).unwrap();
    assert_eq!(m.capacity, 2);
    assert_eq!(m.rgr_floor(), Some(6.0 / 5.0));
    assert!(m.rgr() >= m.rgr_floor().unwrap());
}

/// A batch gives the same metrics as single runs, in order, whatever the thread count, and a
/// cancelled batch reports `Cancelled`.
#[test]
fn batch_matches_single_runs() {
    let text = "[workload.synthetic]\nkind = \"zipf\"\nkeys = 3000\nrequests = 30000\n\
                [cache]\npolicy = \"lru\"\ncapacity_blocks = 300\n\
                [array]\ndisks = 5\nfailed = [3]\n\
                [sweep]\n\"cache.policy\" = [\"lru\", \"arc\", \"vdf-lfu\", \"2q\", \"mq\"]\n";
    let exps = config::from_toml(text, "b.toml", None).unwrap();
    let strip = |m: RunMetrics| {
        let mut c = m.counts().clone();
        c.wall_ns = 0;
        c
    };
    let single: Vec<_> = exps.iter().map(|e| strip(run(e).unwrap())).collect();
    for threads in [1, 2, 3] {
        let batch: Vec<_> = run_batch(&exps, threads, &|_| true)
            .into_iter()
            .map(|r| strip(r.unwrap()))
            .collect();
        assert_eq!(batch, single, "threads = {threads}");
    }
    let cancelled = run_batch(&exps, 2, &|_| false);
    assert!(cancelled
        .iter()
        .any(|r| matches!(r, Err(crate::Error::Cancelled))));
}

/// `run.warmup_requests`: the worked example above with its first 3 reads (0 1 0) replayed
/// but not counted. The cache after them holds 0 1, so the counted reads 2 3 1 are:
/// 2 miss (d2, evicts 1), 3 miss (d1 + d2, evicts 0), 1 miss (d1, evicts 2): hits 0,
/// misses 3, evictions 3, disk reads [0, 2, 2]. With `run.footprint` the pre-pass counts
/// the compulsory misses of the counted part only: 2 (cost 1) and 3 (on the failed disk,
/// cost 2), not 1 (first read in the warm-up): a floor of 3 over 3 lookups.
#[test]
fn warmup_requests_are_replayed_but_not_counted() {
    let lines: Vec<String> = [0u64, 1, 0, 2, 3, 1]
        .iter()
        .enumerate()
        .map(|(i, b)| format!("{} 0 {} 8 1", i * 1000, b * 8))
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let path = mqsim_trace("warmup", &refs);
    let body = "[cache]\npolicy = \"lru\"\ncapacity_blocks = 2\n\
         [array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 4096\nfailed = [0]\n";
    let exp = experiment(&path, &format!("[run]\nwarmup_requests = 3\n{body}"));
    assert_eq!(exp.run.warmup_requests, 3);
    let m = counts(&exp).unwrap();
    assert_eq!((m.requests, m.block_requests, m.lookups), (3, 3, 3));
    assert_eq!((m.hits, m.misses, m.evictions), (0, 3, 3));
    assert_eq!(m.disk_reads, vec![0, 2, 2]);
    assert_eq!(m.miss_disk_blocks, 4);
    assert_eq!((m.cold_miss_disk_blocks, m.footprint_blocks), (None, None));
    let floor = experiment(
        &path,
        &format!("[run]\nwarmup_requests = 3\nfootprint = true\n{body}"),
    );
    let single = counts(&floor).unwrap();
    let batch = run_batch(std::slice::from_ref(&floor), 1, &|_| true)
        .pop()
        .unwrap()
        .unwrap();
    for m in [&single, batch.counts()] {
        assert_eq!((m.hits, m.misses), (0, 3));
        assert_eq!(
            (m.cold_miss_disk_blocks, m.footprint_blocks),
            (Some(3), Some(4))
        );
        assert_eq!(m.rgr_floor(), Some(1.0));
    }
    // Warming past the end counts nothing; no warm-up is the worked example itself.
    let m = counts(&experiment(
        &path,
        &format!("[run]\nwarmup_requests = 6\n{body}"),
    ))
    .unwrap();
    assert_eq!((m.requests, m.hits, m.misses), (0, 0, 0));
    let m = counts(&experiment(&path, body)).unwrap();
    assert_eq!((m.requests, m.hits, m.misses), (6, 1, 5));
}

#[test]
fn warmup_requests_belong_to_counting_mode() {
    let path = mqsim_trace("warmup-timed", &["0 0 0 8 1"]);
    let text = format!(
        "[workload]\ntrace = {:?}\nformat = \"mqsim\"\n[run]\nmode = \"timed\"\nwarmup_requests = 5\n\
         [cache]\npolicy = \"lru\"\ncapacity_blocks = 2\n",
        path.display().to_string()
    );
    let e = config::from_toml(&text, "t.toml", None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("run.warmup_requests") && e.contains("count"),
        "{e}"
    );
}
