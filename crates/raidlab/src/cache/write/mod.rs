//! The non-volatile write-back cache: pages grouped in write groups, a destage order
//! (`order/`), a destage rate (`rate.rs`), the destage planner (`plan.rs`), a backup hook
//! (`backup.rs`) and the bound a unified read/write cache keeps (`unified.rs`).
//!
//! A page is one cache block (`workload.block_size`); a write group is `group_pages`
//! consecutive pages, aligned (one RAID stripe by default, or k stripes). Each group present
//! keeps two bitmaps: **dirty** pages (written, waiting for destage) and **in-flight** pages
//! (being destaged). Both occupy cache memory, so occupancy is the sum of both counts; a page
//! rewritten while its older version is in flight has two buffers for that time.
//!
//! The cache is a sans-IO state machine. Told of a page write it either accepts it (an
//! overwrite hit, a write-group ("stripe") hit or a new group) or answers that it is full,
//! changing nothing; the engine then holds the write until a destage completes. Asked, it
//! starts the destage of the group its order picks (the group's dirty pages become in flight
//! and the group leaves the order) and later is told that the destage completed (its pages
//! are freed; pages written meanwhile send the group back into the order). How many destages
//! may be in flight is the rate's answer for the current occupancy, or the rate's maximum while
//! draining (once writes stop, everything is destaged).
//!
//! INVARIANTS (checked by `debug_assert!` and the property tests): occupancy = sum over groups
//! of dirty + in-flight pages <= capacity; a group is in the order exactly when it has dirty
//! pages and no destage in flight; every page written is dirty, in flight, or was in flight in
//! a destage that completed after the write.

pub mod backup;
mod fail;
pub mod order;
pub mod plan;
#[cfg(test)]
mod proptests;
pub mod rate;
#[cfg(test)]
mod tests;
pub mod unified;
pub mod water;

pub use backup::{Backup, BackupIo, NoBackup};
pub use order::{DestageOrder, OrderCtx, OrderKind, OrderState, PageWrite};

pub use rate::{Rate, RateSpec};

use crate::cache::read::list::Link;
use crate::cache::read::slab::{impl_slot, Slab};

/// The `[write_cache]` table, validated (see `config/write.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct WriteSpec {
    pub capacity_pages: u64,
    /// Pages per write group (resolved from `group_stripes` or `group_bytes`).
    pub group_pages: u64,
    pub order: OrderKind,
    pub rate: RateSpec,
    /// Most destages in flight (the rate's maximum, WOW's MAXQUEUE).
    pub max_destages: u32,
    /// A page is sequential when it continues an ascending run of at least this many pages
    /// written before it (each present when the next was written).
    pub seq_pages: u32,
    /// Destage everything at the maximum rate once the workload has ended.
    pub drain: bool,
    /// Whether `[cache]` (a read cache beside the write cache) was configured.
    pub read_cache: bool,
    /// Read and write caches share one memory of `capacity_pages` (`unified.rs`).
    pub unified: bool,
    /// Destages queue at the disks in the user class (no priority below user I/O), as in
    /// the STOW paper's md set-up; the timed engine reads it.
    pub destage_as_user: bool,
    /// STOW's readings that the ablations change.
    pub stow: StowKnobs,
}

/// STOW's switches for ablations; the defaults are the readings in `order/stow.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StowKnobs {
    /// RanRq and SeqRq count user write requests (classed by their first page) instead of
    /// page writes.
    pub shares_in_requests: bool,
    /// DesiredSeqQSize is kept within `[0, capacity]`.
    pub desired_cap: bool,
}

impl Default for StowKnobs {
    fn default() -> StowKnobs {
        StowKnobs {
            shares_in_requests: false,
            desired_cap: true,
        }
    }
}

/// What the array is like, for the orders (STOW's disks and RAID-10 rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backend {
    pub disks: u32,
    pub mirrored: bool,
}

/// How a write of one page was absorbed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Absorbed {
    /// The page was dirty: its newer version replaces it in place.
    Overwrite,
    /// The page was absent but its group was present.
    StripeHit,
    /// The group was absent.
    NewGroup,
}

/// A destage the cache started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Destage {
    /// Group slot (pass it back to [`WriteCache::finish_destage`]).
    pub slot: u32,
    /// First logical page of the group.
    pub first: u64,
    /// Pages destaged.
    pub pages: u32,
}

/// Counters of the write cache.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteStats {
    /// Pages accepted.
    pub page_writes: u64,
    pub overwrite_hits: u64,
    pub stripe_hits: u64,
    pub new_groups: u64,
    /// Pages the sequential detector classed as sequential (when the order asks for it).
    pub seq_pages: u64,
    /// Read lookups of pages, and those found in the write cache.
    pub read_lookups: u64,
    pub read_hits: u64,
    pub destages: u64,
    pub destaged_pages: u64,
    /// Destages of a whole group (every page present).
    pub full_destages: u64,
    pub occupied_max: u64,
}

