//! The threads of a scheduled run besides the store's own: the clients and the operator.

use std::path::PathBuf;

use raidlab_store::crash;
use raidlab_store::ctrl::SlotState;
use raidlab_store::member::{FaultMember, FileMember, Member};
use raidlab_store::sync::{thread, Arc};
use shuttle::rand::{thread_rng, Rng};

use crate::rig::{fail, Ctx, Focus, Start};

pub(crate) fn client(ctx: &Ctx) {
    let mut rng = thread_rng();
    for _ in 0..ctx.cfg.ops {
        let (count, first) = if ctx.cfg.focus == Focus::HotPages {
            let count = rng.gen_range(1..=2u64);
            (count, rng.gen_range(0..=HOT_PAGES - count))
        } else {
            let count = rng.gen_range(1..=6u64).min(ctx.blocks);
            (count, rng.gen_range(0..=ctx.blocks - count))
        };
        match ctx.cfg.focus {
            Focus::HotPages => match rng.gen_range(0..10u32) {
                0..=7 => ctx.do_write(first, count, false, false),
                8 => ctx.do_read(first, count),
                _ => ctx.do_flush(),
            },
            Focus::LostBackup => match rng.gen_range(0..10u32) {
                0..=4 => ctx.do_write(first, count, false, false),
                5 => ctx.do_read(first, count),
                _ => ctx.do_flush(),
            },
            _ => mix(ctx, &mut rng, first, count),
        }
    }
}

/// Pages the hot-page runs write (a fraction of the cache, a few rows).
const HOT_PAGES: u64 = 6;

fn mix(ctx: &Ctx, rng: &mut impl Rng, first: u64, count: u64) {
    match rng.gen_range(0..100u32) {
        0..=49 => ctx.do_write(first, count, rng.gen_range(0..10u32) < 3, false),
        50..=57 => ctx.do_write(first, count, rng.gen_range(0..10u32) < 3, true),
        58..=79 => ctx.do_read(first, count),
        _ => ctx.do_flush(),
    }
}

