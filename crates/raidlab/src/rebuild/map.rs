//! A dense bitmap over the units (stripe rows) of one disk: the rebuild's progress map.
//!
//! One bit per unit, so a 1 TB member of 64 KiB units costs 2 MiB. `next_clear` finds the
//! lowest clear bit at or after a position a word at a time, which keeps a sequential cursor
//! that skips units rebuilt out of order (PRO, piggybacking) amortized O(1) per unit.

/// A bitmap over `len` units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitMap {
    words: Vec<u64>,
    len: u64,
    set: u64,
}

impl UnitMap {
    /// `len` units, all clear.
    pub fn new(len: u64) -> UnitMap {
        UnitMap {
            words: vec![0; len.div_ceil(64) as usize],
            len,
            set: 0,
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Units set so far.
    pub fn count(&self) -> u64 {
        self.set
    }

    pub fn is_full(&self) -> bool {
        self.set == self.len
    }

    /// Whether `unit` is set (`false` past the end).
    #[inline]
    pub fn get(&self, unit: u64) -> bool {
        unit < self.len && self.words[(unit / 64) as usize] & (1 << (unit % 64)) != 0
    }

    /// Set `unit`; `false` if it was already set. `unit` must be below `len()`.
    #[inline]
    pub fn set(&mut self, unit: u64) -> bool {
        debug_assert!(unit < self.len);
        let w = &mut self.words[(unit / 64) as usize];
        let bit = 1u64 << (unit % 64);
        if *w & bit != 0 {
            return false;
        }
        *w |= bit;
        self.set += 1;
        true
    }

    /// The lowest clear unit `>= from`, if any.
    pub fn next_clear(&self, from: u64) -> Option<u64> {
        if from >= self.len {
            return None;
        }
        let mut i = (from / 64) as usize;
        // Bits below `from` in its word count as set.
        let mut w = self.words[i] | ((1u64 << (from % 64)) - 1);
        loop {
            if w != u64::MAX {
                let unit = i as u64 * 64 + u64::from((!w).trailing_zeros());
                return (unit < self.len).then_some(unit);
            }
            i += 1;
            if i >= self.words.len() {
                return None;
            }
            w = self.words[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_and_scan() {
        let mut m = UnitMap::new(130);
        assert_eq!(m.next_clear(0), Some(0));
        assert!(m.set(0) && !m.set(0));
        for u in 1..70 {
            m.set(u);
        }
        assert_eq!(m.count(), 70);
        assert_eq!(m.next_clear(0), Some(70));
        assert_eq!(m.next_clear(100), Some(100));
        assert!(m.get(69) && !m.get(70) && !m.get(500));
        for u in 70..130 {
            m.set(u);
        }
        assert!(m.is_full());
        assert_eq!(m.next_clear(0), None);
        assert_eq!(m.next_clear(129), None);
        assert_eq!(m.next_clear(130), None);
        assert_eq!(UnitMap::new(0).next_clear(0), None);
    }
}
