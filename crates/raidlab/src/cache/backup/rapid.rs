//! RAPID-Cache's backup cache (section 2): a small NVRAM holding an LRU cache of pages, 2-4
//! segment buffers and a hash table, over a log-structured cache disk.
//!
//! - **Write.** A page written into the primary cache is copied into the NVRAM LRU at once
//!   (the write is acknowledged only when it is in both). A full LRU first moves its least
//!   recently written page into the current segment buffer; a full segment buffer becomes one
//!   large write of its segment to the cache disk, and the next free buffer becomes current.
//!   When the LRU is full, no buffer is current and none is free (all are being written),
//!   [`Backup::can_accept`] says no and the write waits: the paper's 0.5 MB case.
//! - **Hash table.** One entry per page held (the `Slab`'s index is the hash table): in the
//!   LRU, or in slot `slot` of segment `seg` (a buffer being filled or written, or the disk).
//! - **Invalidation.** A destaged or superseded page's copy is dropped: its LRU space freed,
//!   or its segment slot marked empty (an on-disk segment left with no valid slot is free).
//! - **Garbage collection.** When free segments fall below `gc_free_segments`, the on-disk
//!   segments with the fewest valid slots (as many as fit in one segment) are merged: their
//!   live pages are copied *from the primary cache* (every backed-up page is dirty there) into
//!   a DRAM buffer and written as a new segment; the old segments are free once that write
//!   completes (until then their copies on disk are still the backup). The cache disk is never
//!   read (`stats.disk_reads` stays 0). One collection runs at a time.
//!
//! Sans-IO: writes are queued as [`BackupIo`]s for the engine, which reports each completion.
//!
//! INVARIANTS (`check`, property tests): every page held is in exactly one place; the LRU
//! holds at most its capacity; segment valid counts equal their slot maps; an entry's segment
//! slot maps back to its page.

use std::collections::VecDeque;

use super::{
    BackupStats, CacheFailure, Exposure, RapidSpec, Restore, SegState, Segments, EMPTY_SLOT,
};
use crate::cache::read::list::{Link, List};
use crate::cache::read::slab::{impl_slot, Slab};
use crate::cache::write::backup::destaged_pages;
use crate::cache::write::{Backup, BackupIo};

mod member;
mod recover;

/// `Entry::seg` of a page in the NVRAM LRU.
const IN_LRU: u32 = u32::MAX;
/// `Entry::seg` of a page whose only backup copy was on a lost cache disk (`recover.rs`).
const EXPOSED: u32 = u32::MAX - 1;
/// `BackupIo::tag` of a garbage-collection write.
const GC_TAG: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Entry {
    key: u64,
    link: Link,
    seg: u32,
    slot: u32,
}

impl_slot!(Entry);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Buf {
    Free,
    Filling(u32),
    Writing(u32),
}

pub struct Rapid {
    lru_pages: u64,
    entries: Slab<Entry>,
    /// Front: most recently written.
    lru: List,
    lru_len: u64,
    segs: Segments,
    bufs: Vec<Buf>,
    current: Option<u32>,
    /// Writes waiting for the engine (at most one per buffer plus one GC write).
    queue: VecDeque<BackupIo>,
    gc_free_segments: u32,
    /// The running collection's target segment and victims.
    gc_target: Option<u32>,
    gc_victims: Vec<u32>,
    /// Failures of the caches and re-protection (`recover.rs`).
    fail: recover::FailState,
    stats: BackupStats,
}

impl Rapid {
    /// A backup for `spec` behind a primary cache of `primary_pages` pages.
    pub fn new(spec: &RapidSpec, primary_pages: u64) -> Rapid {
        debug_assert!(spec.lru_pages() >= 1 && spec.segment_buffers >= 1);
        let buffers = spec.segment_buffers as usize;
        Rapid {
            lru_pages: spec.lru_pages(),
            entries: Slab::with_capacity(primary_pages.min(1 << 26) as usize),
            lru: List::new(),
            lru_len: 0,
            segs: Segments::new(spec.segments, spec.segment_pages),
            bufs: vec![Buf::Free; buffers],
            current: None,
            queue: VecDeque::with_capacity(buffers + 1),
            gc_free_segments: spec.gc_free_segments,
            gc_target: None,
            gc_victims: Vec::new(),
            fail: recover::FailState::default(),
            stats: BackupStats {
                free_segments_min: spec.segments,
                ..BackupStats::default()
            },
        }
    }

    pub fn segments(&self) -> &Segments {
        &self.segs
    }

    /// Pages in the NVRAM LRU.
    pub fn lru_len(&self) -> u64 {
        self.lru_len
    }

    /// Pages held (LRU, segment buffers, disk).
    pub fn held(&self) -> u64 {
        self.entries.len() as u64
    }

