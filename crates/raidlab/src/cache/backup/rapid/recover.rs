//! RAPID-Cache after a failure of one of its copies (section 3: "If data in any one of the
//! caches is lost ... the other cache is read to rebuild the data").
//!
//! - **Primary failed** ([`Rapid::restore`]): the NVRAM LRU and the segment buffers are
//!   copied back at once (memory speed); every cache-disk segment holding a valid page is read
//!   in one large I/O (`BackupIo.read = true`, counted in `stats.disk_reads`). A collection in
//!   flight has moved its pages to its target segment, whose write completes with its data:
//!   the target is read, not its victims.
//! - **NVRAM failed** ([`Rapid::nvram_failed`]): "a small portion of the primary cache can be
//!   borrowed" — the LRU and buffer pages are copied again from the primary into the borrowed
//!   area at once (a buffer being written still reaches the disk). From then on the NVRAM's
//!   copies live in the primary's memory: a later primary failure loses the pages in the LRU
//!   and the filling buffer ([`Rapid::survives`]).
//! - **Cache disk failed** ([`Rapid::disk_failed`]): "the system can borrow a small
//!   partition from each data disk and operate in a logical cache disk mode". The segment
//!   table starts afresh (the engine has switched the log to the data disks); the buffers
//!   keep their pages and a buffer being written is written again to a new segment; every
//!   page whose only copy was on the lost disk is *exposed* until it is copied again from the
//!   primary (as garbage collection does) into a segment buffer, which happens as buffers
//!   free up, ahead of evictions ([`Rapid::reprotect`]). A primary failure meanwhile loses
//!   the exposed pages.

use std::collections::VecDeque;

use super::{Buf, Rapid, EXPOSED, IN_LRU};
use crate::cache::backup::{Exposure, Restore, SegState, Segments};
use crate::cache::write::BackupIo;

/// `BackupIo::tag` of a recovery read.
const RECOVERY_TAG: u32 = u32::MAX - 1;

/// What failures left behind.
#[derive(Debug, Default)]
pub(super) struct FailState {
    /// Pages whose only backup copy was lost with the cache disk, not yet re-protected.
    pub exposed: u64,
    /// Those pages in the order they are re-protected (stale entries are skipped).
    queue: VecDeque<u64>,
    /// The NVRAM failed and now lives in memory borrowed from the primary cache.
    borrowed: bool,
    /// Pages copied again after a cache-disk failure.
    pub reprotected: u64,
}

/// A recovery read of `blocks` blocks of `segment`.
fn read_io(segment: u32, blocks: u32) -> BackupIo {
    BackupIo {
        segment,
        blocks,
        read: true,
        tag: RECOVERY_TAG,
    }
}

impl Rapid {
    /// Whether `seg` is held by a segment buffer (filling or being written).
    fn is_buffer(&self, seg: u32) -> bool {
        self.bufs
            .iter()
            .any(|b| matches!(*b, Buf::Filling(s) | Buf::Writing(s) if s == seg))
    }

    /// Pages in the NVRAM: the LRU and the segment buffers.
    fn nvram_held(&self) -> u64 {
        let buffered: u64 = self
            .bufs
            .iter()
            .map(|b| match *b {
                Buf::Filling(s) | Buf::Writing(s) => u64::from(self.segs.valid(s)),
                Buf::Free => 0,
            })
            .sum();
        self.lru_len + buffered
    }

    /// Whether page `lba`'s copy survives a primary failure now.
    pub(super) fn survives(&self, lba: u64) -> bool {
        let Some(id) = self.entries.find(lba) else {
            return false;
        };
        let seg = self.entries.get(id).seg;
        if seg == EXPOSED {
            return false;
        }
        // A borrowed NVRAM fails with the primary; a buffer being written reaches the disk.
        !self.fail.borrowed || (seg != IN_LRU && self.segs.state(seg) != SegState::Filling)
    }

    /// The primary failed (its unsurvivable pages already forgotten): copy the NVRAM back and
    /// queue one read per segment whose pages are on the cache disk.
    pub(super) fn restore(&mut self) -> Restore {
        let mut r = Restore {
            memory_pages: if self.fail.borrowed {
                0
            } else {
                self.nvram_held()
            },
            ..Restore::default()
        };
        for seg in 0..self.segs.count() {
            let valid = self.segs.valid(seg);
            if valid == 0 {
                continue;
            }
            let on_disk = match self.segs.state(seg) {
                SegState::OnDisk => true,
                // A collection's target (or, borrowed, a buffer) whose write is in flight.
                SegState::Writing => self.fail.borrowed || !self.is_buffer(seg),
                SegState::Free | SegState::Filling | SegState::Reclaiming | SegState::Retired => {
                    false
                }
            };
            if on_disk {
                self.queue.push_back(read_io(seg, self.segs.used(seg)));
                r.disk_pages += u64::from(valid);
                r.segment_reads += 1;
                self.stats.disk_reads += 1;
            }
        }
        r
    }

