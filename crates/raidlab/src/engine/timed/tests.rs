//! Worked examples and queueing checks of the timed engine, with the constant disk model so
//! every number can be computed by hand.

use super::*;
use crate::config;

fn exps(text: &str) -> Vec<Experiment> {
    config::from_toml(text, "t.toml", None).unwrap()
}

/// The one experiment of `text`, run (shared by the timed engine's test files).
pub(super) fn timed(text: &str) -> TimedMetrics {
    let exps = exps(text);
    assert_eq!(exps.len(), 1);
    run(&exps[0], None, true, &mut |_| true).unwrap()
}

/// MQSim trace lines `arrival_ns device lba_sectors size_sectors type` (type 1 = read)
/// written to a temporary file; returns its path as a TOML string.
pub(super) fn trace<S: std::borrow::Borrow<str>>(name: &str, lines: &[S]) -> String {
    let dir = std::env::temp_dir().join(format!("raidlab-timed-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.mqsim.txt");
    std::fs::write(&path, lines.join("\n")).unwrap();
    format!("{:?}", path.display().to_string())
}

/// `n` uniform reads over a billion blocks: (almost) every lookup misses a 1-block cache.
fn all_misses(n: u64) -> String {
    format!(
        "[workload.synthetic]\nkind = \"uniform\"\nkeys = 1000000000\nrequests = {n}\n\
         [cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n"
    )
}

/// One disk at 1 ms per operation, N requests always outstanding: the disk is never idle, so
/// throughput is exactly 1000/s and every request waits for the N - 1 ahead of it.
#[test]
fn closed_loop_on_one_constant_disk() {
    for n in [1u64, 4] {
        let m = timed(&format!(
            "{w}[run]\nmode = \"timed\"\ndriver = \"closed\"\n\
             outstanding = {n}\n[controller]\nmiss_us = 0\n[disk]\nmodel = \"constant\"\nservice_ms = 1\n",
            w = all_misses(2000),
        ));
        assert_eq!(m.completed, 2000);
        assert_eq!(m.count.misses, 2000);
        assert_eq!(m.sim_ns, 2_000_000_000);
        assert_eq!(m.iops(), 1000.0);
        // The first n requests complete after 1..n ms; every later one waits for the n - 1
        // ahead of it: n ms.
        let expect_ns = (2000 - n) * n * 1_000_000 + (1..=n).sum::<u64>() * 1_000_000;
        let expect_ns = expect_ns as f64 / 2000.0;
        let got = m.latency.mean_ns();
        assert!(
            (got - expect_ns).abs() < 1e-6 * expect_ns,
            "n={n}: {got} vs {expect_ns}"
        );
        assert_eq!(m.disks[0].ops, 2000);
        assert_eq!(m.disks[0].utilization, 1.0);
    }
}

/// `warmup_s` in a closed loop: the example above with n = 4 and 0.5 s of warm-up. Request k
/// (k >= 4) is issued when request k - 4 completes, at (k - 3) ms, so requests 503..1999
/// arrive from 0.5 s on: 1,497 measured, each 4 ms, over the last 1.5 s.
#[test]
fn closed_loop_warmup_is_not_measured() {
    let text = format!(
        "{w}[run]\nmode = \"timed\"\ndriver = \"closed\"\noutstanding = 4\nwarmup_s = 0.5\n\
         [controller]\nmiss_us = 0\n[disk]\nmodel = \"constant\"\nservice_ms = 1\n",
        w = all_misses(2000),
    );
    let m = timed(&text);
    assert_eq!(
        (m.completed, m.count.requests, m.count.misses),
        (1497, 1497, 1497)
    );
    assert_eq!((m.measure_from_ns, m.sim_ns), (500_000_000, 2_000_000_000));
    assert_eq!(m.iops(), 1497.0 / 1.5);
    assert_eq!(m.latency.mean_ns(), 4e6);
    // A warm-up past the end measures nothing.
    let m = timed(&text.replace("warmup_s = 0.5", "warmup_s = 5"));
    assert_eq!((m.completed, m.count.requests, m.iops()), (0, 0, 0.0));
}

/// Think time: one thread, 1 ms service + 4 ms think = one request per 5 ms.
#[test]
fn closed_loop_think_time() {
    let m = timed(&format!(
        "{w}[run]\nmode = \"timed\"\ndriver = \"closed\"\n\
         outstanding = 1\nthink_ms = 4\n[disk]\nmodel = \"constant\"\nservice_ms = 1\n",
        w = all_misses(100),
    ));
    // Last request issued at 99 * 5 ms, done 1 ms later.
    assert_eq!(m.sim_ns, 99 * 5_000_000 + 1_000_000);
    assert_eq!(m.latency.mean_ns(), 1e6);
    assert!((m.disks[0].utilization - 100.0 / 496.0).abs() < 1e-12);
}

/// M/D/1 (Poisson arrivals, constant service): the Pollaczek-Khinchine mean response time
/// W = S + rho S / (2 (1 - rho)). At S = 1 ms and 700 IOPS (rho = 0.7): 2.1667 ms.
#[test]
fn md1_matches_pollaczek_khinchine() {
    for (iops, rho) in [(500.0, 0.5), (700.0, 0.7)] {
        let m = timed(&format!(
            "{w}[run]\nmode = \"timed\"\niops = {iops}\n\
             [disk]\nmodel = \"constant\"\nservice_ms = 1\n",
            w = all_misses(300000),
        ));
        let expect_ms = 1.0 + rho / (2.0 * (1.0 - rho));
        let got_ms = m.latency.mean_ns() / 1e6;
        assert!(
            (got_ms - expect_ms).abs() / expect_ms < 0.05,
            "rho {rho}: {got_ms} ms vs {expect_ms} ms"
        );
        assert!((m.disks[0].utilization - rho).abs() < 0.02);
    }
}

/// A request served wholly from cache completes after exactly the hit overhead; cache
/// decisions are those of counting mode.
#[test]
fn hits_cost_the_controller_overhead() {
    let lines: Vec<String> = (0..10)
        .map(|i| format!("{} 0 0 8 1", i * 10_000_000))
        .collect();
    let t = trace("hits", &lines);
    let m = timed(&format!(
        "[workload]\ntrace = {t}\nformat = \"mqsim\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 4\n\
         [run]\nmode = \"timed\"\n[controller]\nhit_us = 50\nmiss_us = 20\n\
         [disk]\nmodel = \"constant\"\nservice_ms = 3\n"
    ));
    assert_eq!((m.count.hits, m.count.misses), (9, 1));
    assert_eq!(m.latency.max_ns(), 3_020_000);
    // Percentiles come from the histogram (3 significant digits).
    assert!(m.latency.quantile_ns(0.5).abs_diff(50_000) <= 50);
    assert_eq!(m.sim_ns, 90_050_000);
}

/// Write-through on a healthy 3-disk RAID-5 with one-block units: a one-block write is a
/// reconstruct-write (reading the row's other data block is cheaper than reading old data and
/// parity), then data and parity are written in parallel: 2 ms.
/// A full-stripe write (2 blocks, row 1) needs no reads: 1 ms.
#[test]
fn write_through_pays_the_two_phase_plan() {
    let lines = vec!["0 0 0 8 0".to_string(), "100000000 0 16 16 0".to_string()];
    let t = trace("writes", &lines);
    let m = timed(&format!(
        "[workload]\ntrace = {t}\nformat = \"mqsim\"\nops = \"all\"\n\
         [cache]\npolicy = \"lru\"\ncapacity_blocks = 4\n\
         [array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 4096\n\
         [run]\nmode = \"timed\"\n[controller]\nmiss_us = 0\n\
         [disk]\nmodel = \"constant\"\nservice_ms = 1\n"
    ));
    assert_eq!(m.write_latency.count(), 2);
    assert_eq!(m.write_latency.max_ns(), 2_000_000);
    assert_eq!(m.write_latency.mean_ns(), 1.5e6);
    assert_eq!(m.count.disk_writes.iter().sum::<u64>(), 2 + 3);
    assert_eq!(m.count.disk_reads.iter().sum::<u64>(), 1);
}

/// Open loop at trace times gives exactly counting mode's hits, misses and disk blocks.
#[test]
fn timed_cache_decisions_equal_counting_mode() {
    let base = "[workload.synthetic]\nkind = \"websearch\"\nspace_gib = 2\nrequests = 20000\n\
                [cache]\npolicy = \"vdf-lru\"\ncapacity_blocks = 2000\n\
                [array]\ndisks = 5\nfailed = [1]\n";
    let counted = crate::engine::count::run(&exps(base)[0], None, true, &mut |_| true).unwrap();
    let m = timed(&format!(
        "{base}[run]\nmode = \"timed\"\n[disk]\nmodel = \"constant\"\nservice_ms = 0.1\n"
    ));
    assert_eq!(m.count.hits, counted.hits);
    assert_eq!(m.count.misses, counted.misses);
    assert_eq!(m.count.disk_reads, counted.disk_reads);
    assert_eq!(m.count.miss_disk_blocks, counted.miss_disk_blocks);
    assert_eq!(m.completed, counted.requests);
}

/// A failure event mid-run: the failed disk gets no new operations, reads of its blocks
/// reconstruct from the others, and the same config gives the same results bit for bit.
#[test]
fn failure_event_switches_to_degraded_and_runs_are_deterministic() {
    let text = format!(
        "{w}[array]\ndisks = 4\nstripe_unit = 4096\n\
         [run]\nmode = \"timed\"\niops = 400\ninterval_s = 5\n\
         [disk]\nmodel = \"constant\"\nservice_ms = 1\n[[events]]\nat_s = 25\nfail = 2\n",
        w = all_misses(20000),
    );
    let a = timed(&text);
    let b = timed(&text);
    let strip = |m: &TimedMetrics| {
        let mut v = m.to_json();
        let o = v.as_object_mut().unwrap();
        for k in ["wall_s", "requests_per_wall_s", "events_per_wall_s"] {
            o.remove(k);
        }
        v
    };
    assert_eq!(strip(&a), strip(&b));
    assert_eq!(a.failures, vec![(25_000_000_000, 2)]);
    // Before the failure each disk serves a quarter of the reads; after it, a read of disk
    // 2's blocks costs one read on each of the three others (4 reads per 4 requests -> 6).
    let util_2 = &a.series.util[2];
    let util_0 = &a.series.util[0];
    let rows = a.series.t_s.len();
    assert!(rows >= 10, "{rows}");
    assert!(util_2[1] > 0.05 && util_2[rows - 2] == 0.0);
    assert!(util_0[rows - 2] > 1.3 * util_0[1]);
    let reads: u64 = a.count.disk_reads.iter().sum();
    assert!(reads > 20000 && reads < 30000, "{reads}");
}

/// A ramp on one 1 ms disk: the response time grows with the load and the level past the
/// service rate (1000 IOPS) is marked saturated and ends the ramp.
#[test]
fn ramp_finds_the_service_rate() {
    let m = timed(&format!(
        "{w}[run]\nmode = \"timed\"\ndriver = \"ramp\"\n\
         levels_iops = [200, 500, 800, 1500, 2000]\nlevel_s = 20\nwarmup_s = 5\n\
         [disk]\nmodel = \"constant\"\nservice_ms = 1\n",
        w = all_misses(10000000),
    ));
    let p = &m.ramp;
    assert_eq!(p.len(), 4, "{p:?}");
    assert!(p[..3].iter().all(|x| !x.saturated));
    assert!(p[3].saturated);
    assert!(p[0].mean_ms < p[1].mean_ms && p[1].mean_ms < p[2].mean_ms);
    for x in &p[..3] {
        assert!(
            (x.iops - x.target_iops).abs() / x.target_iops < 0.05,
            "{x:?}"
        );
    }
    assert!(p[3].iops < 1010.0, "{:?}", p[3]);
}

#[test]
fn open_loop_overload_is_a_config_error() {
    let e = run(
        &exps(&format!(
            "{w}[run]\nmode = \"timed\"\niops = 5000\n\
             outstanding_max = 1000\n[disk]\nmodel = \"constant\"\nservice_ms = 1\n",
            w = all_misses(100000),
        ))[0],
        None,
        true,
        &mut |_| true,
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::Config { key, .. } if key == "run.outstanding_max"),
        "{e}"
    );
}

