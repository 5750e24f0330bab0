//! STOW (Gill, Debnath, Ko and Belluomini): two WOW-like sorted circular queues, SeqQ for
//! groups that began with a sequential page and RanQ for the rest, with a destage decision
//! that sticks to one queue for a hysteresis amount and an adaptive target size of SeqQ.
//!
//! Followed line by line from the paper (sizes are in pages):
//!
//! - **Algorithm 1 (writes).** A write to a present group: the page joins it (page miss); the
//!   group's recency bit becomes 0 if the page is sequential and the last page of the group,
//!   1 otherwise. A new group goes to SeqQ if its page is sequential (bit 0 if that page is
//!   the group's last, else 1), to RanQ otherwise (bit 0).
//! - **Algorithm 2 (destage).** When the hysteresis is done, choose SeqQ if
//!   `|SeqQ| > DesiredSeqQSize`, else RanQ; sweep that queue's pointer, passing over (and
//!   clearing) groups with bit 1; destage the first group with bit 0. The hysteresis is done
//!   once `HysteresisCount` pages were destaged since the last choice, or either queue grew by
//!   more than `HysteresisCount` pages since then.
//! - **Algorithm 3 (DesiredSeqQSize).** Initialised to `|SeqQ|` when occupancy first reaches
//!   the low threshold. Decremented by one on a write to a group of RanQ whose bit is 0 (for
//!   RAID-10 only when the page itself is a hit) while `|SeqQ| - Desired < HysteresisCount`.
//!   On a destage from SeqQ that is not contiguous with the previous SeqQ destage, after a
//!   stretch shorter than the queue depth, and while RanQ holds more than its share of the
//!   cache (`|RanQ| / (|RanQ| + |SeqQ|) > RanRq / (RanRq + SeqRq)`), incremented by
//!   `n x |RanQ| / |SeqQ|` with `n` the array's disks.
//!
//! `HysteresisCount = min(128 x disks, (high - low) / 8)` in pages is computed by the cache
//! from the rate (`OrderCtx::hysteresis_pages`).
//!
//! Readings where the paper is silent (*unsure*, kept simple and stated here): the increment
//! rule applies to SeqQ destages only (the paper's "breaks in the logical write group
//! addresses being destaged from SeqQ"); a stretch counts consecutive groups; RanRq and SeqRq
//! count page writes by class (`shares = "requests"`, an ablation, counts user write requests
//! by the class of their first page); queue sizes in the increment are taken while the destaged
//! group is still counted in SeqQ (the moment of the destage decision); a destage needed
//! before occupancy ever reached the low threshold (a rate that destages below it)
//! initialises DesiredSeqQSize then; when the chosen queue is empty the other one is used (a
//! new choice); a group written during its own destage re-enters its old queue with bit 1.
//!
//! DesiredSeqQSize is kept within `[0, capacity]`, as ARC (by the same group) bounds its
//! target size `p` by the cache: a target beyond the cache means nothing, and without the bound
//! one increment taken while SeqQ holds a few pages (`n x |RanQ| / |SeqQ|` grows without
//! limit as `|SeqQ|` shrinks) was measured to push it to four times the cache, after which
//! SeqQ is never chosen and sequential data fills the cache (see `docs/write-cache.md`).
//! `desired_cap = false` (an ablation) removes the bound.

use super::{Bits, DestageOrder, OrderCtx, OrderState, PageWrite, SortedRing};
use crate::cache::write::StowKnobs;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queue {
    Seq,
    Ran,
}

pub struct Stow {
    seq: SortedRing,
    ran: SortedRing,
    bits: Bits,
    /// Queue of each present group (by slot).
    in_seq: Vec<bool>,
    /// Dirty pages of each present group (by slot).
    pages: Vec<u32>,
    seq_pages: u64,
    ran_pages: u64,
    /// DesiredSeqQSize; `None` until initialised.
    desired: Option<f64>,
    hysteresis: u64,
    capacity: f64,
    disks: u32,
    queue_depth: u32,
    page_hits_only: bool,
    knobs: StowKnobs,
    /// The queue chosen last, if any, and what has happened since.
    current: Option<Queue>,
    destaged_since: u64,
    seq_at_choice: u64,
    ran_at_choice: u64,
    /// Last group destaged from SeqQ and the length of the stretch it ends.
    prev_seq: Option<u64>,
    stretch: u32,
    /// Page writes classed random and sequential.
    ran_rq: u64,
    seq_rq: u64,
}

