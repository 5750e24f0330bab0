//! Read-cache replacement policies, one file per algorithm, behind [`ReadPolicy`].
//!
//! A policy is a sans-IO state machine: it is told of accesses and answers hit or miss and which
//! keys it evicts. It never reads a clock (the logical clock arrives in [`Access::now`]), never
//! performs I/O and never allocates per access once built: entries live in a fixed arena sized
//! from the capacity.
//!
//! Keys and sizes are abstract. In block mode a key is a logical block number (`Lba`) and every
//! entry has size 1, so capacity counts blocks. In libCacheSim-compatible object mode a key is
//! an object id, the size is its byte size and capacity is in bytes.

use crate::error::{Error, Result};

// `slab` and `freq` define the entry-accessor macros the policy files use: declare them first.
#[macro_use]
pub(crate) mod slab;
#[macro_use]
mod freq;
mod index;
pub(crate) mod list;
mod prefetch;
mod queue;
#[cfg(test)]
pub(crate) mod testutil;

pub mod arc;
pub mod clock;
pub mod demote;
pub mod fifo;
pub mod greedydual;
pub mod lfu;
pub mod lirs;
pub mod lru;
pub mod mq;
pub mod s3fifo;
pub mod sieve;
pub mod slru;
pub mod twoq;
pub mod vdf;
pub mod wtinylfu;
pub mod xray;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod xcheck;

/// What the array tells a cost-aware policy (VDF) about the price of a miss.
///
/// Implemented by the array (`crate::array`), whose I/O planner derives it, and by
/// [`UniformCost`] where there is no array (object mode, plain cache studies).
pub trait MissCost {
    /// Number of disks, i.e. cost groups. Constant for the life of the oracle.
    fn disks(&self) -> u32;
    /// Disk holding block `key`. A pure function of the layout: the same key always maps to
    /// the same disk, whatever the mode, so a policy may cache it with the entry.
    /// Callee guarantees the result is `< disks()`.
    fn disk_of(&self, key: u64) -> u32;
    /// Disk blocks that must be read from surviving disks to fetch one block stored on `disk`
    /// in the current mode: 1 for a healthy disk, `n - 1` for the failed disk of an n-disk
    /// RAID-5. May change between calls when a disk fails mid-run; a policy must not cache it.
    fn penalty(&self, disk: u32) -> u32;
    /// Whether any disk is failed. Cost-aware policies behave exactly like their plain
    /// counterparts while this is false.
    fn degraded(&self) -> bool;
    /// Disk blocks read to fetch block `key` in the current mode. The default charges the
    /// key's disk its per-disk penalty; an oracle that knows more (a rebuilding disk whose
    /// rebuilt rows cost 1 again) overrides it. Callers that need one block's cost use this
    /// rather than `penalty(disk_of(key))`.
    #[inline]
    fn cost_of(&self, key: u64) -> u32 {
        self.penalty(self.disk_of(key))
    }
}

/// A [`MissCost`] for a single healthy device: every miss costs one block.
#[derive(Debug, Clone, Copy, Default)]
pub struct UniformCost;

impl MissCost for UniformCost {
    fn disks(&self) -> u32 {
        1
    }
    fn disk_of(&self, _key: u64) -> u32 {
        0
    }
    fn penalty(&self, _disk: u32) -> u32 {
        1
    }
    fn degraded(&self) -> bool {
        false
    }
}

/// One access as a policy sees it.
#[derive(Clone, Copy)]
pub struct Access<'a> {
    /// Block number (block mode) or object id (object mode).
    pub key: u64,
    /// Entry size in capacity units: 1 in block mode, bytes in object mode. Always >= 1.
    pub size: u32,
    /// Logical clock: the number of block (or object) requests seen before this one. Strictly
    /// increasing across calls to [`ReadPolicy::get`]; `insert` after a missed `get` carries
    /// the same value.
    pub now: u64,
    /// Miss-cost oracle of the array below.
    pub cost: &'a dyn MissCost,
}

