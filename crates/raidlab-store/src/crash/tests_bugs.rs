//! Planted bugs the checker must catch, and the store bugs the crash tests found.

use super::*;

/// Blank write event `i` (no bytes land, indices stay): a store that never issued it.
fn drop_event(events: &mut [Event], i: usize) {
    if let Event::Write { data, .. } = &mut events[i] {
        data.clear();
    }
}

/// The checker can fail: planted bugs in a recorded run are caught.
#[test]
fn checker_catches_planted_bugs() {
    let mut c = cfg("planted", Level::Raid5, 4, Setup::Healthy, 71);
    c.ops = 16;
    let mut run = record(&c);
    let original = run.events.clone();
    // 1. A durable write lost: blank the data-area writes of the last FUA write.
    let last_fua = run
        .model
        .ops
        .iter()
        .rev()
        .find(|o| matches!(o.kind, OpKind::Write { fua: true, .. }))
        .expect("a FUA write in the run")
        .clone();
    for i in last_fua.start..last_fua.ack {
        if matches!(&run.events[i], Event::Write { offset, .. } if *offset >= run.data_offset) {
            drop_event(&mut run.events, i);
        }
    }
    let t = crash_and_check(&run, 0, 1);
    eprintln!(
        "planted lost write: {} states, {} bad, {} with lost writes",
        t.states, t.bad, t.lost_writes
    );
    assert!(
        t.lost_writes > 0,
        "a dropped durable write goes unnoticed: {t:?}"
    );
    // 2. The write-intent bitmap never set: the bitmap writes before data are blanked (the
    // clears too), so a torn row is never resynced.
    run.events = original;
    for i in 0..run.events.len() {
        if matches!(&run.events[i], Event::Write { offset, .. } if *offset == format::BITMAP_OFFSET)
        {
            drop_event(&mut run.events, i);
        }
    }
    let t = crash_and_check(&run, 2, 2);
    eprintln!(
        "planted bitmap skip: {} states, {} bad, {} with inconsistent rows",
        t.states, t.bad, t.parity
    );
    assert!(t.parity > 0, "torn rows left unsynced go unnoticed: {t:?}");
}

/// Regression (found by these tests): `SuperblockSink::persist` writes every superblock,
/// then syncs them one by one, so a crash in between leaves members one event apart; the
/// array must still assemble (mdadm's event margin of one), here right after the first
/// member synced the first update after a clean start.
#[test]
fn a_crash_inside_a_superblock_update_still_assembles() {
    let mut c = cfg("bug-sb", Level::Raid5, 4, Setup::Healthy, 51);
    c.ops = 4;
    let run = record(&c);
    // The first events: the clean flag cleared on every member (4 writes, 4 syncs).
    let after_first_sync = 1 + run
        .events
        .iter()
        .position(|e| matches!(e, Event::Sync { .. }))
        .expect("a sync");
    let state = CrashState {
        cut: after_first_sync,
        landed: Vec::new(),
        kind: "none",
    };
    run.mat.write(&run.events, &state).expect("materialise");
    let o = recover_and_check(
        &run.dir.0,
        &run.model,
        state.cut,
        &rows_written(&run, state.cut),
        false,
    );
    assert_eq!(o.assembly, None);
}