#[derive(Debug, Clone, Copy)]
struct Group {
    key: u64,
    link: Link,
    dirty: u32,
    flight: u32,
    in_order: bool,
}

impl_slot!(Group);

/// The write cache.
pub struct WriteCache {
    capacity: u64,
    group_pages: u64,
    /// `u64` words of one bitmap.
    words: usize,
    groups: Slab<Group>,
    /// Per slot: `words` dirty words, then `words` in-flight words.
    bits: Vec<u64>,
    occupied: u64,
    inflight: u32,
    order: Box<dyn DestageOrder>,
    rate: Rate,
    seq_pages: u32,
    needs_seq: bool,
    /// Per slot and page: length of the ascending run the page ended when written (only for
    /// orders that need the sequential detector).
    runs: Vec<u8>,
    low_reached: bool,
    draining: bool,
    backup: Box<dyn Backup>,
    /// RAPID's water-mark rate state (`rate = "rapid"` only).
    water: Option<water::Water>,
    /// Recovering from a failure (`fail.rs`): no page is accepted and no destage starts.
    offline: bool,
    /// The next page written is the first of a user request ([`WriteCache::start_request`]).
    request_start: bool,
    pub stats: WriteStats,
}

impl WriteCache {
    /// A cache for `spec` in front of `backend`. `spec` is validated (capacity >= one group).
    pub fn new(spec: &WriteSpec, backend: Backend) -> WriteCache {
        debug_assert!(spec.group_pages >= 1 && spec.capacity_pages >= spec.group_pages);
        let capacity = spec.capacity_pages;
        let rate = Rate::new(spec.rate, capacity, spec.max_destages);
        // STOW: 128 x spindles, at most 1/8 of the threshold band.
        let hysteresis_pages = (128 * u64::from(backend.disks))
            .min(rate.band(capacity) / 8)
            .max(1);
        // Every present group holds at least one page, so `capacity` slots suffice.
        let slots = u32::try_from(capacity).unwrap_or(u32::MAX - 1);
        let order = spec.order.build(&OrderCtx {
            slots,
            disks: backend.disks,
            page_hits_only: backend.mirrored,
            hysteresis_pages,
            queue_depth: spec.max_destages,
            capacity_pages: capacity,
            stow: spec.stow,
        });
        let words = spec.group_pages.div_ceil(64) as usize;
        WriteCache {
            capacity,
            group_pages: spec.group_pages,
            words,
            groups: Slab::with_capacity(slots as usize),
            bits: vec![0; slots as usize * 2 * words],
            occupied: 0,
            inflight: 0,
            needs_seq: order.needs_seq(),
            runs: if order.needs_seq() {
                vec![0; slots as usize * spec.group_pages as usize]
            } else {
                Vec::new()
            },
            order,
            rate,
            seq_pages: spec.seq_pages,
            low_reached: false,
            draining: false,
            backup: Box::new(NoBackup),
            water: match (rate, spec.rate) {
                (Rate::Rapid { low, high, .. }, RateSpec::Rapid { idle, .. }) => {
                    Some(water::Water::new(low, high, idle))
                }
                _ => None,
            },
            offline: false,
            request_start: false,
            stats: WriteStats::default(),
        }
    }

    /// Plug a backup in (replaces the current one).
    pub fn set_backup(&mut self, backup: Box<dyn Backup>) {
        self.backup = backup;
    }

    /// The backup (RAPID's log, a dual copy, or none).
    pub fn backup(&self) -> &dyn Backup {
        self.backup.as_ref()
    }

