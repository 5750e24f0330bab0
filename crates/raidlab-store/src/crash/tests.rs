//! Crash states of small arrays under a random workload, recovered and checked.
//!
//! Each test records one run through [`RecordingMember`]s, enumerates crash states over its
//! journal, writes each onto the member files, and runs assembly and recovery on them.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use raidlab::array::{Layout, Level};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use super::check::{recover_and_check, Model, ModelOp, OpKind, Outcome};
use super::*;
use crate::ctrl::column::BLOCK;
use crate::ctrl::{Controller, Options};
use crate::format::{self, CreateSpec, SuperblockSink, DATA_OFFSET_BYTES};

const CHUNK: u64 = 16 << 10;
/// 8 rows: small enough that ~1,000 recoveries per configuration fit a debug test run.
const MEMBER_DATA: u64 = 128 << 10;
/// Ids of client calls that are not data writes or flushes (fail, add-spare).
const SETUP_ACK: u64 = 1 << 40;

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        // tmpfs when there is one: thousands of recoveries each sync the members, which
        // costs milliseconds apiece on a disk and nothing in memory.
        let shm = std::path::Path::new("/dev/shm");
        let base =
            if shm.is_dir() && std::fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly()) {
                shm.to_path_buf()
            } else {
                std::env::temp_dir()
            };
        let p = base.join(format!(
            "raidlab-crash-{tag}-{}-{}",
            std::process::id(),
            format::uuid_string(&format::new_uuid())
        ));
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Setup {
    Healthy,
    /// Slot 1 failed before the workload, no spare.
    Degraded,
    /// Slot 1 failed, a spare added (the rebuild starts) and rebuild steps interleaved.
    Rebuilding,
}

struct Config {
    tag: &'static str,
    level: Level,
    disks: u32,
    setup: Setup,
    ops: usize,
    random_per_cut: usize,
    seed: u64,
}

/// A write-cache backup as `wb.json` records it: kind, legs (path, base, bytes), segment.
/// A backup's `wb.json`: kind, legs, segment bytes, and a log's NVRAM (file, slots).
type WbRecord = (String, Vec<(String, u64, u64)>, u64, Option<(String, u32)>);

/// A recorded run, ready to crash.
struct Run {
    dir: Scratch,
    mat: Materialiser,
    events: Vec<Event>,
    model: Model,
    /// The index of the ack after which the rebuild is recorded on every member.
    rebuild_started: Option<usize>,
    /// The index of the first event after the rebuild completed (it should not, mostly).
    rebuild_done: Option<usize>,
    data_offset: u64,
    /// Logical blocks per row.
    per_row: u64,
    /// The write-cache backup to record in `wb.json` before each recovery (kind, legs,
    /// segment bytes), when the run wrote through a write-back cache.
    wb: Option<WbRecord>,
}

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// Pick a write: sub-unit, unit-crossing, row-crossing or a full row, 1..=12 blocks (a full
/// row of RAID-6 4+2 is 16).
fn pick_write(r: &mut ChaCha8Rng, blocks: u64, bpu: u64, per_row: u64) -> (u64, u64) {
    let (first, count) = match r.next_u32() % 4 {
        0 => {
            let unit = r.next_u64() % (blocks / bpu);
            let off = r.next_u64() % bpu;
            (unit * bpu + off, 1 + r.next_u64() % (bpu - off))
        }
        1 => {
            let unit = 1 + r.next_u64() % (blocks / bpu - 1);
            let back = 1 + r.next_u64() % (bpu - 1);
            (unit * bpu - back, back + 1 + r.next_u64() % bpu)
        }
        2 => {
            let row = 1 + r.next_u64() % (blocks / per_row - 1);
            let back = 1 + r.next_u64() % 6;
            (row * per_row - back, back + 1 + r.next_u64() % 6)
        }
        _ => (per_row * (r.next_u64() % (blocks / per_row)), per_row),
    };
    (first, count.min(blocks - first))
}

