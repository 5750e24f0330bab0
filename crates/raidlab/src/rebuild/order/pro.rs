//! PRO: popularity-based reconstruction order (Tian, Feng, Jiang et al., FAST 2007), the
//! Access Monitor and Reconstruction Scheduler of the paper (section 3); the executor that
//! consumes its jobs is DOR (`rebuild/dor.rs`), as in the paper.
//!
//! # Hot zones (section 3.4)
//!
//! There are no zones when the rebuild starts. A user read of unit `M` of the failed disk
//! that lies in a zone adds one to that zone's popularity. Otherwise a zone is created at
//! `M` (while fewer than `zones_max` exist): `[M, M + L)`, cut short at the next zone's
//! start so zones never overlap. That is the paper's rule ("if M <= N and N - M <= L the
//! range is M to N", N the adjacent zone's start) applied to whichever zone lies above M, and
//! clipped at the end of the disk. Interpretations, each a choice the paper leaves open:
//! - the read that creates a zone counts towards its popularity (it is a read of the zone);
//! - no zone is created at a unit already handed out (it would have nothing to rebuild
//!   there), but reads of handed-out units inside an existing zone still count.
//!
//! # Scheduling (the RS loop of section 3.3)
//!
//! Each zone is a reconstruction thread. When the running thread's time slice (`slice_units`
//! consecutive units) is used up, or its zone has nothing left, the scheduler picks the zone
//! with the highest popularity (ties: the lowest start), gives it a new slice and resets
//! every popularity counter to zero (short-term popularity). The chosen thread hands out the
//! remaining units of its zone in ascending order. A zone with nothing left is reclaimed.
//! When no zone is hot (every counter zero), the slice goes to sequential order: the lowest
//! unit not yet handed out, as the original DOR would rebuild.

use crate::rebuild::map::UnitMap;

/// PRO's parameters (the paper's values by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProSpec {
    /// Maximum (and default) length of a hot zone, in units: L = 1024.
    pub zone_units: u64,
    /// Maximum number of hot zones (reconstruction threads): 128.
    pub zones_max: u32,
    /// Time slice, in consecutive units: 64.
    pub slice_units: u32,
    /// The paper's rule when no zone was read during the last slice: rebuild in sequential
    /// order (`true`). The ablation (`false`) keeps rebuilding zones instead: the running
    /// zone if it has units left, else the lowest zone that has; sequential order only when
    /// no zone has work.
    pub fallback_sequential: bool,
}