impl Stow {
    pub fn new(ctx: &OrderCtx) -> Stow {
        Stow {
            seq: SortedRing::with_slots(ctx.slots),
            ran: SortedRing::with_slots(ctx.slots),
            bits: Bits::new(ctx.slots),
            in_seq: vec![false; ctx.slots as usize],
            pages: vec![0; ctx.slots as usize],
            seq_pages: 0,
            ran_pages: 0,
            desired: None,
            hysteresis: ctx.hysteresis_pages.max(1),
            capacity: ctx.capacity_pages as f64,
            disks: ctx.disks.max(1),
            queue_depth: ctx.queue_depth,
            page_hits_only: ctx.page_hits_only,
            knobs: ctx.stow,
            current: None,
            destaged_since: 0,
            seq_at_choice: 0,
            ran_at_choice: 0,
            prev_seq: None,
            stretch: 0,
            ran_rq: 0,
            seq_rq: 0,
        }
    }

    /// DesiredSeqQSize, once initialised.
    pub fn desired(&self) -> Option<f64> {
        self.desired
    }

    fn hysteresis_done(&self) -> bool {
        self.current.is_none()
            || self.destaged_since >= self.hysteresis
            || self.seq_pages > self.seq_at_choice + self.hysteresis
            || self.ran_pages > self.ran_at_choice + self.hysteresis
    }

    fn choose(&mut self, q: Queue) {
        self.current = Some(q);
        self.destaged_since = 0;
        self.seq_at_choice = self.seq_pages;
        self.ran_at_choice = self.ran_pages;
    }

    /// Algorithm 3, lines 10-18, for a group `g` being destaged from SeqQ (still counted in
    /// `seq_pages`).
    fn seq_destaged(&mut self, g: u64) {
        match self.prev_seq {
            Some(p) if g == p.wrapping_add(1) => self.stretch += 1,
            prev => {
                if prev.is_some() && self.stretch < self.queue_depth && self.seq_pages > 0 {
                    let ran = self.ran_pages as f64;
                    let seq = self.seq_pages as f64;
                    let rq = (self.ran_rq + self.seq_rq).max(1) as f64;
                    if ran / (ran + seq) > self.ran_rq as f64 / rq {
                        let cap = if self.knobs.desired_cap {
                            self.capacity
                        } else {
                            f64::INFINITY
                        };
                        if let Some(d) = self.desired.as_mut() {
                            *d = (*d + f64::from(self.disks) * ran / seq).min(cap);
                        }
                    }
                }
                self.stretch = 1;
            }
        }
        self.prev_seq = Some(g);
    }
}

impl DestageOrder for Stow {
    fn on_write(&mut self, w: &PageWrite) {
        let s = w.slot;
        // RanRq / SeqRq: page writes, or (ablation) requests classed by their first page.
        if !self.knobs.shares_in_requests || w.request_start {
            if w.seq {
                self.seq_rq += 1;
            } else {
                self.ran_rq += 1;
            }
        }
        if !w.new_group {
            // Algorithm 3, lines 1-9 (reads the bit before Algorithm 1 updates it).
            let in_seq = self.in_seq[s as usize];
            if !in_seq && (!self.page_hits_only || w.page_hit) && !self.bits.get(s) {
                if let Some(d) = self.desired.as_mut() {
                    if (self.seq_pages as f64 - *d) < self.hysteresis as f64 {
                        *d = (*d - 1.0).max(0.0);
                    }
                }
            }
            // Algorithm 1, lines 1-10.
            if !w.page_hit {
                self.pages[s as usize] += 1;
                if in_seq {
                    self.seq_pages += 1;
                } else {
                    self.ran_pages += 1;
                }
            }
            self.bits.set(s, !(w.seq && w.last_page));
            return;
        }
        // Algorithm 1, lines 11-25.
        self.pages[s as usize] = 1;
        if w.seq {
            self.seq.insert(w.group, s);
            self.in_seq[s as usize] = true;
            self.seq_pages += 1;
            self.bits.set(s, !w.last_page);
        } else {
            self.ran.insert(w.group, s);
            self.in_seq[s as usize] = false;
            self.ran_pages += 1;
            self.bits.set(s, false);
        }
    }

