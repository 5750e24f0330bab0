//! WOW (Gill and Modha, FAST 2005): CSCAN's sorted circular list of write groups plus one
//! recency bit per group. A group enters with bit 0; a write to a present group sets it to 1.
//! The destage pointer sweeps in LBA order: a group with bit 1 is passed over and its bit
//! cleared (an extra life of one revolution), a group with bit 0 is destaged.

use super::{Bits, DestageOrder, OrderCtx, PageWrite, SortedRing};

pub struct Wow {
    ring: SortedRing,
    bits: Bits,
}

impl Wow {
    pub fn new(ctx: &OrderCtx) -> Wow {
        Wow {
            ring: SortedRing::with_slots(ctx.slots),
            bits: Bits::new(ctx.slots),
        }
    }
}

impl DestageOrder for Wow {
    fn on_write(&mut self, w: &PageWrite) {
        if w.new_group {
            self.ring.insert(w.group, w.slot);
            self.bits.set(w.slot, false);
        } else {
            self.bits.set(w.slot, true);
        }
    }

    fn next_victim(&mut self) -> Option<u32> {
        let bits = &mut self.bits;
        self.ring.sweep(|s| bits.take(s)).map(|(_, s)| s)
    }

    fn reinsert(&mut self, slot: u32, group: u64, _pages: u32) {
        // It was written since its last destage began: recently used.
        self.ring.insert(group, slot);
        self.bits.set(slot, true);
    }

    fn len(&self) -> usize {
        self.ring.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ctx, drain, w};
    use super::*;

    #[test]
    fn recently_written_groups_get_one_more_revolution() {
        let mut o = Wow::new(&ctx());
        for g in [10u64, 20, 30, 40] {
            o.on_write(&w(g, true, false));
        }
        // Hits on 10 and 30 set their bits.
        o.on_write(&w(10, false, true));
        o.on_write(&w(30, false, false));
        // Sweep: 10 skipped (bit cleared), 20 destaged.
        assert_eq!(o.next_victim(), Some(20));
        // 30 skipped, 40 destaged; then wrap: 10 (bit now 0), 30.
        assert_eq!(o.next_victim(), Some(40));
        assert_eq!(drain(&mut o), vec![10, 30]);
    }

    #[test]
    fn reinserted_group_is_recent() {
        let mut o = Wow::new(&ctx());
        o.on_write(&w(10, true, false));
        o.on_write(&w(20, true, false));
        assert_eq!(o.next_victim(), Some(10));
        o.reinsert(10, 10, 2);
        // Pointer past 10: 20 first; wrap to 10 with its bit set: skipped once, then taken.
        assert_eq!(drain(&mut o), vec![20, 10]);
    }
}
