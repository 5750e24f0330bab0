//! Full 2Q (Johnson and Shasha, VLDB 1994).
//!
//! Three queues: A1in, a FIFO of entries seen once; Am, an LRU of entries seen again after
//! leaving A1in; and A1out, a FIFO of *keys* (ghosts) recently pushed out of A1in.
//! - hit in Am: move to Am's MRU end; hit in A1in: nothing (correlated re-references inside
//!   A1in do not prove long-term popularity);
//! - miss found in A1out: the ghost is dropped and the entry enters Am;
//! - any other miss enters A1in.
//!
//! To make room, A1in's oldest entry goes to A1out when A1in holds more than `kin` of the
//! capacity (or Am is empty); otherwise Am's LRU entry is evicted without a ghost. A1out keeps
//! at most `kout` of the capacity, oldest ghosts dropped first. Both thresholds are measured in
//! capacity units (entries in block mode, bytes in object mode). Defaults from the paper:
//! `kin` = 25 %, `kout` = 50 %.

use super::list::{Link, List};
use super::slab::Slab;
use super::{Access, ReadPolicy};

const A1IN: u8 = 0;
const AM: u8 = 1;
const A1OUT: u8 = 2;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    link: Link,
    size: u32,
    queue: u8,
}

impl_slot!(Entry);

/// 2Q over a fixed arena (resident entries plus `kout` x capacity of ghosts).
#[derive(Clone, Debug)]
pub struct TwoQ {
    slab: Slab<Entry>,
    queues: [List; 3],
    /// Units in each queue, indexed like `queues`.
    sizes: [u64; 3],
    kin_units: u64,
    kout_units: u64,
    resident: usize,
    capacity: u64,
}

impl TwoQ {
    /// `capacity` units, `kin` and `kout` as shares of it; room for `entries` entries.
    pub fn new(capacity: u64, kin: f64, kout: f64, entries: usize) -> Self {
        TwoQ {
            slab: Slab::with_capacity(entries),
            queues: [List::new(); 3],
            sizes: [0; 3],
            kin_units: (capacity as f64 * kin) as u64,
            kout_units: (capacity as f64 * kout) as u64,
            resident: 0,
            capacity,
        }
    }

    #[inline(always)]
    fn unlink(&mut self, id: u32) -> Entry {
        let e = *self.slab.get(id);
        self.queues[e.queue as usize].unlink(self.slab.nodes(), id);
        self.sizes[e.queue as usize] -= u64::from(e.size);
        e
    }

    #[inline(always)]
    fn push_front(&mut self, id: u32, queue: u8) {
        let e = self.slab.get_mut(id);
        e.queue = queue;
        let size = u64::from(e.size);
        self.queues[queue as usize].push_front(self.slab.nodes(), id);
        self.sizes[queue as usize] += size;
    }

    /// Evict one resident entry; false when nothing is resident.
    #[inline(always)]
    fn reclaim(&mut self, evicted: &mut Vec<u64>) -> bool {
        let a1in_over = self.sizes[A1IN as usize] > self.kin_units;
        let from_a1in = !self.queues[A1IN as usize].is_empty()
            && (a1in_over || self.queues[AM as usize].is_empty());
        if from_a1in {
            let Some(id) = self.queues[A1IN as usize].back() else {
                return false;
            };
            let e = self.unlink(id);
            self.push_front(id, A1OUT);
            self.resident -= 1;
            evicted.push(e.key);
            while self.sizes[A1OUT as usize] > self.kout_units {
                let Some(old) = self.queues[A1OUT as usize].back() else {
                    break;
                };
                self.unlink(old);
                self.slab.remove(old);
            }
        } else {
            let Some(id) = self.queues[AM as usize].back() else {
                return false;
            };
            let e = self.unlink(id);
            self.slab.remove(id);
            self.resident -= 1;
            evicted.push(e.key);
        }
        true
    }

    #[inline]
    fn used_units(&self) -> u64 {
        self.sizes[A1IN as usize] + self.sizes[AM as usize]
    }
}

impl ReadPolicy for TwoQ {
    fn name(&self) -> &'static str {
        "2q"
    }

    #[inline(always)]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        let Some(id) = self.slab.find(acc.key) else {
            return false;
        };
        match self.slab.get(id).queue {
            AM => {
                self.queues[AM as usize].move_to_front(self.slab.nodes(), id);
                true
            }
            A1IN => true,
            _ => false,
        }
    }

    #[inline(always)]
    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool {
        let size = u64::from(acc.size);
        if size > self.capacity {
            return false;
        }
        debug_assert!(!self.contains(acc.key), "insert of a resident key");
        // A remembered ghost sends the entry straight to Am.
        let target = match self.slab.find(acc.key) {
            Some(ghost) => {
                self.unlink(ghost);
                self.slab.remove(ghost);
                AM
            }
            None => A1IN,
        };
        while self.used_units() + size > self.capacity {
            if !self.reclaim(evicted) {
                break;
            }
        }
        let id = self.slab.insert(Entry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
            queue: target,
        });
        self.push_front(id, target);
        self.resident += 1;
        true
    }

    ghost_policy_accessors!(|e| e.queue != A1OUT);

    fn used(&self) -> u64 {
        self.used_units()
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
        // Capacity 4, Kin = 1 entry, Kout = 2 entries. Queues MRU first.
        //  1 2 3 4 miss              A1in=[4 3 2 1]
        //  5 miss: A1in 4 > 1 -> 1 to A1out      A1in=[5 4 3 2] A1out=[1]       (evicts 1)
        //  1 miss, ghost: drop it; 2 to A1out; 1 into Am
        //                            A1in=[5 4 3] Am=[1] A1out=[2]              (evicts 2)
        //  3 hit in A1in (no change); 1 hit in Am
        //  6 miss: 3 to A1out        A1in=[6 5 4] A1out=[3 2]                   (evicts 3)
        //  2 miss, ghost: 4 to A1out; 2 into Am
        //                            A1in=[6 5] Am=[2 1] A1out=[4 3]            (evicts 4)
        //  7 miss: 5 to A1out, A1out over 2 drops 3    A1out=[5 4]              (evicts 5)
        //  3 miss (ghost forgotten): 6 to A1out, drops 4    A1in=[3 7]          (evicts 6)
        //  8 miss: 7 to A1out, drops 5   A1in=[8 3] A1out=[7 6]                 (evicts 7)
        //  6 miss, ghost: 3 to A1out; 6 into Am   A1in=[8] Am=[6 2 1]           (evicts 3)
        //  9 miss: A1in holds 1 = Kin -> Am's LRU 1 is evicted, no ghost         (evicts 1)
        let mut p = TwoQ::new(4, 0.25, 0.5, 8);
        let (h, ev) = run_evictions(&mut p, &[1, 2, 3, 4, 5, 1, 3, 1, 6, 2, 7, 3, 8, 6, 9]);
        let mut want = [false; 15];
        want[6] = true;
        want[7] = true;
        assert_eq!(h, want);
        assert_eq!(ev, [1, 2, 3, 4, 5, 6, 7, 3, 1]);
        let mut resident: Vec<u64> = (0..10).filter(|&k| p.contains(k)).collect();
        resident.sort_unstable();
        assert_eq!(resident, [2, 6, 8, 9]);
    }
}
