//! Worked examples of rebuild runs: how many member operations a rebuild takes, and rows
//! already rebuilt inside a run.

use std::sync::Arc;

use raidlab::array::Level;

use super::tests::{mem_members, pattern, read_all, rebuild_to_end, shape, CHUNK, OFFSET};
use super::*;
use crate::member::{FaultMember, MemMember, Member};

/// A RAID-5 of 4 behind op counters, `rows` rows, slot 2 failed and a spare added (its
/// rebuild not started); every byte written first.
pub(super) fn degraded(
    rows: u64,
) -> (Controller, Vec<Arc<FaultMember>>, Arc<FaultMember>, Vec<u8>) {
    degraded_runs(rows, Options::default().rebuild_run_bytes)
}

/// [`degraded`] with rebuild runs of at most `run_bytes` per member (`--rebuild-run-kib`).
fn degraded_runs(
    rows: u64,
    run_bytes: u64,
) -> (Controller, Vec<Arc<FaultMember>>, Arc<FaultMember>, Vec<u8>) {
    degraded_with(
        rows,
        Options {
            auto_rebuild: false,
            rebuild_run_bytes: run_bytes,
            ..Options::default()
        },
    )
}

/// [`degraded`] with the controller's options `opts`.
pub(super) fn degraded_with(
    rows: u64,
    opts: Options,
) -> (Controller, Vec<Arc<FaultMember>>, Arc<FaultMember>, Vec<u8>) {
    let sh = shape(Level::Raid5, 4, rows);
    let members: Vec<Arc<FaultMember>> = mem_members(&sh, "d", 4)
        .into_iter()
        .map(|m| Arc::new(FaultMember::new(m)))
        .collect();
    let devs = members
        .iter()
        .map(|f| Some(f.clone() as Arc<dyn Member>))
        .collect();
    let rec = Arc::new(super::tests::Recorder::default());
    let c = Controller::new(sh.clone(), devs, Vec::new(), None, 1, Box::new(rec), opts).unwrap();
    c.init_intent(None);
    let data = pattern(7, c.size_bytes() as usize);
    c.write(0, &data, false).unwrap();
    c.fail_member(2, "test").unwrap();
    let spare = Arc::new(FaultMember::new(Arc::new(MemMember::new(
        "s0",
        sh.data_offset_bytes + sh.member_data_bytes,
    ))));
    c.add_spare(spare.clone()).unwrap();
    (c, members, spare, data)
}

/// 64 rows of 16 KiB units make 4 runs of 16 (the simulator's DOR write size): each
/// survivor is read 4 times and the replacement written 4 times, where a row at a time
/// took 64 of each.
#[test]
fn a_rebuild_reads_each_survivor_and_writes_the_replacement_once_per_run() {
    let (c, members, spare, data) = degraded(64);
    assert_eq!(c.run_units_max(), 16);
    let before: Vec<u64> = members.iter().map(|m| m.ops()).collect();
    let spare_before = spare.ops();
    assert!(c.maybe_start_rebuild() || c.rebuild_active());
    rebuild_to_end(&c);
    for (slot, m) in members.iter().enumerate().filter(|(s, _)| *s != 2) {
        assert_eq!(m.ops() - before[slot], 4, "survivor {slot}");
    }
    assert_eq!(spare.ops() - spare_before, 4, "replacement writes");
    assert_eq!(c.last_rebuild().unwrap().rows, 64);
    assert_eq!(read_all(&c), data);
    assert_eq!(c.check().mismatches, 0);
}

/// `--rebuild-run-kib` sets the run: one chunk reads a unit per operation, 64 of each; three chunks and a byte make runs of 3 whole units, 22 for 64 rows
/// (21 of 3 and one of 1). The data is the same either way.
#[test]
fn the_run_size_option_sets_the_reads_per_survivor() {
    for (run_bytes, units, runs) in [(CHUNK, 1, 64), (3 * CHUNK + 1, 3, 22)] {
        let (c, members, spare, data) = degraded_runs(64, run_bytes);
        assert_eq!(c.run_units_max(), units);
        let before: Vec<u64> = members.iter().map(|m| m.ops()).collect();
        let spare_before = spare.ops();
        assert!(c.maybe_start_rebuild() || c.rebuild_active());
        rebuild_to_end(&c);
        for (slot, m) in members.iter().enumerate().filter(|(s, _)| *s != 2) {
            assert_eq!(
                m.ops() - before[slot],
                runs,
                "survivor {slot}, {run_bytes} B runs"
            );
        }
        assert_eq!(spare.ops() - spare_before, runs, "replacement writes");
        assert_eq!(read_all(&c), data);
        assert_eq!(c.check().mismatches, 0);
    }
}