/// Operator commands racing the clients: fail a member (or inject errors into it) while
/// the level survives, add the withheld spare, try to add a live member again (refused),
/// `check` (no mismatch), clear idle bitmap regions.
pub(crate) fn operator(
    ctx: &Ctx,
    faults: &[Arc<FaultMember>],
    first_spare: &FaultMember,
    spare: Option<Arc<dyn Member>>,
    live: &[PathBuf],
) {
    let mut rng = thread_rng();
    let mut injected: Vec<usize> = Vec::new();
    let mut spare = spare;
    let mut spare_failing = false;
    // Original members the array still uses: never failed (a failed one may be removed and
    // then legitimately added back as a spare).
    let mut gone: Vec<usize> = Vec::new();
    if ctx.cfg.start != Start::Healthy {
        gone.push(1);
    }
    match ctx.cfg.focus {
        Focus::LostBackup => lose_backup(ctx),
        Focus::ReplacementFails => {
            // Let the rebuild get some units in flight first.
            for _ in 0..rng.gen_range(0..24u32) {
                thread::yield_now();
            }
            let states = ctx.ctl.slot_states();
            if let Some(slot) = states
                .iter()
                .position(|s| matches!(s, SlotState::Recovering { .. }))
            {
                ctx.failed_during
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                if rng.gen_bool(0.5) && holds(ctx, slot, first_spare) {
                    first_spare.fail_now();
                    spare_failing = true;
                } else if let Err(e) = ctx.ctl.fail_member(slot as u32, "failed by ctl") {
                    fail(format!(
                        "ctl fail {slot} of the replacement killed the array: {e}"
                    ));
                }
            }
        }
        _ => {}
    }
    for _ in 0..3 {
        match rng.gen_range(0..8u32) {
            0 | 1 => {
                let states = ctx.ctl.slot_states();
                // Half the time the replacement being rebuilt, when there is one.
                let rebuilding = states
                    .iter()
                    .position(|s| matches!(s, SlotState::Recovering { .. }));
                let slot = match rebuilding {
                    Some(s) if rng.gen_bool(0.5) => s,
                    _ => rng.gen_range(0..states.len()),
                };
                // Failures pending (errors injected, not yet hit) count as failed; so does
                // the first spare once made to fail, wherever it ends up.
                let down = states.iter().filter(|s| **s != SlotState::InSync).count()
                    + injected
                        .iter()
                        .filter(|&&s| states[s] == SlotState::InSync)
                        .count()
                    + usize::from(spare_failing);
                let replacement = matches!(states[slot], SlotState::Recovering { .. });
                let survives = states[slot] == SlotState::InSync && down < ctx.cfg.tolerance();
                if replacement || survives {
                    ctx.failed_during
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                }
                if replacement && rng.gen_bool(0.5) && holds(ctx, slot, first_spare) {
                    // The first replacement (spare 0) starts failing: its units in flight
                    // fail late, after a rebuild onto spare 1 may have begun. (Only while it
                    // is the replacement: once rebuilt it may be the slot's last good copy.)
                    first_spare.fail_now();
                    spare_failing = true;
                } else if replacement || survives {
                    if replacement || rng.gen_bool(0.5) || injected.contains(&slot) {
                        if let Err(e) = ctx.ctl.fail_member(slot as u32, "failed by ctl") {
                            fail(format!("ctl fail {slot} killed a surviving array: {e}"));
                        }
                        gone.push(slot);
                    } else {
                        // Errors from the device now in the slot: found by its next I/O.
                        let dev = &faults[slot];
                        dev.fail_now();
                        injected.push(slot);
                        gone.push(slot);
                    }
                }
            }
            2 => {
                if let Some(s) = spare.take() {
                    if let Err(e) = ctx.ctl.add_spare(s) {
                        fail(format!("add-spare of a new device refused: {e}"));
                    }
                }
            }
            3 => {
                let live: Vec<&PathBuf> = (0..live.len())
                    .filter(|k| !gone.contains(k))
                    .map(|k| &live[k])
                    .collect();
                if live.is_empty() {
                    continue;
                }
                let p = live[rng.gen_range(0..live.len())];
                let again: Arc<dyn Member> =
                    Arc::new(FileMember::open(&p.to_string_lossy()).expect("reopen"));
                if ctx.ctl.add_spare(again).is_ok() {
                    fail(format!(
                        "add-spare accepted {}, a device of the array",
                        p.display()
                    ));
                }
            }
            4 if ctx.backup_fault.is_some() && rng.gen_bool(0.3) => lose_backup(ctx),
            4 => {
                let r = ctx.ctl.check();
                if r.mismatches > 0 {
                    fail(format!(
                        "check found {} mismatched rows: {r:?}",
                        r.mismatches
                    ));
                }
            }
            5 => {
                // `ctl remove K`: forget the faulty device taken out of a slot, if any.
                let slot = rng.gen_range(0..ctx.cfg.disks);
                let _ = ctx.ctl.remove(&slot.to_string());
            }
            _ => {
                ctx.ctl.intent_clear_idle(true);
            }
        }
        thread::yield_now();
    }
}

/// The backup device dies: writes after this are the NBD contract's.
fn lose_backup(ctx: &Ctx) {
    let Some(f) = &ctx.backup_fault else {
        return;
    };
    ctx.backup_lost
        .store(true, std::sync::atomic::Ordering::SeqCst);
    ctx.lost_at
        .lock()
        .expect("lost")
        .get_or_insert(crash::position(&ctx.j));
    f.fail_now();
}

/// Whether `dev` is the device in `slot` now.
fn holds(ctx: &Ctx, slot: usize, dev: &FaultMember) -> bool {
    ctx.ctl.status()["members"][slot]["path"].as_str() == Some(dev.path())
}