/// A read-cache replacement policy.
///
/// Protocol (the caller's obligations): for every request the caller calls [`get`]; if it
/// returns `false` and the caller wants the block cached, it calls [`insert`] with the same
/// `Access` before the next `get`. [`remove`] may be called at any time (a write invalidating
/// the cached copy). Policies rely on this order (e.g. ARC and MQ consult their history on the
/// missed `get` and use that at `insert`).
///
/// One policy, `wtinylfu`, evicts inside some hits, as libCacheSim's does: `get` cannot
/// report them, so those keys are reported at the start of the next `insert`'s `evicted` (or
/// by `remove`, which returns `true` for one); until then `get` and `contains` miss them while
/// the caller still holds them.
///
/// The callee's obligations: `used() <= capacity()` after every call; `len()` counts resident
/// entries only (not ghost/history entries); in block mode (every size 1) no allocation after
/// construction — the arena is sized from the capacity. In object mode the number of entries
/// is unknown up front, so the arena may grow geometrically (amortised, never shrinks).
///
/// [`get`]: ReadPolicy::get
/// [`insert`]: ReadPolicy::insert
/// [`remove`]: ReadPolicy::remove
pub trait ReadPolicy {
    /// Short lowercase name as used in configs (`"lru"`, `"vdf-lfu"`).
    fn name(&self) -> &'static str;

