//! The write-back cache on the served array: the core's own [`WriteCache`] (write groups =
//! stripe rows, the LRW / CSCAN / WOW / STOW destage orders, the linear-threshold destage
//! rate) holding real dirty pages, a backup that makes them durable before the reply
//! (`mirror`, RAPID-Cache's `log`, or `none`), a destager thread, and recovery.
//!
//! - **Write.** Each page is accepted by the `WriteCache` (or the writer waits for a destage
//!   to make room), copied into a frame, and staged in the backup under the cache lock; then
//!   the backup commits (group commit, no lock held) and only then is the write answered.
//!   A page rewritten while dirty is overwritten in its frame; its older backup record is
//!   released once the newer one is durable.
//! - **Read.** Cached pages (the dirty version, else the one being destaged) are copied
//!   under the lock; the rest is read from the array. A page absent from the cache is on the
//!   members: it leaves the cache only after its destage's writes were synced.
//! - **Destage** (`destage.rs`): the order picks a group, its dirty pages become in flight,
//!   are written through the array's planner (a full row is a full-stripe write), the
//!   members are synced, and only then are the backup records released and the frames
//!   freed. On slow members several threads destage at once, each group landing on its own
//!   (`destage_pool.rs`).
//! - **Backup lost** (a write or sync of the backup failed): writers wait while everything
//!   is destaged, the backup is voided (a new epoch, or a marker file when even that fails,
//!   so its stale records are never replayed), and writes go straight to the array until a
//!   periodic probe finds the backup writable again.
//! - **Recovery** (`recover.rs`): replay the newest version of every page found in the
//!   backup through the array, sync, then start a new epoch.
//!
//! Lock order: the cache lock, then (inside the backup's `put`) the backup's own lock. The
//! array's locks are never taken with the cache lock held.

pub mod backup;
pub mod commit;
pub(crate) mod destage;
mod destage_pool;
pub mod format;
mod io;
pub mod log;
pub mod mirror;
pub mod ppl;
pub mod recover;
pub mod setup;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_order;
#[cfg(all(test, not(feature = "shuttle")))]
mod tests_pool;
#[cfg(test)]
mod tests_ppl;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

use crate::sync::{Arc, AtomicBool, Condvar, Mutex, MutexGuard, Ordering};
use std::time::Duration;

use raidlab::array::Level;
use raidlab::cache::write::{self as core_wb, OrderKind, RateSpec, WriteCache, WriteSpec};
use serde_json::{json, Value};

use crate::ctrl::column::BLOCK;
use crate::ctrl::Controller;
use backup::{Backup, Handle, LiveData};
use format::{RecKind, RecMeta};

/// How long a waiter sleeps before it looks again (a missed wake-up costs at most this).
const WAIT_SLICE: Duration = Duration::from_millis(50);
/// Most waits of one request for room before it fails (10 minutes of no progress).
const ROOM_WAITS_MAX: u32 = 12_000;

/// Which second copy the dirty pages have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackupKind {
    /// Volatile: a crash loses what was not flushed.
    None,
    Mirror,
    Log {
        logical: bool,
    },
}

impl BackupKind {
    pub fn name(self) -> &'static str {
        match self {
            BackupKind::None => "none",
            BackupKind::Mirror => "mirror",
            BackupKind::Log { logical: false } => "log (physical)",
            BackupKind::Log { logical: true } => "log (logical)",
        }
    }
}

/// The write cache's tunables (`raidlab serve --write-cache-mib --destage --thresholds`).
#[derive(Debug, Clone, PartialEq)]
pub struct WbSpec {
    pub capacity_pages: u64,
    pub order: OrderKind,
    pub high_pct: f64,
    pub low_pct: f64,
    /// Most destages in flight (the rate's maximum).
    pub max_destages: u32,
}

impl Default for WbSpec {
    fn default() -> Self {
        WbSpec {
            capacity_pages: 64 * 256,
            order: OrderKind::Stow,
            high_pct: 80.0,
            low_pct: 20.0,
            max_destages: 16,
        }
    }
}

/// The linear-threshold rate's H/L, in percent of the cache: `0 <= L < H <= 100`.
pub fn check_thresholds(high_pct: f64, low_pct: f64) -> raidlab::Result<()> {
    if (0.0..100.0).contains(&low_pct) && low_pct < high_pct && high_pct <= 100.0 {
        return Ok(());
    }
    Err(raidlab::Error::config(
        "--thresholds",
        format!("expected H/L in percent of the cache with 0 <= L < H <= 100, e.g. 80/20; got {high_pct}/{low_pct}"),
    ))
}

