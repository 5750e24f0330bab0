//! Multi-Queue, MQ (Zhou, Philbin and Li, USENIX 2001), the second-level buffer cache policy
//! X-RAY is compared with.
//!
//! - `m` LRU queues Q0..Q(m-1). An entry with reference count `f` lives in queue
//!   `min(floor(log2 f), m - 1)`; the victim is the LRU entry of the lowest non-empty queue.
//! - Every access sets the entry's `expire = now + lifetime` (`now` = [`Access::now`], i.e.
//!   time counts requests). After every request, for each queue `k >= 1`, if the LRU entry of
//!   Qk has expired (`expire < now`) it drops to the MRU end of Q(k-1) with a fresh expiry;
//!   its count is kept, so its next hit lifts it back to its level.
//! - Qout: a FIFO history of evicted keys with their counts, at most `history_factor` x the
//!   capacity (in capacity units: entries in block mode, bytes in object mode). A miss found in
//!   Qout re-enters with the remembered count + 1; otherwise with count 1.
//!
//! Choices the paper leaves open (documented so they can be revisited): the Qout lookup of a
//! missing key happens before the eviction that makes room for it, so the entry cannot lose its
//! own history to that eviction; and the per-request queue adjustment of a miss runs after
//! its insertion (as in the paper's pseudo-code), or at the next `get` if the caller does not
//! insert.

use super::list::{Link, List};
use super::slab::Slab;
use super::{Access, ReadPolicy};

/// Marks a Qout (ghost) entry in `Entry::queue`.
const QOUT: u8 = u8::MAX;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    link: Link,
    size: u32,
    count: u32,
    expire: u64,
    queue: u8,
}

impl_slot!(Entry);

/// MQ over a fixed arena (resident entries plus the Qout history).
#[derive(Clone, Debug)]
pub struct Mq {
    slab: Slab<Entry>,
    queues: Vec<List>,
    qout: List,
    qout_units: u64,
    history_units: u64,
    lifetime: u64,
    /// `now` of a missed `get` whose queue adjustment has not run yet.
    pending_adjust: Option<u64>,
    used: u64,
    resident: usize,
    capacity: u64,
}

impl Mq {
    /// `capacity` units, `queues` queues (1..=64), `lifetime` in requests, history of
    /// `history_factor` x capacity; room for `entries` entries before the arena grows.
    pub fn new(
        capacity: u64,
        queues: u32,
        lifetime: u64,
        history_factor: u32,
        entries: usize,
    ) -> Self {
        Mq {
            slab: Slab::with_capacity(entries),
            queues: vec![List::new(); queues.clamp(1, 64) as usize],
            qout: List::new(),
            qout_units: 0,
            history_units: capacity.saturating_mul(u64::from(history_factor)),
            lifetime,
            pending_adjust: None,
            used: 0,
            resident: 0,
            capacity,
        }
    }

    #[inline]
    fn level(&self, count: u32) -> u8 {
        let log2 = 31 - count.max(1).leading_zeros();
        log2.min(self.queues.len() as u32 - 1) as u8
    }

    /// Demote expired LRU entries one queue down (the paper's `Adjust`).
    #[inline(always)]
    fn adjust(&mut self, now: u64) {
        for k in 1..self.queues.len() {
            let Some(id) = self.queues[k].back() else {
                continue;
            };
            if self.slab.get(id).expire < now {
                self.queues[k].unlink(self.slab.nodes(), id);
                self.queues[k - 1].push_front(self.slab.nodes(), id);
                let e = self.slab.get_mut(id);
                e.queue = (k - 1) as u8;
                e.expire = now.saturating_add(self.lifetime);
            }
        }
    }

    /// Evict the LRU entry of the lowest non-empty queue into Qout.
    #[inline(always)]
    fn evict_one(&mut self) -> Option<u64> {
        let k = self.queues.iter().position(|q| !q.is_empty())?;
        let id = self.queues[k].pop_back(self.slab.nodes())?;
        let e = self.slab.get_mut(id);
        e.queue = QOUT;
        let (key, size) = (e.key, u64::from(e.size));
        self.used -= size;
        self.resident -= 1;
        self.qout.push_front(self.slab.nodes(), id);
        self.qout_units += size;
        while self.qout_units > self.history_units {
            let Some(old) = self.qout.pop_back(self.slab.nodes()) else {
                break;
            };
            let g = self.slab.remove(old);
            self.qout_units -= u64::from(g.size);
        }
        Some(key)
    }

    /// Detach resident `id` from its queue and the used units.
    #[inline(always)]
    fn unlink(&mut self, id: u32) {
        let e = *self.slab.get(id);
        self.queues[e.queue as usize].unlink(self.slab.nodes(), id);
        self.used -= u64::from(e.size);
    }