    fn next_victim(&mut self) -> Option<u32> {
        if self.seq.is_empty() && self.ran.is_empty() {
            return None;
        }
        let desired = *self.desired.get_or_insert(self.seq_pages as f64);
        // Algorithm 2, lines 2-8.
        if self.hysteresis_done() {
            let q = if self.seq_pages as f64 > desired {
                Queue::Seq
            } else {
                Queue::Ran
            };
            self.choose(q);
        }
        let mut q = self.current.expect("chosen above");
        let empty = match q {
            Queue::Seq => self.seq.is_empty(),
            Queue::Ran => self.ran.is_empty(),
        };
        if empty {
            q = if q == Queue::Seq {
                Queue::Ran
            } else {
                Queue::Seq
            };
            self.choose(q);
        }
        // Lines 9-17.
        let bits = &mut self.bits;
        let ring = match q {
            Queue::Seq => &mut self.seq,
            Queue::Ran => &mut self.ran,
        };
        let (g, s) = ring.sweep(|s| bits.take(s))?;
        let p = u64::from(std::mem::take(&mut self.pages[s as usize]));
        self.destaged_since += p;
        match q {
            Queue::Seq => {
                self.seq_destaged(g);
                self.seq_pages -= p;
            }
            Queue::Ran => self.ran_pages -= p,
        }
        Some(s)
    }

    fn reinsert(&mut self, slot: u32, group: u64, pages: u32) {
        self.pages[slot as usize] = pages;
        if self.in_seq[slot as usize] {
            self.seq.insert(group, slot);
            self.seq_pages += u64::from(pages);
        } else {
            self.ran.insert(group, slot);
            self.ran_pages += u64::from(pages);
        }
        self.bits.set(slot, true);
    }

    fn on_low_threshold(&mut self) {
        if self.desired.is_none() {
            self.desired = Some(self.seq_pages as f64);
        }
    }

    fn len(&self) -> usize {
        self.seq.len() + self.ran.len()
    }

    fn needs_seq(&self) -> bool {
        true
    }

