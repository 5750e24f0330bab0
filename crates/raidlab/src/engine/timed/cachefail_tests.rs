//! Worked examples of cache failures in timed mode, on constant-time disks (1 ms per
//! operation), 4 KiB pages, a 16-page write cache that destages only when full (and drains at
//! the end). MQSim lines: `arrival_ns device lba_sectors size_sectors type` (0 = write).

use crate::metrics::backup::BackupMetrics;
use crate::metrics::cachefail::CacheFailMetrics;
use crate::metrics::TimedMetrics;

/// `backup_tests`' runners; the names are prefixed so their trace files stay apart.
fn timed(name: &str, lines: &[&str], tables: &str) -> crate::error::Result<TimedMetrics> {
    super::backup_tests::timed(&format!("cf-{name}"), lines, tables)
}

fn timed_group(
    name: &str,
    lines: &[&str],
    group_bytes: u32,
    tables: &str,
) -> crate::error::Result<TimedMetrics> {
    super::backup_tests::timed_group(&format!("cf-{name}"), lines, group_bytes, tables)
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
fn a_cache_disk_failing_during_a_recovery_loses_the_pages_being_read() {
    // The primary fails at 2 ms: pages 2 (buffer) and 3 (LRU) come back from the NVRAM and
    // segment 0 (pages 0, 1) is read from 2 ms. The cache disk fails at 2.5 ms: the read dies
    // with it, so pages 0 and 1 (in neither the primary nor the NVRAM) are lost, not copied
    // again "from the primary"; the recovery ends there.
    let tables = format!(
        "{RAID5}{RAPID}{}{}",
        event(0.002, "primary"),
        event(0.0025, "cache_disk")
    );
    let m = timed("during", &FOUR, &tables).unwrap();
    let f = failures(&m);
    assert_eq!((f.lost_pages, f.lost_log_ios), (2, 1));
    assert_eq!(f.recovery_ns_max, 500_000);
    assert_eq!(f.recovered_pages, 4);
    // Nothing is left exposed: the lost pages left the cache.
    assert_eq!(f.unprotected_ns_max, 0);
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

/// RAID-5 over 4 members with RAPID's log on a logical cache disk: segment `s` on member
/// `s mod 4`.
const LOGICAL4: &str = "[array]\nlevel = \"raid5\"\ndisks = 4\nstripe_unit = 8192\n\
    [backup]\nnvram_kib = 12\nsegment_kib = 8\nsegment_buffers = 1\ndisk_mib = 1\n\
    gc_free_segments = 1\ncache_disk = \"logical\"\n";

/// A stripe row's data (write-cache groups must hold whole rows): 3 x 8 KiB.
const ROW: u32 = 24576;

/// Pages 0-7 at t = 0, pages 8-11 at 10 ms.
const TWELVE: [&str; 12] = [
    "0 0 0 8 0",
    "0 0 8 8 0",
    "0 0 16 8 0",
    "0 0 24 8 0",
    "0 0 32 8 0",
    "0 0 40 8 0",
    "0 0 48 8 0",
    "0 0 56 8 0",
    "10000000 0 64 8 0",
    "10000000 0 72 8 0",
    "10000000 0 80 8 0",
    "10000000 0 88 8 0",
];

#[test]
fn a_failed_member_s_log_segments_are_skipped_and_their_pages_copied_again() {
    // Segments fill in log order, one 2-page buffer at a time (each log write takes 1 ms):
    // segment 0 (pages 0, 1) on member 0 at 0-1 ms, segment 1 (2, 3) on member 1 at 1-2 ms,
    // segment 2 (4, 5) on member 2 at 2-3 ms; page 6 is in the LRU and page 7 waits for the
    // buffer. Member 1 fails at 2.5 ms: pages 2 and 3 lose their copy. The buffer frees at
    // 3 ms and takes them first (segment 3, member 3, 3-4 ms): re-protected at 3 ms. Page 7
    // then waits for that write (acknowledged at 4.2 ms, not 3.2) and page 6 starts segment
    // 4 (member 0). The writes at 10 ms fill segment 4, then skip segment 5 (member 1) for 6.
    let fail = "[[events]]\nat_s = 0.0025\nfail = 1\n";
    let tables = format!("{LOGICAL4}{fail}");
    let m = timed_group("member", &TWELVE, ROW, &tables).unwrap();
    let f = failures(&m);
    assert_eq!(f.log_member_failures, 1);
    assert_eq!((f.unprotected_pages, f.unprotected_ns_max), (2, 500_000));
    assert_eq!((f.lost_log_ios, f.lost_pages), (0, 0));
    assert_eq!(m.write_latency.max_ns(), 4_200_000);
    // Member 1 saw only segment 1's log write (16 sectors): no log I/O after its failure,
    // and the degraded array writes no user data to it.
    assert_eq!((m.disks[1].ops, m.disks[1].write_sectors), (1, 16));
    // Log writes: segments 0-4, 6, and the buffer left at the end is never written.
    assert_eq!(backup(&m).stats.log_writes, 6);
    assert_eq!(m.write_cache.as_ref().unwrap().stats.destaged_pages, 12);

    // The primary fails at 2.75 ms, inside the window: exactly the 2 exposed pages are lost.
    // Page 6 (LRU) and the buffer being written (4, 5) come back from the NVRAM; segment 0 is
    // read from member 0 (2.75 to 3.75 ms).
    let m = timed_group(
        "member2",
        &TWELVE,
        ROW,
        &format!("{tables}{}", event(0.00275, "primary")),
    )
    .unwrap();
    let f = failures(&m);
    assert_eq!((f.unprotected_pages, f.lost_pages), (2, 2));
    assert_eq!(
        (f.recovered_pages, f.recovered_disk_pages, f.recovery_reads),
        (5, 2, 1)
    );
    assert_eq!(f.recovery_ns_max, 1_000_000);
    assert_eq!(m.write_cache.as_ref().unwrap().stats.destaged_pages, 10);
}

#[test]
fn a_member_failing_under_a_log_write_drops_it_and_writes_it_elsewhere() {
    // Member 1 fails at 1.5 ms while segment 1 (pages 2, 3) is being written to it: the write
    // is lost and the buffer is written again as segment 2 on member 2 (1.5 to 2.5 ms); the
    // pages never lost their copy (the buffer holds them).
    let tables = format!("{LOGICAL4}[[events]]\nat_s = 0.0015\nfail = 1\n");
    let m = timed_group("member3", &TWELVE, ROW, &tables).unwrap();
    let f = failures(&m);
    assert_eq!(
        (f.lost_log_ios, f.unprotected_pages, f.lost_pages),
        (1, 0, 0)
    );
    assert_eq!(m.disks[1].ops, 1);
    // Page 5 waited for the rewritten buffer: acknowledged at 2.7 ms.
    assert!(m.write_latency.max_ns() > 2_500_000);
}

#[test]
fn a_fallback_skips_a_data_disk_that_failed_before() {
    // Data disk 1 fails at 0.1 ms, while the log is still on the physical cache disk; the
    // cache disk fails at 2 ms (pages 0, 1 exposed, page 2 in the buffer, 3 in the LRU). The
    // log falls back to the data disks, skipping disk 1: pages 2 and 0 are written as segment
    // 0 on disk 0 (2 to 3 ms), then page 1 goes to segment 2 on disk 2, not 1; a write at
    // 10 ms fills it (page 3 evicted from the LRU) and it is written there.
    let mut lines = FOUR.to_vec();
    lines.push("10000000 0 32 8 0");
    let m = timed(
        "fallback",
        &lines,
        &format!(
            "{RAID5}{RAPID}[[events]]\nat_s = 0.0001\nfail = 1\n{}",
            event(0.002, "cache_disk")
        ),
    )
    .unwrap();
    let f = failures(&m);
    assert_eq!((f.log_member_failures, f.cache_disk_failures), (0, 1));
    assert_eq!((f.unprotected_pages, f.unprotected_ns_max), (2, 1_000_000));
    assert_eq!(m.disks[1].ops, 0);
    // Log writes: segment 0 on the cache disk, then segments 0 and 2 on disks 0 and 2.
    assert_eq!((backup(&m).stats.log_writes, f.lost_pages), (3, 0));
}

#[test]
fn a_member_failing_during_a_recovery_loses_its_segments_pages() {
    // As above; the primary fails at 2.25 ms: page 6 (LRU) and the buffer being written (4, 5)
    // come back at once, segments 0 (member 0) and 1 (member 1) are read from 2.25 ms. Member
    // 1 fails at 2.5 ms: its read is lost and so are pages 2, 3; the recovery ends with
    // segment 0's read at 3.25 ms.
    let tables = format!(
        "{LOGICAL4}{}[[events]]\nat_s = 0.0025\nfail = 1\n",
        event(0.00225, "primary")
    );
    let m = timed_group("member4", &TWELVE, ROW, &tables).unwrap();
    let f = failures(&m);
    assert_eq!((f.recovered_pages, f.recovery_reads), (7, 2));
    assert_eq!(
        (f.lost_pages, f.lost_log_ios, f.log_member_failures),
        (2, 1, 1)
    );
    assert_eq!(f.recovery_ns_max, 1_000_000);
    // Member 1: segment 1's log write and the lost read.
    assert_eq!(m.disks[1].ops, 2);
    assert_eq!(m.write_cache.as_ref().unwrap().stats.destaged_pages, 10);
}