/// A run's metrics as JSON without the wall-clock ones.
fn results(exp: &Experiment, workload_thread: bool) -> String {
    let mut m = run(exp, None, workload_thread, &mut |_| true).unwrap();
    m.count.wall_ns = 0;
    serde_json::to_string(&m.to_json()).unwrap()
}

#[test]
fn a_workload_drawn_on_its_own_thread_gives_the_same_results() {
    // SPC-1 scales its streams to a Poisson open loop's rate (`set_load` before the first
    // draw); a closed loop draws as requests complete; a ramp never uses the thread.
    let spc1 = "[workload]\nops = \"all\"\n[workload.synthetic]\nkind = \"spc1\"\n\
                requests = 6000\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 4000\n\
                [array]\ndisks = 5\nfailed = [1]\n[disk]\nmodel = \"constant\"\n\
                service_ms = 0.2\n[run]\nmode = \"timed\"\n";
    for driver in [
        "iops = 3000",
        "driver = \"closed\"\noutstanding = 8",
        "driver = \"ramp\"\nlevel_s = 1\nlevels_iops = [500.0, 1500.0]",
    ] {
        let exp = &exps(&format!("{spc1}{driver}\n"))[0];
        assert_eq!(results(exp, true), results(exp, false), "{driver}");
    }
}

