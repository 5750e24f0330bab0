//! A unified read/write primary cache (RAPID-Cache section 2, Fig. 2a): clean (read) pages and
//! dirty pages share one DRAM cache of `total` pages instead of a fixed split.
//!
//! raidlab keeps its two caches (a [`ReadPolicy`] for clean pages, the [`WriteCache`] for dirty
//! and in-flight ones) and only bounds their sum: both are built with the whole `total` as
//! capacity, and this state machine keeps
//!
//! ```text
//! read.used() + write.occupied() <= total
//! ```
//!
//! - a page write that needs a new buffer first evicts clean pages (the read policy's own
//!   victims, [`ReadPolicy::evict_one`]) while the sum is at the total; with no clean page
//!   left the write cache is full and the write waits, as in a split cache;
//! - a clean page (a read miss) enters only where the sum leaves room, evicting clean pages
//!   first; it is not cached when dirty pages fill everything;
//! - a destaged page stays cached as a clean page: its buffer passes from the write cache to
//!   the read cache (inserted at the policy's most recent end), so the sum never grows.
//!
//! So the dirty share may grow into the whole cache (the write cache's water marks are
//! percentages of `total`), and reads use whatever the dirty pages leave. Sans-IO like the
//! caches; the engine calls it (`engine/timed/unified.rs`). Nothing is allocated per call:
//! the destaged-page scratch holds one write group.

use super::backup::destaged_pages;
use super::WriteCache;
use crate::cache::read::{Access, MissCost, ReadPolicy};

/// Counters of a unified cache over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnifiedStats {
    pub total_pages: u64,
    /// Clean pages evicted to make room for dirty ones.
    pub evicted_for_writes: u64,
    /// Destaged pages kept as clean pages.
    pub kept_clean: u64,
}

/// The shared bound of a unified cache.
pub struct Unified {
    total: u64,
    /// Pages of the destage being finished (filled by [`Unified::destaging`]).
    destaged: Vec<u64>,
    pub stats: UnifiedStats,
}

impl Unified {
    /// A unified cache of `total` pages whose write groups have `group_pages` pages.
    pub fn new(total: u64, group_pages: u64) -> Unified {
        Unified {
            total,
            destaged: Vec::with_capacity(group_pages.min(1 << 20) as usize),
            stats: UnifiedStats {
                total_pages: total,
                ..UnifiedStats::default()
            },
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Pages both caches hold.
    #[inline]
    pub fn used(read: &dyn ReadPolicy, write: &WriteCache) -> u64 {
        read.used() + write.occupied()
    }

    /// Evict clean pages until one page fits; whether it does.
    fn room(&self, read: &mut dyn ReadPolicy, write: &WriteCache, evicted: &mut Vec<u64>) -> bool {
        while Unified::used(read, write) >= self.total {
            if !read.evict_one(evicted) {
                return false;
            }
        }
        true
    }

    /// Before a write of page `lba` into `write`: evict clean pages if it needs a new buffer
    /// and the cache is at its total. `false` when no clean page is left to give (the write
    /// cache alone is full; its `write` then refuses the page).
    pub fn room_for_write(
        &mut self,
        read: &mut dyn ReadPolicy,
        write: &WriteCache,
        lba: u64,
        evicted: &mut Vec<u64>,
    ) -> bool {
        // A rewrite of a dirty page replaces it in place; anything else takes a buffer.
        if write.page_state(lba).0 {
            return true;
        }
        let before = evicted.len();
        let ok = self.room(read, write, evicted);
        self.stats.evicted_for_writes += (evicted.len() - before) as u64;
        ok
    }

    /// Before a clean page enters `read`: evict clean pages if the cache is at its total.
    /// `false` when dirty pages fill the whole cache (the page is not cached).
    pub fn room_for_read(
        &self,
        read: &mut dyn ReadPolicy,
        write: &WriteCache,
        evicted: &mut Vec<u64>,
    ) -> bool {
        self.room(read, write, evicted)
    }

    /// Before `write.finish_destage(slot)`: note the pages the destage puts on disk (in flight
    /// and not rewritten meanwhile); [`Unified::keep_destaged`] then keeps them clean.
    pub fn destaging(&mut self, write: &WriteCache, slot: u32, first: u64) {
        let (dirty, flight) = write.group_bits(slot);
        self.destaged.clear();
        self.destaged.extend(destaged_pages(first, flight, dirty));
    }

    /// After `write.finish_destage`: insert the destaged pages into `read` as clean pages
    /// (each a miss at logical time `*tick`, which advances by one per page). A page already
    /// resident is left where it is. Returns the pages kept.
    pub fn keep_destaged(
        &mut self,
        read: &mut dyn ReadPolicy,
        write: &WriteCache,
        tick: &mut u64,
        cost: &dyn MissCost,
        evicted: &mut Vec<u64>,
    ) -> u64 {
        let mut kept = 0;
        for i in 0..self.destaged.len() {
            let lba = self.destaged[i];
            if read.contains(lba) || !self.room(read, write, evicted) {
                continue;
            }
            let acc = Access {
                key: lba,
                size: 1,
                now: *tick,
                cost,
            };
            *tick += 1;
            // The policy's protocol: a missed lookup, then the insert.
            let hit = read.get(&acc);
            debug_assert!(!hit);
            read.insert(&acc, evicted);
            kept += 1;
        }
        self.destaged.clear();
        self.stats.kept_clean += kept;
        debug_assert!(self.check(read, write).is_ok());
        kept
    }

    /// The bound, as an error message (tests and debug checks).
    pub fn check(&self, read: &dyn ReadPolicy, write: &WriteCache) -> Result<(), String> {
        let used = Unified::used(read, write);
        if used > self.total {
            return Err(format!(
                "{} clean + {} dirty pages exceed the unified cache's {}",
                read.used(),
                write.occupied(),
                self.total
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "unified_tests.rs"]
mod tests;
