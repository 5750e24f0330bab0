//! One scheduled run: the real controller, write-back cache, destager, rebuild and resync
//! threads, clients and an operator, under shuttle's scheduler, checked against the model.
//!
//! Members are files (so crash states can be materialised and assembled as `serve` does),
//! each wrapped in a recorder (the journal of writes and syncs) and a fault injector whose
//! every operation is a scheduling point.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Mutex as StdMutex;

use raidlab::array::Level;
use raidlab_store::crash::{self, CrashState, Event, Materialiser, RecordingMember, SharedJournal};
use raidlab_store::ctrl::column::BLOCK;
use raidlab_store::ctrl::{Controller, IoFail, Options, RebuildExecutor};
use raidlab_store::format;
use raidlab_store::member::{FaultMember, FileMember, Member};
use raidlab_store::model::{Model, OpKind};
use raidlab_store::sync::{self, thread, Arc};
use raidlab_store::wb::backup::Backup;
use raidlab_store::wb::log::LogBackup;
use raidlab_store::wb::mirror::MirrorBackup;
use raidlab_store::wb::{BackupKind, WbSpec, WriteBack};

pub const CHUNK: u64 = 16 << 10;
pub const ROWS: u64 = 8;
const CACHE_PAGES: u64 = 48;
pub(crate) const MIRROR_SLOTS: u64 = 2 * CACHE_PAGES + 32;
pub(crate) const LOG_SEGMENT: u64 = 64 << 10;
pub(crate) const BACKUP_FILE: u64 = 1 << 20;
/// NVRAM slots of `Mode::LogNvram`: few, so writers wait for drains.
pub(crate) const NVRAM_SLOTS: u32 = 2;

pub(crate) use crate::fixture::write_record;
pub use crate::fixture::{fixture, Fixture};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No write cache: the NBD contract (FLUSH or FUA makes a write durable).
    Through,
    /// Write-back with `--backup none`: the NBD contract too.
    Volatile,
    Mirror,
    Log,
    /// The log behind NVRAM segment buffers (`--log-nvram`): its drainer threads run under
    /// the scheduler too.
    LogNvram,
}

impl Mode {
    pub(crate) fn backed(self) -> bool {
        matches!(self, Mode::Mirror | Mode::Log | Mode::LogNvram)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Healthy,
    Degraded,
    Rebuilding,
}

/// What a configuration's runs concentrate on. The general mix finds most bugs in a few
/// hundred runs; the narrow windows of some need their ingredients every run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    /// Writes, zeroes, reads and FLUSHes anywhere; the operator's commands at random.
    Mix,
    /// Writes to a few pages over and over while the destager runs, so versions of one
    /// page are cached, destaged and released together (images, records and clears).
    HotPages,
    /// The backup device fails first: writes go through and FLUSHes race each other; a
    /// crash state is cut just after every FLUSH reply.
    LostBackup,
    /// The replacement being rebuilt fails soon after the start, so a second rebuild
    /// races the first one's late units.
    ReplacementFails,
}

#[derive(Debug, Clone, Copy)]
pub struct Cfg {
    pub level: Level,
    pub disks: u32,
    pub mode: Mode,
    pub start: Start,
    /// Operations per client thread.
    pub ops: u32,
    pub clients: u32,
    /// Crash states cut from each run's history and recovered.
    pub crashes: u32,
    pub focus: Focus,
    /// How the rebuild runs (`serve --rebuild-executor`).
    pub executor: RebuildExecutor,
}

impl Cfg {
    /// Member failures the level survives.
    pub(crate) fn tolerance(&self) -> usize {
        match self.level {
            Level::Raid0 => 0,
            Level::Raid1 => self.disks as usize - 1,
            Level::Raid10 => 1,
            Level::Raid5 => 1,
            Level::Raid6 => 2,
        }
    }
}

fn none_state() -> CrashState {
    CrashState {
        cut: 0,
        landed: Vec::new(),
        kind: "none",
    }
}