/// Create the configuration's array (a spare too when it rebuilds) in a fresh scratch
/// directory; returns it and the members' paths.
fn create_array(cfg: &Config) -> (Scratch, Vec<PathBuf>) {
    let dir = Scratch::new(cfg.tag);
    let spec = CreateSpec {
        dir: dir.0.clone(),
        name: "crash".into(),
        level: cfg.level,
        layout: Layout::LeftSymmetric,
        disks: cfg.disks,
        chunk_bytes: CHUNK,
        member_data_bytes: MEMBER_DATA,
        spares: u32::from(cfg.setup == Setup::Rebuilding),
        members: None,
        force: false,
        // One row per region: a crash resyncs only the rows it may have torn.
        bitmap_region_bytes: Some(CHUNK),
    };
    format::create(&spec).expect("create");
    let paths = format::read_manifest(&dir.0).expect("manifest");
    (dir, paths)
}

/// A controller over the recorded devices of `a`, as `serve` builds one.
fn recorded_controller(a: &format::Assembled) -> Controller {
    let ctl = Controller::new(
        a.shape.clone(),
        a.devs.clone(),
        Vec::new(),
        None,
        a.events,
        Box::new(SuperblockSink::from_assembled(a)),
        Options::default(),
    )
    .expect("controller");
    ctl.assume_clean(a.clean);
    ctl.init_intent_regions(a.rows_per_region, a.dirty_regions.clone());
    ctl
}

/// The set-up failures: slot 1 failed (degraded, rebuilding) and a spare added
/// (rebuilding). Returns the index of the ack after which the rebuild is recorded.
fn fail_and_spare(
    cfg: &Config,
    ctl: &Controller,
    j: &SharedJournal,
    spare: Option<Arc<dyn Member>>,
) -> Option<usize> {
    if cfg.setup != Setup::Healthy {
        ctl.fail_member(1, "crash test")
            .expect("one failure is survived");
        ack(j, SETUP_ACK);
    }
    let sp = spare?;
    ctl.add_spare(sp).expect("add spare");
    let at = ack(j, SETUP_ACK + 1);
    assert!(ctl.rebuild_progress().is_some(), "the rebuild started");
    Some(at)
}

/// Rebuild a unit now and then, and stop short of the end so the crash finds the rebuild
/// in progress; checkpoint now and then (every second while rebuilding).
fn rebuild_tick(cfg: &Config, ctl: &Controller, r: &mut ChaCha8Rng, rows: u64, rebuilt: &mut u64) {
    if cfg.setup == Setup::Rebuilding && *rebuilt + 3 < rows && r.next_u32().is_multiple_of(3) {
        ctl.rebuild_step(1);
        *rebuilt += 1;
        if r.next_u32().is_multiple_of(3) {
            ctl.checkpoint();
        }
    }
}

fn record(cfg: &Config) -> Run {
    let (dir, paths) = create_array(cfg);
    // What a run or a recovery writes: superblock and bitmap, and the data area.
    let extents = vec![
        (0, 16 << 10),
        (DATA_OFFSET_BYTES, DATA_OFFSET_BYTES + MEMBER_DATA),
    ];
    let mat = Materialiser::capture(paths.clone(), extents).expect("images");
    let j = journal();
    let a = format::assemble(&dir.0).expect("assemble the new array");
    let index_of = |d: &Arc<dyn Member>| {
        paths
            .iter()
            .position(|p| p.to_string_lossy() == d.path())
            .expect("a listed device")
    };
    let wrap = |d: &Arc<dyn Member>| RecordingMember::wrap(d.clone(), index_of(d), &j);
    let mut a2 = a.clone();
    a2.devs = a.devs.iter().map(|d| d.as_ref().map(wrap)).collect();
    a2.spares = Vec::new();
    let spare: Option<Arc<dyn Member>> = a.spares.first().map(wrap);
    let ctl = recorded_controller(&a2);
    let mut r = rng(cfg.seed);
    let mut model = Model::default();
    let rebuild_started = fail_and_spare(cfg, &ctl, &j, spare);
    let blocks = ctl.size_bytes() / BLOCK as u64;
    let bpu = u64::from(ctl.geo.blocks_per_stripe_unit());
    let per_row = ctl.geo.blocks_per_stripe();
    let rows = ctl.shape().rows();
    let mut rebuilt = 0;
    for _ in 0..cfg.ops {
        let (first, count) = pick_write(&mut r, blocks, bpu, per_row);
        let fua = r.next_u32() % 10 < 3;
        let id = model.next_id();
        let data = model.data_for(first, count);
        let start = position(&j);
        ctl.write(first * BLOCK as u64, &data, fua).expect("write");
        let at = ack(&j, id);
        model.ops.push(ModelOp {
            kind: OpKind::Write { first, count, fua },
            start,
            ack: at,
        });
        let roll = r.next_u32() % 100;
        if roll < 15 {
            let start = position(&j);
            let id = model.next_id();
            ctl.flush().expect("flush");
            let at = ack(&j, id);
            model.ops.push(ModelOp {
                kind: OpKind::Flush,
                start,
                ack: at,
            });
        } else if roll < 25 {
            // The background's lazy clearing, as if the regions had been idle for 2 s.
            ctl.intent_clear_idle(true);
        }
        rebuild_tick(cfg, &ctl, &mut r, rows, &mut rebuilt);
    }
    let rebuild_done =
        (cfg.setup == Setup::Rebuilding && ctl.rebuild_progress().is_none()).then(|| position(&j));
    drop(ctl);
    Run {
        dir,
        mat,
        events: snapshot(&j),
        model,
        rebuild_started,
        rebuild_done,
        data_offset: DATA_OFFSET_BYTES,
        per_row,
        wb: None,
    }
}

