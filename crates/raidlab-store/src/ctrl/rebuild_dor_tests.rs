//! Worked examples of the disk-oriented rebuild on the members (`rebuild_dor.rs`): the
//! member operations it takes, and a write that lands between a job's reads.

use std::sync::Arc;

use super::rebuild_tests::degraded_with;
use super::tests::{read_all, rebuild_to_end, CHUNK};
use super::*;

fn dor(buffers: u32, depth: u32, run_bytes: u64) -> Options {
    Options {
        auto_rebuild: false,
        rebuild_executor: RebuildExecutor::Dor { buffers, depth },
        rebuild_run_bytes: run_bytes,
        ..Options::default()
    }
}

/// RAID-5 of 4, 64 rows of 16 KiB units, slot 2 rebuilt by one thread. With reads of up to
/// 16 units (the default 1 MiB) each survivor's reader reads 16 jobs at a time: 4 reads per
/// survivor, and every 16 jobs complete together, so 4 replacement writes. With one unit a
/// read, 64 reads per survivor, and jobs complete one at a time with a write slot free
/// each time, so each is written alone: 64 writes (merges need both slots busy).
#[test]
fn one_thread_reads_each_survivor_per_merged_read_and_writes_what_completed() {
    for (run_bytes, reads, writes) in [(1 << 20, 4, 4), (CHUNK, 64, 64)] {
        let (c, members, spare, data) = degraded_with(64, dor(64, 2, run_bytes));
        assert_eq!(c.rebuild_threads(), 3 * 2 + 2);
        let before: Vec<u64> = members.iter().map(|m| m.ops()).collect();
        let spare_before = spare.ops();
        assert!(c.maybe_start_rebuild());
        rebuild_to_end(&c);
        for (slot, m) in members.iter().enumerate().filter(|(s, _)| *s != 2) {
            assert_eq!(
                m.ops() - before[slot],
                reads,
                "survivor {slot}, {run_bytes} B"
            );
        }
        assert_eq!(spare.ops() - spare_before, writes, "{run_bytes} B");
        let report = c.last_rebuild().unwrap();
        assert_eq!((report.rows, report.rows_reread), (64, 0));
        assert_eq!(read_all(&c), data);
        assert_eq!(c.check().mismatches, 0);
    }
}

/// A user write to row 0 after the rebuild read row 0's first source and before it read
/// the others: the job's sources are not one row any more, so its write finds the row's
/// hold count moved and rebuilds the row again under its lock. Without that check the
/// replacement would get the old data of slot 0 solved against the new parity.
#[test]
fn a_write_between_a_jobs_reads_has_its_row_read_again() {
    let (c, _, _, mut data) = degraded_with(8, dor(4, 1, CHUNK));
    assert!(c.maybe_start_rebuild());
    // One step: survivor 0 reads row 0 (row 0's parity is on slot 3, its data on 0, 1, 2).
    assert_eq!(c.rebuild_step(1), Some(std::time::Duration::ZERO));
    let fresh = vec![0x5Au8; CHUNK as usize];
    c.write(0, &fresh, false).unwrap();
    data[..CHUNK as usize].copy_from_slice(&fresh);
    rebuild_to_end(&c);
    let report = c.last_rebuild().unwrap();
    assert_eq!((report.rows, report.rows_reread), (8, 1));
    assert_eq!(read_all(&c), data);
    assert_eq!(c.check().mismatches, 0);
}

/// With 16-unit reads a write merges 16 jobs. A user write to row 3 between the first
/// survivor's read of rows 0-15 and the others' sends only row 3 back to its disks: rows
/// 0-2 and 4-15 are written from what was read (two writes), row 3 by a run under its lock
/// (one read per survivor, one write), and the other 48 rows as three writes of 16.
#[test]
fn only_the_touched_row_of_a_merged_write_is_read_again() {
    let (c, members, spare, mut data) = degraded_with(64, dor(64, 2, 1 << 20));
    let before: Vec<u64> = members.iter().map(|m| m.ops()).collect();
    let spare_before = spare.ops();
    assert!(c.maybe_start_rebuild());
    assert_eq!(c.rebuild_step(1), Some(std::time::Duration::ZERO));
    // Row 3's first data block: 3 rows of 3 data units of 16 KiB in.
    let at = 3 * 3 * CHUNK as usize;
    let fresh = vec![0xC3u8; 4096];
    c.write(at as u64, &fresh, false).unwrap();
    data[at..at + 4096].copy_from_slice(&fresh);
    let written = spare.ops() - spare_before;
    rebuild_to_end(&c);
    let report = c.last_rebuild().unwrap();
    assert_eq!((report.rows, report.rows_reread), (64, 1));
    assert_eq!(spare.ops() - spare_before - written, 2 + 1 + 3);
    for (slot, m) in members.iter().enumerate().filter(|(s, _)| *s != 2) {
        // 4 merged reads and row 3's, plus the user write's (read-modify-write) if it
        // touched this member.
        let ops = m.ops() - before[slot];
        assert!((5..=7).contains(&ops), "survivor {slot}: {ops}");
    }
    assert_eq!(read_all(&c), data);
    assert_eq!(c.check().mismatches, 0);
}

/// Threads as `serve` runs them: a rebuild under concurrent writers ends with the data
/// every writer left and clean parity, whatever the interleaving.
#[test]
fn rebuild_threads_and_writers_at_once_leave_the_data_and_parity_right() {
    let (c, _, _, data) = degraded_with(96, dor(8, 2, CHUNK));
    let c = Arc::new(c);
    assert!(c.maybe_start_rebuild());
    let data = Arc::new(std::sync::Mutex::new(data));
    std::thread::scope(|s| {
        for _ in 0..c.rebuild_threads() {
            let c = c.clone();
            s.spawn(move || rebuild_to_end(&c));
        }
        for w in 0..2u8 {
            let (c, data) = (c.clone(), data.clone());
            s.spawn(move || {
                for i in 0..200u64 {
                    // Each writer its own blocks (even or odd), spread over the rows.
                    let block = (i * 37 % 570) * 2 + u64::from(w);
                    let buf = vec![w.wrapping_mul(31).wrapping_add(i as u8); 4096];
                    let mut d = data.lock().unwrap();
                    c.write(block * 4096, &buf, false).unwrap();
                    d[block as usize * 4096..][..4096].copy_from_slice(&buf);
                }
            });
        }
    });
    assert!(!c.rebuild_active());
    assert_eq!(c.last_rebuild().unwrap().rows, 96);
    assert_eq!(read_all(&c), *data.lock().unwrap());
    assert_eq!(c.check().mismatches, 0);
}
