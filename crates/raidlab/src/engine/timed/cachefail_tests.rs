//! Worked examples of cache failures in timed mode, on constant-time disks (1 ms per
//! operation), 4 KiB pages, a 16-page write cache that destages only when full (and drains at
//! the end). MQSim lines: `arrival_ns device lba_sectors size_sectors type` (0 = write).

use crate::config;
use crate::engine::timed::run;
use crate::metrics::backup::BackupMetrics;
use crate::metrics::cachefail::CacheFailMetrics;
use crate::metrics::TimedMetrics;

fn timed(name: &str, lines: &[&str], tables: &str) -> crate::error::Result<TimedMetrics> {
    let dir = std::env::temp_dir().join(format!("raidlab-cf-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.mqsim.txt");
    std::fs::write(&path, lines.join("\n")).unwrap();
    let disk = if tables.contains("[disk]") {
        ""
    } else {
        "[disk]\nmodel = \"constant\"\nservice_ms = 1\n"
    };
    let text = format!(
        "[workload]\ntrace = {:?}\nformat = \"mqsim\"\nops = \"all\"\n\
         [run]\nmode = \"timed\"\n[controller]\nhit_us = 200\n{disk}\
         [write_cache]\ncapacity_pages = 16\ngroup_bytes = 16384\nrate = \"fixed\"\nthreshold = 100\n\
         {tables}",
        path.display().to_string()
    );
    let exps = config::from_toml(&text, "t.toml", None)?;
    run(&exps[0], None, &mut |_| true)
}

fn backup(m: &TimedMetrics) -> &BackupMetrics {
    m.write_cache.as_ref().unwrap().backup.as_ref().unwrap()
}

fn failures(m: &TimedMetrics) -> &CacheFailMetrics {
    backup(m).failures.as_ref().unwrap()
}

/// Pages 0-3 written at t = 0.
const FOUR: [&str; 4] = ["0 0 0 8 0", "0 0 8 8 0", "0 0 16 8 0", "0 0 24 8 0"];

/// One 2-page segment buffer and a 1-page LRU; 128 segments of 8 KiB.
const RAPID: &str = "[backup]\nnvram_kib = 12\nsegment_kib = 8\nsegment_buffers = 1\n\
    disk_mib = 1\ngc_free_segments = 1\n";

fn event(at_s: f64, what: &str) -> String {
    format!("[[events]]\nat_s = {at_s}\nfail_cache = \"{what}\"\n")
}

#[test]
fn rapid_rebuilds_the_primary_from_nvram_and_one_segment_read() {
    // By 1 ms: segment 0 (pages 0, 1) is on the cache disk, page 2 fills the buffer (segment
    // 1), page 3 is in the LRU (it waited for the buffer: acknowledged at 1.2 ms). The primary
    // fails at 2 ms: pages 2 and 3 are copied back from the NVRAM, segment 0 is read (2 blocks,
    // 2 to 3 ms). At 2.5 ms a write of page 4 and a read of page 0 (held by the write cache)
    // wait for the recovery: both finish at 3.2 ms; a read of page 100 goes to the data disk
    // (2.5 to 3.5 ms).
    let mut lines = FOUR.to_vec();
    lines.extend(["2500000 0 32 8 0", "2500000 0 0 8 1", "2500000 0 800 8 1"]);
    let m = timed(
        "rapid",
        &lines,
        &format!("{RAPID}{}", event(0.002, "primary")),
    )
    .unwrap();
    let f = failures(&m);
    assert_eq!(f.primary_failures, 1);
    assert_eq!(f.recovery_ns_max, 1_000_000);
    assert_eq!(
        (f.recovered_pages, f.recovered_disk_pages, f.recovery_reads),
        (4, 2, 1)
    );
    assert_eq!((f.lost_pages, f.recovery_waited_reads), (0, 1));
    assert_eq!(backup(&m).stats.disk_reads, 1);
    assert_eq!(m.write_latency.max_ns(), 1_200_000);
    assert_eq!(
        m.write_latency.mean_ns(),
        (3.0 * 200_000.0 + 1_200_000.0 + 700_000.0) / 5.0
    );
    assert_eq!(m.read_latency.max_ns(), 1_000_000);
    assert_eq!(m.read_latency.mean_ns(), (700_000.0 + 1_000_000.0) / 2.0);
    // The cache disk: two segment writes and the recovery read, 16 sectors each.
    let cd = m.disks.last().unwrap();
    assert_eq!((cd.ops, cd.write_sectors, cd.read_sectors), (3, 32, 16));
    // Every acknowledged page reaches the data disk in the final drain.
    assert_eq!(m.write_cache.as_ref().unwrap().stats.destaged_pages, 5);
}

#[test]
fn without_a_backup_a_primary_failure_loses_every_dirty_page() {
    let m = timed("none", &FOUR, &event(0.002, "primary")).unwrap();
    let f = failures(&m);
    assert_eq!(backup(&m).kind, "none");
    assert_eq!(
        (f.lost_pages, f.recovered_pages, f.recovery_ns_max),
        (4, 0, 0)
    );
    // Nothing is left to destage: the data disk never sees a write.
    assert_eq!(m.disks[0].write_sectors, 0);
    // A dual NVRAM copies its mirror back at once and loses nothing.
    let d = timed(
        "dual",
        &FOUR,
        &format!("[backup]\nkind = \"dual\"\n{}", event(0.002, "primary")),
    )
    .unwrap();
    let f = failures(&d);
    assert_eq!(
        (f.lost_pages, f.recovered_pages, f.recovery_ns_max),
        (0, 4, 0)
    );
    assert_eq!(d.disks[0].write_sectors, 4 * 8);
    // The mirror fails first: the 4 pages have a single copy, and a primary failure then
    // loses them.
    let d = timed(
        "dual2",
        &FOUR,
        &format!(
            "[backup]\nkind = \"dual\"\n{}{}",
            event(0.001, "backup"),
            event(0.002, "primary")
        ),
    )
    .unwrap();
    let f = failures(&d);
    assert_eq!((f.unprotected_pages, f.lost_pages), (4, 4));
}

const RAID5: &str = "[array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 8192\n";

#[test]
fn a_lost_cache_disk_falls_back_to_a_logical_one() {
    // The cache disk fails at 0.5 ms while segment 0 (pages 0, 1) is being written to it:
    // the write is lost and issued again to the logical log on data disk 0 (0.5 to 1.5 ms);
    // page 3, waiting for the buffer, is acknowledged at 1.7 ms.
    let m = timed(
        "disk",
        &FOUR,
        &format!("{RAID5}{RAPID}{}", event(0.0005, "cache_disk")),
    )
    .unwrap();
    let f = failures(&m);
    assert_eq!((f.cache_disk_failures, f.lost_log_ios), (1, 1));
    assert_eq!((f.unprotected_pages, f.unprotected_ns_max), (0, 0));
    assert_eq!(m.write_latency.max_ns(), 1_700_000);
    // Devices: 3 members, then the cache disk, whose one write was lost.
    assert_eq!(m.disks.len(), 4);
    assert_eq!(m.disks[3].ops, 1);
    assert_eq!(backup(&m).log_ios_done, 1);
}

#[test]
fn pages_only_on_the_lost_disk_are_exposed_until_copied_again() {
    // At 2 ms segment 0 (pages 0, 1) is on the cache disk when it fails; page 2 is in the
    // buffer, 3 in the LRU. Page 0 joins page 2 in the buffer (a 2-page log write to data disk
    // 0, 2 to 3 ms); page 1 waits for the buffer and is re-protected at 3 ms.
    let tables = format!("{RAID5}{RAPID}{}", event(0.002, "cache_disk"));
    let m = timed("expose", &FOUR, &tables).unwrap();
    let f = failures(&m);
    assert_eq!((f.unprotected_pages, f.unprotected_ns_max), (2, 1_000_000));
    assert_eq!(f.lost_pages, 0);
    // A primary failure at 2.5 ms, inside that window, loses page 1 (its only other copy was
    // on the lost disk); pages 0, 2 (buffer) and 3 (LRU) are copied back from the NVRAM.
    let m = timed(
        "expose2",
        &FOUR,
        &format!("{tables}{}", event(0.0025, "primary")),
    )
    .unwrap();
    let f = failures(&m);
    assert_eq!(
        (f.lost_pages, f.recovered_pages, f.recovery_reads),
        (1, 3, 0)
    );
    assert_eq!(m.write_cache.as_ref().unwrap().stats.destaged_pages, 3);
}

#[test]
fn a_failed_nvram_borrows_from_the_primary() {
    // The NVRAM (3 pages) fails at 2 ms holding pages 2 and 3: copied again at once into 3
    // pages borrowed from the primary (16 -> 13 pages). A primary failure later loses them
    // (the borrowed NVRAM shares its memory); page 0, 1 are read back from segment 0.
    let m = timed(
        "nvram",
        &FOUR,
        &format!(
            "{RAPID}{}{}",
            event(0.002, "backup"),
            event(0.003, "primary")
        ),
    )
    .unwrap();
    let f = failures(&m);
    assert_eq!((f.unprotected_pages, f.borrowed_pages), (2, 3));
    assert_eq!(
        (f.lost_pages, f.recovered_disk_pages, f.recovery_reads),
        (2, 2, 1)
    );
    assert_eq!(f.recovery_ns_max, 1_000_000);
}
