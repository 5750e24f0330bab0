//! Worked examples of the write cache in timed mode, on constant-time disks (1 ms per
//! operation) so every time can be computed by hand. MQSim lines: `arrival_ns device
//! lba_sectors size_sectors type` (type 0 = write, 1 = read); a 4 KiB page is 8 sectors.

use crate::engine::timed::tests::{timed as run_text, trace};
use crate::metrics::TimedMetrics;

fn timed(name: &str, lines: &[&str], tables: &str) -> TimedMetrics {
    run_text(&format!(
        "[workload]\ntrace = {}\nformat = \"mqsim\"\nops = \"all\"\n\
         [run]\nmode = \"timed\"\n[controller]\nhit_us = 200\n\
         [disk]\nmodel = \"constant\"\nservice_ms = 1\n{tables}",
        trace(&format!("wb-{name}"), lines)
    ))
}

#[test]
fn writes_are_acknowledged_from_cache_and_destaged_at_the_low_threshold() {
    // 4-page groups, 8 pages: L = 4 pages (50%), H = 8. Pages 0-3 arrive 1 ms apart; the
    // fourth reaches L at 3 ms and its group (one contiguous op of 4 blocks) is destaged
    // from 3 to 4 ms.
    let m = timed(
        "ack",
        &[
            "0 0 0 8 0",
            "1000000 0 8 8 0",
            "2000000 0 16 8 0",
            "3000000 0 24 8 0",
        ],
        "[write_cache]\ncapacity_pages = 8\ngroup_bytes = 16384\nhigh = 100\nlow = 50\n",
    );
    assert_eq!(m.completed, 4);
    assert_eq!(m.write_latency.mean_ns(), 200_000.0);
    assert_eq!(m.sim_ns, 3_200_000);
    assert_eq!(m.disks[0].ops, 1);
    assert_eq!(m.disks[0].write_sectors, 32);
    let wc = m.write_cache.as_ref().unwrap();
    assert_eq!(wc.stats.destages, 1);
    assert_eq!(wc.stats.full_destages, 1);
    assert_eq!(wc.stats.stripe_hits, 3);
    assert_eq!(wc.left_pages, 0);
    // The destage ends 0.8 ms after the last acknowledgement.
    assert_eq!(wc.drain_ns, 800_000);
    assert_eq!(wc.full_ns, 0);
    // Occupancy: 1, 2, 3 pages for 1 ms each, 4 pages for 1 ms (3-4 ms), over 4 ms.
    assert_eq!(wc.occupancy_area, 10.0 * 1e6);
}

#[test]
fn a_full_cache_makes_writes_wait() {
    // 4 pages = one group; fixed threshold at 100%. Five single-page writes at 0: pages 0-3
    // fill the cache, whose group is destaged from 0 to 1 ms; page 4 waits until 1 ms and is
    // acknowledged at 1.2 ms. Page 4 is left below the threshold and drained from 1.2 to
    // 2.2 ms.
    let m = timed(
        "full",
        &["0 0 0 8 0", "0 0 8 8 0", "0 0 16 8 0", "0 0 24 8 0", "0 0 32 8 0"],
        "[write_cache]\ncapacity_pages = 4\ngroup_bytes = 16384\nrate = \"fixed\"\nthreshold = 100\n",
    );
    assert_eq!(m.completed, 5);
    assert_eq!(m.write_latency.max_ns(), 1_200_000);
    assert_eq!(
        m.write_latency.mean_ns(),
        (4.0 * 200_000.0 + 1_200_000.0) / 5.0
    );
    let wc = m.write_cache.as_ref().unwrap();
    assert_eq!(
        (wc.waited_writes, wc.wait_ns, wc.full_ns),
        (1, 1_000_000, 1_000_000)
    );
    assert_eq!(wc.stats.destages, 2);
    assert_eq!(wc.drain_ns, 1_000_000);
    assert_eq!(m.disks[0].ops, 2);
}