/// One cached version of a page: its frame, its sequence number, its backup record.
#[derive(Debug, Clone, Copy)]
struct Ver {
    frame: u32,
    seq: u64,
    handle: Option<Handle>,
}

#[derive(Debug, Default, Clone, Copy)]
struct PageBufs {
    /// The newest version, waiting for destage.
    dirty: Option<Ver>,
    /// The version being destaged.
    flight: Option<Ver>,
}

/// Whether writes are backed up or go straight to the array.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    Backed,
    /// The backup failed: destage everything, then write through.
    Draining(String),
    WriteThrough(String),
}

struct Inner {
    cache: WriteCache,
    pages: HashMap<u64, PageBufs>,
    frames: Vec<u8>,
    free: Vec<u32>,
    seq: u64,
    mode: Mode,
    /// FLUSH calls (or a drain) waiting for the cache to empty: destage at the maximum rate
    /// and hold new cached writes back, so the flush cannot be starved.
    flushing: u32,
    /// Writes going through that wait for an older version of their pages to land.
    landing_waiters: u32,
    /// Cached writes waiting for room.
    room_waiters: u32,
    /// The array failed under a destage: nothing more can be destaged.
    failed: Option<String>,
}

/// The cache's frames seen by a backup's cleaner.
struct Live<'a> {
    pages: &'a HashMap<u64, PageBufs>,
    frames: &'a [u8],
}

impl LiveData for Live<'_> {
    fn newest(&self, lba: u64) -> Option<(u64, &[u8])> {
        let p = self.pages.get(&lba)?;
        let v = p.dirty.or(p.flight)?;
        let at = v.frame as usize * BLOCK;
        Some((v.seq, &self.frames[at..at + BLOCK]))
    }
}

/// Counters for `ctl status`.
#[derive(Debug, Default)]
pub struct WbCounters {
    pub writes: AtomicU64,
    pub write_pages: AtomicU64,
    pub read_hit_pages: AtomicU64,
    pub read_pages: AtomicU64,
    pub write_through_pages: AtomicU64,
    pub room_waits: AtomicU64,
    /// Waits for room that a notification ended (not the wait's time slice): a destage
    /// wakes one writer per page it frees, so these stay near the pages freed.
    pub room_wakeups: AtomicU64,
    pub flushes: AtomicU64,
    pub images: AtomicU64,
    /// Of those, taken after a member failed during a destage's writes.
    pub late_images: AtomicU64,
    /// Plan and partial-parity records put before destages (`ppl.rs`).
    pub partial_parity: AtomicU64,
    /// Writes answered after a backup commit made them durable (with the backup's syncs:
    /// how many writes one sync covered).
    pub committed_writes: AtomicU64,
    /// Times the cache lock was found held, and the time spent waiting for it (ns): how
    /// much the lock limits the request paths and the destager.
    pub lock_waits: AtomicU64,
    pub lock_wait_ns: AtomicU64,
    /// Where the destager's time goes (ns): writing rounds' pages through the array, the
    /// member syncs after them, and freeing the pages and releasing their records; summed
    /// over the threads that run rounds at once on slow members (`destage_pool.rs`).
    pub destage_write_ns: AtomicU64,
    pub destage_sync_ns: AtomicU64,
    pub destage_release_ns: AtomicU64,
    pub destage_rounds: AtomicU64,
    /// Most destages in flight at once (seen when a round starts).
    pub destages_in_flight_max: AtomicU64,
}

/// The write-back cache in front of a controller.
pub struct WriteBack {
    ctl: Arc<Controller>,
    spec: WbSpec,
    kind: BackupKind,
    backup: Option<Box<dyn Backup>>,
    inner: Mutex<Inner>,
    /// Room was made, a flush finished, or the mode changed.
    room: Condvar,
    /// Work for the destager.
    work: Condvar,
    stop: AtomicBool,
    /// Writes that went straight to the array without FUA: the next FLUSH syncs the members
    /// (see `commit::FlushGen`).
    through: commit::FlushGen,
    /// Called with the backup's epoch when it must never be replayed again but could not be
    /// reset (the marker file of `serve`).
    void_hook: Option<Box<dyn Fn(u64) -> std::io::Result<()> + Send + Sync>>,
    pub counters: WbCounters,
}

