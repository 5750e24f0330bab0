//! The mirror's free slots (`mirror.rs`): handed out in address order from a moving cursor.

/// The free slots, handed out in address order from a cursor that moves on and wraps. The
/// records one commit covers then sit next to each other in the file: their data blocks in
/// a short range and their headers in one or two pages, so its fdatasync writes a few
/// neighbouring pages instead of a data page and a header page per record scattered over
/// the file (which a stack of freed slots gave, as destages free slots in any order).
#[derive(Debug)]
pub(super) struct FreeSlots {
    /// Bit `i` set: slot `i` is free.
    bits: Vec<u64>,
    slots: u64,
    free: u64,
    /// Where the next search starts.
    cursor: u64,
}

impl FreeSlots {
    /// Every slot of `slots` free; slot 0 is taken first.
    pub(super) fn all(slots: u64) -> FreeSlots {
        let mut bits = vec![u64::MAX; slots.div_ceil(64) as usize];
        if !slots.is_multiple_of(64) {
            *bits.last_mut().expect("at least one slot") = (1u64 << (slots % 64)) - 1;
        }
        FreeSlots {
            bits,
            slots,
            free: slots,
            cursor: 0,
        }
    }

    /// The first free slot at or after the cursor, wrapping; `None` when none is free.
    pub(super) fn take(&mut self) -> Option<u64> {
        if self.free == 0 {
            return None;
        }
        let words = self.bits.len();
        let first = (self.cursor / 64) as usize;
        // Bounded: every word once, and the cursor's word again for its bits below it.
        for i in 0..=words {
            let w = (first + i) % words;
            let mut word = self.bits[w];
            if i == 0 {
                word &= u64::MAX << (self.cursor % 64);
            }
            if word != 0 {
                let slot = w as u64 * 64 + u64::from(word.trailing_zeros());
                debug_assert!(slot < self.slots);
                self.bits[w] &= !(1u64 << (slot % 64));
                self.free -= 1;
                self.cursor = if slot + 1 == self.slots { 0 } else { slot + 1 };
                return Some(slot);
            }
        }
        unreachable!("{} free slots counted, none found", self.free)
    }

    /// Slot `slot` is free again.
    pub(super) fn give(&mut self, slot: u64) {
        debug_assert!(!self.contains(slot), "slot {slot} freed twice");
        self.bits[(slot / 64) as usize] |= 1u64 << (slot % 64);
        self.free += 1;
    }

    fn contains(&self, slot: u64) -> bool {
        self.bits[(slot / 64) as usize] & (1u64 << (slot % 64)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_slots_are_taken_in_address_order_from_a_cursor_that_wraps() {
        let mut f = FreeSlots::all(130);
        let taken: Vec<u64> = (0..130).map(|_| f.take().unwrap()).collect();
        assert_eq!(taken, (0..130).collect::<Vec<u64>>());
        assert_eq!(f.take(), None);
        for s in [129, 3, 70, 64] {
            f.give(s);
        }
        // The cursor wrapped to 0: the lowest free slot, then on in order, then around.
        assert_eq!(f.take(), Some(3));
        assert_eq!(f.take(), Some(64));
        f.give(10);
        assert_eq!(f.take(), Some(70));
        assert_eq!(f.take(), Some(129));
        assert_eq!(f.take(), Some(10));
        assert_eq!(f.take(), None);
        // One word: a slot below the cursor in the cursor's own word, found after wrapping.
        let mut f = FreeSlots::all(64);
        for _ in 0..64 {
            f.take().unwrap();
        }
        f.give(2);
        f.give(60);
        assert_eq!(f.take(), Some(2));
        f.give(1);
        assert_eq!(f.take(), Some(60));
        assert_eq!(f.take(), Some(1));
        assert_eq!(f.take(), None);
    }
}
