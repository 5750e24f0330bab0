//! The controller: the array state, the member devices and the request paths.
//!
//! One `Controller` serves one array. Requests arrive from any number of threads (NBD
//! connections and their workers); each executes its own plan with positioned I/O on the
//! members, so members are driven in parallel by the requests in flight. Shared state:
//!
//! - `state` (RwLock): the core's `Array` (failed members, rebuild progress), the member
//!   devices and the spares. Requests hold it for reading; failures, spares and rebuild steps
//!   take it for writing briefly.
//! - `locks`: stripe-row locks, held by every write for its rows and by every operation that
//!   reads a row to combine it (degraded reads, rebuild, resync, check).
//! - the read cache (`cache.rs`), the write-intent bitmap and the rebuild job.
//!
//! Lock order: stripe rows, then `state`, then the cache or the bitmap.

pub mod cache;
pub mod checkjob;
pub mod column;
pub mod fanout;
pub mod io;
pub mod locks;
mod members;
mod meta;
pub mod write;
pub use meta::{MetaError, MetaSink, NoMeta, SlotState, Snapshot};
mod missing;
mod ops;
mod pages;
pub(crate) use pages::BeforeRowWrites;
pub mod readd;
pub mod rebuild;
pub mod rebuild_dor;
pub mod rebuild_run;
pub mod status;
pub mod sync;

use std::sync::atomic::AtomicU64;

use crate::sync::{
    thread, Arc, AtomicBool, Mutex, Ordering, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

use raidlab::array::{Array, ArraySpec, ArrayState, Geometry, Layout, Level};
use raidlab::cache::read::PolicySpec;
use raidlab::rebuild::{OrderSpec, RateSpec};

use crate::member::Member;
use cache::ReadCache;
use column::BLOCK;
use locks::StripeLocks;

/// A set of slots (at most `format::DISKS_MAX`), kept on the stack: the members a write
/// touched (synced by FUA), or those whose write failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlotSet([u64; 4]);

impl SlotSet {
    /// Slots `0..n`.
    pub fn all(n: u32) -> SlotSet {
        let mut s = SlotSet::default();
        (0..n).for_each(|i| s.insert(i));
        s
    }

    pub fn insert(&mut self, slot: u32) {
        assert!(slot < crate::format::DISKS_MAX, "slot {slot} out of range");
        self.0[(slot / 64) as usize] |= 1 << (slot % 64);
    }

    /// Add every slot of `other`.
    pub fn union(&mut self, other: SlotSet) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a |= b;
        }
    }

    pub fn iter(self) -> impl Iterator<Item = u32> {
        (0..crate::format::DISKS_MAX)
            .filter(move |&i| self.0[(i / 64) as usize] & (1 << (i % 64)) != 0)
    }
}

/// Why a request failed (mapped to an NBD error by the server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IoFail {
    /// The array lost more members than its level survives, or a member I/O error left no
    /// redundant copy: the data cannot be served.
    Failed(String),
    /// A request the array cannot take (past the end, misaligned).
    Invalid(String),
    /// A member's file system is full (ENOSPC, EDQUOT): the request fails, no member does.
    NoSpace(String),
}

impl std::fmt::Display for IoFail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoFail::Failed(m) | IoFail::Invalid(m) | IoFail::NoSpace(m) => f.write_str(m),
        }
    }
}

/// A member I/O that failed: the slot, the device that failed (errors are charged to the
/// device, never to whatever occupies the slot by the time the caller acts), and the OS error.
#[derive(Debug, Clone)]
pub struct Fault {
    pub slot: u32,
    pub dev: Option<Arc<dyn Member>>,
    pub why: String,
    /// The device's file system is full: a request error, not a member failure.
    pub no_space: bool,
}

impl Fault {
    pub(crate) fn new(slot: u32, dev: Option<&Arc<dyn Member>>, e: &std::io::Error) -> Fault {
        // ENOSPC and EDQUOT (Linux errno 28 and 122).
        let no_space = matches!(e.raw_os_error(), Some(28) | Some(122));
        Fault {
            slot,
            dev: dev.cloned(),
            why: e.to_string(),
            no_space,
        }
    }

