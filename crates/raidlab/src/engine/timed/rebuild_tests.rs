//! Worked examples of the rebuild in the timed engine, on constant-time disks so the
//! schedule can be followed by hand.

use super::tests::timed as run_text;
use super::*;

/// RAID-5 of 3 constant 1 ms disks, one-block (4 KiB) units, `units` rows; one user read at
/// t = 0, then disk 1 fails and its rebuild starts at 1 s.
fn config(units: u64, rebuild: &str) -> String {
    let gib = (units * 4096) as f64 / (1u64 << 30) as f64;
    format!(
        "[workload.synthetic]\nkind = \"uniform\"\nkeys = 4\nrequests = 1\nseed = 1\n\
         [cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n\
         [array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 4096\n\
         [run]\nmode = \"timed\"\ndriver = \"closed\"\noutstanding = 1\n\
         [disk]\nmodel = \"constant\"\nservice_ms = 1\n\
         [rebuild]\nextent_gib = {gib}\n{rebuild}\n\
         [[events]]\nat_s = 1\nfail = 1\n[[events]]\nat_s = 1\nrebuild = 1\n"
    )
}

fn rebuild_s(m: &TimedMetrics) -> f64 {
    let r = &m.rebuild.as_ref().unwrap().records[0];
    (r.end_ns.expect("the rebuild finished") - r.start_ns) as f64 / 1e9
}

/// SOR, one stripe at a time: each unit reads both survivors in parallel (1 ms), then writes
/// the spare (1 ms): 8 units take exactly 16 ms.
#[test]
fn sor_one_stripe_at_a_time() {
    let m = run_text(&config(8, "executor = \"sor\""));
    let r = &m.rebuild.as_ref().unwrap().records[0];
    assert_eq!((r.units, r.rebuilt, r.reads, r.writes), (8, 8, 16, 8));
    assert_eq!(r.start_ns, 1_000_000_000);
    assert_eq!(r.end_ns, Some(1_016_000_000));
    // Devices: members 0-2 and the spare (3). Disk 1 did the user read or nothing.
    assert_eq!(m.disks.len(), 4);
    assert_eq!(m.disks[3].ops, 8);
    assert_eq!(m.disks[0].ops + m.disks[2].ops, 16 + 1 - m.disks[1].ops);
    // The window alone: no user request (the only one came at t = 0); each survivor read 8
    // units and the spare wrote 8, 1 ms each, over 16 ms: half busy; the failed disk idle.
    assert_eq!((r.window.lookups, r.window.hits), (0, 0));
    assert_eq!(r.window.busy_ns, vec![8_000_000, 0, 8_000_000, 8_000_000]);
    let mut flat = serde_json::Map::new();
    m.rebuild.as_ref().unwrap().put(&mut flat);
    assert_eq!(flat["window_util_mean"], 0.5);
    assert_eq!(flat["window_util_max"], 0.5);
    assert_eq!(flat["window_rgr"], 0.0);
}

/// DOR: both survivors stream (a read queued behind the one in service), unit k's reads end
/// at k + 1 ms and its write right after: 8 units in 9 ms. Two stripes of SOR in parallel:
/// the survivors serve two reads per 2 ms, the spare writes them in 2 ms: 8 units in 9 ms
/// too, but a single SOR stripe is slower.
#[test]
fn dor_streams_the_survivors() {
    let m = run_text(&config(8, ""));
    let r = &m.rebuild.as_ref().unwrap().records[0];
    assert_eq!((r.rebuilt, r.reads), (8, 16));
    assert_eq!(rebuild_s(&m), 0.009);
    assert_eq!(m.disks[3].ops, r.writes);
    assert!(rebuild_s(&run_text(&config(8, "executor = \"sor\"\nstripes = 2"))) <= 0.010);
}

/// DOR merging 4 units per read on constant 1 ms disks: each survivor reads units 0-3 by
/// 1 ms and 4-7 by 2 ms (queued behind), the spare writes 0-3 by 2 ms and 4-7 by 3 ms.
#[test]
fn dor_merged_reads_take_one_operation_each() {
    let m = run_text(&config(8, "read_units = 4"));
    let r = &m.rebuild.as_ref().unwrap().records[0];
    assert_eq!((r.rebuilt, r.reads, r.writes), (8, 4, 2));
    assert_eq!(rebuild_s(&m), 0.003);
}