    /// Where page `lba` is: `None` if absent, `Some(None)` in the NVRAM LRU, `Some(Some(seg))`
    /// in segment `seg`.
    pub fn location(&self, lba: u64) -> Option<Option<u32>> {
        let e = self.entries.get(self.entries.find(lba)?);
        Some((e.seg != IN_LRU).then_some(e.seg))
    }

    /// Whether the current buffer, or a free one, can take an evicted page.
    fn buffer_room(&self) -> bool {
        self.current.is_some() || (self.segs.free() > 0 && self.bufs.contains(&Buf::Free))
    }

    /// Make a buffer current (there is room: `can_accept` said so).
    fn current_segment(&mut self) -> u32 {
        if let Some(b) = self.current {
            let Buf::Filling(seg) = self.bufs[b as usize] else {
                unreachable!("the current buffer is filling")
            };
            return seg;
        }
        let b = self
            .bufs
            .iter()
            .position(|b| *b == Buf::Free)
            .expect("can_accept checked for a free buffer");
        let seg = self
            .segs
            .alloc()
            .expect("can_accept checked for a free segment");
        self.bufs[b] = Buf::Filling(seg);
        self.current = Some(b as u32);
        self.stats.free_segments_min = self.stats.free_segments_min.min(self.segs.free());
        self.maybe_gc();
        seg
    }

    /// Move the LRU's oldest page into the current segment buffer.
    fn evict(&mut self) {
        let id = self
            .lru
            .pop_back(self.entries.nodes())
            .expect("a full LRU has a back");
        self.lru_len -= 1;
        self.buffer_page(id);
        self.stats.evictions += 1;
    }

    /// Append entry `id` to the current segment buffer; a full buffer is written.
    fn buffer_page(&mut self, id: u32) {
        let seg = self.current_segment();
        let lba = self.entries.get(id).key;
        let slot = self.segs.append(seg, lba);
        let e = self.entries.get_mut(id);
        e.seg = seg;
        e.slot = slot;
        if self.segs.is_full(seg) {
            let b = self.current.take().expect("filling a current buffer");
            self.write_buffer(b as usize, seg);
        }
    }

    /// Queue buffer `b`'s write of segment `seg` (the slots filled so far).
    fn write_buffer(&mut self, b: usize, seg: u32) {
        self.bufs[b] = Buf::Writing(seg);
        self.segs.start_write(seg);
        let blocks = self.segs.used(seg);
        self.queue.push_back(BackupIo {
            segment: seg,
            blocks,
            read: false,
            tag: b as u32,
        });
        self.stats.log_writes += 1;
        self.stats.log_pages += u64::from(blocks);
    }

    /// Collect garbage if free segments are short and no collection runs.
    fn maybe_gc(&mut self) {
        if self.gc_target.is_some() || self.segs.free() >= self.gc_free_segments {
            return;
        }
        let mut victims = std::mem::take(&mut self.gc_victims);
        self.segs.gc_victims(&mut victims);
        if victims.is_empty() {
            self.gc_victims = victims;
            return;
        }
        let Some(target) = self.segs.alloc() else {
            self.gc_victims = victims;
            return;
        };
        let mut copied = 0;
        for &v in &victims {
            for slot in 0..self.segs.used(v) {
                let lba = self.segs.lba(v, slot);
                if lba == EMPTY_SLOT {
                    continue;
                }
                // The page is dirty in the primary cache: copied from there, not the disk.
                let id = self.entries.find(lba).expect("a mapped slot has an entry");
                let new = self.segs.append(target, lba);
                let e = self.entries.get_mut(id);
                debug_assert!(e.seg == v && e.slot == slot);
                e.seg = target;
                e.slot = new;
                copied += 1;
            }
            self.segs.reclaim(v);
        }
        self.segs.start_write(target);
        self.queue.push_back(BackupIo {
            segment: target,
            blocks: copied.max(1),
            read: false,
            tag: GC_TAG,
        });
        self.stats.gc_runs += 1;
        self.stats.gc_pages += u64::from(copied);
        self.stats.gc_segments_freed += victims.len() as u64;
        self.gc_target = Some(target);
        self.gc_victims = victims;
    }

    /// Drop page `lba`'s copy; whether there was one.
    fn remove(&mut self, lba: u64) -> Option<bool> {
        let id = self.entries.find(lba)?;
        let e = *self.entries.get(id);
        let in_lru = e.seg == IN_LRU;
        if in_lru {
            self.lru.unlink(self.entries.nodes(), id);
            self.lru_len -= 1;
        } else if e.seg == EXPOSED {
            self.fail.exposed -= 1;
        } else {
            self.segs.invalidate(e.seg, e.slot);
        }
        self.entries.remove(id);
        Some(in_lru)
    }