    pub(crate) fn missing(slot: u32) -> Fault {
        Fault {
            slot,
            dev: None,
            why: "no device in the slot".into(),
            no_space: false,
        }
    }
}

/// The array's shape, as the superblocks describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub level: Level,
    pub layout: Layout,
    pub disks: u32,
    pub chunk_bytes: u64,
    /// Byte offset of the data area on every member.
    pub data_offset_bytes: u64,
    /// Bytes of data area per member (a whole number of chunks).
    pub member_data_bytes: u64,
}

impl Shape {
    pub fn rows(&self) -> u64 {
        self.member_data_bytes / self.chunk_bytes
    }
    pub fn data_disks(&self) -> u64 {
        match self.level {
            Level::Raid0 => u64::from(self.disks),
            Level::Raid1 => 1,
            Level::Raid10 => u64::from(self.disks / 2),
            Level::Raid5 => u64::from(self.disks - 1),
            Level::Raid6 => u64::from(self.disks - 2),
        }
    }
    /// Logical size of the array in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.rows() * self.data_disks() * self.chunk_bytes
    }
    fn array_spec(&self) -> ArraySpec {
        ArraySpec {
            level: self.level,
            disks: self.disks,
            stripe_unit_bytes: self.chunk_bytes,
            layout: self.layout,
            failed: Vec::new(),
            block_size: BLOCK as u32,
        }
    }
}

/// How a rebuild turns the units its order hands out into member I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebuildExecutor {
    /// Four threads, each rebuilding a run of consecutive units under their rows' locks
    /// (`rebuild_run.rs`): one read per survivor's extent, one replacement write.
    Runs,
    /// The simulator's disk-oriented reconstruction (`rebuild_dor.rs`): a reader per
    /// survivor keeping `depth` reads at its disk, `buffers` unit buffers.
    Dor { buffers: u32, depth: u32 },
}

impl RebuildExecutor {
    /// The simulator's defaults for DOR (`[rebuild] buffers`, `depth`).
    pub const DOR_DEFAULT: RebuildExecutor = RebuildExecutor::Dor {
        buffers: 64,
        depth: 2,
    };

    pub fn name(&self) -> &'static str {
        match self {
            RebuildExecutor::Runs => "runs",
            RebuildExecutor::Dor { .. } => "dor",
        }
    }
}

/// Tunables of a served array.
#[derive(Debug, Clone)]
pub struct Options {
    pub cache: Option<(PolicySpec, u64)>,
    pub rebuild_order: OrderSpec,
    pub rebuild_rate: RateSpec,
    /// Member bytes a rebuild run reads from each survivor at once, at most
    /// `rebuild_run::RUN_BYTES_MAX` (whole chunks, at least one: `Controller::run_units_max`).
    pub rebuild_run_bytes: u64,
    /// How a rebuild turns the order's units into member I/O.
    pub rebuild_executor: RebuildExecutor,
    /// Start a rebuild by itself when a slot is failed and a spare is present.
    pub auto_rebuild: bool,
    /// How long a missing member's slot waits for its host before a spare is rebuilt onto
    /// it (`missing.rs`).
    pub missing_grace: std::time::Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cache: None,
            rebuild_order: OrderSpec::Sequential,
            rebuild_rate: RateSpec::Full,
            rebuild_run_bytes: rebuild_run::RUN_BYTES_MAX,
            rebuild_executor: RebuildExecutor::Runs,
            auto_rebuild: true,
            missing_grace: std::time::Duration::from_secs(30),
        }
    }
}