/// md pacing with min = max = 100 KiB/s: one 4 KiB unit per 40 ms, so the last of 256 units
/// starts at 255 * 40 ms = 10.2 s and is written 2 ms later.
#[test]
fn md_rate_paces_the_rebuild() {
    let m = run_text(&config(
        256,
        "rate = \"md\"\nmin_kib_s = 100\nmax_kib_s = 100",
    ));
    let s = rebuild_s(&m);
    assert!((10.2..10.21).contains(&s), "{s}");
    let fast = rebuild_s(&run_text(&config(256, "rate = \"md\"\nmax_kib_s = 1000")));
    // Idle array: paced at the maximum, ten times faster.
    assert!((1.02..1.03).contains(&fast), "{fast}");
}

/// Users keep reading across the rebuild: the failed device gets nothing once it failed,
/// reads of rebuilt rows go to the spare, and afterwards the member lives on the spare.
#[test]
fn users_move_to_the_replacement() {
    let text = "[workload.synthetic]\nkind = \"uniform\"\nkeys = 2048\nrequests = 4000\nseed = 3\n\
         [cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n\
         [array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 4096\n\
         [run]\nmode = \"timed\"\ndriver = \"open\"\niops = 200\ninterval_s = 1\n\
         [disk]\nmodel = \"constant\"\nservice_ms = 1\n\
         [rebuild]\nextent_gib = 0.00390625\n\
         [[events]]\nat_s = 5\nfail = 1\n[[events]]\nat_s = 6\nrebuild = 1\n";
    let m = run_text(text);
    let rb = m.rebuild.as_ref().unwrap();
    let r = &rb.records[0];
    assert_eq!(r.units, 1024);
    assert_eq!(r.failed_ns, 5_000_000_000);
    assert!(r.end_ns.is_some_and(|e| e < 18_000_000_000), "{r:?}");
    assert!(r.redirected_reads > 0);
    // All three phases saw requests.
    assert!(rb.before.count() > 0 && rb.during.count() > 0 && rb.after.count() > 0);
    assert_eq!(
        rb.before.count() + rb.during.count() + rb.after.count(),
        m.completed
    );
    // Disk 1 served about a third of the reads until 5 s (about 333), nothing after.
    assert!((250..420).contains(&m.disks[1].ops), "{}", m.disks[1].ops);
    // The spare took the rebuild writes, the redirected reads and a third of the reads
    // after the rebuild.
    assert!(m.disks[3].ops > r.writes + r.redirected_reads + 200);
    // The progress column rises to 1.
    let p = &m.series.rebuild_progress;
    assert_eq!(p.len(), m.series.t_s.len());
    assert!(p.windows(2).all(|w| w[0] <= w[1]) && p.last() == Some(&1.0));
    // Same config, same numbers.
    let again = run_text(text);
    assert_eq!(again.rebuild.as_ref().unwrap().records, rb.records);
    assert_eq!(again.latency.mean_ns(), m.latency.mean_ns());
}

/// Piggybacking: a user read that reconstructs a unit not yet rebuilt reads the whole unit
/// and writes it to the spare; the rebuild skips it.
#[test]
fn piggybacked_units_are_not_rebuilt_twice() {
    let text = "[workload.synthetic]\nkind = \"uniform\"\nkeys = 2048\nrequests = 4000\nseed = 3\n\
         [cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n\
         [array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 4096\n\
         [run]\nmode = \"timed\"\ndriver = \"open\"\niops = 1100\n\
         [disk]\nmodel = \"constant\"\nservice_ms = 1\n\
         [rebuild]\nextent_gib = 0.00390625\npiggyback = true\nrate = \"md\"\nmax_kib_s = 40\nmin_kib_s = 40\n\
         [[events]]\nat_s = 1\nfail = 1\n[[events]]\nat_s = 1\nrebuild = 1\n";
    let m = run_text(text);
    let r = &m.rebuild.as_ref().unwrap().records[0];
    assert!(r.piggybacked > 0, "{r:?}");
    assert_eq!(r.rebuilt, r.units);
    // Every unit is rebuilt once: by the executor (two reads, written in merged writes) or
    // by a user read (one write each).
    assert_eq!(r.reads, 2 * (r.units - r.piggybacked));
    assert!(m.disks[3].ops >= r.writes + r.piggybacked);
}