    /// The backup NVRAM failed: borrow its size from the primary and copy its pages again.
    pub(super) fn nvram_failed(&mut self) -> Exposure {
        if self.fail.borrowed {
            return Exposure::default();
        }
        self.fail.borrowed = true;
        let slots = u64::from(self.segs.slots());
        Exposure {
            pages: self.nvram_held(),
            borrowed_pages: self.lru_pages + self.bufs.len() as u64 * slots,
        }
    }

    /// The cache disk failed: start a fresh segment table (the log is now logical), rewrite
    /// the buffers' segments, expose the pages that were only on the disk and start
    /// re-protecting them.
    pub(super) fn disk_failed(&mut self, reprotect: bool) -> Exposure {
        let (count, slots) = (self.segs.count(), self.segs.slots());
        let old = std::mem::replace(&mut self.segs, Segments::new(count, slots));
        // Transfers to the lost disk are dropped by the engine; nothing queued is issued.
        self.queue.clear();
        let gc_target = self.gc_target.take();
        self.gc_victims.clear();
        let mut pages = Vec::new();
        for b in 0..self.bufs.len() {
            let (Buf::Filling(s) | Buf::Writing(s)) = self.bufs[b] else {
                continue;
            };
            old.valid_pages(s, &mut pages);
            let moved = self.rehome_buffer(b, &pages);
            debug_assert!(moved, "a fresh table has a segment per buffer");
        }
        let before = self.fail.exposed;
        for s in 0..count {
            let lost = match old.state(s) {
                SegState::OnDisk => true,
                SegState::Writing => gc_target == Some(s),
                _ => false,
            };
            if lost {
                old.valid_pages(s, &mut pages);
                self.expose(&pages);
            }
        }
        let exposed = self.fail.exposed - before;
        if reprotect {
            self.reprotect();
        }
        Exposure {
            pages: exposed,
            borrowed_pages: 0,
        }
    }

    /// The only backup copies of `pages` were lost: they are exposed until copied again.
    pub(super) fn expose(&mut self, pages: &[u64]) {
        for &lba in pages {
            let id = self.entries.find(lba).expect("a mapped slot has an entry");
            self.entries.get_mut(id).seg = EXPOSED;
            self.fail.queue.push_back(lba);
        }
        self.fail.exposed += pages.len() as u64;
    }

    /// Buffer `b`'s segment was lost with its disk: give it a free segment holding `pages`
    /// (its valid pages); a buffer being written is written again, or freed if empty.
    /// `false` (nothing changed) when no segment is free.
    pub(super) fn rehome_buffer(&mut self, b: usize, pages: &[u64]) -> bool {
        let Some(new) = self.segs.alloc() else {
            return false;
        };
        for &lba in pages {
            let at = self.segs.append(new, lba);
            let id = self.entries.find(lba).expect("a mapped slot has an entry");
            let e = self.entries.get_mut(id);
            e.seg = new;
            e.slot = at;
        }
        match self.bufs[b] {
            Buf::Filling(_) => self.bufs[b] = Buf::Filling(new),
            Buf::Writing(_) if pages.is_empty() => {
                // Every page was destaged meanwhile: nothing to write again.
                self.segs.start_write(new);
                self.segs.written(new);
                self.bufs[b] = Buf::Free;
            }
            Buf::Writing(_) => self.write_buffer(b, new),
            Buf::Free => unreachable!("only a buffer with a segment is rehomed"),
        }
        true
    }

    /// Copy exposed pages from the primary into segment buffers while one has room.
    pub(super) fn reprotect(&mut self) {
        // Bounded: every pass pops the queue or stops.
        while let Some(&lba) = self.fail.queue.front() {
            let live = self
                .entries
                .find(lba)
                .filter(|&id| self.entries.get(id).seg == EXPOSED);
            let Some(id) = live else {
                // Destaged or rewritten meanwhile.
                self.fail.queue.pop_front();
                continue;
            };
            if !self.buffer_room() {
                return;
            }
            self.fail.queue.pop_front();
            self.fail.exposed -= 1;
            self.fail.reprotected += 1;
            self.buffer_page(id);
        }
    }

    /// Pages copied again after a cache-disk failure (tests).
    pub fn reprotected(&self) -> u64 {
        self.fail.reprotected
    }
}
