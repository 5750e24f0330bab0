//! Disk-timed members: the bytes of any [`Member`], the time of one of the core's disk models.
//!
//! A [`TimedMember`] wraps a member and makes every read and write take, in real time, what
//! the core's `raidlab::disk::Device` (the same model, per-disk queue, scheduler, priority
//! classes and NCQ that timed mode drives; no second model) says it takes:
//!
//! 1. The caller's operation becomes a `DiskIo` (the 512-byte sectors its bytes touch) and is
//!    submitted to the device at the current model time, in the calling thread's priority
//!    class ([`set_thread_class`]; foreground unless set).
//! 2. Whenever the device has a free service slot (the model's `parallelism()`: 1 for an
//!    arm, the dies of an SSD) it starts the next operation by its queue discipline; the
//!    model answers the service time at that model time.
//! 3. The started operation's caller does the real byte I/O on the inner member, sleeps until
//!    `start + service` on the monotonic clock, and then completes it on the device, which
//!    may start the next queued operations (their callers are woken).
//!
//! There is no dispatcher thread: the device is driven at its two events, a submission and a
//! completion, by the thread that causes them (under the member's lock), exactly as the
//! engine drives it at its events. So the schedule is the device's, the byte I/O runs on the
//! caller's thread with the caller's buffer, nothing is copied and there is nothing to shut
//! down; the only cost over the model is the sleep's overshoot and one wake-up.
//!
//! **Model time** is the real time in nanoseconds since the member was made
//! (`Instant`, `CLOCK_MONOTONIC` on Linux), read under the member's lock so that it never
//! decreases: an idle disk's platters keep turning. A completion is given to the device at
//! the operation's model time, not when its caller got back (a sleep that overslept, a slow
//! inner member): the queued operation after it starts then, as in the drive's own queue, so
//! a queued sequential stream keeps its sectors in reach instead of losing nearly a turn per
//! operation to the caller's lateness. The lateness is counted (`late_us_mean`).
//!
//! **Bounded.** At most `bound` operations are present (queued or in service) at once; a
//! caller that finds the member full waits for room before it is queued (and its arrival
//! time is when it got in).
//!
//! **Flush.** The models have no write cache (a write's service time is its media time), so
//! `sync` costs no model time: it waits for nothing but the inner member's sync (every write
//! that returned has completed its service).

use std::cell::Cell;
use std::io;
use std::time::Duration;

use raidlab::disk::{presets, Class, Device, Discipline, DiskIo, DiskSpec, QueueSpec};
use raidlab::disk::{DeviceStats, SECTOR_BYTES};
use raidlab::workload::Op;

use super::{DevId, Member};
use crate::sync::{Arc, Condvar, Instant, Mutex, MutexGuard};

mod spec;
pub use spec::{TimingOptions, TimingSpec};

#[cfg(test)]
mod tests;

/// Operations a member holds at once (queued and in service) unless told otherwise.
pub const BOUND_DEFAULT: u32 = 256;

/// Largest bound a spec may ask for.
pub const BOUND_MAX: u32 = 4096;

crate::sync::thread_local! {
    static THREAD_CLASS: Cell<Class> = const { Cell::new(Class::Foreground) };
}

/// The priority class of the member I/O this thread issues from now on (the rebuild thread
/// says `Rebuild`, the destager `Destage`, a check `Background`). Only timed members look
/// at it.
pub fn set_thread_class(class: Class) {
    THREAD_CLASS.with(|c| c.set(class));
}

/// The priority class of this thread's member I/O.
pub fn thread_class() -> Class {
    THREAD_CLASS.with(|c| c.get())
}

/// A timed member's counters, as `ctl status` shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct TimingStatus {
    /// The spec as given (`wd10eals,scheduler=sstf`).
    pub spec: String,
    /// Operations completed.
    pub ops: u64,
    /// Mean model service time per completed operation, microseconds.
    pub service_us_mean: f64,
    /// Mean model wait (submission to start of service), microseconds.
    pub wait_us_mean: f64,
    /// Mean time a completion came after the model's completion instant (the sleep's
    /// overshoot and the wake-up), microseconds: how far real time ran behind the model.
    pub late_us_mean: f64,
    /// Largest such lateness, microseconds.
    pub late_us_max: f64,
    /// Largest number of operations present at once (queued and in service).
    pub queue_max: u64,
    /// Operations present now.
    pub queue_now: u64,
    /// Fraction of the member's life with an operation in service.
    pub utilization: f64,
    /// The device's counters (per class waits, sectors, seeks).
    pub device: DeviceStats,
}

/// One completed operation, as [`TimedMember::record`] keeps it (times in model ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpRecord {
    pub op: Op,
    pub sector: u64,
    pub sectors: u32,
    pub class: Class,
    pub arrival_ns: u64,
    pub start_ns: u64,
    pub service_ns: u64,
    /// When the caller completed it (>= `start_ns + service_ns`).
    pub complete_ns: u64,
}

/// A started operation, handed to its caller.
#[derive(Debug, Clone, Copy)]
struct Grant {
    start_ns: u64,
    done_ns: u64,
    service_ns: u64,
}

