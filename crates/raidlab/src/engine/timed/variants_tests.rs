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

/// Four reads of pages 40-43 at 0, eighteen one-page writes (pages 0-17) at 2 ms, then reads
/// of pages 42 and 40 at 3 ms.
fn unified_trace() -> Vec<String> {
    let mut t: Vec<String> = (40..44).map(|p| format!("0 0 {} 8 1", p * 8)).collect();
    t.extend((0..18).map(|p| format!("2000000 0 {} 8 0", p * 8)));
    t.push("3000000 0 336 8 1".into());
    t.push("3000000 0 320 8 1".into());
    t
}

#[test]
fn a_unified_cache_gives_clean_pages_space_to_dirty_ones() {
    let lines = unified_trace();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let cache = "[cache]\npolicy = \"lru\"\ncapacity_blocks = 4\n";
    // Split: 4 clean + 16 dirty pages; writes 17 and 18 wait for the first destage (which
    // starts when the 16 pages are full).
    let split = timed("split", &lines, cache).unwrap();
    assert!(split.write_latency.max_ns() > 1_000_000);
    assert!(split.write_cache.as_ref().unwrap().unified.is_none());
    // Unified: one cache of 20 pages. The 4 clean pages leave 16 free; dirty pages 17 and
    // 18 take the space of the two oldest clean pages (40, 41), so no write waits (every one
    // is acknowledged after the 200 us hit time) and no destage starts (threshold 100% of
    // 20). At 3 ms page 42 is a hit; page 40 misses and evicts 43, the least recent.
    let m = timed("unified", &lines, &format!("unified = true\n{cache}")).unwrap();
    assert_eq!(m.write_latency.max_ns(), 200_000);
    let wc = m.write_cache.as_ref().unwrap();
    let u = wc.unified.as_ref().unwrap();
    assert_eq!((u.total_pages, u.evicted_for_writes), (20, 2));
    assert_eq!(wc.capacity_pages, 20);
    assert_eq!((m.count.hits, m.count.misses), (1, 5));
    assert_eq!(m.count.evictions, 3);
    // The final drain keeps the 18 destaged pages clean, as far as the 20 pages allow.
    assert_eq!(u.kept_clean, 18);
    // With a RAPID backup the dirty pages are still logged; same acknowledgements.
    let r = timed(
        "unified-rapid",
        &lines,
        &format!("unified = true\n{cache}[backup]\nkind = \"rapid\"\n"),
    )
    .unwrap();
    assert_eq!(r.write_latency.max_ns(), 200_000);
    let bk = r.write_cache.as_ref().unwrap().backup.as_ref().unwrap();
    assert_eq!(bk.stats.page_writes, 18);
}
