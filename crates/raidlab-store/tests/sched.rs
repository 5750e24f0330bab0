//! Controlled-schedule tests of the store (issue 28; DESIGN §9).
//!
//! Each test runs the real controller, write-back cache, destager, rebuild and resync
//! threads, two clients and an operator under shuttle's randomized scheduler: every lock,
//! wait, shared atomic and member I/O is a point where the scheduler picks the next thread,
//! from a seed, so a failing schedule replays exactly. Every call is checked against the
//! reference model (`raidlab_store::model`): no acknowledged write lost or read stale, no
//! FLUSH answered before what it covers is durable, no call failing while the level
//! survives, parity consistent (`check`); and crash states cut from each run's concurrent
//! history are recovered as `serve` does and checked against the same model.
//!
//! Built only with the `shuttle` feature:
//! `cargo test -p raidlab-store --features shuttle --test sched`. `RAIDLAB_SCHED_RUNS` sets
//! the runs per configuration (default 6; `make soak` runs 10,000), `RAIDLAB_SCHED_SEED` the
//! first seed, `RAIDLAB_SCHED_CRASHES` the crash states per run (default 2).

#[path = "sched/actors.rs"]
mod actors;
#[path = "sched/fixture.rs"]
mod fixture;
#[path = "sched/kernels.rs"]
mod kernels;
#[path = "sched/recover.rs"]
mod recover;
#[path = "sched/rig.rs"]
mod rig;

use std::sync::Mutex as StdMutex;

use raidlab::array::Level;
use raidlab_store::ctrl::RebuildExecutor;
use rig::{Cfg, Fixture, Focus, Mode, Start, Tally};
use shuttle::scheduler::RandomScheduler;
use shuttle::{Config, MaxSteps, Runner};

fn env_u64(key: &str, default: u64) -> u64 {
    match std::env::var(key) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{key}={v:?}: expected a whole number")),
        Err(_) => default,
    }
}

/// A shuttle run configuration: big enough stacks for the controller's request paths, and
/// a step bound far above any run's (a livelock fails instead of hanging).
fn config() -> Config {
    let mut c = Config::new();
    c.stack_size = 1 << 20;
    c.max_steps = MaxSteps::FailAfter(20_000_000);
    c.silence_warnings = true;
    c
}

/// Make the fixture inside a one-shot scheduled run: creating an array takes the seam's
/// locks, which exist only inside shuttle's executions in this build.
fn make_fixture(tag: &'static str, cfg: Cfg) -> std::sync::Arc<Fixture> {
    let slot = std::sync::Arc::new(StdMutex::new(None));
    let s = slot.clone();
    Runner::new(RandomScheduler::new_from_seed(0, 1), config())
        .run(move || *s.lock().expect("slot") = Some(rig::fixture(tag, &cfg)));
    let fx = slot.lock().expect("slot").take().expect("fixture made");
    std::sync::Arc::new(fx)
}

fn run(tag: &'static str, level: Level, disks: u32, mode: Mode, start: Start) -> Tally {
    run_cfg(
        tag,
        level,
        disks,
        mode,
        start,
        Focus::Mix,
        RebuildExecutor::Runs,
    )
}

