//! Crash states cut from a scheduled run's concurrent history: materialised on copies of
//! the files, recovered as `serve` does, and checked against the reference model.

use std::sync::Mutex as StdMutex;

use raidlab_store::crash::{self, check::recover_and_check, CrashState, Event, Materialiser};
use raidlab_store::model::{Model, OpKind};
use shuttle::rand::{thread_rng, Rng};

use crate::rig::{fail, write_record, Cfg, Fixture, Focus, Tally, ROWS};

/// What a finished run leaves for its crash states.
pub(crate) struct Run {
    /// The files as the run began.
    pub(crate) mat: Materialiser,
    pub(crate) events: Vec<Event>,
    pub(crate) model: Model,
    /// Where a lost backup was voided by its marker file, and its epoch (each time).
    pub(crate) voided: Vec<(usize, u64)>,
    /// Where the operator failed the backup device.
    pub(crate) lost_at: Option<usize>,
    /// The operator failed a member (or made one fail its I/O) during the run.
    pub(crate) failed_during: bool,
}

/// Cut `cfg.crashes` crash states from the run's history (any prefix of the member and
/// backup I/O, with any subset of the writes in flight at the cut landing, in any order),
/// recover each as `serve` does and check it against the model.
pub(crate) fn crash_check(fx: &Fixture, cfg: &Cfg, run: &Run, tally: &StdMutex<Tally>) {
    let Run {
        mat,
        events,
        model,
        voided,
        lost_at,
        ..
    } = run;
    let lost_at = *lost_at;
    let mut draw = thread_rng();
    // Cut 0 comes before the prefill's reply (the prefill is in the starting images).
    let states: Vec<CrashState> = crash::crash_states(events, 1, &mut || draw.gen::<u64>())
        .into_iter()
        .filter(|s| s.cut > 0)
        .collect();
    let mut rng = thread_rng();
    let rows_all = vec![true; ROWS as usize];
    // Half the states are cut just after a reply with nothing in flight landing: where a
    // promise made at the reply (a FLUSH, a FUA write, a backed write) is tested hardest.
    let after_reply: Vec<&CrashState> = states
        .iter()
        .filter(|s| s.kind == "none" && s.cut > 0 && matches!(events[s.cut - 1], Event::Ack { .. }))
        .collect();
    let mut chosen: Vec<&CrashState> = (0..cfg.crashes)
        .map(|_| {
            if !after_reply.is_empty() && rng.gen_bool(0.5) {
                after_reply[rng.gen_range(0..after_reply.len())]
            } else {
                &states[rng.gen_range(0..states.len())]
            }
        })
        .collect();
    if cfg.focus == Focus::LostBackup {
        // Just after every FLUSH reply, nothing in flight landing.
        chosen.extend(after_reply.iter().copied().filter(|s| {
            matches!(events[s.cut - 1], Event::Ack { id }
                if id > 0 && matches!(model.ops[id as usize - 1].kind, OpKind::Flush))
        }));
    }
    for s in chosen {
        mat.write(events, s).expect("materialise a crash state");
        write_record(&fx.dir.0, cfg.mode, &fx.backup, fx.backup_bytes);
        let void = fx.dir.0.join(raidlab_store::wb::setup::VOID_FILE);
        // The marker as the latest void before the cut left it.
        match voided.iter().rev().find(|(at, _)| *at < s.cut) {
            Some((_, epoch)) => std::fs::write(&void, format!("{epoch}\n")).expect("void marker"),
            _ => {
                let _ = std::fs::remove_file(&void);
            }
        }
        let o = recover_and_check(&fx.dir.0, model, s.cut, &rows_all, cfg.mode.backed());
        let at = format!(
            "crash state at event {} of {} ({})",
            s.cut,
            events.len(),
            s.kind
        );
        if let Some(e) = &o.assembly {
            fail(format!("{at} did not assemble: {e}"));
        }
        // Without a backup a crash can leave a degraded row's lost unit wrong: the
        // RAID-5/6 write hole, a documented limit. With one, nothing may read wrong.
        // After the backup was lost the cache writes through: the hole is open again. A
        // member that fails while a destage of a row it was healthy in is in flight is
        // covered by the row's partial parity (`wb/ppl.rs`); only a second unit of the same
        // column lost during the same destage is not, and replay reports it.
        let unbacked = !cfg.mode.backed() || lost_at.is_some_and(|p| p < s.cut);
        let concurrent_failure = run.failed_during && o.ppl_unrecovered > 0;
        let hole = (unbacked || concurrent_failure) && o.bad.iter().all(|b| b.on_lost_unit);
        if !o.bad.is_empty() && !hole {
            let lba = o.bad[0].lba;
            let ops: Vec<String> = model
                .ops
                .iter()
                .enumerate()
                .filter(|(_, o)| match o.kind {
                    OpKind::Write { first, count, .. } => (first..first + count).contains(&lba),
                    OpKind::Flush => true,
                })
                .map(|(i, o)| format!("{} {:?} [{}, {}]", i + 1, o.kind, o.start, o.ack))
                .collect();
            let backup = fx.paths.len() - 1;
            let syncs: Vec<usize> = events
                .iter()
                .enumerate()
                .filter(|(_, e)| matches!(e, Event::Sync { member } if *member == backup))
                .map(|(i, _)| i)
                .collect();
            if std::env::var_os("RAIDLAB_SCHED_TRACE").is_some() {
                dump(fx, events, s.cut);
                eprintln!("backup lost at {lost_at:?}, voided {voided:?}");
                for (i, o) in model.ops.iter().enumerate() {
                    eprintln!("call {} {:?} [{}, {}]", i + 1, o.kind, o.start, o.ack);
                }
            }
            fail(format!(
                "{at}: blocks lost or stale: {:?}; calls on block {lba}: {ops:?}; backup syncs at {syncs:?}",
                &o.bad[..o.bad.len().min(4)]
            ));
        }
        if !o.mismatch_rows.is_empty() {
            fail(format!(
                "{at}: rows inconsistent after resync: {:?}",
                o.mismatch_rows
            ));
        }
        if !unbacked && !concurrent_failure && !o.mismatch_rows_lost.is_empty() {
            fail(format!(
                "{at}: degraded rows inconsistent: {:?}",
                o.mismatch_rows_lost
            ));
        }
        if cfg.mode.backed()
            && !unbacked
            && !o.bad.is_empty()
            && std::env::var_os("RAIDLAB_SCHED_TRACE_HOLES").is_some()
        {
            dump(fx, events, s.cut);
            eprintln!("HOLE {at}: {:?}", &o.bad[..o.bad.len().min(4)]);
        }
        let mut t = tally.lock().expect("tally");
        t.crash_states += 1;
        t.hole_states += u64::from(!o.bad.is_empty() || !o.mismatch_rows_lost.is_empty());
        t.hole_concurrent += u64::from(
            cfg.mode.backed()
                && !unbacked
                && (!o.bad.is_empty() || !o.mismatch_rows_lost.is_empty()),
        );
    }
}