/// A write-back problem shown to the operator.
fn warn(msg: &str) {
    crate::warn!("{msg}");
}

impl WriteBack {
    /// A write-back cache of `spec` in front of `ctl`, backed up by `backup` (`None` only
    /// with `BackupKind::None`). The backup must be empty (fresh, or reset after recovery).
    pub fn new(
        ctl: Arc<Controller>,
        spec: WbSpec,
        kind: BackupKind,
        backup: Option<Box<dyn Backup>>,
    ) -> raidlab::Result<WriteBack> {
        assert_eq!(
            kind == BackupKind::None,
            backup.is_none(),
            "a backup exactly when the kind has one"
        );
        let shape = ctl.shape().clone();
        let group_pages = ctl.geo.blocks_per_stripe();
        if spec.capacity_pages < group_pages * 2 {
            return Err(raidlab::Error::config(
                "--write-cache-mib",
                format!(
                    "the write cache must hold at least two stripe rows ({} KiB here)",
                    group_pages * 2 * BLOCK as u64 / 1024
                ),
            ));
        }
        if spec.capacity_pages > u64::from(u32::MAX / 2) {
            return Err(raidlab::Error::config("--write-cache-mib", "too large"));
        }
        check_thresholds(spec.high_pct, spec.low_pct)?;
        let wspec = WriteSpec {
            capacity_pages: spec.capacity_pages,
            group_pages,
            order: spec.order,
            rate: RateSpec::Linear {
                high_pct: spec.high_pct,
                low_pct: spec.low_pct,
            },
            max_destages: spec.max_destages.max(1),
            seq_pages: 2,
            drain: false,
            read_cache: false,
            unified: false,
            destage_as_user: false,
            stow: Default::default(),
        };
        let cache = WriteCache::new(
            &wspec,
            core_wb::Backend {
                disks: shape.disks,
                mirrored: matches!(shape.level, Level::Raid1 | Level::Raid10),
            },
        );
        let frames = spec.capacity_pages as usize;
        Ok(WriteBack {
            ctl,
            kind,
            backup,
            inner: Mutex::new(Inner {
                cache,
                pages: HashMap::with_capacity(frames),
                frames: vec![0u8; frames * BLOCK],
                free: (0..frames as u32).rev().collect(),
                seq: 0,
                mode: Mode::Backed,
                flushing: 0,
                landing_waiters: 0,
                room_waiters: 0,
                failed: None,
            }),
            room: Condvar::new(),
            work: Condvar::new(),
            stop: AtomicBool::new(false),
            through: commit::FlushGen::default(),
            void_hook: None,
            counters: WbCounters::default(),
            spec,
        })
    }

    /// What to do when a lost backup cannot be reset: record its epoch somewhere recovery
    /// looks, so its records are never replayed over newer data written through.
    pub fn with_void_hook(
        mut self,
        hook: Box<dyn Fn(u64) -> std::io::Result<()> + Send + Sync>,
    ) -> Self {
        self.void_hook = Some(hook);
        self
    }

    /// Sequence numbers continue after those recovery found.
    pub fn set_next_seq(&self, seq: u64) {
        let mut g = self.lock();
        g.seq = g.seq.max(seq);
    }

