//! raidlab core: a trace-driven simulator of a cached RAID storage controller.
//!
//! The tree mirrors the storage stack (see `docs/design.md`): `workload` produces requests,
//! `cache` holds the controller's caches, `array` turns block accesses into per-disk I/O, and
//! `engine` moves requests through them. Policies are sans-IO state machines.
//!
//! This crate has no Python in it; `raidlab-py` is the thin binding.

// Denied, not forbidden: the one exception is the CPU prefetch hint in
// `cache/read/prefetch.rs`, allowed there alone.
#![deny(unsafe_code)]

pub mod array;
pub mod cache;
pub mod config;
pub mod curve;
pub mod disk;
pub mod engine;
pub mod error;
pub mod host;
pub mod metrics;
pub mod rebuild;
pub mod reliability;
pub mod workload;

pub use error::{Error, Result};

/// Version of the core, reported in every result.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