    /// Look up `acc.key`. On a hit, update the policy's recency/frequency state and return
    /// `true`. On a miss return `false`; resident entries are unchanged, although history
    /// (ghost) state may be read or updated.
    fn get(&mut self, acc: &Access<'_>) -> bool;

    /// Insert `acc.key`, which the caller guarantees is not resident. Evicts as needed to make
    /// room, appending each victim's key to `evicted` (the caller clears it between calls).
    /// Returns `false`, caching nothing and evicting nothing, when the entry can never fit
    /// (`acc.size > capacity()`).
    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool;

    /// Drop `key` if resident (no ghost entry is created). Returns whether it was resident.
    fn remove(&mut self, key: u64) -> bool;

    /// Whether `key` is resident, without touching any state.
    fn contains(&self, key: u64) -> bool;

    /// Number of resident entries.
    fn len(&self) -> usize;

    /// Whether nothing is resident.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Capacity units in use (sum of resident sizes).
    fn used(&self) -> u64;

    /// Capacity in units (blocks, or bytes in object mode).
    fn capacity(&self) -> u64;

    /// Heap bytes held by the policy's metadata (arena, index, ghost lists), for the
    /// bytes-per-cached-block figure of the benchmark.
    fn metadata_bytes(&self) -> usize;

    /// Evict one resident entry outside an insert, the one the policy's next insert would
    /// evict first, appending its key to `evicted`; `false` (nothing changed) when nothing is
    /// resident or the policy cannot (the default). A unified read/write cache uses it to give
    /// a clean page's space to a dirty one (`cache/write/unified.rs`).
    ///
    /// Callee's obligations when it returns `true`: exactly one resident entry is gone (its
    /// `used()` share freed, no ghost entry created), the policy's order for the remaining
    /// entries is what it would be after the same eviction inside `insert`, and nothing is
    /// allocated. Policies that implement it are listed by [`PolicySpec::evicts_one`].
    fn evict_one(&mut self, _evicted: &mut Vec<u64>) -> bool {
        false
    }

    /// Start loading into the CPU cache what the lookups of keys `first..first + count`
    /// read first (their index buckets), without waiting: a caller that knows its next
    /// lookups (a batch decoded, requests drawn ahead) calls it first, so the lookups find
    /// the buckets cached instead of each waiting on its own memory load.
    ///
    /// Caller's obligations: none (any keys, any time); `count` small, as it bounds the
    /// work. Callee's obligations: change no state, allocate nothing and never wait on the
    /// memory it asks for, so calling it or not never changes a result. Default: nothing.
    #[inline]
    fn prefetch(&self, _first: u64, _count: u64) {}

    /// The second step of [`ReadPolicy::prefetch`]: read the keys' index buckets (which an
    /// earlier `prefetch` should have brought in) and start loading the entries they point
    /// to. Obligations as for `prefetch`, except that it may wait on the buckets it reads.
    #[inline]
    fn prefetch_entries(&self, _first: u64, _count: u64) {}
}

/// Which policy to build, with its tunables. Filled from the `[cache]` table by
/// `crate::config`; defaults follow the original papers.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicySpec {
    Lru,
    Fifo,
    Lfu,
    Clock,
    /// Full 2Q (Johnson and Shasha): `kin` share of capacity for A1in, `kout` share (of
    /// capacity, counted in entries) for the A1out ghost queue.
    TwoQ {
        kin: f64,
        kout: f64,
    },
    Arc,
    /// Multi-Queue (Zhou, Philbin, Li): `queues` LRU queues, `lifetime` in requests, history
    /// (Qout) of `history_factor` x the capacity in entries.
    Mq {
        queues: u32,
        lifetime: u64,
        history_factor: u32,
    },
    VdfLru,
    VdfLfu,
    /// SIEVE (Zhang et al., NSDI 2024).
    Sieve,
    /// S3-FIFO (Yang et al., SOSP 2023): `small` share of capacity for the small FIFO,
    /// `ghost` share (in capacity units) for the ghost FIFO, an entry of the small FIFO hit
    /// `move_threshold` times moves to the main FIFO.
    S3Fifo {
        small: f64,
        ghost: f64,
        move_threshold: u8,
    },
    /// LIRS (Jiang and Zhang, SIGMETRICS 2002), resident HIR blocks 1 % of capacity.
    Lirs,
    /// W-TinyLFU (Einziger, Friedman, Manes): 1 % LRU window, SLRU main cache, frequency
    /// sketch admission.
    WTinyLfu,
    /// Segmented LRU with `segments` equal segments.
    Slru {
        segments: u32,
    },
    /// GreedyDual (Young; GreedyDual-Size with unit sizes) with costs from the miss-cost
    /// oracle.
    GreedyDual,
    /// CLOCK whose unreferenced blocks wait `cost - 1` extra rotations (VDF-style).
    VdfClock,
    /// SIEVE whose unvisited blocks wait `cost - 1` extra passes of the hand (VDF-style).
    VdfSieve,
    /// ARC whose chosen list gives unreferenced blocks `cost - 1` extra trips (VDF-style).
    VdfArc,
    /// S3-FIFO whose queues give leaving blocks `cost - 1` extra trips (VDF-style), with
    /// S3-FIFO's tunables.
    VdfS3Fifo {
        small: f64,
        ghost: f64,
        move_threshold: u8,
    },
    /// DEMOTE (Wong and Wilkes): demoted blocks at MRU, blocks read by the host at LRU.
    Demote,
    /// X-RAY: exclusive caching from inferred FS cache contents; needs a `[host]` run.
    /// `threshold` distinct files of evidence per CB update, window refreshed every
    /// `refresh_ns`, placement reads from `placement`'s bandwidth.
    Xray {
        threshold: u32,
        refresh_ns: u64,
        placement: xray::Placement,
    },
    /// Belady's OPT (`cache/offline`): counting mode only, it needs the future.
    Opt,
    /// The cost-aware offline optimum (min-cost flow): counting mode, block mode only.
    OptCost,
    /// The cost-aware Belady heuristic: counting mode only.
    BeladyCost,
}