/// What a run saw (summed over runs by the caller).
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub runs: u64,
    pub calls: u64,
    pub crash_states: u64,
    /// Crash states whose lost units read wrong without a backup: the documented RAID-5/6
    /// write hole (docs/store.md, Limits), not a broken promise.
    pub hole_states: u64,
    /// Of those, with a backup: two units of a column lost during one destage, which the
    /// partial parities do not cover (`wb/ppl.rs`); any other one with a backup fails the run.
    pub hole_concurrent: u64,
    /// Distinct histories (member I/O and client calls, in order) among the runs.
    pub histories: std::collections::HashSet<u64>,
    /// Runs in which the write cache had two destages or more in flight at once (the
    /// destager's pool: under the scheduler the members count as slow).
    pub overlapped: u64,
}

/// Shared by the threads of one run.
pub(crate) struct Ctx {
    pub(crate) cfg: Cfg,
    pub(crate) ctl: Arc<Controller>,
    pub(crate) wb: Option<Arc<WriteBack>>,
    pub(crate) j: SharedJournal,
    pub(crate) model: StdMutex<Model>,
    pub(crate) blocks: u64,
    /// Clients and operator finished.
    pub(crate) done: std::sync::atomic::AtomicU32,
    /// The operator failed the write cache's backup device.
    pub(crate) backup_lost: std::sync::atomic::AtomicBool,
    pub(crate) backup_fault: Option<Arc<FaultMember>>,
    /// Where in the history the backup was failed.
    pub(crate) lost_at: StdMutex<Option<usize>>,
    /// The operator failed a member or made one fail its I/O.
    pub(crate) failed_during: std::sync::atomic::AtomicBool,
}