/// The rebuild window's counters are differences of counters the warm-up's end resets: a
/// rebuild before the end of the warm-up is a config error naming `run.warmup_s`.
#[test]
fn a_rebuild_during_the_warmup_is_refused() {
    let text = config(8, "").replace("outstanding = 1\n", "outstanding = 1\nwarmup_s = 2\n");
    let err = crate::config::from_toml(&text, "t.toml", None).unwrap_err();
    assert!(
        matches!(&err, crate::Error::Config { key, .. } if key == "run.warmup_s"),
        "{err}"
    );
    let ok = config(8, "").replace("outstanding = 1\n", "outstanding = 1\nwarmup_s = 0.5\n");
    assert_eq!(rebuild_s(&run_text(&ok)), 0.009);
    // A rebuild at the very end of the warm-up: the counters restart first, so its window
    // (no user request in it) counts nothing rather than a difference across the reset.
    let at = config(8, "").replace("outstanding = 1\n", "outstanding = 1\nwarmup_s = 1\n");
    let m = run_text(&at);
    let w = &m.rebuild.as_ref().unwrap().records[0].window;
    assert_eq!((w.lookups, w.hits, w.miss_disk_blocks), (0, 0, 0));
    assert_eq!(m.measure_from_ns, 1_000_000_000);
}

/// `priority = "user"` queues rebuild I/O with users' in one FCFS queue (md's resync in the
/// block layer's elevator). Open-loop users below saturation bring a fixed amount of work,
/// and the rebuild takes all the rest whatever its class, so on constant-time disks the
/// rebuild lasts the same (survivors busy throughout either way); what changes is who waits:
/// users now queue behind rebuild reads (DOR keeps 8 at each survivor here).
#[test]
fn rebuild_in_the_user_class_trades_users_latency_for_rebuild_time() {
    let text = |priority: &str| {
        format!(
            "[workload.synthetic]\nkind = \"uniform\"\nkeys = 2048\nrequests = 12000\nseed = 3\n\
             [cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n\
             [array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 4096\n\
             [run]\nmode = \"timed\"\ndriver = \"open\"\niops = 1100\n\
             [disk]\nmodel = \"constant\"\nservice_ms = 1\n\
             [rebuild]\nextent_gib = 0.00390625\ndepth = 8\n{priority}\n\
             [[events]]\nat_s = 1\nfail = 1\n[[events]]\nat_s = 1\nrebuild = 1\n"
        )
    };
    let below = run_text(&text(""));
    let user = run_text(&text("priority = \"user\""));
    assert_eq!(
        below.rebuild.as_ref().unwrap().records[0].rebuilt,
        user.rebuild.as_ref().unwrap().records[0].rebuilt
    );
    let (rb_below, rb_user) = (rebuild_s(&below), rebuild_s(&user));
    assert!(
        (rb_user - rb_below).abs() < 0.05 * rb_below,
        "{rb_user} vs {rb_below}"
    );
    for m in [&below, &user] {
        let r = &m.rebuild.as_ref().unwrap().records[0];
        let busy_ns = r.window.busy_ns[0].min(r.window.busy_ns[2]) as f64;
        assert!(
            busy_ns > 0.99 * rebuild_s(m) * 1e9,
            "{:?}",
            r.window.busy_ns
        );
    }
    let during = |m: &TimedMetrics| m.rebuild.as_ref().unwrap().during.mean_ns();
    // Measured: 2.3 ms below users, 19.2 ms in their class.
    assert!(
        during(&user) > 4.0 * during(&below),
        "{} vs {}",
        during(&user),
        during(&below)
    );
    match crate::config::from_toml(&text("priority = \"top\""), "t.toml", None) {
        Err(crate::error::Error::Config { key, .. }) => assert_eq!(key, "rebuild.priority"),
        other => panic!("expected a config error, got {other:?}"),
    }
}