/// Counters of data-area I/O in blocks (metadata I/O is not counted) of the device in a
/// slot: reset when another device takes the slot, so a replacement starts from zero.
#[derive(Default)]
pub struct SlotCounters {
    pub read_blocks: AtomicU64,
    pub write_blocks: AtomicU64,
    pub errors: AtomicU64,
    /// Moving mean of the device's operation times, ns (`fanout`: slow members are driven
    /// in parallel).
    pub op_ns_mean: AtomicU64,
    /// The same for its syncs alone (an fdatasync on a disk is slow even when its reads
    /// and writes land in the page cache).
    pub sync_ns_mean: AtomicU64,
}

impl SlotCounters {
    /// A new device in the slot (I/O of the old one still in flight may land after).
    pub fn reset(&self) {
        self.read_blocks.store(0, Ordering::Relaxed);
        self.write_blocks.store(0, Ordering::Relaxed);
        self.errors.store(0, Ordering::Relaxed);
        self.op_ns_mean.store(0, Ordering::Relaxed);
        self.sync_ns_mean.store(0, Ordering::Relaxed);
    }
}

pub(crate) struct State {
    pub array: Array,
    pub devs: Vec<Option<Arc<dyn Member>>>,
    pub spares: Vec<Arc<dyn Member>>,
    pub faulty: Vec<Arc<dyn Member>>,
    /// The slot each device of `faulty` was failed out of (`ctl remove K` names it).
    pub faulty_slots: Vec<u32>,
    /// The last superblock update's event number. Taken for a new update under the write
    /// lock, or under the read lock holding `Controller::persisting` (a progress update),
    /// so numbers follow the order updates are written in.
    pub events: std::sync::atomic::AtomicU64,
    pub clean: bool,
    /// Set once the array lost more than it survives: every request fails from then on.
    pub dead: Option<String>,
    /// Members whose host is away (`missing.rs`), failed for the array but not faulty.
    pub missing: Vec<missing::Missing>,
    /// The device of a running partial re-add, its slot and the event it first left at.
    pub readd_left: Option<(Arc<dyn Member>, u32, u64)>,
    pub flaps: missing::Flaps,
}