impl PolicySpec {
    /// Parse a policy name with default tunables.
    pub fn from_name(name: &str) -> Option<PolicySpec> {
        Some(match name {
            "lru" => PolicySpec::Lru,
            "fifo" => PolicySpec::Fifo,
            "lfu" => PolicySpec::Lfu,
            "clock" => PolicySpec::Clock,
            "2q" | "twoq" => PolicySpec::TwoQ {
                kin: 0.25,
                kout: 0.5,
            },
            "arc" => PolicySpec::Arc,
            "mq" => PolicySpec::Mq {
                queues: 8,
                lifetime: 10_000,
                history_factor: 4,
            },
            "vdf-lru" => PolicySpec::VdfLru,
            "vdf-lfu" => PolicySpec::VdfLfu,
            "sieve" => PolicySpec::Sieve,
            "s3fifo" | "s3-fifo" => PolicySpec::S3Fifo {
                small: 0.1,
                ghost: 0.9,
                move_threshold: 2,
            },
            "slru" => PolicySpec::Slru { segments: 4 },
            "lirs" => PolicySpec::Lirs,
            "wtinylfu" | "w-tinylfu" => PolicySpec::WTinyLfu,
            "greedydual" | "gd" => PolicySpec::GreedyDual,
            "vdf-clock" => PolicySpec::VdfClock,
            "vdf-sieve" => PolicySpec::VdfSieve,
            "vdf-arc" => PolicySpec::VdfArc,
            "vdf-s3fifo" | "vdf-s3-fifo" => PolicySpec::VdfS3Fifo {
                small: 0.1,
                ghost: 0.9,
                move_threshold: 2,
            },
            "demote" => PolicySpec::Demote,
            "xray" => PolicySpec::Xray {
                threshold: 2,
                refresh_ns: 100_000_000,
                placement: xray::Placement::Unlimited,
            },
            "opt" | "belady" => PolicySpec::Opt,
            "opt-cost" => PolicySpec::OptCost,
            "belady-cost" => PolicySpec::BeladyCost,
            _ => return None,
        })
    }

    /// Whether the policy is an offline bound, which only counting mode can replay.
    pub fn is_offline(&self) -> bool {
        matches!(
            self,
            PolicySpec::Opt | PolicySpec::OptCost | PolicySpec::BeladyCost
        )
    }

    /// Names of the offline bounds (`cache/offline`), accepted by counting mode only and kept
    /// out of [`PolicySpec::NAMES`], the policies every engine and the store can run.
    pub const OFFLINE_NAMES: &'static [&'static str] = &["opt", "opt-cost", "belady-cost"];

    /// Whether the policy implements [`ReadPolicy::evict_one`] (a unified cache needs it).
    pub fn evicts_one(&self) -> bool {
        matches!(
            self,
            PolicySpec::Lru
                | PolicySpec::Fifo
                | PolicySpec::Clock
                | PolicySpec::Sieve
                | PolicySpec::Slru { .. }
        )
    }

    /// Names of the policies that implement [`ReadPolicy::evict_one`].
    pub const EVICTS_ONE: &'static [&'static str] = &["lru", "fifo", "clock", "sieve", "slru"];

    /// Every accepted policy name, for error messages and docs.
    pub const NAMES: &'static [&'static str] = &[
        "lru",
        "fifo",
        "lfu",
        "clock",
        "2q",
        "arc",
        "mq",
        "sieve",
        "s3fifo",
        "slru",
        "lirs",
        "wtinylfu",
        "vdf-lru",
        "vdf-lfu",
        "vdf-clock",
        "vdf-sieve",
        "vdf-arc",
        "vdf-s3fifo",
        "greedydual",
        "demote",
        "xray",
    ];
}

/// What a capacity counts. It decides how the entry arena is sized, not how policies behave:
/// every policy weighs entries by `Access::size` either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Units {
    /// Cache blocks, every entry of size 1: the arena (including ghost/history entries) is
    /// sized from the capacity at build and never grows.
    #[default]
    Blocks,
    /// Bytes (libCacheSim object mode): the entry count is unknown, so the arena starts small
    /// and grows geometrically.
    Bytes,
}

/// Initial arena size in object mode.
const BYTES_MODE_INITIAL_ENTRIES: usize = 1024;