impl Default for ProSpec {
    fn default() -> Self {
        ProSpec {
            zone_units: 1024,
            zones_max: 128,
            slice_units: 64,
            fallback_sequential: true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Zone {
    start: u64,
    /// Exclusive.
    end: u64,
    popularity: u64,
    /// Every unit of the zone below it has been handed out.
    cursor: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Running {
    /// The zone starting at this unit (zones never overlap, so the start names it).
    Zone(u64),
    Sequential,
}

/// Counters of what the scheduler did, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProStats {
    pub zones_created: u64,
    pub decisions: u64,
    /// Decisions that went to a hot zone (the rest fell back to sequential order).
    pub hot_decisions: u64,
    /// Units handed out from hot zones.
    pub zone_units: u64,
}

#[derive(Debug, Clone)]
pub struct Pro {
    spec: ProSpec,
    pub(super) issued: UnitMap,
    /// Sorted by start, non-overlapping, at most `zones_max`.
    zones: Vec<Zone>,
    running: Running,
    slice_left: u32,
    /// Sequential fallback: every unit below it has been handed out.
    seq_cursor: u64,
    stats: ProStats,
}

impl Pro {
    pub fn new(units: u64, spec: ProSpec) -> Pro {
        debug_assert!(spec.zone_units >= 1 && spec.slice_units >= 1);
        Pro {
            spec,
            issued: UnitMap::new(units),
            zones: Vec::with_capacity(spec.zones_max as usize),
            running: Running::Sequential,
            slice_left: 0,
            seq_cursor: 0,
            stats: ProStats::default(),
        }
    }

    pub fn stats(&self) -> ProStats {
        self.stats
    }

    /// The Access Monitor: a user read reached `unit` of the failed disk.
    pub fn user_read(&mut self, unit: u64) {
        let units = self.issued.len();
        if unit >= units {
            return;
        }
        let i = self.zones.partition_point(|z| z.start <= unit);
        if i > 0 && self.zones[i - 1].end > unit {
            self.zones[i - 1].popularity += 1;
            return;
        }
        if self.issued.get(unit) || self.zones.len() >= self.spec.zones_max as usize {
            return;
        }
        let next_start = self.zones.get(i).map_or(units, |z| z.start);
        let end = unit
            .saturating_add(self.spec.zone_units)
            .min(next_start)
            .min(units);
        debug_assert!(end > unit);
        self.zones.insert(
            i,
            Zone {
                start: unit,
                end,
                popularity: 1,
                cursor: unit,
            },
        );
        self.stats.zones_created += 1;
        debug_assert!(self.zones.windows(2).all(|w| w[0].end <= w[1].start));
    }

    /// Whether zone `z` still has a unit to hand out; moves its cursor to that unit.
    fn refresh(issued: &UnitMap, z: &mut Zone) -> bool {
        match issued.next_clear(z.cursor) {
            Some(u) if u < z.end => {
                z.cursor = u;
                true
            }
            _ => {
                z.cursor = z.end;
                false
            }
        }
    }

    /// One scheduling decision: reclaim spent zones, give the slice to the most popular
    /// zone (or to sequential order when none is hot) and reset every counter.
    fn schedule(&mut self) {
        let issued = &self.issued;
        self.zones.retain_mut(|z| Self::refresh(issued, z));
        let mut best: Option<&Zone> = None;
        for z in &self.zones {
            if z.popularity > 0 && best.is_none_or(|b| z.popularity > b.popularity) {
                best = Some(z);
            }
        }
        let previous = match self.running {
            Running::Zone(start) if self.zones.iter().any(|z| z.start == start) => Some(start),
            _ => None,
        };
        self.running = match best {
            Some(z) => {
                self.stats.hot_decisions += 1;
                Running::Zone(z.start)
            }
            // Spent zones were reclaimed above, so every zone left has work.
            None if !self.spec.fallback_sequential => {
                match previous.or_else(|| self.zones.first().map(|z| z.start)) {
                    Some(start) => Running::Zone(start),
                    None => Running::Sequential,
                }
            }
            None => Running::Sequential,
        };
        for z in &mut self.zones {
            z.popularity = 0;
        }
        self.slice_left = self.spec.slice_units;
        self.stats.decisions += 1;
    }

    /// The Reconstruction Scheduler's next job.
    pub fn next_unit(&mut self) -> Option<u64> {
        // Each pass either hands out a unit, ends (nothing left) or reclaims the running
        // zone and decides again; a decision never picks a spent zone, so two passes do.
        for _ in 0..3 {
            if self.slice_left == 0 {
                self.schedule();
            }
            match self.running {
                Running::Sequential => {
                    let u = self.issued.next_clear(self.seq_cursor)?;
                    self.issued.set(u);
                    self.seq_cursor = u + 1;
                    self.slice_left -= 1;
                    return Some(u);
                }
                Running::Zone(start) => {
                    let i = self.zones.partition_point(|z| z.start < start);
                    debug_assert_eq!(self.zones.get(i).map(|z| z.start), Some(start));
                    let z = &mut self.zones[i];
                    if !Self::refresh(&self.issued, z) {
                        self.zones.remove(i);
                        self.slice_left = 0;
                        continue;
                    }
                    let u = z.cursor;
                    z.cursor += 1;
                    self.issued.set(u);
                    self.stats.zone_units += 1;
                    self.slice_left -= 1;
                    if !Self::refresh(&self.issued, &mut self.zones[i]) {
                        // The zone is rebuilt: reclaim its thread; the next job decides anew.
                        self.zones.remove(i);
                        self.slice_left = 0;
                    }
                    return Some(u);
                }
            }
        }
        unreachable!("a scheduling decision yields a unit within two passes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pro(units: u64, zone: u64, zones: u32, slice: u32) -> Pro {
        Pro::new(
            units,
            ProSpec {
                zone_units: zone,
                zones_max: zones,
                slice_units: slice,
                fallback_sequential: true,
            },
        )
    }

    /// The ablation: with no zone read in the last slice, the running zone goes on (and
    /// then the lowest zone with work) instead of sequential order.
    #[test]
    fn without_the_sequential_fallback_zones_go_on() {
        let mut p = pro(100, 8, 128, 4);
        p.spec.fallback_sequential = false;
        // No zone at all yet: sequential order even so.
        assert_eq!(take(&mut p, 4), vec![0, 1, 2, 3]);
        p.user_read(50); // [50, 58)
        p.user_read(20); // [20, 28)
        p.user_read(21); // [20, 28) is hottest
        assert_eq!(take(&mut p, 4), vec![20, 21, 22, 23]);
        // Nothing read since: the paper would go sequential (4, 5, 6, 7); the running zone
        // goes on instead, then, once it is spent, the lowest zone with work.
        assert_eq!(take(&mut p, 4), vec![24, 25, 26, 27]);
        assert_eq!(take(&mut p, 4), vec![50, 51, 52, 53]);
        assert_eq!(take(&mut p, 4), vec![54, 55, 56, 57]);
        assert_eq!(take(&mut p, 2), vec![4, 5]);
        assert!(spans(&p).is_empty());
    }

    fn spans(p: &Pro) -> Vec<(u64, u64, u64)> {
        p.zones
            .iter()
            .map(|z| (z.start, z.end, z.popularity))
            .collect()
    }

    fn take(p: &mut Pro, n: usize) -> Vec<u64> {
        (0..n).map(|_| p.next_unit().unwrap()).collect()
    }

    #[test]
    fn zones_follow_the_papers_creation_rule() {
        // L = 8 on a disk of 100 units.
        let mut p = pro(100, 8, 128, 4);
        p.user_read(50); // N = 50: [50, 58)
        p.user_read(45); // M = 45 <= N, N - M = 5 <= L: [M, N) = [45, 50)
        p.user_read(30); // N - M = 15 > L: [30, 38)
        p.user_read(52); // inside [50, 58)
        p.user_read(57); // inside [50, 58) (its last unit)
        p.user_read(58); // just past it: [58, 66)
        p.user_read(95); // clipped at the disk's end: [95, 100)
        p.user_read(100); // past the disk: ignored
        p.user_read(36); // inside [30, 38)
        p.user_read(38); // [38, 45): cut at the zone above
        assert_eq!(
            spans(&p),
            vec![
                (30, 38, 2),
                (38, 45, 1),
                (45, 50, 1),
                (50, 58, 3),
                (58, 66, 1),
                (95, 100, 1)
            ]
        );
        assert_eq!(p.stats().zones_created, 6);
    }

    #[test]
    fn at_most_zones_max_zones() {
        let mut p = pro(1000, 10, 2, 4);
        p.user_read(100);
        p.user_read(200);
        p.user_read(300); // a third zone is not created
        p.user_read(205);
        assert_eq!(spans(&p), vec![(100, 110, 1), (200, 210, 2)]);
    }

    #[test]
    fn hottest_zone_first_counters_reset_sequential_fallback() {
        // L = 8, slice 4, 100 units.
        let mut p = pro(100, 8, 128, 4);
        // Nothing hot yet: a slice of sequential order.
        assert_eq!(take(&mut p, 4), vec![0, 1, 2, 3]);
        p.user_read(50); // [50, 58) popularity 1
        p.user_read(20); // [20, 28) popularity 1
        p.user_read(21);
        p.user_read(22); // [20, 28) popularity 3
                         // Decision: [20, 28) is hottest; its slice hands out 4 consecutive units.
        assert_eq!(take(&mut p, 4), vec![20, 21, 22, 23]);
        // Counters were reset at that decision: [50, 58) is no longer hot, so with no new
        // reads the next slice is sequential again.
        assert_eq!(take(&mut p, 4), vec![4, 5, 6, 7]);
        p.user_read(51);
        assert_eq!(take(&mut p, 4), vec![50, 51, 52, 53]);
        p.user_read(27);
        p.user_read(56);
        p.user_read(57); // [50, 58): 2 beats [20, 28): 1
        assert_eq!(take(&mut p, 4), vec![54, 55, 56, 57]);
        // [50, 58) is spent and reclaimed; the counter of [20, 28) was reset by that
        // decision, so the next slice is sequential.
        assert_eq!(spans(&p), vec![(20, 28, 0)]);
        assert_eq!(take(&mut p, 4), vec![8, 9, 10, 11]);
        let st = p.stats();
        assert_eq!((st.decisions, st.hot_decisions, st.zone_units), (6, 3, 12));
    }

    #[test]
    fn a_spent_zone_ends_its_slice_early() {
        let mut p = pro(100, 3, 128, 4);
        p.user_read(10); // [10, 13)
        assert_eq!(take(&mut p, 3), vec![10, 11, 12]);
        // The zone was reclaimed after 3 of its 4 units: a new decision (sequential).
        assert_eq!(take(&mut p, 2), vec![0, 1]);
        assert!(spans(&p).is_empty());
    }

    #[test]
    fn sequential_order_skips_what_zones_rebuilt_and_zones_skip_the_rest() {
        let mut p = pro(12, 4, 128, 2);
        p.user_read(2); // [2, 6)
        assert_eq!(take(&mut p, 2), vec![2, 3]);
        assert_eq!(take(&mut p, 2), vec![0, 1]); // cold: sequential
                                                 // Read 1 (already rebuilt, outside every zone): no zone is created.
        p.user_read(1);
        assert_eq!(spans(&p), vec![(2, 6, 0)]);
        // A taken unit (piggybacked) is skipped by the zone.
        let mut o = crate::rebuild::order::Order::Pro(p);
        assert!(o.take(4));
        o.user_read(5);
        assert_eq!(o.next_unit(), Some(5));
        let rest: Vec<u64> = std::iter::from_fn(|| o.next_unit()).collect();
        assert_eq!(rest, vec![6, 7, 8, 9, 10, 11]);
        assert!(o.issued().is_full());
    }

    #[test]
    fn every_unit_exactly_once_under_random_reads() {
        use proptest::prelude::*;
        proptest!(ProptestConfig::with_cases(64), |(
            units in 1u64..400,
            zone in 1u64..40,
            zones in 1u32..6,
            slice in 1u32..9,
            reads in proptest::collection::vec((0u64..420, 0u8..4), 0..300),
        )| {
            let mut p = pro(units, zone, zones, slice);
            let mut seen = vec![false; units as usize];
            let mut reads = reads.into_iter();
            let mut got = 0u64;
            loop {
                for (u, n) in reads.by_ref().take(3) {
                    for _ in 0..n { p.user_read(u); }
                }
                let Some(u) = p.next_unit() else { break };
                prop_assert!(u < units && !seen[u as usize]);
                seen[u as usize] = true;
                got += 1;
                prop_assert!(p.zones.len() <= zones as usize);
                prop_assert!(p.zones.windows(2).all(|w| w[0].end <= w[1].start));
                prop_assert!(p.zones.iter().all(|z| z.end - z.start <= zone));
            }
            prop_assert_eq!(got, units);
        });
    }
}