fn run_cfg(
    tag: &'static str,
    level: Level,
    disks: u32,
    mode: Mode,
    start: Start,
    focus: Focus,
    executor: RebuildExecutor,
) -> Tally {
    let runs = env_u64("RAIDLAB_SCHED_RUNS", 6) as usize;
    let seed = env_u64("RAIDLAB_SCHED_SEED", 1);
    let cfg = Cfg {
        level,
        disks,
        mode,
        start,
        ops: 8,
        clients: 2,
        crashes: env_u64("RAIDLAB_SCHED_CRASHES", 2) as u32,
        focus,
        executor,
    };
    let fx = make_fixture(tag, cfg);
    let tally = std::sync::Arc::new(StdMutex::new(Tally::default()));
    let t0 = std::time::Instant::now();
    {
        let (fx, tally) = (fx.clone(), tally.clone());
        let body = move || rig::run_once(&fx, &cfg, &tally);
        // Randomized, not PCT: the waits of the store and of the rig yield in loops,
        // which PCT's fixed priorities starve (measured: runs hit the step bound).
        Runner::new(RandomScheduler::new_from_seed(seed, runs), config()).run(body);
    }
    let t = tally.lock().expect("tally").clone();
    println!(
        "SCHED {tag}: {} runs, {} calls, {} distinct histories, {} with two destages in flight at once, {} crash states ({} write-hole, {} of them two units lost during one backed destage), 0 violations, {:.1} s",
        t.runs,
        t.calls,
        t.histories.len(),
        t.overlapped,
        t.crash_states,
        t.hole_states,
        t.hole_concurrent,
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(t.runs, runs as u64);
    t
}

macro_rules! sched_case {
    ($name:ident, $level:expr, $disks:expr, $mode:expr, $start:expr) => {
        #[test]
        fn $name() {
            run(stringify!($name), $level, $disks, $mode, $start);
        }
    };
}

use Level::{Raid1, Raid5, Raid6};
use Mode::{Log, LogNvram, Mirror, Through, Volatile};
use Start::{Degraded, Healthy, Rebuilding};

sched_case!(raid1_through_healthy, Raid1, 2, Through, Healthy);
sched_case!(raid1_through_degraded, Raid1, 2, Through, Degraded);
sched_case!(raid1_through_rebuilding, Raid1, 2, Through, Rebuilding);
sched_case!(raid1_mirror_healthy, Raid1, 2, Mirror, Healthy);
sched_case!(raid1_mirror_degraded, Raid1, 2, Mirror, Degraded);
sched_case!(raid1_mirror_rebuilding, Raid1, 2, Mirror, Rebuilding);
sched_case!(raid1_log_healthy, Raid1, 2, Log, Healthy);
sched_case!(raid1_log_degraded, Raid1, 2, Log, Degraded);
sched_case!(raid1_log_rebuilding, Raid1, 2, Log, Rebuilding);
sched_case!(raid5_through_healthy, Raid5, 4, Through, Healthy);
sched_case!(raid5_through_degraded, Raid5, 4, Through, Degraded);
sched_case!(raid5_through_rebuilding, Raid5, 4, Through, Rebuilding);
sched_case!(raid5_mirror_healthy, Raid5, 4, Mirror, Healthy);
sched_case!(raid5_mirror_degraded, Raid5, 4, Mirror, Degraded);
sched_case!(raid5_mirror_rebuilding, Raid5, 4, Mirror, Rebuilding);
sched_case!(raid5_log_healthy, Raid5, 4, Log, Healthy);
sched_case!(raid5_log_degraded, Raid5, 4, Log, Degraded);
sched_case!(raid5_log_rebuilding, Raid5, 4, Log, Rebuilding);
sched_case!(raid5_volatile_healthy, Raid5, 4, Volatile, Healthy);
sched_case!(raid5_volatile_degraded, Raid5, 4, Volatile, Degraded);
sched_case!(raid6_through_healthy, Raid6, 5, Through, Healthy);
sched_case!(raid6_through_degraded, Raid6, 5, Through, Degraded);
sched_case!(raid6_through_rebuilding, Raid6, 5, Through, Rebuilding);
sched_case!(raid6_mirror_healthy, Raid6, 5, Mirror, Healthy);
sched_case!(raid6_mirror_degraded, Raid6, 5, Mirror, Degraded);
sched_case!(raid6_mirror_rebuilding, Raid6, 5, Mirror, Rebuilding);
sched_case!(raid6_log_healthy, Raid6, 5, Log, Healthy);
sched_case!(raid6_log_degraded, Raid6, 5, Log, Degraded);
sched_case!(raid6_log_rebuilding, Raid6, 5, Log, Rebuilding);
sched_case!(raid1_log_nvram_healthy, Raid1, 2, LogNvram, Healthy);
sched_case!(raid5_log_nvram_healthy, Raid5, 4, LogNvram, Healthy);
sched_case!(raid5_log_nvram_degraded, Raid5, 4, LogNvram, Degraded);
sched_case!(raid6_log_nvram_rebuilding, Raid6, 5, LogNvram, Rebuilding);

macro_rules! focus_case {
    ($name:ident, $level:expr, $disks:expr, $mode:expr, $start:expr, $focus:expr) => {
        #[test]
        fn $name() {
            run_cfg(
                stringify!($name),
                $level,
                $disks,
                $mode,
                $start,
                $focus,
                RebuildExecutor::Runs,
            );
        }
    };
}

// Narrow windows, with their ingredients in every run.
focus_case!(
    raid5_mirror_hot_pages,
    Raid5,
    4,
    Mirror,
    Healthy,
    Focus::HotPages
);
focus_case!(
    raid6_log_hot_pages,
    Raid6,
    5,
    Log,
    Degraded,
    Focus::HotPages
);
focus_case!(
    raid5_mirror_lost_backup,
    Raid5,
    4,
    Mirror,
    Healthy,
    Focus::LostBackup
);
focus_case!(
    raid1_log_lost_backup,
    Raid1,
    2,
    Log,
    Healthy,
    Focus::LostBackup
);
focus_case!(
    raid5_through_replacement_fails,
    Raid5,
    4,
    Through,
    Rebuilding,
    Focus::ReplacementFails
);
focus_case!(
    raid6_mirror_replacement_fails,
    Raid6,
    5,
    Mirror,
    Rebuilding,
    Focus::ReplacementFails
);

macro_rules! dor_case {
    ($name:ident, $level:expr, $disks:expr, $mode:expr, $focus:expr) => {
        #[test]
        fn $name() {
            // Few buffers and one read per survivor: jobs are read and written while the
            // clients' writes land between a job's reads, with few threads to schedule.
            let dor = RebuildExecutor::Dor {
                buffers: 3,
                depth: 1,
            };
            run_cfg(
                stringify!($name),
                $level,
                $disks,
                $mode,
                Start::Rebuilding,
                $focus,
                dor,
            );
        }
    };
}

// The disk-oriented rebuild (`serve --rebuild-executor dor`): its threads read a row's
// survivors at different times without holding the row.
dor_case!(raid5_through_rebuilding_dor, Raid5, 4, Through, Focus::Mix);
dor_case!(raid6_log_rebuilding_dor, Raid6, 5, Log, Focus::Mix);
dor_case!(
    raid5_mirror_replacement_fails_dor,
    Raid5,
    4,
    Mirror,
    Focus::ReplacementFails
);