    /// Reference count of resident `key` and its queue (tests).
    #[cfg(test)]
    fn state(&self, key: u64) -> Option<(u32, u8)> {
        let e = self.slab.get(self.slab.find(key)?);
        Some((e.count, e.queue))
    }
}

impl ReadPolicy for Mq {
    fn name(&self) -> &'static str {
        "mq"
    }

    #[inline(always)]
    fn get(&mut self, acc: &Access<'_>) -> bool {
        if let Some(t) = self.pending_adjust.take() {
            self.adjust(t);
        }
        match self.slab.find(acc.key) {
            Some(id) if self.slab.get(id).queue != QOUT => {
                let e = *self.slab.get(id);
                let count = e.count.saturating_add(1);
                let level = self.level(count);
                self.queues[e.queue as usize].unlink(self.slab.nodes(), id);
                self.queues[level as usize].push_front(self.slab.nodes(), id);
                let e = self.slab.get_mut(id);
                e.count = count;
                e.queue = level;
                e.expire = acc.now.saturating_add(self.lifetime);
                self.adjust(acc.now);
                true
            }
            _ => {
                self.pending_adjust = Some(acc.now);
                false
            }
        }
    }

    #[inline(always)]
    fn insert(&mut self, acc: &Access<'_>, evicted: &mut Vec<u64>) -> bool {
        let size = u64::from(acc.size);
        if size > self.capacity {
            return false;
        }
        debug_assert!(!self.contains(acc.key), "insert of a resident key");
        let count = match self.slab.find(acc.key) {
            Some(ghost) => {
                self.qout.unlink(self.slab.nodes(), ghost);
                let g = self.slab.remove(ghost);
                self.qout_units -= u64::from(g.size);
                g.count.saturating_add(1)
            }
            None => 1,
        };
        while self.used + size > self.capacity {
            match self.evict_one() {
                Some(k) => evicted.push(k),
                None => break,
            }
        }
        let level = self.level(count);
        let id = self.slab.insert(Entry {
            key: acc.key,
            link: Link::DETACHED,
            size: acc.size,
            count,
            expire: acc.now.saturating_add(self.lifetime),
            queue: level,
        });
        self.queues[level as usize].push_front(self.slab.nodes(), id);
        self.used += size;
        self.resident += 1;
        let now = self.pending_adjust.take().unwrap_or(acc.now);
        self.adjust(now);
        true
    }

    ghost_policy_accessors!(|e| e.queue != QOUT);

    fn used(&self) -> u64 {
        self.used
    }

    fn metadata_bytes(&self) -> usize {
        self.slab.heap_bytes() + self.queues.capacity() * std::mem::size_of::<List>()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::run_evictions;
    use super::*;

    // Capacity 3, two queues, request i has now = i. With lifetime 2:
    //  n0 1 miss  Q0=[1] (count 1, expire 2)
    //  n1 1 hit   count 2 -> Q1=[1], expire 3
    //  n2 2 miss  Q0=[2];  n3 3 miss Q0=[3 2]
    //  n4 4 miss  evict Q0's LRU 2 (to Qout); Q0=[4 3]; adjust: Q1's LRU 1 expired (3 < 4)
    //             -> Q0=[1 4 3]
    //  n5 5 miss  evict 3;  n6 6 miss evict 4;  n7 7 miss evict 1 (it aged out of Q1)
    // With a long lifetime nothing expires: 1 stays in Q1 and n7 evicts 5 instead.
    const TRACE: [u64; 8] = [1, 1, 2, 3, 4, 5, 6, 7];

    #[test]
    fn expiry_demotes_to_the_lower_queue() {
        let mut p = Mq::new(3, 2, 2, 4, 16);
        let (h, ev) = run_evictions(&mut p, &TRACE);
        assert_eq!(h, [false, true, false, false, false, false, false, false]);
        assert_eq!(ev, [2, 3, 4, 1]);
    }

    #[test]
    fn without_expiry_frequent_entry_survives() {
        let mut p = Mq::new(3, 2, 1000, 4, 16);
        let (_, ev) = run_evictions(&mut p, &TRACE);
        assert_eq!(ev, [2, 3, 4, 5]);
        assert_eq!(p.state(1), Some((2, 1)));
    }

    #[test]
    fn qout_restores_count_plus_one() {
        // Capacity 1: 1 hit twice (count 3, Q1), 2 evicts it into Qout with count 3;
        // 1 misses and comes back with count 4 -> queue min(log2 4, 7) = 2.
        let mut p = Mq::new(1, 8, 10_000, 4, 16);
        let (h, ev) = run_evictions(&mut p, &[1, 1, 1, 2, 1]);
        assert_eq!(h, [false, true, true, false, false]);
        assert_eq!(ev, [1, 2]);
        assert_eq!(p.state(1), Some((4, 2)));
    }
}