#[derive(Debug)]
struct State {
    device: Device,
    /// Tokens not in use.
    free: Vec<u32>,
    /// The grant of each started token, until its caller takes it.
    grants: Vec<Option<Grant>>,
    /// Model time last read (never decreases).
    last_ns: u64,
    /// The time of the device's last event (a submission or a completion), which may lag
    /// `last_ns`: completions are given to the device at their model time.
    device_ns: u64,
    ops: u64,
    service_ns: u128,
    wait_ns: u128,
    late_ns: u128,
    late_ns_max: u64,
    /// Kept records and how many more to keep.
    records: Vec<OpRecord>,
    records_left: usize,
}

/// A member whose operations take the time of a core disk model (see the module docs).
pub struct TimedMember {
    inner: Arc<dyn Member>,
    spec: TimingSpec,
    epoch: Instant,
    state: Mutex<State>,
    /// A caller waiting for room (the member held `bound` operations).
    room: Condvar,
    /// Per token: its caller waits here until the operation starts.
    go: Vec<Condvar>,
}

impl std::fmt::Debug for TimedMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimedMember")
            .field("inner", &self.inner)
            .field("spec", &self.spec.text)
            .finish()
    }
}

impl TimedMember {
    /// Wrap `inner` in the model `spec` describes. Errors (naming nothing: the caller says
    /// which option) when the inner member is larger than the model's capacity.
    pub fn new(inner: Arc<dyn Member>, spec: &TimingSpec) -> Result<TimedMember, String> {
        let model = spec.disk.build().map_err(|e| e.to_string())?;
        let capacity = model.capacity_sectors().saturating_mul(SECTOR_BYTES);
        if inner.len_bytes() > capacity {
            return Err(format!(
                "{}: {} bytes, more than the {} bytes of the {:?} disk model",
                inner.path(),
                inner.len_bytes(),
                capacity,
                spec.preset
            ));
        }
        let bound = spec.bound.clamp(1, BOUND_MAX);
        let device = Device::new(model, spec.queue);
        Ok(TimedMember {
            inner,
            spec: spec.clone(),
            epoch: Instant::now(),
            state: Mutex::new(State {
                device,
                free: (0..bound).rev().collect(),
                grants: vec![None; bound as usize],
                last_ns: 0,
                device_ns: 0,
                ops: 0,
                service_ns: 0,
                wait_ns: 0,
                late_ns: 0,
                late_ns_max: 0,
                records: Vec::new(),
                records_left: 0,
            }),
            room: Condvar::new(),
            go: (0..bound).map(|_| Condvar::new()).collect(),
        })
    }

    /// The spec it was made with.
    pub fn spec(&self) -> &TimingSpec {
        &self.spec
    }

    /// The member whose bytes it times.
    pub fn inner(&self) -> &Arc<dyn Member> {
        &self.inner
    }

    /// Keep the next `n` completed operations' records (replacing those kept).
    pub fn record(&self, n: usize) {
        let mut st = self.lock();
        st.records = Vec::with_capacity(n.min(1 << 20));
        st.records_left = n;
    }

    /// The records kept since [`TimedMember::record`], in completion order.
    pub fn records(&self) -> Vec<OpRecord> {
        self.lock().records.clone()
    }