    /// The invariants above, as an error message (tests).
    fn check_all(&self) -> Result<(), String> {
        self.segs.check()?;
        if self.lru_len > self.lru_pages {
            return Err(format!("LRU holds {} > {}", self.lru_len, self.lru_pages));
        }
        let mut in_segs: u64 = 0;
        for s in 0..self.segs.count() {
            if self.segs.state(s) == SegState::Free {
                continue;
            }
            in_segs += u64::from(self.segs.valid(s));
            for slot in 0..self.segs.used(s) {
                let lba = self.segs.lba(s, slot);
                if lba == EMPTY_SLOT {
                    continue;
                }
                match self.entries.find(lba).map(|id| *self.entries.get(id)) {
                    Some(e) if e.seg == s && e.slot == slot => {}
                    _ => return Err(format!("segment {s} slot {slot} maps page {lba} wrongly")),
                }
            }
        }
        if in_segs + self.lru_len + self.fail.exposed != self.held() {
            return Err(format!(
                "{} pages held but {} in the LRU, {in_segs} in segments and {} exposed",
                self.held(),
                self.lru_len,
                self.fail.exposed
            ));
        }
        Ok(())
    }
}

impl Backup for Rapid {
    fn on_write(&mut self, lba: u64, _overwrite: bool) {
        debug_assert!(self.can_accept(lba));
        self.stats.page_writes += 1;
        if self.entries.find(lba).is_some() {
            // Not superseded first (cannot happen with the write cache): supersede now.
            self.on_invalidate(lba);
        }
        if self.lru_len >= self.lru_pages {
            self.evict();
        }
        let id = self.entries.insert(Entry {
            key: lba,
            link: Link::DETACHED,
            seg: IN_LRU,
            slot: 0,
        });
        self.lru.push_front(self.entries.nodes(), id);
        self.lru_len += 1;
        self.stats.held_max = self.stats.held_max.max(self.held());
        debug_assert!(self.lru_len <= self.lru_pages);
    }

    fn on_destage(&mut self, first: u64, flight: &[u64], dirty: &[u64]) {
        for lba in destaged_pages(first, flight, dirty) {
            if self.remove(lba).is_some() {
                self.stats.destaged += 1;
            }
        }
    }

    fn on_invalidate(&mut self, lba: u64) {
        if let Some(in_lru) = self.remove(lba) {
            self.stats.invalidated += 1;
            self.stats.nvram_hits += u64::from(in_lru);
        }
    }

    #[inline]
    fn can_accept(&self, lba: u64) -> bool {
        if self.lru_len < self.lru_pages || self.buffer_room() {
            return true;
        }
        // A rewrite of a page in the LRU frees its own space first.
        matches!(self.location(lba), Some(None))
    }

    fn next_io(&mut self) -> Option<BackupIo> {
        self.queue.pop_front()
    }

    fn io_done(&mut self, io: BackupIo) {
        if io.read {
            return;
        }
        if io.tag == GC_TAG {
            let target = self.gc_target.take().expect("a GC write completes its GC");
            debug_assert_eq!(target, io.segment);
            self.segs.written(target);
            for i in 0..self.gc_victims.len() {
                let v = self.gc_victims[i];
                // A victim on a data disk that failed meanwhile stays retired.
                if self.segs.state(v) == SegState::Reclaiming {
                    self.segs.reclaimed(v);
                }
            }
            self.gc_victims.clear();
        } else {
            let b = io.tag as usize;
            debug_assert_eq!(self.bufs[b], Buf::Writing(io.segment));
            self.segs.written(io.segment);
            self.bufs[b] = Buf::Free;
            self.reprotect();
        }
        self.maybe_gc();
    }

    fn copies(&self, lba: u64) -> u32 {
        u32::from(self.entries.find(lba).is_some())
    }

    fn check(&self) -> Result<(), String> {
        self.check_all()
    }

    fn stats(&self) -> BackupStats {
        self.stats.clone()
    }

    fn survives_primary(&self, lba: u64) -> bool {
        self.survives(lba)
    }

    fn primary_failed(&mut self) -> Restore {
        self.restore()
    }

    fn backup_failed(&mut self, what: CacheFailure, reprotect: bool) -> Exposure {
        match what {
            CacheFailure::Primary => Exposure::default(),
            CacheFailure::Backup => self.nvram_failed(),
            CacheFailure::CacheDisk => self.disk_failed(reprotect),
        }
    }

    fn log_member_failed(&mut self, member: u32, members: u32, reprotect: bool) -> Exposure {
        self.member_failed(member, members, reprotect)
    }

    fn unprotected(&self) -> u64 {
        self.fail.exposed
    }

    fn forget(&mut self, lba: u64) {
        self.remove(lba);
    }
}