/// The run's units from its bytes: whole chunks, at least one, at most 16 and 1 MiB.
#[test]
fn run_units_are_whole_chunks_between_one_and_the_bounds() {
    use super::rebuild_run::{run_units, RUN_BYTES_MAX};
    assert_eq!(run_units(RUN_BYTES_MAX, 64 << 10), 16);
    assert_eq!(run_units(64 << 10, 64 << 10), 1);
    assert_eq!(run_units(4 << 10, 64 << 10), 1);
    assert_eq!(run_units(200 << 10, 64 << 10), 3);
    assert_eq!(run_units(RUN_BYTES_MAX, 4 << 10), 16);
    assert_eq!(run_units(RUN_BYTES_MAX, 512 << 10), 2);
    assert_eq!(run_units(RUN_BYTES_MAX, 4 << 20), 1);
    assert_eq!(run_units(u64::MAX, 64 << 10), 16);
}

/// A run is cut by `units_max`: one step of 1 unit rebuilds exactly one row.
#[test]
fn a_step_of_one_unit_rebuilds_one_row() {
    let (c, _, spare, _) = degraded(64);
    assert!(c.maybe_start_rebuild() || c.rebuild_active());
    let spare_before = spare.ops();
    assert_eq!(c.rebuild_step(1), Some(std::time::Duration::ZERO));
    assert_eq!(spare.ops() - spare_before, 1);
    assert_eq!(c.rebuild_progress().unwrap().rebuilt_rows, 1);
    assert_eq!(c.rebuild_step(5), Some(std::time::Duration::ZERO));
    assert_eq!(c.rebuild_progress().unwrap().rebuilt_rows, 6);
    // The two steps were two runs: one write each.
    assert_eq!(spare.ops() - spare_before, 2);
}

/// Rows already marked rebuilt inside a run (a fresh pass after a survivor error, a resumed
/// job) are read along but not rewritten: the replacement's bytes there stay, and the run
/// writes the stretches on either side.
#[test]
fn rows_already_rebuilt_inside_a_run_are_not_rewritten() {
    let (c, _, spare, data) = degraded(64);
    assert!(c.maybe_start_rebuild() || c.rebuild_active());
    // Rows 5 and 6 are rebuilt first, alone; then a marker goes into row 6's unit on the
    // replacement, which a rewrite would erase.
    let job = c.rebuild.lock().unwrap().as_ref().unwrap().id;
    assert_eq!(c.rebuild_run(2, 5, 2, job).unwrap(), 2);
    let off = OFFSET + 6 * CHUNK + CHUNK - 8;
    let mut unit6 = vec![0u8; 8];
    spare.read_at(&mut unit6, off).unwrap();
    let marker = [0xA5u8; 8];
    assert_ne!(unit6, marker);
    spare.write_at(&marker, off).unwrap();
    let writes_before = spare.ops();
    rebuild_to_end(&c);
    let mut got = [0u8; 8];
    spare.read_at(&mut got, off).unwrap();
    assert_eq!(got, marker, "row 6 was rewritten");
    // Runs 0..16 (two stretches: 0..5 and 7..16), 16..32, 32..48, 48..64; then the read
    // of the marker.
    assert_eq!(spare.ops() - writes_before, 5 + 1);
    // The job solved the other 62 (rows 5 and 6 were done outside it).
    assert_eq!(c.last_rebuild().unwrap().rows, 62);
    // Put row 6's true bytes back: the array reads right and checks clean.
    spare.write_at(&unit6, off).unwrap();
    assert_eq!(read_all(&c), data);
    assert_eq!(c.check().mismatches, 0);
}