#[test]
fn reads_hit_dirty_pages() {
    // A write of pages 0-1, then a read of page 1 (a write-cache hit, no disk) and of page 5
    // (a miss: one disk read, 1 ms). The cache never reaches its low threshold: the final
    // drain destages pages 0-1 as one op.
    let m = timed(
        "reads",
        &["0 0 0 16 0", "1000000 0 8 8 1", "2000000 0 40 8 1"],
        "[write_cache]\ncapacity_pages = 64\ngroup_bytes = 16384\n",
    );
    let wc = m.write_cache.as_ref().unwrap();
    assert_eq!((wc.stats.read_lookups, wc.stats.read_hits), (2, 1));
    assert_eq!(m.read_latency.mean_ns(), (200_000.0 + 1_000_000.0) / 2.0);
    assert_eq!(m.count.hits, 1);
    assert_eq!(m.disks[0].ops, 2);
    assert_eq!(wc.stats.destaged_pages, 2);
}

#[test]
fn raid5_destage_of_one_page_is_a_read_modify_write() {
    // RAID-5 of 5 disks, 16 KiB units (4 pages), one 16-page group. One page: read old data
    // and parity (1 ms, in parallel), then write both (1 ms).
    let m = timed(
        "rmw",
        &["0 0 0 8 0"],
        "[write_cache]\ncapacity_pages = 64\n\
         [array]\nlevel = \"raid5\"\ndisks = 5\nstripe_unit = 16384\n",
    );
    let wc = m.write_cache.as_ref().unwrap();
    assert_eq!(wc.rows.rmw, 1);
    assert_eq!((wc.destage_read_ops, wc.destage_write_ops), (2, 2));
    assert_eq!(wc.drain_ns, 2_000_000);
    let ops: u64 = m.disks.iter().map(|d| d.ops).sum();
    assert_eq!(ops, 4);
    assert_eq!(m.count.disk_reads.iter().sum::<u64>(), 2);
}

#[test]
fn same_config_same_results() {
    let lines: Vec<String> = (0..400u64)
        .map(|i| {
            let lba = (i * 7919) % 512 * 8;
            format!("{} 0 {lba} 8 {}", i * 300_000, i % 3 / 2)
        })
        .collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let tables = "[write_cache]\ncapacity_pages = 64\norder = \"stow\"\nhigh = 70\nlow = 40\n\
                  [array]\nlevel = \"raid5\"\ndisks = 5\nstripe_unit = 16384\n";
    let a = timed("det-a", &lines, tables);
    let b = timed("det-b", &lines, tables);
    let (mut ja, mut jb) = (a.to_json(), b.to_json());
    for j in [&mut ja, &mut jb] {
        let o = j.as_object_mut().unwrap();
        for k in ["wall_s", "requests_per_wall_s", "events_per_wall_s"] {
            o.remove(k);
        }
    }
    assert_eq!(ja, jb);
    let wc = a.write_cache.as_ref().unwrap();
    assert_eq!(wc.left_pages, 0);
    assert_eq!(
        wc.stats.destaged_pages + wc.stats.overwrite_hits,
        wc.stats.page_writes
    );
}

#[test]
fn destages_below_user_reads_or_beside_them() {
    // Two 4-page groups written at 0 with a fixed threshold of 50%: group 0's destage runs
    // 0-1 ms, group 1's waits at the disk. A read miss arrives at 0.5 ms. With destages below
    // user I/O (default) the read is served 1-2 ms (1.5 ms); with `destage_priority = "user"`
    // the two share one FCFS class and the read follows the earlier destage: 2-3 ms (2.5 ms).
    let lines = ["0 0 0 32 0", "0 0 32 32 0", "500000 0 160 8 1"];
    let wc = "[write_cache]\ncapacity_pages = 8\ngroup_bytes = 16384\nrate = \"fixed\"\n\
              threshold = 50\n";
    let low = timed("prio-low", &lines, &format!("queue = \"fcfs\"\n{wc}"));
    let user = timed(
        "prio-user",
        &lines,
        &format!("queue = \"fcfs\"\n{wc}destage_priority = \"user\"\n"),
    );
    assert_eq!(low.read_latency.mean_ns(), 1_500_000.0);
    assert_eq!(user.read_latency.mean_ns(), 2_500_000.0);
    for m in [&low, &user] {
        assert_eq!(m.write_cache.as_ref().unwrap().stats.destages, 2);
        assert_eq!(m.disks[0].ops, 3);
    }
}