/// Tallies over the crash states of one configuration.
#[derive(Debug, Default)]
struct Tally {
    states: usize,
    cuts: usize,
    bad: usize,
    assembly: usize,
    not_resumed: usize,
    /// States with a wrong block outside a lost unit (a broken promise).
    lost_writes: usize,
    /// States whose redundancy stayed wrong in a row with no lost unit.
    parity: usize,
    /// States with a wrong block on a unit lost at assembly (the write hole).
    hole: usize,
    /// ... of which a block no write ever touched.
    hole_untouched: usize,
    /// Write-hole damage in a row that had no write in flight at the cut (not predicted).
    hole_unpredicted: usize,
    /// Rows with a lost unit whose redundancy stayed wrong (RAID-6's second parity).
    lost_row_mismatch: usize,
    /// The first state of each kind of failure, described.
    examples: std::collections::BTreeMap<&'static str, String>,
}

/// Rows of the data area with a write in flight at `cut`.
fn rows_in_flight(run: &Run, cut: usize) -> BTreeSet<u64> {
    let members = run.mat.paths.len();
    in_flight(&run.events, cut, members)
        .iter()
        .filter_map(|p| match &run.events[p.event] {
            Event::Write { offset, .. } if *offset >= run.data_offset => {
                Some((offset + p.start as u64 - run.data_offset) / CHUNK)
            }
            _ => None,
        })
        .collect()
}

/// Rows of the data area some member write reached before `cut` (durable or not).
fn rows_written(run: &Run, cut: usize) -> Vec<bool> {
    let mut rows = vec![false; (MEMBER_DATA / CHUNK) as usize];
    for e in &run.events[..cut] {
        if let Event::Write { offset, data, .. } = e {
            if *offset >= run.data_offset {
                let r0 = (offset - run.data_offset) / CHUNK;
                let r1 = (offset + data.len() as u64 - 1 - run.data_offset) / CHUNK;
                rows[r0 as usize..=r1 as usize].fill(true);
            }
        }
    }
    rows
}

fn crash_and_check(run: &Run, random_per_cut: usize, seed: u64) -> Tally {
    let mut r = rng(seed ^ 0x5eed);
    let mut next = || r.next_u64();
    let states = crash_states(&run.events, random_per_cut, &mut next);
    let mut t = Tally {
        cuts: cut_points(&run.events).len(),
        ..Tally::default()
    };
    for s in &states {
        run.mat.write(&run.events, s).expect("materialise");
        if let Some((kind, legs, seg, nv)) = &run.wb {
            let nv = nv.as_ref().map(|(p, k)| (p.as_str(), *k));
            crate::wb::setup::write_record_with_nvram(&run.dir.0, kind, legs, *seg, nv)
                .expect("wb.json");
        }
        let o = recover_and_check(
            &run.dir.0,
            &run.model,
            s.cut,
            &rows_written(run, s.cut),
            run.wb.is_some(),
        );
        t.states += 1;
        if judge(run, s, &o, &mut t) {
            t.bad += 1;
        }
    }
    t
}