    /// Counters up to now.
    pub fn status(&self) -> TimingStatus {
        let mut st = self.lock();
        let now = self.now_ns(&mut st);
        st.device_ns = now;
        let device = st.device.stats(now);
        let mean = |sum: u128| {
            if st.ops == 0 {
                0.0
            } else {
                sum as f64 / st.ops as f64 / 1e3
            }
        };
        TimingStatus {
            spec: self.spec.text.clone(),
            ops: st.ops,
            service_us_mean: mean(st.service_ns),
            wait_us_mean: mean(st.wait_ns),
            late_us_mean: mean(st.late_ns),
            late_us_max: st.late_ns_max as f64 / 1e3,
            queue_max: device.queue_max,
            queue_now: st.device.present(),
            utilization: if now == 0 {
                0.0
            } else {
                device.busy_ns as f64 / now as f64
            },
            device,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Model time now: real nanoseconds since the member was made, never decreasing.
    fn now_ns(&self, st: &mut State) -> u64 {
        let real = Instant::now().duration_since(self.epoch).as_nanos() as u64;
        st.last_ns = st.last_ns.max(real);
        st.last_ns
    }

    /// Start what the device will start at `now`, handing each its grant.
    fn start_ready(&self, st: &mut State, now: u64) {
        while let Some(s) = st.device.start(now) {
            st.grants[s.token as usize] = Some(Grant {
                start_ns: now,
                done_ns: s.done_ns,
                service_ns: s.service.total_ns,
            });
            self.go[s.token as usize].notify_one();
        }
    }

    /// Run `io_fn` (the byte I/O of `op` on `len` bytes at `offset`) in the model's time.
    fn timed(
        &self,
        op: Op,
        offset: u64,
        len: usize,
        io_fn: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let end = offset.saturating_add(len as u64);
        let capacity = self.inner.len_bytes();
        if len == 0 || end > capacity {
            // Nothing to time, or the inner member's error to return.
            return io_fn();
        }
        let sector = offset / SECTOR_BYTES;
        let sectors = u32::try_from(end.div_ceil(SECTOR_BYTES) - sector)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "transfer too large"))?;
        let class = thread_class();
        let mut st = self.lock();
        let token = loop {
            if let Some(t) = st.free.pop() {
                break t;
            }
            st = self.room.wait(st).unwrap_or_else(|e| e.into_inner());
        };
        let arrival_ns = self.now_ns(&mut st);
        let dio = DiskIo {
            op,
            sector,
            sectors,
        };
        st.device_ns = arrival_ns;
        st.device.submit(arrival_ns, dio, class, token);
        self.start_ready(&mut st, arrival_ns);
        let grant = loop {
            if let Some(g) = st.grants[token as usize].take() {
                break g;
            }
            st = self.go[token as usize]
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        };
        drop(st);
        // Member I/O is where other threads can observe this one: a scheduling point.
        crate::sync::switch();
        // A panic in the inner member still completes the operation (the NBD server turns
        // a backend's panic into an error reply and goes on: the disk must not stay busy).
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(io_fn));
        self.sleep_until(grant.done_ns);
        let mut st = self.lock();
        let now = self.now_ns(&mut st);
        // The disk finished at its model time, whenever its caller got here: the next
        // queued operation starts then, as a drive's own queue would start it. Starting it
        // at the caller's (late) real time would make a sequential stream miss its sector
        // and wait nearly a turn per operation. No earlier than the device's last event, so
        // the device's time never goes back.
        let done = grant.done_ns.max(st.device_ns);
        st.device_ns = done;
        st.device.complete(done, token);
        let late = now - grant.done_ns;
        st.ops += 1;
        st.service_ns += u128::from(grant.service_ns);
        st.wait_ns += u128::from(grant.start_ns - arrival_ns);
        st.late_ns += u128::from(late);
        st.late_ns_max = st.late_ns_max.max(late);
        if st.records_left > 0 {
            st.records_left -= 1;
            st.records.push(OpRecord {
                op,
                sector,
                sectors,
                class,
                arrival_ns,
                start_ns: grant.start_ns,
                service_ns: grant.service_ns,
                complete_ns: now,
            });
        }
        st.free.push(token);
        self.room.notify_one();
        self.start_ready(&mut st, done);
        drop(st);
        r.unwrap_or_else(|p| std::panic::resume_unwind(p))
    }

    /// Sleep until model time `t_ns` (`thread::sleep`, then again if it woke early).
    fn sleep_until(&self, t_ns: u64) {
        fine_timer_slack();
        let target = Duration::from_nanos(t_ns);
        loop {
            let now = Instant::now().duration_since(self.epoch);
            if now >= target {
                return;
            }
            crate::sync::thread::sleep(target - now);
        }
    }
}

impl Member for TimedMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let len = buf.len();
        self.timed(Op::Read, offset, len, || self.inner.read_at(buf, offset))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.timed(Op::Write, offset, buf.len(), || {
            self.inner.write_at(buf, offset)
        })
    }

    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }

    fn len_bytes(&self) -> u64 {
        self.inner.len_bytes()
    }

    fn refresh_len(&self) -> io::Result<()> {
        self.inner.refresh_len()
    }

    fn path(&self) -> &str {
        self.inner.path()
    }

    fn identity(&self) -> DevId {
        self.inner.identity()
    }

    fn timing(&self) -> Option<TimingStatus> {
        Some(self.status())
    }

    fn link(&self) -> Option<&dyn super::nbd::Link> {
        self.inner.link()
    }
}

/// Linux lets a sleeping thread wake up to its timer slack late (50 us by default) so that
/// wake-ups can be merged; a timed member's sleeps are its service times, so the threads that
/// sleep in one ask for 1 us (once per OS thread, for the rest of its life: it only makes its
/// timers more precise).
fn fine_timer_slack() {
    std::thread_local! {
        static DONE: Cell<bool> = const { Cell::new(false) };
    }
    DONE.with(|d| {
        if !d.replace(true) {
            // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes only the
            // calling thread's timer slack; a failure leaves the default, which is harmless.
            unsafe {
                libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
            }
        }
    });
}

/// The names `--timing` accepts as a model: the core's presets and `constant`.
pub fn model_names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = presets::NAMES.to_vec();
    v.push("constant");
    v
}

/// The model of `name` (a core preset, or `constant`: X-RAY's 10 ms disk).
fn model_of(name: &str) -> Option<DiskSpec> {
    match name {
        "constant" => Some(presets::constant_default()),
        n => presets::get(n),
    }
}

/// The queue discipline of a scheduler name.
fn discipline_of(name: &str) -> Option<Discipline> {
    Discipline::from_name(name)
}

/// The default scheduling of a timed member: the core's defaults (FCFS, 500 ms aging, no
/// NCQ).
fn default_queue() -> QueueSpec {
    QueueSpec::default()
}
