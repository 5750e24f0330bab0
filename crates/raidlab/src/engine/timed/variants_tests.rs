//! Worked examples of the RAPID-Cache variants in timed mode (triple backups, a unified
//! primary), on constant-time disks (1 ms per operation); the trace format is `backup_tests`'.

use super::backup_tests::{timed, FOUR};

/// The RAPID backup of `backup_tests`' stall example: one 2-page segment buffer, 1 LRU page.
const SMALL: &str = "nvram_kib = 12\nsegment_kib = 8\nsegment_buffers = 1\ndisk_mib = 1\n\
                     gc_free_segments = 1\n";

#[test]
fn a_triple_writes_each_log_to_its_own_cache_disk_and_waits_for_both() {
    // As with one backup: pages 0-2 fill each backup's buffer (one 2-page log write per
    // cache disk, 0 to 1 ms, in parallel); page 3 waits for both buffers and is acknowledged
    // at 1.2 ms.
    let m = timed(
        "triple",
        &FOUR,
        &format!("[backup]\nkind = \"triple\"\n{SMALL}"),
    )
    .unwrap();
    assert_eq!(m.write_latency.max_ns(), 1_200_000);
    let bk = m.write_cache.as_ref().unwrap().backup.as_ref().unwrap();
    assert_eq!(bk.kind, "triple");
    assert_eq!((bk.stalled_writes, bk.stall_ns), (1, 1_000_000));
    assert_eq!((bk.stats.log_writes, bk.stats.log_pages), (2, 4));
    // One data disk, then the two cache disks: one 16-sector write each, at sector 0.
    assert_eq!(m.disks.len(), 3);
    for cd in &m.disks[1..] {
        assert_eq!((cd.ops, cd.write_sectors, cd.read_sectors), (1, 16, 0));
    }
}

#[test]
fn a_logical_triple_puts_both_logs_on_the_data_disks() {
    // RAID-5 of 3 disks, 128 segments per backup in one partition per disk: backup 0's
    // segment 0 goes to disk 0, backup 1's (segment 128 of the partition) to disk 2; no
    // extra device.
    let m = timed(
        "triple-logical",
        &FOUR,
        &format!(
            "[array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 8192\n\
             [backup]\nkind = \"triple\"\ncache_disk = \"logical\"\n{SMALL}"
        ),
    )
    .unwrap();
    assert_eq!(m.disks.len(), 3);
    assert_eq!(m.write_latency.max_ns(), 1_200_000);
    let bk = m.write_cache.as_ref().unwrap().backup.as_ref().unwrap();
    assert_eq!((bk.cache_disk, bk.stats.log_writes), ("logical", 2));
}