impl State {
    /// The last superblock update's event number.
    pub(crate) fn events(&self) -> u64 {
        self.events.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// What the device `id` is in this array (`"the member in slot 2"`, `"a spare"`,
    /// `"a faulty device"`), or `None` when the array does not know it.
    pub(crate) fn role_of(&self, id: crate::member::DevId) -> Option<String> {
        if let Some(slot) = self
            .devs
            .iter()
            .position(|d| d.as_ref().is_some_and(|d| d.identity() == id))
        {
            return Some(format!("the member in slot {slot}"));
        }
        if self.spares.iter().any(|d| d.identity() == id) {
            return Some("a spare".into());
        }
        if self.faulty.iter().any(|d| d.identity() == id) {
            return Some("a faulty device".into());
        }
        if let Some(m) = self.missing.iter().find(|m| m.dev.identity() == id) {
            return Some(format!(
                "the missing member of slot {} (its host is away; it is re-added when it returns)",
                m.slot
            ));
        }
        None
    }
}

pub struct Controller {
    pub(crate) shape: Shape,
    pub(crate) geo: Geometry,
    pub(crate) state: RwLock<State>,
    pub(crate) locks: StripeLocks,
    pub(crate) cache: Option<ReadCache>,
    pub(crate) counters: Vec<SlotCounters>,
    pub(crate) meta: Box<dyn MetaSink>,
    /// Held from a superblock snapshot's making (under the state's write lock) to the end
    /// of its writes, so snapshots reach the devices in event order even when the state
    /// lock is let go during the writes (`mark_dirty`).
    pub(crate) persisting: Mutex<()>,
    pub(crate) opts: Options,
    pub(crate) rebuild: Mutex<Option<rebuild::Job>>,
    /// What the last completed rebuild did.
    pub(crate) last_rebuild: Mutex<Option<rebuild::Report>>,
    pub(crate) resync: Mutex<sync::Resync>,
    /// Signalled when a bitmap write ends (`sync::Resync::writing`).
    pub(crate) resync_cv: crate::sync::Condvar,
    /// Signalled when the disk-oriented rebuild has new actions to take (`rebuild_dor.rs`).
    pub(crate) rebuild_cv: crate::sync::Condvar,
    /// User I/O seen since the rebuild last looked (md's "is the array idle").
    pub(crate) busy: AtomicBool,
    /// Rows written through a plan and the member operations their plans held (the
    /// simulator's `wc_destage_disk_ops` counts the same plans for destages).
    pub(crate) row_writes: AtomicU64,
    pub(crate) row_plan_ops: AtomicU64,
    pub(crate) shutdown: AtomicBool,
    /// What a layer in front (the write-back cache) adds to `ctl status`.
    pub(crate) front_status: std::sync::OnceLock<StatusHook>,
    /// A member may be missing (a hint: the background pass then looks at the state).
    /// A std atomic: no scheduling point for the scheduled tests, which have no remote
    /// members.
    pub(crate) any_missing: std::sync::atomic::AtomicBool,
}

/// A closure that reports a front layer's state as JSON.
pub type StatusHook = Box<dyn Fn() -> Option<serde_json::Value> + Send + Sync>;

impl Controller {
    /// Build a controller over `devs` (one per slot, `None` for a missing or failed member;
    /// `recovering` names a slot whose device is a replacement rebuilt up to a checkpoint).
    pub fn new(
        shape: Shape,
        devs: Vec<Option<Arc<dyn Member>>>,
        spares: Vec<Arc<dyn Member>>,
        recovering: Option<(u32, u64)>,
        events: u64,
        meta: Box<dyn MetaSink>,
        opts: Options,
    ) -> raidlab::Result<Controller> {
        let spec = shape.array_spec();
        let mut array = Array::new(&spec)?;
        let geo = array.geometry().clone();
        assert_eq!(
            devs.len(),
            shape.disks as usize,
            "one device entry per slot"
        );
        for (slot, d) in devs.iter().enumerate() {
            let is_recovering = recovering.is_some_and(|(s, _)| s as usize == slot);
            if d.is_none() || is_recovering {
                array.fail(slot as u32)?;
            }
        }
        if let Some((slot, checkpoint)) = recovering {
            array.start_rebuild(slot, shape.rows(), true, "rebuild")?;
            for row in 0..checkpoint.min(shape.rows()) {
                array.mark_rebuilt(slot, row);
            }
        }
        let cache = match &opts.cache {
            Some((policy, blocks)) => Some(ReadCache::new(policy, *blocks)?),
            None => None,
        };
        let counters = (0..shape.disks).map(|_| SlotCounters::default()).collect();
        let c = Controller {
            geo,
            state: RwLock::new(State {
                array,
                devs,
                spares,
                faulty: Vec::new(),
                faulty_slots: Vec::new(),
                events: std::sync::atomic::AtomicU64::new(events),
                clean: false,
                dead: None,
                missing: Vec::new(),
                readd_left: None,
                flaps: Default::default(),
            }),
            locks: StripeLocks::default(),
            cache,
            counters,
            meta,
            persisting: Mutex::new(()),
            opts,
            rebuild: Mutex::new(None),
            last_rebuild: Mutex::new(None),
            resync: Mutex::new(sync::Resync::default()),
            resync_cv: crate::sync::Condvar::new(),
            rebuild_cv: crate::sync::Condvar::new(),
            busy: AtomicBool::new(false),
            row_writes: AtomicU64::new(0),
            row_plan_ops: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            front_status: std::sync::OnceLock::new(),
            any_missing: std::sync::atomic::AtomicBool::new(false),
            shape,
        };
        if let Some((slot, _)) = recovering {
            c.resume_rebuild(slot);
        }
        Ok(c)
    }

    /// Let `ctl status` show the state of the layer in front (set once).
    pub fn set_front_status(&self, hook: StatusHook) {
        let _ = self.front_status.set(hook);
    }

    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    pub fn size_bytes(&self) -> u64 {
        self.shape.size_bytes()
    }