/// Two one-block writes to one row at the same instant (the set-up above). With row locks
/// (the default) the second waits for the first's whole reconstruct-write: 2 ms, then its
/// own 2 ms. Without them both read at once (1 ms), and only the parity disk serialises
/// their writes: 2 and 3 ms.
#[test]
fn a_second_write_to_a_row_waits_for_the_first() {
    let lines = vec!["0 0 0 8 0".to_string(), "0 0 8 8 0".to_string()];
    let t = trace("row-lock", &lines);
    let run = |locks: bool| {
        timed(&format!(
            "[workload]\ntrace = {t}\nformat = \"mqsim\"\nops = \"all\"\n\
             [cache]\npolicy = \"lru\"\ncapacity_blocks = 4\n\
             [array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 4096\n\
             [run]\nmode = \"timed\"\n[controller]\nmiss_us = 0\nrow_locks = {locks}\n\
             [disk]\nmodel = \"constant\"\nservice_ms = 1\nqueue = \"fcfs\"\n"
        ))
    };
    let m = run(true);
    assert_eq!(m.write_latency.count(), 2);
    assert_eq!(
        (m.write_latency.max_ns(), m.write_latency.mean_ns()),
        (4_000_000, 3e6)
    );
    assert_eq!((m.row_lock_waits, m.row_lock_wait_ns), (1, 2_000_000));
    assert_eq!(m.count.disk_writes.iter().sum::<u64>(), 4);
    let m = run(false);
    assert_eq!(
        (m.write_latency.max_ns(), m.write_latency.mean_ns()),
        (3_000_000, 2.5e6)
    );
    assert_eq!((m.row_lock_waits, m.row_lock_wait_ns), (0, 0));
    assert_eq!(m.count.disk_writes.iter().sum::<u64>(), 4);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// Overlapping writes of any spans, mixed with reads, on any level with a failed disk or
    /// none: every request completes (no two writes wait on each other), every row is
    /// released at the end (the engine asserts it), and at most one wait per write.
    #[test]
    fn row_locks_never_deadlock(
        reqs in proptest::collection::vec((0u64..4_000_000, 0u64..40, 1u64..12, proptest::bool::ANY), 1..60),
        level in 0usize..3,
        failed in proptest::bool::ANY,
    ) {
        let mut sorted = reqs.clone();
        sorted.sort_by_key(|r| r.0);
        let lines: Vec<String> = sorted
            .iter()
            .map(|&(t, b, n, read)| format!("{t} 0 {} {} {}", b * 8, n * 8, u8::from(read)))
            .collect();
        let t = trace(&format!("row-lock-prop-{level}-{failed}"), &lines);
        let (lvl, disks) = [("raid5", 4), ("raid6", 5), ("raid10", 4)][level];
        let m = timed(&format!(
            "[workload]\ntrace = {t}\nformat = \"mqsim\"\nops = \"all\"\n\
             [cache]\npolicy = \"lru\"\ncapacity_blocks = 4\n\
             [array]\nlevel = \"{lvl}\"\ndisks = {disks}\nstripe_unit = 8192\n{f}\
             [run]\nmode = \"timed\"\n\
             [disk]\nmodel = \"constant\"\nservice_ms = 1\n",
            f = if failed { "failed = [1]\n" } else { "" },
        ));
        let writes = reqs.iter().filter(|r| !r.3).count() as u64;
        proptest::prop_assert_eq!(m.completed, reqs.len() as u64);
        proptest::prop_assert!(m.row_lock_waits <= writes);
    }
}