/// The run's history, one line per event, for a failure being investigated
/// (`RAIDLAB_SCHED_TRACE=1`).
fn dump(fx: &Fixture, events: &[Event], cut: usize) {
    for (i, e) in events.iter().enumerate() {
        let mark = if i == cut { "--- cut ---\n" } else { "" };
        let line = match e {
            Event::Write {
                member,
                offset,
                data,
            } => format!(
                "write {} @{offset} +{} [{:02x?}]{}",
                fx.paths[*member].display(),
                data.len(),
                &data[..data.len().min(8)],
                log_batch(data)
            ),
            Event::Sync { member } => format!("sync {}", fx.paths[*member].display()),
            Event::Ack { id } => format!("ack {id}"),
        };
        eprintln!("{mark}{i:5} {line}");
    }
}

/// A log backup's batch header, decoded for the trace: each record's page, sequence and kind
/// (the layout of `wb::format`'s batch: count at 4, 24-byte entries from 40).
fn log_batch(data: &[u8]) -> String {
    if data.len() < 4096 || &data[..4] != b"RLLB" {
        return String::new();
    }
    let n = u32::from_le_bytes(data[4..8].try_into().expect("4 bytes")) as usize;
    let recs: Vec<String> = (0..n.min(100))
        .map(|i| {
            let at = 40 + i * 24;
            let lba = u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
            let seq = u64::from_le_bytes(data[at + 8..at + 16].try_into().expect("8 bytes"));
            format!("{lba}#{seq}:{}", data[at + 20])
        })
        .collect();
    format!(" records {}", recs.join(" "))
}
