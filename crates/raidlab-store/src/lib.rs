//! The store: a user-space RAID controller on member files, served over NBD.
//!
//! It is the second driver of raidlab's sans-IO policy objects (the simulator is the first):
//! the array planner, the miss-cost oracle, the read-cache policies and the rebuild orders are
//! the core crate's, and this crate executes their decisions on real bytes.
//!
//! - `parity`: XOR and RAID-6 P/Q syndromes (md's: generator {02} over GF(2^8), poly 0x11d)
//!   and reconstruction of up to two lost chunks;
//! - `member`: positioned I/O on one member (file or block device), and the fault-injecting
//!   and recording wrappers tests use;
//! - `format`: the on-disk superblock, the write-intent bitmap and assembly rules;
//! - `nbd`: the NBD protocol (fixed newstyle) and the server front, with a `Backend` trait;
//! - `ctrl`: the controller (array state, request paths, read cache, rebuild, resync, check);
//! - `device`: exclusive locks on members and spares, preallocation of member files;
//! - `serve`, `control`: `raidlab serve` and its control socket (`raidlab ctl`);
//! - `log`: timestamped, levelled log records (text or JSON lines) and their macros;
//! - `events`: the array's events (mdadm's names) for `--event-program` and `ctl watch`;
//! - `wb`: the write-back cache (the core's `WriteCache` on real pages), its backups
//!   (`mirror`, RAPID-Cache's `log`) and crash recovery;
//! - `model`: the reference model of what the store promises (pages, FLUSH/FUA, crashes,
//!   concurrent calls), the oracle of every correctness test;
//! - `sync`: the one seam for threads and locks (std's, or shuttle's under the test
//!   scheduler);
//! - `crash`: a test tool that records member writes and barriers and materialises the
//!   states a power loss could leave (crash-consistency tests);
//!
//! No Python here; `raidlab-py` binds it. See `docs/store.md`.

pub mod args;
pub mod control;
#[doc(hidden)]
pub mod crash;
pub mod ctrl;
pub mod device;
pub mod events;
pub mod format;
pub mod log;
pub mod member;
pub mod model;
pub mod nbd;
pub mod parity;
pub mod replay;
pub mod replay_sched;
pub mod serve;
pub mod sync;
pub mod wb;