std::thread_local! {
    /// Runs started by this test (its OS thread carries all its scheduled tasks): a failure
    /// names the run it broke in, i.e. how many schedules it took to find.
    static RUNS_STARTED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

pub(crate) fn fail(msg: String) -> ! {
    let run = RUNS_STARTED.with(|c| c.get());
    let name = std::thread::current().name().unwrap_or("?").to_string();
    panic!("PROMISE BROKEN in scheduled run {run} of {name}: {msg}");
}

impl Ctx {
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), IoFail> {
        match &self.wb {
            Some(w) => w.write(offset, data, fua),
            None => self.ctl.write(offset, data, fua),
        }
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), IoFail> {
        match &self.wb {
            Some(w) => w.read(offset, buf),
            None => self.ctl.read(offset, buf),
        }
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> Result<(), IoFail> {
        match &self.wb {
            Some(w) => w.write_zeroes(offset, len, fua),
            None => self.ctl.write_zeroes(offset, len, fua),
        }
    }
    /// Whether an answered write is durable at its reply: with a backup that has not been
    /// failed (after a backup failure writes go straight to the array: the NBD contract).
    fn durable_at_ack(&self) -> bool {
        self.cfg.mode.backed() && !self.backup_lost.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn flush(&self) -> Result<(), IoFail> {
        match &self.wb {
            Some(w) => w.flush(),
            None => self.ctl.flush(),
        }
    }

    /// A write of `count` blocks from `first` (of zeros with `zeros`: TRIM / WRITE_ZEROES):
    /// must succeed (redundancy always remains).
    pub(crate) fn do_write(&self, first: u64, count: u64, fua: bool, zeros: bool) {
        let (i, data) = {
            let mut m = self.model.lock().expect("model");
            let data = if zeros {
                m.zeros_for(first, count);
                Vec::new()
            } else {
                m.data_for(first, count)
            };
            // With a backup every answered write is durable at its reply (decided at the
            // reply: a write the backup failed under may be the NBD contract's).
            let kind = OpKind::Write { first, count, fua };
            let i = m.begin(kind, crash::position(&self.j));
            (i, data)
        };
        let r = if zeros {
            self.write_zeroes(first * BLOCK as u64, count * BLOCK as u64, fua)
        } else {
            self.write(first * BLOCK as u64, &data, fua)
        };
        if let Err(e) = r {
            fail(format!(
                "write of blocks {first}+{count} failed while the level survives: {e}"
            ));
        }
        let durable = self.durable_at_ack();
        let ack = crash::ack(&self.j, i as u64 + 1);
        let mut m = self.model.lock().expect("model");
        if let OpKind::Write { fua: f, .. } = &mut m.ops[i].kind {
            *f |= durable;
        }
        m.end(i, ack);
    }

    pub(crate) fn do_flush(&self) {
        let i = {
            let mut m = self.model.lock().expect("model");
            m.begin(OpKind::Flush, crash::position(&self.j))
        };
        if let Err(e) = self.flush() {
            fail(format!("FLUSH failed while the level survives: {e}"));
        }
        let ack = crash::ack(&self.j, i as u64 + 1);
        self.model.lock().expect("model").end(i, ack);
    }

    /// Read `count` blocks from `first` and check each against the model.
    pub(crate) fn do_read(&self, first: u64, count: u64) {
        let start = crash::position(&self.j);
        let mut buf = vec![0u8; (count as usize) * BLOCK];
        if let Err(e) = self.read(first * BLOCK as u64, &mut buf) {
            fail(format!(
                "read of blocks {first}+{count} failed while the level survives: {e}"
            ));
        }
        let end = crash::ack(&self.j, 0);
        let m = self.model.lock().expect("model");
        for (k, b) in buf.chunks(BLOCK).enumerate() {
            let lba = first + k as u64;
            let got = m.identify(lba, b);
            let ok = m.allowed_read(lba, start, end);
            if got.is_none_or(|id| !ok.contains(&id)) {
                let writes: Vec<String> = m
                    .ops
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| match o.kind {
                        OpKind::Write { first, count, .. } => (first..first + count).contains(&lba),
                        OpKind::Flush => false,
                    })
                    .map(|(i, o)| format!("write {} [{}, {}]", i + 1, o.start, o.ack))
                    .collect();
                fail(format!(
                    "read of block {lba} [{start}, {end}] returned {got:?}, the model allows {ok:?} (stale or lost); {writes:?}"
                ));
            }
        }
    }
}

/// Run one scheduled execution of `cfg` on `fx`; panics (with shuttle's replayable
/// schedule) when a promise is broken.
pub fn run_once(fx: &Fixture, cfg: &Cfg, tally: &StdMutex<Tally>) {
    RUNS_STARTED.with(|c| c.set(c.get() + 1));
    sync::reset_clock();
    fx.base
        .write(&[], &none_state())
        .expect("restore the images");
    let j = crash::journal();
    j.lock().expect("journal").paused = true;
    let a = format::assemble(&fx.dir.0).expect("assemble");
    let index_of = |p: &str| {
        fx.paths
            .iter()
            .position(|x| x.to_string_lossy() == p)
            .expect("a device of the fixture")
    };
    let wrap = |d: &Arc<dyn Member>| {
        Arc::new(FaultMember::new(RecordingMember::wrap(
            d.clone(),
            index_of(d.path()),
            &j,
        )))
    };
    let faults: Vec<Arc<FaultMember>> = a
        .devs
        .iter()
        .map(|d| wrap(d.as_ref().expect("a healthy fixture")))
        .collect();
    let spares: Vec<Arc<FaultMember>> = a.spares.iter().map(wrap).collect();
    let mut a2 = a.clone();
    a2.devs = faults
        .iter()
        .map(|f| Some(f.clone() as Arc<dyn Member>))
        .collect();
    // Degraded runs start with no spare, healthy ones with one; the operator may add the
    // withheld one. Rebuilding runs have both: when the operator fails the replacement, a
    // second rebuild starts at once, racing the first one's late units.
    type Dev = Arc<dyn Member>;
    let (given, withheld): (Vec<Dev>, Option<Dev>) = match cfg.start {
        Start::Degraded => (Vec::new(), Some(spares[1].clone())),
        Start::Healthy => (vec![spares[0].clone()], Some(spares[1].clone())),
        Start::Rebuilding => (vec![spares[0].clone(), spares[1].clone()], None),
    };
    a2.spares = given;
    let ctl = Arc::new(
        raidlab_store::serve::controller_from(
            &a2,
            Options {
                rebuild_executor: cfg.executor,
                ..Options::default()
            },
        )
        .expect("controller"),
    );
    // Every block starts with data of its own (write 1), durable before the run: a row a
    // rebuild wrongly calls done, or a stale read, then shows as wrong bytes, not as zeros
    // that happen to be right.
    let mut model = Model::default();
    let blocks = ctl.size_bytes() / BLOCK as u64;
    let prefill = model.data_for(0, blocks);
    let first = model.begin(
        OpKind::Write {
            first: 0,
            count: blocks,
            fua: true,
        },
        0,
    );
    ctl.write(0, &prefill, true).expect("prefill");
    if cfg.start != Start::Healthy {
        ctl.fail_member(1, "set-up").expect("fail slot 1");
    }
    if cfg.start == Start::Rebuilding {
        assert!(ctl.maybe_start_rebuild(), "a rebuild onto spare 0");
        let _ = ctl.rebuild_step(2);
    }
    let mut backup_fault: Option<Arc<FaultMember>> = None;
    let void_at: Arc<StdMutex<Vec<(usize, u64)>>> = Arc::new(StdMutex::new(Vec::new()));
    let _ = std::fs::remove_file(fx.dir.0.join(raidlab_store::wb::setup::VOID_FILE));
    let wb = match cfg.mode {
        Mode::Through => None,
        m => {
            let backup: Option<Box<dyn Backup>> = match m {
                Mode::Volatile => None,
                _ => {
                    let f: Arc<dyn Member> =
                        Arc::new(FileMember::open(&fx.backup.to_string_lossy()).expect("backup"));
                    let rec = RecordingMember::wrap(f, fx.paths.len() - 1, &j);
                    // The NVRAM file, just before the backup file in the journal's order.
                    let nvram = fx.nvram.as_ref().map(|p| {
                        let f: Arc<dyn Member> =
                            Arc::new(FileMember::open(&p.to_string_lossy()).expect("nvram"));
                        RecordingMember::wrap(f, fx.paths.len() - 2, &j)
                    });
                    let fault = Arc::new(FaultMember::new(rec));
                    backup_fault = Some(fault.clone());
                    let bdev: Arc<dyn Member> = fault;
                    Some(if m == Mode::Mirror {
                        Box::new(
                            MirrorBackup::create(bdev, a.uuid, MIRROR_SLOTS, 0).expect("mirror"),
                        )
                    } else {
                        Box::new({
                            let log = LogBackup::create(
                                vec![(bdev, 0, fx.backup_bytes)],
                                a.uuid,
                                LOG_SEGMENT,
                                CACHE_PAGES,
                            )
                            .expect("log");
                            match nvram {
                                Some(nv) => log.with_nvram(nv, NVRAM_SLOTS).expect("nvram"),
                                None => log,
                            }
                        })
                    })
                }
            };
            let kind = match m {
                Mode::Volatile => BackupKind::None,
                Mode::Mirror => BackupKind::Mirror,
                _ => BackupKind::Log { logical: false },
            };
            let spec = WbSpec {
                capacity_pages: CACHE_PAGES,
                order: raidlab::cache::write::OrderKind::Lrw,
                high_pct: 50.0,
                low_pct: 10.0,
                max_destages: 2,
            };
            // As `serve`: a lost backup that cannot be reset is voided by a marker file
            // (its position in the history is kept, for the crash states).
            let (dir, vj, va) = (fx.dir.0.clone(), j.clone(), void_at.clone());
            let hook = Box::new(move |epoch: u64| {
                va.lock().expect("void").push((crash::position(&vj), epoch));
                std::fs::write(
                    dir.join(raidlab_store::wb::setup::VOID_FILE),
                    format!("{epoch}\n"),
                )
            });
            Some(Arc::new(
                WriteBack::new(ctl.clone(), spec, kind, backup)
                    .expect("write cache")
                    .with_void_hook(hook),
            ))
        }
    };
    // The run's own starting images (the set-up above wrote superblocks and the backup).
    let mat = Materialiser::capture_each(fx.paths.clone(), fx.extents.clone()).expect("images");
    j.lock().expect("journal").paused = false;
    // The prefill's reply comes before every call of the run.
    model.end(first, crash::ack(&j, 1));

    let ctx = Arc::new(Ctx {
        cfg: *cfg,
        ctl: ctl.clone(),
        wb: wb.clone(),
        j: j.clone(),
        model: StdMutex::new(model),
        blocks,
        done: std::sync::atomic::AtomicU32::new(0),
        backup_lost: std::sync::atomic::AtomicBool::new(false),
        backup_fault: backup_fault.clone(),
        lost_at: StdMutex::new(None),
        failed_during: std::sync::atomic::AtomicBool::new(false),
    });
    let bg = ctl.spawn_background();
    let destager = wb.as_ref().map(|w| w.spawn_destager());
    let clients: Vec<_> = (0..cfg.clients)
        .map(|_| {
            let c = ctx.clone();
            thread::spawn(move || {
                crate::actors::client(&c);
                c.done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            })
        })
        .collect();
    let op = {
        let c = ctx.clone();
        let faults = faults.clone();
        let first_spare = spares[0].clone();
        let live = fx.members.clone();
        thread::spawn(move || {
            crate::actors::operator(&c, &faults, &first_spare, withheld, &live);
            c.done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })
    };
    // Wait for the clients and the operator, boundedly: a run that stops making progress
    // (a lost wake-up, a livelock) is reported with the state it is stuck in.
    for turn in 0u64.. {
        if ctx.done.load(std::sync::atomic::Ordering::SeqCst) == cfg.clients + 1 {
            break;
        }
        if turn > 20_000 {
            let m = ctx.model.lock().expect("model");
            let pending: Vec<_> = m
                .ops
                .iter()
                .filter(|o| o.ack == raidlab_store::model::PENDING)
                .collect();
            fail(format!(
                "no progress: calls pending {pending:?}; array {}; write cache {}",
                ctl.status(),
                wb.as_ref().map(|w| w.status()).unwrap_or_default()
            ));
        }
        thread::yield_now();
    }
    for c in clients {
        c.join().expect("client");
    }
    op.join().expect("operator");
    let mut overlapped = false;
    if let (Some(w), Some(d)) = (&wb, destager) {
        let drained = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let dr = {
            let (w, drained) = (w.clone(), drained.clone());
            thread::spawn(move || {
                let r = w.drain_all();
                drained.store(true, std::sync::atomic::Ordering::SeqCst);
                r
            })
        };
        for turn in 0u64.. {
            if drained.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            if turn > 20_000 {
                fail(format!(
                    "the drain makes no progress: write cache {}",
                    w.status()
                ));
            }
            thread::yield_now();
        }
        if let Err(e) = dr.join().expect("drain") {
            fail(format!("draining the write cache failed: {e}"));
        }
        // Only an injected fault may lose the backup: anything else (a cleaner that cannot
        // find a live record's page, a full log) is the controller's own bug, even though
        // writing through afterwards keeps the data.
        let st = w.status();
        if st["destages_in_flight_max"].as_u64().unwrap_or(0) >= 2 {
            overlapped = true;
        }
        if ctx.cfg.mode.backed()
            && !ctx.backup_lost.load(std::sync::atomic::Ordering::SeqCst)
            && st["mode"]["state"] != "backed"
        {
            fail(format!(
                "the backup was lost with no fault injected: {}",
                st["mode"]
            ));
        }
        w.stop();
        d.join().expect("destager");
    }
    ctl.stop();
    bg.join().expect("background");
    // Quiescent: every block reads as a write no later write superseded.
    ctx.do_read(0, blocks);
    let r = ctl.check();
    if r.mismatches > 0 {
        fail(format!("check after the run: {r:?}"));
    }
    let events = crash::snapshot(&j);
    let mut h = DefaultHasher::new();
    for e in &events {
        match e {
            Event::Write { member, offset, .. } => (0u8, *member, *offset).hash(&mut h),
            Event::Sync { member } => (1u8, *member, 0u64).hash(&mut h),
            Event::Ack { id } => (2u8, 0usize, *id).hash(&mut h),
        }
    }
    let lost_at = *ctx.lost_at.lock().expect("lost");
    let ctx_failed = ctx.failed_during.load(std::sync::atomic::Ordering::SeqCst);
    drop(wb);
    drop(ctl);
    // The threads are joined: the model is this thread's alone.
    let model = match Arc::try_unwrap(ctx) {
        Ok(c) => c.model.into_inner().expect("model"),
        Err(_) => panic!("a thread of the run outlived it"),
    };
    {
        let mut t = tally.lock().expect("tally");
        t.runs += 1;
        t.calls += model.ops.len() as u64;
        t.histories.insert(h.finish());
        t.overlapped += u64::from(overlapped);
    }
    let voided = void_at.lock().expect("void").clone();
    let run = crate::recover::Run {
        mat,
        events,
        model,
        voided,
        lost_at,
        failed_during: ctx_failed,
    };
    crate::recover::crash_check(fx, cfg, &run, tally);
}
