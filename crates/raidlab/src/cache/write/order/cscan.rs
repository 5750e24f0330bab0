//! CSCAN: destage groups in ascending group number (LBA order), wrapping around; writes to a
//! present group change nothing. Spatial locality only.

use super::{DestageOrder, OrderCtx, PageWrite, SortedRing};

pub struct Cscan {
    ring: SortedRing,
}

impl Cscan {
    pub fn new(ctx: &OrderCtx) -> Cscan {
        Cscan {
            ring: SortedRing::with_slots(ctx.slots),
        }
    }
}

impl DestageOrder for Cscan {
    fn on_write(&mut self, w: &PageWrite) {
        if w.new_group {
            self.ring.insert(w.group, w.slot);
        }
    }

    fn next_victim(&mut self) -> Option<u32> {
        self.ring.sweep(|_| false).map(|(_, s)| s)
    }

    fn reinsert(&mut self, slot: u32, group: u64, _pages: u32) {
        self.ring.insert(group, slot);
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
    fn ascending_and_wrapping() {
        let mut o = Cscan::new(&ctx());
        for g in [30u64, 10, 20] {
            o.on_write(&w(g, true, false));
        }
        // A hit changes nothing.
        o.on_write(&w(10, false, true));
        assert_eq!(o.next_victim(), Some(10));
        assert_eq!(o.next_victim(), Some(20));
        // 5 lies behind the pointer (now past 20): it waits for the wrap.
        o.on_write(&w(5, true, false));
        assert_eq!(drain(&mut o), vec![30, 5]);
    }
}
