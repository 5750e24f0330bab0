//! CLOCK (second chance, FIFO with reinsertion).
//!
//! Entries sit in a FIFO queue with a small saturating reference counter. A new entry starts at
//! 0; a hit adds 1 up to [`MAX_COUNT`]. To evict, the back entry is examined: a non-zero
//! counter is decremented and the entry goes back to the front; a zero counter makes it the
//! victim. With `MAX_COUNT = 1` this is the classic one-bit CLOCK, and it is exactly
//! libCacheSim's `Clock` with its default `n-bit-counter=1`.

use super::list::{Link, List};
use super::slab::Slab;
use super::{Access, ReadPolicy};

/// Saturation value of the reference counter (one bit).
pub const MAX_COUNT: u8 = 1;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    link: Link,
    size: u32,
    count: u8,
}

impl_slot!(Entry);

/// CLOCK over a fixed arena.
#[derive(Clone, Debug)]
pub struct Clock {
    slab: Slab<Entry>,
    queue: List,
    used: u64,
    capacity: u64,
}

impl Clock {
    /// `capacity` units; room for `entries` entries before the arena grows.
    pub fn new(capacity: u64, entries: usize) -> Self {
        Clock {
            slab: Slab::with_capacity(entries),
            queue: List::new(),
            used: 0,
            capacity,
        }
    }

    fn unlink(&mut self, id: u32) {
        self.queue.unlink(self.slab.nodes(), id);
    }

    /// Rotate the hand until an unreferenced entry is at the back, then remove it. Terminates:
    /// each pass over a referenced entry lowers its counter.
    fn pop_victim(&mut self) -> Option<u64> {
        loop {
            let back = self.queue.back()?;
            let e = self.slab.get_mut(back);
            if e.count == 0 {
                break;
            }
            e.count -= 1;
            self.queue.move_to_front(self.slab.nodes(), back);
        }
        let victim = self.queue.pop_back(self.slab.nodes())?;
        let e = self.slab.remove(victim);
        self.used -= u64::from(e.size);
        Some(e.key)
    }
}

impl ReadPolicy for Clock {
    fn name(&self) -> &'static str {
        "clock"
    }

    #[inline]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        match self.slab.find(acc.key) {
            Some(id) => {
                let e = self.slab.get_mut(id);
                e.count = (e.count + 1).min(MAX_COUNT);
                true
            }
            None => false,
        }
    }

    #[inline]
    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool {
        let size = u64::from(acc.size);
        if size > self.capacity {
            return false;
        }
        debug_assert!(!self.contains(acc.key), "insert of a resident key");
        while self.used + size > self.capacity {
            match self.pop_victim() {
                Some(k) => evicted.push(k),
                None => break,
            }
        }
        let id = self.slab.insert(Entry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
            count: 0,
        });
        self.queue.push_front(self.slab.nodes(), id);
        self.used += size;
        true
    }

    slab_policy_accessors!();

    fn evict_one(&mut self, evicted: &mut Vec<u64>) -> bool {
        match self.pop_victim() {
            Some(k) => {
                evicted.push(k);
                true
            }
            None => false,
        }
    }

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::run_evictions;
    use super::*;

    #[test]
    fn worked_example() {
        // Capacity 3; queue shown front .. back with counters.
        // 1 2 3 miss: [3:0 2:0 1:0]. 1 hit: 1:1. 2 hit: 2:1.
        // 4 miss: back 1:1 -> 1:0 to front [1:0 3:0 2:1]; back 2:1 -> 2:0 to front
        //   [2:0 1:0 3:0]; back 3:0 is the victim -> [4:0 2:0 1:0].
        // 5 miss: victim 1 -> [5 4 2]. 2 hit (2:1). 6 miss: 2:1 -> front, victim 4.
        let mut p = Clock::new(3, 3);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 1, 2, 4, 5, 2, 6]);
        assert_eq!(
            h,
            [false, false, false, true, true, false, false, true, false]
        );
        assert_eq!(ev, [3, 1, 4]);
    }
}