    pub fn backup_mut(&mut self) -> &mut dyn Backup {
        self.backup.as_mut()
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn group_pages(&self) -> u64 {
        self.group_pages
    }

    /// Pages held (dirty + in flight).
    pub fn occupied(&self) -> u64 {
        self.occupied
    }

    /// Destages in flight.
    pub fn inflight(&self) -> u32 {
        self.inflight
    }

    pub fn order_state(&self) -> OrderState {
        self.order.state()
    }

    pub fn rate(&self) -> &Rate {
        &self.rate
    }

    /// Groups waiting in the order.
    pub fn groups_waiting(&self) -> usize {
        self.order.len()
    }

    #[inline]
    fn dirty_word(&self, slot: u32, page: u64) -> usize {
        slot as usize * 2 * self.words + (page / 64) as usize
    }

    /// Whether page `lba` is in the cache (dirty or in flight).
    #[inline]
    pub fn holds(&self, lba: u64) -> bool {
        let (dirty, flight) = self.page_state(lba);
        dirty || flight
    }

    /// Whether page `lba` is dirty (a version waiting for destage) and whether a version of it
    /// is in flight.
    pub fn page_state(&self, lba: u64) -> (bool, bool) {
        let Some(slot) = self.groups.find(lba / self.group_pages) else {
            return (false, false);
        };
        let page = lba % self.group_pages;
        let w = self.dirty_word(slot, page);
        let bit = 1u64 << (page % 64);
        (
            self.bits[w] & bit != 0,
            self.bits[w + self.words] & bit != 0,
        )
    }

    /// A read of page `lba`: whether the write cache serves it (counted).
    #[inline]
    pub fn read(&mut self, lba: u64) -> bool {
        self.stats.read_lookups += 1;
        let hit = self.holds(lba);
        self.stats.read_hits += u64::from(hit);
        hit
    }

    /// The ascending run a write of `lba` ends: one more than the run of page `lba - 1` if
    /// that page is in the cache, else 1 (SARC's detector: presence of the preceding page plus
    /// a counter). Pages written out of order do not make a run.
    fn run_of(&self, lba: u64) -> u8 {
        if lba == 0 {
            return 1;
        }
        let prev = lba - 1;
        let Some(slot) = self.groups.find(prev / self.group_pages) else {
            return 1;
        };
        let page = prev % self.group_pages;
        let w = self.dirty_word(slot, page);
        if (self.bits[w] | self.bits[w + self.words]) & (1u64 << (page % 64)) == 0 {
            return 1;
        }
        let i = slot as usize * self.group_pages as usize + page as usize;
        self.runs[i].saturating_add(1)
    }

    /// Classify a write of `lba` in `slot` (recording its run): whether it is sequential.
    #[inline]
    fn classify(&mut self, slot: u32, lba: u64) -> bool {
        if !self.needs_seq {
            return false;
        }
        let run = self.run_of(lba);
        let i = slot as usize * self.group_pages as usize + (lba % self.group_pages) as usize;
        self.runs[i] = run;
        u32::from(run) > self.seq_pages
    }

    /// Write page `lba`. `None` when it needs a buffer and the cache is full (nothing
    /// changed); the caller retries after a destage completes.
    pub fn write(&mut self, lba: u64) -> Option<Absorbed> {
        if self.offline {
            return None;
        }
        let first = std::mem::take(&mut self.request_start);
        let group = lba / self.group_pages;
        let page = lba % self.group_pages;
        let bit = 1u64 << (page % 64);
        let found = self.groups.find(group);
        if let Some(slot) = found {
            let w = self.dirty_word(slot, page);
            if self.bits[w] & bit != 0 {
                self.stats.page_writes += 1;
                self.stats.overwrite_hits += 1;
                self.backup.on_invalidate(lba);
                self.backup.on_write(lba, true);
                let seq = self.classify(slot, lba);
                if self.groups.get(slot).in_order {
                    self.notify(slot, group, page, (false, true, seq, first));
                }
                return Some(Absorbed::Overwrite);
            }
        }
        if self.occupied >= self.capacity {
            // Retried later: the page is still its request's first.
            self.request_start = first;
            return None;
        }
        let (slot, absorbed) = match found {
            Some(slot) => (slot, Absorbed::StripeHit),
            None => {
                let slot = self.groups.insert(Group {
                    key: group,
                    link: Link::DETACHED,
                    dirty: 0,
                    flight: 0,
                    in_order: true,
                });
                let base = slot as usize * 2 * self.words;
                self.bits[base..base + 2 * self.words].fill(0);
                (slot, Absorbed::NewGroup)
            }
        };
        let seq = self.classify(slot, lba);
        let w = self.dirty_word(slot, page);
        if self.bits[w + self.words] & bit != 0 {
            // The older version is being destaged: this one takes a second buffer.
            self.backup.on_invalidate(lba);
        }
        self.bits[w] |= bit;
        self.groups.get_mut(slot).dirty += 1;
        self.occupied += 1;
        self.stats.page_writes += 1;
        self.stats.seq_pages += u64::from(seq);
        self.stats.occupied_max = self.stats.occupied_max.max(self.occupied);
        match absorbed {
            Absorbed::StripeHit => self.stats.stripe_hits += 1,
            _ => self.stats.new_groups += 1,
        }
        self.backup.on_write(lba, false);
        if self.groups.get(slot).in_order {
            self.notify(
                slot,
                group,
                page,
                (absorbed == Absorbed::NewGroup, false, seq, first),
            );
        }
        if !self.low_reached && self.rate.low().is_some_and(|l| self.occupied >= l) {
            self.low_reached = true;
            self.order.on_low_threshold();
        }
        if let Some(w) = self.water.as_mut() {
            w.update(self.occupied);
        }
        debug_assert!(self.occupied <= self.capacity);
        Some(absorbed)
    }

    /// The next page written starts a user request (STOW counts requests for its shares
    /// when `StowKnobs::shares_in_requests`; the timed engine calls this).
    pub fn start_request(&mut self) {
        self.request_start = true;
    }

    /// Tell the order of a page write; `flags` = (new group, page hit, sequential, first page
    /// of its request).
    #[inline]
    fn notify(&mut self, slot: u32, group: u64, page: u64, flags: (bool, bool, bool, bool)) {
        let (new_group, page_hit, seq, request_start) = flags;
        self.order.on_write(&PageWrite {
            slot,
            group,
            new_group,
            page_hit,
            last_page: page + 1 == self.group_pages,
            seq,
            request_start,
        });
    }

    /// Destages the rate allows in flight now (the maximum while draining).
    #[inline]
    pub fn allowed(&self) -> u32 {
        if self.draining {
            self.rate.max()
        } else if let Some(w) = &self.water {
            w.allowed(self.occupied, self.rate.max())
        } else {
            self.rate.allowed(self.occupied)
        }
    }

    /// Whether another destage should start now.
    #[inline]
    pub fn wants_destage(&self) -> bool {
        self.inflight < self.allowed() && !self.order.is_empty() && !self.offline
    }

    /// The engine says whether the controller is idle (RAPID's rate destages in idle periods).
    pub fn set_idle(&mut self, idle: bool) {
        if let Some(w) = self.water.as_mut() {
            w.set_idle(idle);
        }
    }

    /// From now on destage at the maximum rate until the cache is empty (writes stopped).
    pub fn drain(&mut self) {
        self.draining = true;
    }

    /// Start destaging the group the order picks, if any.
    pub fn start_destage(&mut self) -> Option<Destage> {
        let slot = self.order.next_victim()?;
        let w = self.words;
        let base = slot as usize * 2 * w;
        let (dirty, flight) = self.bits[base..base + 2 * w].split_at_mut(w);
        flight.copy_from_slice(dirty);
        dirty.fill(0);
        let g = self.groups.get_mut(slot);
        debug_assert!(g.in_order && g.flight == 0 && g.dirty > 0);
        g.flight = g.dirty;
        g.dirty = 0;
        g.in_order = false;
        let d = Destage {
            slot,
            first: g.key * self.group_pages,
            pages: g.flight,
        };
        self.inflight += 1;
        self.stats.destages += 1;
        self.stats.destaged_pages += u64::from(d.pages);
        self.stats.full_destages += u64::from(u64::from(d.pages) == self.group_pages);
        Some(d)
    }

    /// First logical page of group `slot`.
    pub fn group_first(&self, slot: u32) -> u64 {
        self.groups.get(slot).key * self.group_pages
    }

    /// In-flight pages of group `slot` as a bitmap (bit `i` = page `first + i`).
    pub fn flight_bits(&self, slot: u32) -> &[u64] {
        self.group_bits(slot).1
    }

    /// Group `slot`'s dirty and in-flight bitmaps (the [`Backup::on_destage`] arguments).
    pub fn group_bits(&self, slot: u32) -> (&[u64], &[u64]) {
        let base = slot as usize * 2 * self.words;
        self.bits[base..base + 2 * self.words].split_at(self.words)
    }

    /// The destage of group `slot` completed: free its in-flight pages; a group written
    /// meanwhile goes back into the order. Returns the pages freed.
    pub fn finish_destage(&mut self, slot: u32) -> u32 {
        let w = self.words;
        let base = slot as usize * 2 * w;
        let g = *self.groups.get(slot);
        debug_assert!(!g.in_order && g.flight > 0);
        {
            let (dirty, flight) = self.bits[base..base + 2 * w].split_at(w);
            self.backup
                .on_destage(g.key * self.group_pages, flight, dirty);
        }
        self.bits[base + w..base + 2 * w].fill(0);
        self.occupied -= u64::from(g.flight);
        self.inflight -= 1;
        if let Some(w) = self.water.as_mut() {
            w.update(self.occupied);
        }
        if g.dirty > 0 {
            let e = self.groups.get_mut(slot);
            e.flight = 0;
            e.in_order = true;
            self.order.reinsert(slot, g.key, g.dirty);
        } else {
            self.groups.remove(slot);
        }
        g.flight
    }

    /// Dirty and in-flight pages counted bit by bit, and groups present (tests).
    #[cfg(test)]
    fn recount(&self) -> (u64, usize) {
        let pages: u32 = self.bits.iter().map(|w| w.count_ones()).sum();
        (u64::from(pages), self.groups.len())
    }
}
