//! RAPID-Cache over a logical cache disk when one of the data disks fails (section 3: "If one
//! cache partition of a logical cache disk crashes ... the controller can simply skip the
//! failed disk"). Segment `s` lies on member `s mod members`; the failed member's segments
//! are retired for good (a rebuild onto a spare does not restore the log partition):
//!
//! - pages whose copy was on a written segment there, or on a collection's target being
//!   written there, are *exposed* and copied again from the primary as buffers free up, as
//!   after a cache-disk failure (`recover.rs`); the collection's victims are freed (their old
//!   copies are no longer mapped: counted conservatively);
//! - a segment buffer assigned to a segment there moves to a free segment elsewhere (a write
//!   in flight is dropped by the engine and issued again); with no free segment its pages
//!   are exposed instead;
//! - a collection victim there whose target is elsewhere is retired now (its pages are in
//!   the target) and stays retired when the collection completes.

use super::{Buf, Rapid};
use crate::cache::backup::{Exposure, SegState};

impl Rapid {
    /// Data disk `member` of `members` failed; `reprotect`: the primary can be read now.
    pub(super) fn member_failed(&mut self, member: u32, members: u32, reprotect: bool) -> Exposure {
        debug_assert!(member < members);
        let on = |s: u32| s % members == member;
        let before = self.fail.exposed;
        // Transfers not yet issued to the member are dropped (buffers are written again
        // below); the engine drops those in flight.
        self.queue.retain(|io| !on(io.segment));
        let mut pages = Vec::new();
        if let Some(t) = self.gc_target.filter(|&t| on(t)) {
            self.gc_target = None;
            self.expose_segment(t, &mut pages);
            for v in std::mem::take(&mut self.gc_victims) {
                if on(v) {
                    self.segs.retire(v);
                } else {
                    self.segs.reclaimed(v);
                }
            }
        }
        // Bounded: one pass over the member's segments.
        for s in (member..self.segs.count()).step_by(members as usize) {
            match self.segs.state(s) {
                SegState::Free | SegState::Reclaiming => self.segs.retire(s),
                SegState::OnDisk => self.expose_segment(s, &mut pages),
                // Buffers' segments: below; a collection's target: above.
                SegState::Filling | SegState::Writing | SegState::Retired => {}
            }
        }
        for b in 0..self.bufs.len() {
            let (Buf::Filling(s) | Buf::Writing(s)) = self.bufs[b] else {
                continue;
            };
            if !on(s) {
                continue;
            }
            self.segs.valid_pages(s, &mut pages);
            self.segs.retire(s);
            if !self.rehome_buffer(b, &pages) {
                // No free segment: the buffer's pages wait to be copied again.
                self.bufs[b] = Buf::Free;
                if self.current == Some(b as u32) {
                    self.current = None;
                }
                self.expose(&pages);
            }
        }
        let exposed = self.fail.exposed - before;
        if reprotect {
            self.reprotect();
        }
        self.maybe_gc();
        Exposure {
            pages: exposed,
            borrowed_pages: 0,
        }
    }

    /// Retire `seg` and expose the pages it held.
    fn expose_segment(&mut self, seg: u32, pages: &mut Vec<u64>) {
        self.segs.valid_pages(seg, pages);
        self.segs.retire(seg);
        self.expose(pages);
    }

    /// Segments retired after data-disk failures (tests).
    pub fn retired_segments(&self) -> u32 {
        self.segs.retired()
    }
}
