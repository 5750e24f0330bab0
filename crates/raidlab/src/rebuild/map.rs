//! A dense bitmap over the units (stripe rows) of one disk: the rebuild's progress map.
//!
//! One bit per unit, so a 1 TB member of 64 KiB units costs 2 MiB. `next_clear` finds the
//! lowest clear bit at or after a position a word at a time, which keeps a sequential cursor
//! that skips units rebuilt out of order (PRO, piggybacking) amortized O(1) per unit.

use std::sync::atomic::{AtomicU64, Ordering};

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
        next_clear(self.len, self.words.len(), |i| self.words[i], from)
    }
}

/// The lowest clear unit `>= from` of a map of `len` units in `words` words.
fn next_clear(len: u64, words: usize, word: impl Fn(usize) -> u64, from: u64) -> Option<u64> {
    if from >= len {
        return None;
    }
    let mut i = (from / 64) as usize;
    // Bits below `from` in its word count as set.
    let mut w = word(i) | ((1u64 << (from % 64)) - 1);
    // Bounded: `i` grows each pass, up to `words`.
    loop {
        if w != u64::MAX {
            let unit = i as u64 * 64 + u64::from((!w).trailing_zeros());
            return (unit < len).then_some(unit);
        }
        i += 1;
        if i >= words {
            return None;
        }
        w = word(i);
    }
}

/// A [`UnitMap`] that can be set through a shared reference: the array's record of the
/// rows a replacement holds (`Mode`). The store's rebuild marks its rows while requests
/// read the array's state: each row's own lock keeps that row's writers out, and taking the
/// state's write lock for it made every request wait behind the slowest row write in
/// flight. Bits are set with release and read with acquire, so a reader that sees a row
/// rebuilt also sees what was done before it was marked.
#[derive(Default)]
pub struct SharedUnitMap {
    words: Vec<AtomicU64>,
    len: u64,
    set: AtomicU64,
}

impl SharedUnitMap {
    /// `len` units, all clear.
    pub fn new(len: u64) -> SharedUnitMap {
        SharedUnitMap {
            words: (0..len.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            len,
            set: AtomicU64::new(0),
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
        self.set.load(Ordering::Acquire)
    }

    pub fn is_full(&self) -> bool {
        self.count() == self.len
    }

    /// Whether `unit` is set (`false` past the end).
    #[inline]
    pub fn get(&self, unit: u64) -> bool {
        unit < self.len
            && self.words[(unit / 64) as usize].load(Ordering::Acquire) & (1 << (unit % 64)) != 0
    }

    /// Set `unit`; `false` if it was already set. `unit` must be below `len()`.
    pub fn set(&self, unit: u64) -> bool {
        debug_assert!(unit < self.len);
        let bit = 1u64 << (unit % 64);
        let old = self.words[(unit / 64) as usize].fetch_or(bit, Ordering::AcqRel);
        if old & bit != 0 {
            return false;
        }
        self.set.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// The lowest clear unit `>= from`, if any.
    pub fn next_clear(&self, from: u64) -> Option<u64> {
        next_clear(
            self.len,
            self.words.len(),
            |i| self.words[i].load(Ordering::Acquire),
            from,
        )
    }

    /// The bits as a plain map.
    pub fn snapshot(&self) -> UnitMap {
        let words: Vec<u64> = self
            .words
            .iter()
            .map(|w| w.load(Ordering::Acquire))
            .collect();
        let set = words.iter().map(|w| u64::from(w.count_ones())).sum();
        UnitMap {
            words,
            len: self.len,
            set,
        }
    }
}

impl Clone for SharedUnitMap {
    fn clone(&self) -> SharedUnitMap {
        let m = self.snapshot();
        SharedUnitMap {
            words: m.words.into_iter().map(AtomicU64::new).collect(),
            len: m.len,
            set: AtomicU64::new(m.set),
        }
    }
}

impl PartialEq for SharedUnitMap {
    fn eq(&self, other: &SharedUnitMap) -> bool {
        self.snapshot() == other.snapshot()
    }
}

impl Eq for SharedUnitMap {}

impl std::fmt::Debug for SharedUnitMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedUnitMap")
            .field("len", &self.len)
            .field("set", &self.count())
            .finish()
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

    #[test]
    fn the_shared_map_answers_as_the_plain_one() {
        let (plain, shared) = (&mut UnitMap::new(200), SharedUnitMap::new(200));
        for u in (0..200).filter(|u| u % 3 != 1) {
            assert_eq!(plain.set(u), shared.set(u));
        }
        assert!(!shared.set(0), "set twice");
        assert_eq!(shared.snapshot(), *plain);
        assert_eq!(shared.count(), plain.count());
        for from in 0..205 {
            assert_eq!(
                shared.next_clear(from),
                plain.next_clear(from),
                "from {from}"
            );
            assert_eq!(shared.get(from), plain.get(from));
        }
        assert_eq!(shared.clone(), shared);
        assert!(!shared.is_full());
    }

    #[test]
    fn threads_setting_one_shared_map_count_each_unit_once() {
        let m = SharedUnitMap::new(1000);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let m = &m;
                s.spawn(move || {
                    for u in 0..1000 {
                        if (u + t) % 2 == 0 {
                            m.set(u);
                        }
                    }
                });
            }
        });
        assert!(m.is_full());
        assert_eq!(m.count(), 1000);
        assert_eq!(m.next_clear(0), None);
    }
}