    fn state(&self) -> OrderState {
        OrderState {
            seq_pages: self.seq_pages,
            ran_pages: self.ran_pages,
            desired_seq_pages: self.desired.unwrap_or(0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::ctx;
    use super::*;

    fn pw(group: u64, new_group: bool, page_hit: bool, seq: bool, last: bool) -> PageWrite {
        PageWrite {
            slot: group as u32,
            group,
            new_group,
            page_hit,
            last_page: last,
            seq,
            request_start: true,
        }
    }

    #[test]
    fn algorithm_1_recency_bits() {
        let mut o = Stow::new(&ctx());
        // Random new group: RanQ, bit 0.
        o.on_write(&pw(1, true, false, false, false));
        assert!(!o.in_seq[1] && !o.bits.get(1));
        // Sequential new group, not its last page: SeqQ, bit 1.
        o.on_write(&pw(2, true, false, true, false));
        assert!(o.in_seq[2] && o.bits.get(2));
        // Sequential new group starting on its last page: SeqQ, bit 0.
        o.on_write(&pw(3, true, false, true, true));
        assert!(o.in_seq[3] && !o.bits.get(3));
        // Group hit in RanQ: bit 1; the page joins (2 pages now).
        o.on_write(&pw(1, false, false, false, false));
        assert!(o.bits.get(1));
        assert_eq!(o.pages[1], 2);
        // The sequential stream writes group 2's last page: bit forced to 0.
        o.on_write(&pw(2, false, false, true, true));
        assert!(!o.bits.get(2));
        // An overwrite adds no page.
        o.on_write(&pw(2, false, true, false, false));
        assert_eq!((o.pages[2], o.seq_pages, o.ran_pages), (2, 3, 2));
    }

    #[test]
    fn algorithm_2_queue_choice_with_hysteresis() {
        // Hysteresis 4 pages (ctx). SeqQ: groups 10..=13 of 2 pages each (8 pages), bit 0;
        // RanQ: groups 50, 51 of 1 page.
        let mut o = Stow::new(&ctx());
        for g in 10..=13 {
            o.on_write(&pw(g, true, false, true, true));
            o.on_write(&pw(g, false, false, true, true));
        }
        o.on_write(&pw(50, true, false, false, false));
        o.on_write(&pw(51, true, false, false, false));
        assert_eq!((o.seq_pages, o.ran_pages), (8, 2));
        // Low threshold: Desired = |SeqQ| = 8, so |SeqQ| > Desired is false: RanQ first.
        o.on_low_threshold();
        assert_eq!(o.desired(), Some(8.0));
        assert_eq!(o.next_victim(), Some(50));
        // One page destaged of the 4 of hysteresis: stay on RanQ.
        assert_eq!(o.next_victim(), Some(51));
        // RanQ is empty: the other queue becomes the choice.
        assert_eq!(o.next_victim(), Some(10));
        assert_eq!(o.next_victim(), Some(11));
        // 4 pages destaged from SeqQ: the hysteresis is done. A random group arrives, and
        // since |SeqQ| = 4 <= Desired = 8 the new choice is RanQ.
        o.on_write(&pw(60, true, false, false, false));
        assert_eq!(o.next_victim(), Some(60));
        assert_eq!(o.next_victim(), Some(12));
        assert_eq!(o.next_victim(), Some(13));
        assert_eq!(o.next_victim(), None);
    }

    #[test]
    fn seq_queue_above_its_target_is_destaged_first() {
        let mut o = Stow::new(&ctx());
        o.on_write(&pw(50, true, false, false, false));
        o.on_low_threshold(); // Desired = 0
        o.on_write(&pw(10, true, false, true, true));
        assert_eq!(o.next_victim(), Some(10));
        assert_eq!(o.next_victim(), Some(50));
    }

    #[test]
    fn algorithm_3_decrement_on_first_time_ranq_hits() {
        let mut o = Stow::new(&ctx());
        for g in 0..3 {
            o.on_write(&pw(100 + g, true, false, true, false));
        }
        o.on_write(&pw(1, true, false, false, false));
        o.on_low_threshold();
        assert_eq!(o.desired(), Some(3.0));
        // |SeqQ| - Desired = 0 < 4: a hit on RanQ group 1 with bit 0 decrements.
        o.on_write(&pw(1, false, false, false, false));
        assert_eq!(o.desired(), Some(2.0));
        // Its bit is now 1: the next hit is not a first-time hit.
        o.on_write(&pw(1, false, true, false, false));
        assert_eq!(o.desired(), Some(2.0));
        // Hits on SeqQ groups never decrement.
        o.on_write(&pw(100, false, false, true, false));
        assert_eq!(o.desired(), Some(2.0));
        // RAID-10 counts page hits only: a group hit with bit 0 that is a page miss does not.
        let mut c = ctx();
        c.page_hits_only = true;
        let mut o = Stow::new(&c);
        o.on_write(&pw(1, true, false, false, false));
        o.on_write(&pw(100, true, false, true, false));
        o.on_low_threshold();
        o.on_write(&pw(1, false, false, false, false));
        assert_eq!(o.desired(), Some(1.0));
        o.bits.set(1, false);
        o.on_write(&pw(1, false, true, false, false));
        assert_eq!(o.desired(), Some(0.0));
        // Never below zero.
        o.bits.set(1, false);
        o.on_write(&pw(1, false, true, false, false));
        assert_eq!(o.desired(), Some(0.0));
    }

    /// SeqQ groups `seq` of one page each (last pages: bit 0), RanQ groups 1..=6 of one page;
    /// DesiredSeqQSize initialised, then forced to 0 so SeqQ is chosen.
    fn seq_then_six_random(ctx: &OrderCtx, seq: &[u64]) -> Stow {
        let mut o = Stow::new(ctx);
        for &g in seq {
            o.on_write(&pw(g, true, false, true, true));
        }
        for g in 1..=6 {
            o.on_write(&pw(g, true, false, false, false));
        }
        o.on_low_threshold();
        o.desired = Some(0.0);
        o
    }

    #[test]
    fn algorithm_3_increment_on_short_stretches() {
        // disks n = 5, queue depth 20, hysteresis 4. SeqQ: 10, 11 (a stretch of 2), 20, 21;
        // page writes so far: 4 seq, 6 random.
        let mut o = seq_then_six_random(&ctx(), &[10, 11, 20, 21]);
        assert_eq!(o.next_victim(), Some(10));
        assert_eq!(o.next_victim(), Some(11)); // contiguous: stretch 2
        assert_eq!(o.desired(), Some(0.0));
        // 20 breaks a stretch of 2 < 20. With 20 still counted: |RanQ| = 6, |SeqQ| = 2;
        // RanQ's share 6/8 > RanRq's share 6/10: Desired += 5 x 6 / 2 = 15.
        assert_eq!(o.next_victim(), Some(20));
        assert_eq!(o.desired(), Some(15.0));
    }

    #[test]
    fn desired_is_bounded_by_the_cache() {
        let mut c = ctx();
        c.capacity_pages = 20;
        let mut o = seq_then_six_random(&c, &[10, 20]);
        assert_eq!(o.next_victim(), Some(10));
        // A break with |RanQ| = 6, |SeqQ| = 1: 5 x 6 / 1 = 30, held at the capacity 20.
        assert_eq!(o.next_victim(), Some(20));
        assert_eq!(o.desired(), Some(20.0));
    }

    #[test]
    fn no_increment_when_ranq_is_below_its_share() {
        let mut o = Stow::new(&ctx());
        for g in [10u64, 20, 30] {
            o.on_write(&pw(g, true, false, true, true));
        }
        o.on_write(&pw(1, true, false, false, false));
        // Many random page writes (hits) raise RanRq's share above RanQ's 1/4.
        for _ in 0..20 {
            o.on_write(&pw(1, false, true, false, false));
        }
        o.on_low_threshold();
        o.desired = Some(0.0);
        assert_eq!(o.next_victim(), Some(10));
        assert_eq!(o.next_victim(), Some(20)); // a break, but RanQ's 1/2 < RanRq's 21/24
        assert_eq!(o.desired(), Some(0.0));
    }

    #[test]
    fn desired_uncapped_ablation_exceeds_the_cache() {
        let mut c = ctx();
        c.capacity_pages = 20;
        c.stow.desired_cap = false;
        let mut o = seq_then_six_random(&c, &[10, 20]);
        assert_eq!(o.next_victim(), Some(10));
        // The same break as above: 5 x 6 / 1 = 30, now kept beyond the 20-page cache.
        assert_eq!(o.next_victim(), Some(20));
        assert_eq!(o.desired(), Some(30.0));
    }

    /// SeqQ groups 10, 20, 30 of 4 pages, each written by one 4-page request; RanQ group 1
    /// of 2 pages from two 1-page requests; DesiredSeqQSize forced to 0.
    fn shares_example(c: &OrderCtx) -> Stow {
        let mut o = Stow::new(c);
        for g in [10u64, 20, 30] {
            for p in 0..4 {
                let mut w = pw(g, p == 0, false, true, p == 3);
                w.request_start = p == 0;
                o.on_write(&w);
            }
        }
        o.on_write(&pw(1, true, false, false, false));
        o.on_write(&pw(1, false, false, false, false));
        o.on_low_threshold();
        o.desired = Some(0.0);
        o
    }

    #[test]
    fn shares_in_pages_or_in_requests() {
        // The break at group 20 (after 10, a stretch of 1 < 20) sees |RanQ| = 2, |SeqQ| = 8:
        // RanQ's share 2/10 = 0.2. In pages RanRq's share is 2/14 = 0.14 < 0.2: Desired +=
        // 5 x 2 / 8 = 1.25. In requests it is 2/5 = 0.4 > 0.2: no increment.
        let mut o = shares_example(&ctx());
        assert_eq!((o.ran_rq, o.seq_rq), (2, 12));
        assert_eq!(o.next_victim(), Some(10));
        assert_eq!(o.next_victim(), Some(20));
        assert_eq!(o.desired(), Some(1.25));
        let mut c = ctx();
        c.stow.shares_in_requests = true;
        let mut o = shares_example(&c);
        assert_eq!((o.ran_rq, o.seq_rq), (2, 3));
        assert_eq!(o.next_victim(), Some(10));
        assert_eq!(o.next_victim(), Some(20));
        assert_eq!(o.desired(), Some(0.0));
    }
}