    pub fn controller(&self) -> &Arc<Controller> {
        &self.ctl
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.try_lock() {
            Ok(g) => g,
            Err(crate::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(crate::sync::TryLockError::WouldBlock) => {
                // Contended: count the wait (real time, whatever clock the store runs on).
                let t0 = std::time::Instant::now();
                let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
                let c = &self.counters;
                c.lock_waits.fetch_add(1, Ordering::Relaxed);
                c.lock_wait_ns
                    .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                g
            }
        }
    }

    fn wait<'a>(&'a self, cv: &Condvar, g: MutexGuard<'a, Inner>) -> MutexGuard<'a, Inner> {
        crate::sync::wait_timeout(cv, &self.inner, g, WAIT_SLICE)
    }

    /// The backup failed: stop taking cached writes, destage everything (the destager then
    /// voids the backup and switches to write-through). Called with the cache lock held.
    fn lose_backup(&self, g: &mut Inner, why: &str) {
        if g.mode == Mode::Backed {
            warn(&format!(
                "write-cache backup lost ({why}); destaging everything and writing through until it is back"
            ));
            g.mode = Mode::Draining(why.to_string());
            self.work.notify_all();
        }
    }

    /// Status for `ctl status`.
    pub fn status(&self) -> Value {
        let g = self.lock();
        let s = &g.cache.stats;
        let c = &self.counters;
        let mode = match &g.mode {
            Mode::Backed => json!({"state": "backed"}),
            Mode::Draining(w) => json!({"state": "draining", "why": w}),
            Mode::WriteThrough(w) => json!({"state": "write-through", "why": w}),
        };
        json!({
            "backup": self.kind.name(),
            "backup_detail": self.backup.as_ref().map(|b| b.describe()),
            "mode": mode,
            "failure": g.failed,
            "order": self.spec.order.name(),
            "thresholds_pct": [self.spec.high_pct, self.spec.low_pct],
            "max_destages": self.spec.max_destages,
            "capacity_pages": g.cache.capacity(),
            "group_pages": g.cache.group_pages(),
            "occupied_pages": g.cache.occupied(),
            "destages_in_flight": g.cache.inflight(),
            "destages_in_flight_max": c.destages_in_flight_max.load(Ordering::Relaxed),
            "groups_waiting": g.cache.groups_waiting(),
            "page_writes": s.page_writes,
            "overwrite_hits": s.overwrite_hits,
            "stripe_hits": s.stripe_hits,
            "destages": s.destages,
            "destaged_pages": s.destaged_pages,
            "full_stripe_destages": s.full_destages,
            "read_pages": c.read_pages.load(Ordering::Relaxed),
            "read_hit_pages": c.read_hit_pages.load(Ordering::Relaxed),
            "write_through_pages": c.write_through_pages.load(Ordering::Relaxed),
            "room_waits": c.room_waits.load(Ordering::Relaxed),
            "room_wakeups": c.room_wakeups.load(Ordering::Relaxed),
            "images": c.images.load(Ordering::Relaxed),
            "late_images": c.late_images.load(Ordering::Relaxed),
            "partial_parity_records": c.partial_parity.load(Ordering::Relaxed),
            "group_commit": self.backup.as_ref().map(|b| {
                let writes = c.committed_writes.load(Ordering::Relaxed);
                let syncs = b.stats().commits;
                json!({"writes": writes, "syncs": syncs,
                       "writes_per_sync": if syncs > 0 { writes as f64 / syncs as f64 } else { 0.0 }})
            }),
            "lock_waits": c.lock_waits.load(Ordering::Relaxed),
            "lock_wait_us": c.lock_wait_ns.load(Ordering::Relaxed) / 1000,
            "destage_time_us": json!({
                "rounds": c.destage_rounds.load(Ordering::Relaxed),
                "write": c.destage_write_ns.load(Ordering::Relaxed) / 1000,
                "sync": c.destage_sync_ns.load(Ordering::Relaxed) / 1000,
                "release": c.destage_release_ns.load(Ordering::Relaxed) / 1000,
            }),
            "backup_stats": self.backup.as_ref().map(|b| {
                let b = b.stats();
                let mut v = json!({"records": b.records, "commits": b.commits, "commit_calls": b.commit_calls,
                       "bytes_written": b.bytes_written,
                       "gc_segments": b.gc_segments, "gc_records": b.gc_records, "live": b.live,
                       "capacity": b.capacity});
                // Apart: one more key takes the status's json! past the macro recursion limit.
                v["nvram_slots"] = b.nvram_slots.into();
                v["nvram_stalls"] = b.nvram_stalls.into();
                v["nvram_drained"] = b.nvram_drained.into();
                v["images_released"] = b.images_released.into();
                v["release_entries"] = b.release_entries.into();
                v["image_void_leg_writes"] = b.image_void_leg_writes.into();
                v
            }),
        })
    }

    /// Pages held (dirty or in flight).
    pub fn occupied(&self) -> u64 {
        self.lock().cache.occupied()
    }

    /// Pages the cache can take before a writer must wait.
    pub fn room(&self) -> u64 {
        let g = self.lock();
        g.cache.capacity() - g.cache.occupied()
    }

    /// Ask the destager to stop (after `drain_all` for a clean stop).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.work.notify_all();
        self.room.notify_all();
    }
}

/// The destager's view of a failed array.
fn dead(ctl: &Controller) -> Option<String> {
    ctl.read_state().dead.clone()
}