    pub(crate) fn read_state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write_state(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn array_state(&self) -> ArrayState {
        self.read_state().array.state()
    }

    pub fn counters(&self) -> &[SlotCounters] {
        &self.counters
    }

    /// Whether member operations on `slots` are worth issuing in parallel: some member is
    /// slow (`fanout`). Always under the scheduled tests, so they explore parallel I/O.
    pub(crate) fn fan_out(&self, slots: impl IntoIterator<Item = u32>) -> bool {
        self.slow(slots, |c| &c.op_ns_mean)
    }

    /// Whether syncs of `slots` are worth issuing in parallel.
    pub(crate) fn fan_out_syncs(&self, slots: impl IntoIterator<Item = u32>) -> bool {
        self.slow(slots, |c| &c.sync_ns_mean)
    }

    fn slow(
        &self,
        slots: impl IntoIterator<Item = u32>,
        mean: impl Fn(&SlotCounters) -> &AtomicU64,
    ) -> bool {
        cfg!(feature = "shuttle")
            || slots.into_iter().any(|s| {
                mean(&self.counters[s as usize]).load(Ordering::Relaxed) >= fanout::SLOW_NS_MIN
            })
    }

    /// Sync every live member (NBD FLUSH).
    pub fn flush(&self) -> Result<(), IoFail> {
        if let Some(d) = &self.read_state().dead {
            return Err(IoFail::Failed(d.clone()));
        }
        self.sync_slots(SlotSet::all(self.shape.disks))
    }

    /// Ask background work (rebuild, resync) to stop.
    pub fn stop(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
    }

    pub fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Start the background thread: rebuild steps, resync of dirty regions, lazy clearing
    /// of the write-intent bitmap. It ends after `stop`.
    pub fn spawn_background(self: &Arc<Self>) -> thread::JoinHandle<()> {
        let me = Arc::clone(self);
        thread::Builder::new()
            .name("raidlab-bg".into())
            .spawn(move || me.background_loop())
            .expect("spawning a thread")
    }

    fn background_loop(&self) {
        // Extra rebuild threads; the scope joins them once `stop` is seen.
        thread::scope(|scope| {
            for _ in 1..self.rebuild_threads() {
                scope.spawn(|| {
                    crate::member::timed::set_thread_class(raidlab::disk::Class::Rebuild);
                    while !self.stopping() {
                        match self.rebuild_step(16) {
                            Some(wait) if wait.is_zero() => {}
                            Some(wait) => thread::sleep(wait),
                            None => thread::sleep(std::time::Duration::from_millis(20)),
                        }
                    }
                });
            }
            self.main_loop();
        });
    }

    fn main_loop(&self) {
        // Rebuild, resync and bitmap I/O queue behind user I/O on disk-timed members.
        crate::member::timed::set_thread_class(raidlab::disk::Class::Rebuild);
        let mut last_clear = crate::sync::Instant::now();
        while !self.stopping() {
            let mut busy = false;
            // A paced rebuild's wait is slept only when nothing else is to be done: slept
            // here, it held the resync of a crash's dirty regions to one region per wait
            // (128 regions took 10 s under a rebuild paced to 32 KiB/s).
            let mut nap = std::time::Duration::from_millis(20);
            match self.rebuild_step_waiting(16, false) {
                Some(wait) if wait.is_zero() => busy = true,
                Some(wait) => nap = nap.min(wait),
                None => {
                    if self.opts.auto_rebuild && self.maybe_start_rebuild() {
                        busy = true;
                    }
                }
            }
            if self.resync_step() {
                busy = true;
            }
            self.reconnect_missing();
            if last_clear.elapsed() >= std::time::Duration::from_millis(500) {
                self.intent_clear_idle(false);
                last_clear = crate::sync::Instant::now();
            }
            if !busy {
                thread::sleep(nap);
            }
        }
    }
}

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod rebuild_dor_tests;
#[cfg(test)]
mod rebuild_tests;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod tests_intent;
/// Deterministic test bytes, shared by the store's tests.
#[cfg(test)]
pub(crate) mod tests_pattern;
#[cfg(test)]
mod tests_state_lock;
