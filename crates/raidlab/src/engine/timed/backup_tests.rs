//! Worked examples of the backup in timed mode, on constant-time disks (1 ms per operation).
//! MQSim lines: `arrival_ns device lba_sectors size_sectors type` (0 = write, 1 = read).

use crate::config;
use crate::engine::timed::run;
use crate::metrics::TimedMetrics;

pub(super) fn timed(
    name: &str,
    lines: &[&str],
    tables: &str,
) -> crate::error::Result<TimedMetrics> {
    timed_group(name, lines, 16384, tables)
}

/// As `timed`, with write-cache groups of `group_bytes` (also the cache-failure examples').
pub(super) fn timed_group(
    name: &str,
    lines: &[&str],
    group_bytes: u32,
    tables: &str,
) -> crate::error::Result<TimedMetrics> {
    let dir = std::env::temp_dir().join(format!("raidlab-bk-{}-{name}", std::process::id()));
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
         [write_cache]\ncapacity_pages = 16\ngroup_bytes = {group_bytes}\nrate = \"fixed\"\nthreshold = 100\n\
         {tables}",
        path.display().to_string()
    );
    let exps = config::from_toml(&text, "t.toml", None);
    // The run has read the trace by the time it returns: leave no directory behind.
    let out = exps.and_then(|exps| run(&exps[0], None, true, &mut |_| true));
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// Four one-page writes at t = 0; 4 KiB pages.
pub(super) const FOUR: [&str; 4] = ["0 0 0 8 0", "0 0 8 8 0", "0 0 16 8 0", "0 0 24 8 0"];

#[test]
fn a_write_waits_while_no_segment_buffer_is_free() {
    // NVRAM 12 KiB = one 8 KiB segment buffer (2 pages) + a 1-page LRU. Page 0 enters the
    // LRU; page 1 evicts 0 into the buffer; page 2 evicts 1, filling it: one 2-page log write
    // to the physical cache disk from 0 to 1 ms. Page 3 finds the LRU full and no buffer: it
    // waits until 1 ms and is acknowledged at 1.2 ms.
    let m = timed(
        "stall",
        &FOUR,
        "[backup]\nnvram_kib = 12\nsegment_kib = 8\nsegment_buffers = 1\ndisk_mib = 1\n\
         gc_free_segments = 1\n",
    )
    .unwrap();
    assert_eq!(m.write_latency.max_ns(), 1_200_000);
    assert_eq!(
        m.write_latency.mean_ns(),
        (3.0 * 200_000.0 + 1_200_000.0) / 4.0
    );
    let bk = m.write_cache.as_ref().unwrap().backup.as_ref().unwrap();
    assert_eq!((bk.stalled_writes, bk.stall_ns), (1, 1_000_000));
    assert_eq!((bk.stats.log_writes, bk.stats.log_pages), (1, 2));
    assert_eq!(bk.log_ios_done, 1);
    // The cache disk is the last device: one write of 2 pages (16 sectors).
    let cd = m.disks.last().unwrap();
    assert_eq!((cd.ops, cd.write_sectors, cd.read_sectors), (1, 16, 0));
    assert_eq!(bk.stats.disk_reads, 0);
}

#[test]
fn a_dual_copy_never_waits_and_a_logical_log_goes_to_the_data_disks() {
    let dual = timed("dual", &FOUR, "[backup]\nkind = \"dual\"\n").unwrap();
    assert_eq!(dual.write_latency.max_ns(), 200_000);
    assert_eq!(dual.disks.len(), 1);
    // Logical: RAID-5 of 3 disks; segment 0 lives on disk 0 at the end of its space.
    let m = timed(
        "logical",
        &FOUR,
        "[array]\nlevel = \"raid5\"\ndisks = 3\nstripe_unit = 8192\n\
         [backup]\ncache_disk = \"logical\"\nnvram_kib = 12\nsegment_kib = 8\n\
         segment_buffers = 1\ndisk_mib = 1\ngc_free_segments = 1\n",
    )
    .unwrap();
    assert_eq!(m.disks.len(), 3);
    assert_eq!(m.write_latency.max_ns(), 1_200_000);
    let bk = m.write_cache.as_ref().unwrap().backup.as_ref().unwrap();
    assert_eq!(bk.cache_disk, "logical");
    assert_eq!(bk.stats.log_writes, 1);
}

#[test]
fn a_physical_cache_disk_too_small_is_a_config_error() {
    let e = timed(
        "small",
        &FOUR,
        "[disk]\nmodel = \"constant\"\nservice_ms = 1\ncapacity_gib = 0.0001\n\
         [backup]\ndisk_mib = 64\n",
    );
    assert!(
        matches!(&e, Err(crate::error::Error::Config { key, .. }) if key == "backup.disk_mib"),
        "{e:?}"
    );
}