/// Classify one state's outcome; true when a promise is broken.
fn judge(run: &Run, s: &CrashState, o: &Outcome, t: &mut Tally) -> bool {
    let mut why: Vec<(&'static str, String)> = Vec::new();
    if let Some(e) = &o.assembly {
        t.assembly += 1;
        why.push(("assembly", format!("assembly refused: {e}")));
    } else {
        let rebuilding = run.rebuild_started.is_some_and(|a| s.cut > a)
            && run.rebuild_done.is_none_or(|d| s.cut < d);
        if rebuilding && o.recovering.is_none() {
            t.not_resumed += 1;
            why.push(("resume", "the rebuild was not resumed".into()));
        }
        let lost: Vec<_> = o.bad.iter().filter(|b| !b.on_lost_unit).collect();
        if !lost.is_empty() {
            t.lost_writes += 1;
            let text: Vec<String> = lost
                .iter()
                .map(|b| format!("lba {} holds {:?}, allowed {:?}", b.lba, b.got, b.allowed))
                .collect();
            why.push(("lost", format!("blocks read wrong: {}", text.join(", "))));
        }
        if !o.mismatch_rows.is_empty() {
            t.parity += 1;
            why.push((
                "parity",
                format!("rows inconsistent after recovery: {:?}", o.mismatch_rows),
            ));
        }
        let hole: Vec<_> = o.bad.iter().filter(|b| b.on_lost_unit).collect();
        if !hole.is_empty() {
            t.hole += 1;
            if hole.iter().any(|b| b.untouched) {
                t.hole_untouched += 1;
            }
            let flying = rows_in_flight(run, s.cut);
            if hole
                .iter()
                .any(|b| !flying.contains(&(b.lba / run.per_row)))
            {
                t.hole_unpredicted += 1;
                why.push((
                    "hole",
                    format!(
                        "write-hole damage in a row with no write in flight: {:?}",
                        hole.iter()
                            .map(|b| (b.lba, b.got, &b.allowed))
                            .collect::<Vec<_>>()
                    ),
                ));
            }
        }
        if !o.mismatch_rows_lost.is_empty() {
            t.lost_row_mismatch += 1;
        }
    }
    if why.is_empty() {
        return false;
    }
    for (kind, text) in why {
        t.examples.entry(kind).or_insert_with(|| {
            format!(
                "cut {} of {} ({}, {} pieces landed: {:?}): {text}",
                s.cut,
                run.events.len(),
                s.kind,
                s.landed.len(),
                describe(&run.events, s)
            )
        });
    }
    true
}

/// The events around a state's cut and what landed, for a reproduction.
fn describe(events: &[Event], s: &CrashState) -> Vec<String> {
    let short = |i: usize| match &events[i] {
        Event::Write {
            member,
            offset,
            data,
        } => format!("#{i} write m{member} @{offset}+{}", data.len()),
        Event::Sync { member } => format!("#{i} sync m{member}"),
        Event::Ack { id } => format!("#{i} ack {id}"),
    };
    let mut out: Vec<String> = (s.cut.saturating_sub(12)..s.cut).map(short).collect();
    out.push("| landed:".into());
    out.extend(
        s.landed
            .iter()
            .take(12)
            .map(|p| format!("{}[{}..{}]", short(p.event), p.start, p.end)),
    );
    out
}

/// Prints a configuration's counts (visible with `--nocapture`).
fn report(cfg: &Config, run: &Run, t: &Tally, secs: f64) {
    eprintln!(
        "crash {}: {} events, {} cuts, {} states checked, {} bad (assembly refused {}, rebuild not resumed {}, lost writes {}, inconsistent rows {}); write hole: {} states ({} with never-written blocks, {} unpredicted), {} with a lost-unit row inconsistent; {:.1} s",
        cfg.tag,
        run.events.len(),
        t.cuts,
        t.states,
        t.bad,
        t.assembly,
        t.not_resumed,
        t.lost_writes,
        t.parity,
        t.hole,
        t.hole_untouched,
        t.hole_unpredicted,
        t.lost_row_mismatch,
        secs
    );
    for (kind, b) in &t.examples {
        eprintln!("  {kind}: {b}");
    }
}

fn run_config(cfg: &Config) -> (Run, Tally) {
    let t0 = Instant::now();
    let run = record(cfg);
    let t = crash_and_check(&run, cfg.random_per_cut, cfg.seed);
    report(cfg, &run, &t, t0.elapsed().as_secs_f64());
    (run, t)
}

fn cfg(tag: &'static str, level: Level, disks: u32, setup: Setup, seed: u64) -> Config {
    Config {
        tag,
        level,
        disks,
        setup,
        ops: 40,
        // RAID-6 runs have more cuts (more members) and cost more per state (Q in a debug
        // build): fewer random states per cut keep each configuration near 1,000 states.
        random_per_cut: if level == Level::Raid6 { 2 } else { 4 },
        seed,
    }
}

/// The promises every configuration keeps: no durable write lost or torn outside the
/// write hole's territory, a resumed rebuild, write-hole damage only where a write was in
/// flight. (These tests found two store bugs, both fixed: a crash inside a superblock
/// update left an array that would not assemble, and a cleared bitmap bit could become
/// durable before its row's writes; see `tests_bugs.rs`.)
fn assert_promises(t: &Tally) {
    assert!(t.states >= 1000, "{t:?}");
    // Every state assembles, keeps every durably acknowledged write, resumes its rebuild,
    // and ends with consistent redundancy in every row that kept all its units; the write
    // hole stays on lost units of rows that had a write in flight.
    assert_eq!(
        (
            t.assembly,
            t.lost_writes,
            t.not_resumed,
            t.parity,
            t.hole_unpredicted
        ),
        (0, 0, 0, 0, 0),
        "{t:?}"
    );
}

#[test]
fn raid5_healthy() {
    let (_, t) = run_config(&cfg("raid5-healthy", Level::Raid5, 4, Setup::Healthy, 51));
    assert_promises(&t);
    assert_eq!(t.hole, 0, "no unit is lost in a healthy array: {t:?}");
}

#[test]
fn raid6_healthy() {
    let (_, t) = run_config(&cfg("raid6-healthy", Level::Raid6, 6, Setup::Healthy, 61));
    assert_promises(&t);
    assert_eq!(t.hole, 0, "no unit is lost in a healthy array: {t:?}");
}

#[test]
fn raid5_rebuilding() {
    let (_, t) = run_config(&cfg(
        "raid5-rebuild",
        Level::Raid5,
        4,
        Setup::Rebuilding,
        52,
    ));
    assert_promises(&t);
}

#[test]
fn raid6_rebuilding() {
    let mut c = cfg("raid6-rebuild", Level::Raid6, 6, Setup::Rebuilding, 62);
    // No bitmap clear while the slot is rebuilt: fewer cuts, more random states per cut.
    c.random_per_cut = 5;
    let (_, t) = run_config(&c);
    assert_promises(&t);
    // A row missing one unit keeps one redundant unit, which resync brings in line with
    // the data (the lost unit taken as P says), so no row is left inconsistent.
    assert_eq!(t.lost_row_mismatch, 0, "{t:?}");
}

/// Degraded, no spare: a lost data unit is solved from P alone (RAID-5 has nothing else;
/// RAID-6's resync brings Q in line with what P says), so a crash that lands part of a
/// row's data and parity writes makes the lost unit read wrong: the write hole, for
/// RAID-5 and for RAID-6 with one member lost alike. The design predicts such damage only
/// on lost units of rows with a write in flight at the crash (`assert_promises`), and some.
fn degraded(tag: &'static str, level: Level, disks: u32, seed: u64) {
    let mut c = cfg(tag, level, disks, Setup::Degraded, seed);
    // Fewer cuts than a healthy run: fewer members to sync, and no bitmap bit is cleared
    // while a slot is not in sync (the workload's clears write nothing).
    c.random_per_cut = if level == Level::Raid6 { 6 } else { 9 };
    let (_, t) = run_config(&c);
    assert_promises(&t);
    assert!(
        t.hole > 0,
        "the write hole is real and should be seen: {t:?}"
    );
    assert_eq!(t.lost_row_mismatch, 0, "{t:?}");
}

#[test]
fn raid5_degraded_write_hole() {
    degraded("raid5-degraded", Level::Raid5, 4, 53);
}

#[test]
fn raid6_degraded_write_hole() {
    degraded("raid6-degraded", Level::Raid6, 6, 63);
}

#[path = "tests_bugs.rs"]
mod bugs;
#[path = "tests_wb.rs"]
mod wb;