/// Largest entry count a block-mode arena may be sized for: 3/4 of the largest index table
/// (slot ids share a `u32` bucket with a displacement, see `slab.rs`).
const MAX_ARENA_ENTRIES: u64 = 3 << (slab::MAX_BUCKETS_LOG2 - 2);

/// Build the policy `spec` with `capacity` blocks (see [`build_in`]). Policies are plain
/// data, so every one is `Send`: the store moves them behind a lock shared by its threads.
pub fn build(spec: &PolicySpec, capacity: u64) -> Result<Box<dyn ReadPolicy + Send>> {
    build_in(spec, capacity, Units::Blocks)
}

/// Build the policy `spec` with `capacity` units of kind `units`.
pub fn build_in(
    spec: &PolicySpec,
    capacity: u64,
    units: Units,
) -> Result<Box<dyn ReadPolicy + Send>> {
    build_with(spec, capacity, units, Boxed)
}

/// What to do with a policy once built, given its concrete type: [`build_with`] hands the
/// policy `spec` names to [`WithPolicy::with`], so the caller's code is compiled once per
/// policy type and its calls into the policy inline (the counting engine's fast path loops
/// over millions of lookups); [`build_in`] boxes it.
pub trait WithPolicy {
    type Output;
    fn with<P: ReadPolicy + Send + 'static>(self, policy: P) -> Self::Output;
}

/// [`WithPolicy`] that boxes the policy.
struct Boxed;

impl WithPolicy for Boxed {
    type Output = Box<dyn ReadPolicy + Send>;
    fn with<P: ReadPolicy + Send + 'static>(self, policy: P) -> Self::Output {
        Box::new(policy)
    }
}

/// Build the policy `spec` with `capacity` units of kind `units` (checked as [`build_in`]
/// checks them) and pass it to `then`.
pub fn build_with<W: WithPolicy>(
    spec: &PolicySpec,
    capacity: u64,
    units: Units,
    then: W,
) -> Result<W::Output> {
    if capacity == 0 {
        return Err(Error::config("cache.capacity", "must be > 0"));
    }
    // Entries the arena must hold per unit of capacity: resident plus ghosts.
    let per_unit: f64 = match spec {
        PolicySpec::TwoQ { kin, kout } => {
            if !(kin.is_finite() && *kin > 0.0 && *kin < 1.0) {
                return Err(Error::config("cache.kin", "must be in (0, 1)"));
            }
            if !(kout.is_finite() && *kout >= 0.0 && *kout <= 16.0) {
                return Err(Error::config("cache.kout", "must be in [0, 16]"));
            }
            1.0 + kout
        }
        PolicySpec::Arc | PolicySpec::VdfArc => 2.0,
        // Resident entries plus ghosts in S, which is bounded by twice the capacity.
        PolicySpec::Lirs => 3.0,
        PolicySpec::Mq {
            queues,
            lifetime,
            history_factor,
        } => {
            if *queues == 0 || *queues > 64 {
                return Err(Error::config("cache.queues", "must be in 1..=64"));
            }
            if *lifetime == 0 {
                return Err(Error::config("cache.lifetime", "must be > 0"));
            }
            if *history_factor > 64 {
                return Err(Error::config("cache.history_factor", "must be <= 64"));
            }
            1.0 + f64::from(*history_factor)
        }
        PolicySpec::S3Fifo {
            small,
            ghost,
            move_threshold,
        }
        | PolicySpec::VdfS3Fifo {
            small,
            ghost,
            move_threshold,
        } => {
            if !(small.is_finite() && *small > 0.0 && *small < 1.0) {
                return Err(Error::config("cache.s3fifo.small", "must be in (0, 1)"));
            }
            if !(ghost.is_finite() && *ghost >= 0.0 && *ghost <= 16.0) {
                return Err(Error::config("cache.s3fifo.ghost", "must be in [0, 16]"));
            }
            if *move_threshold == 0 {
                return Err(Error::config("cache.s3fifo.move_threshold", "must be >= 1"));
            }
            1.0 + ghost
        }
        PolicySpec::Slru { segments } => {
            if *segments == 0 || *segments > slru::MAX_SEGMENTS {
                return Err(Error::config(
                    "cache.slru.segments",
                    format!("must be in 1..={}", slru::MAX_SEGMENTS),
                ));
            }
            1.0
        }
        _ => 1.0,
    };
    let entries = match units {
        Units::Blocks => {
            let n = (capacity as f64 * per_unit).ceil();
            if n > MAX_ARENA_ENTRIES as f64 {
                return Err(Error::config(
                    "cache.capacity",
                    format!(
                        "{capacity} blocks (with history) exceed the {MAX_ARENA_ENTRIES} entries \
                         a cache can index"
                    ),
                ));
            }
            n as usize + 1
        }
        Units::Bytes => BYTES_MODE_INITIAL_ENTRIES,
    };
    Ok(match spec {
        PolicySpec::Lru => then.with(lru::Lru::new(capacity, entries)),
        PolicySpec::Fifo => then.with(fifo::Fifo::new(capacity, entries)),
        PolicySpec::Lfu => then.with(lfu::Lfu::new(capacity, entries)),
        PolicySpec::Clock => then.with(clock::Clock::new(capacity, entries)),
        PolicySpec::TwoQ { kin, kout } => {
            then.with(twoq::TwoQ::new(capacity, *kin, *kout, entries))
        }
        PolicySpec::Arc => then.with(arc::Arc::new(capacity, entries)),
        PolicySpec::VdfArc => then.with(arc::Arc::vdf(capacity, entries)),
        PolicySpec::Mq {
            queues,
            lifetime,
            history_factor,
        } => then.with(mq::Mq::new(
            capacity,
            *queues,
            *lifetime,
            *history_factor,
            entries,
        )),
        PolicySpec::VdfLru => then.with(vdf::Vdf::new(vdf::Base::Lru, capacity, entries)),
        PolicySpec::VdfLfu => then.with(vdf::Vdf::new(vdf::Base::Lfu, capacity, entries)),
        PolicySpec::Sieve => then.with(sieve::Sieve::new(capacity, entries)),
        PolicySpec::VdfSieve => then.with(sieve::Sieve::vdf(capacity, entries)),
        PolicySpec::VdfClock => then.with(clock::Clock::vdf(capacity, entries)),
        PolicySpec::S3Fifo {
            small,
            ghost,
            move_threshold,
        } => then.with(s3fifo::S3Fifo::new(
            capacity,
            *small,
            *ghost,
            *move_threshold,
            entries,
        )),
        PolicySpec::VdfS3Fifo {
            small,
            ghost,
            move_threshold,
        } => then.with(s3fifo::S3Fifo::vdf(
            capacity,
            *small,
            *ghost,
            *move_threshold,
            entries,
        )),
        PolicySpec::Slru { segments } => then.with(slru::Slru::new(capacity, *segments, entries)),
        PolicySpec::GreedyDual => then.with(greedydual::GreedyDual::new(capacity, entries)),
        PolicySpec::Lirs => then.with(lirs::Lirs::new(capacity, entries)),
        PolicySpec::WTinyLfu => then.with(wtinylfu::WTinyLfu::new(
            capacity,
            units == Units::Bytes,
            entries,
        )),
        PolicySpec::Demote => then.with(demote::Demote::new(capacity, entries)),
        PolicySpec::Xray { .. } => {
            return Err(Error::config(
                "cache.policy",
                "\"xray\" infers the host's cache from file-system traffic: it needs a [host] \
                 table and a file-level workload ([workload.files])",
            ))
        }
        PolicySpec::Opt | PolicySpec::OptCost | PolicySpec::BeladyCost => {
            return Err(Error::config(
                "cache.policy",
                "an offline bound needs the whole trace in advance and a constant array \
                 mode: counting mode only ([run] mode = \"count\")",
            ))
        }
    })
}
