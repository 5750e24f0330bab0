//! Offline bounds: policies that know the future, for "how far from the best" lines.
//!
//! - `opt` ([`belady::Belady::opt`]): Belady's OPT, the fewest misses any demand-paged cache
//!   of unit-size blocks can have (equal to libCacheSim's `Belady`).
//! - `opt-cost` ([`mincost`]): the cost-aware optimum, the smallest total miss cost (disk
//!   blocks read from survivors, RGR's numerator) with per-block miss costs, solved exactly as
//!   a min-cost flow; block mode only, and a bounded number of lookups.
//! - `belady-cost` ([`belady::Belady::cost_aware`]): the cost-aware Belady heuristic, for any
//!   length.
//!
//! All three replay through the ordinary engine as [`ReadPolicy`]s, so every metric (hits,
//! per-disk reads, RGR) comes from the same loop as the online policies'. The future is
//! precomputed in one backward pass ([`next_uses`]): for each lookup `t`, the index of the
//! next lookup of the same block, or [`NEVER`] when there is none or a write invalidates the
//! block first (an invalidated block misses whatever the cache did). `opt-cost` runs the same
//! policy as `opt` over a future in which every interval the flow does not keep is cut
//! ([`cut_future`]): evicting farthest-next-use first then evicts exactly the blocks the
//! optimum drops (see `cut_future`).
//!
//! Costs come from the miss-cost oracle, which must not change during the run: counting mode
//! has a constant array mode; timed mode, where disks fail and rebuild mid-run, rejects these
//! policies (`read::build_in`).

pub mod belady;
pub mod mincost;

use std::collections::HashMap;

use crate::cache::read::MissCost;

pub use belady::NEVER;

/// One event of the block stream as the cache sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A lookup (one `Access::now` tick).
    Lookup(u64),
    /// A write that drops the block from the cache (`writes = "invalidate"`).
    Invalidate(u64),
}

/// Next use of every lookup, indexed by lookup number, in one backward pass.
pub fn next_uses(events: impl Iterator<Item = Event>) -> Box<[u64]> {
    let events: Vec<Event> = events.collect();
    let lookups = events
        .iter()
        .filter(|e| matches!(e, Event::Lookup(_)))
        .count();
    let mut next = vec![NEVER; lookups].into_boxed_slice();
    let mut seen: HashMap<u64, u64> = HashMap::new();
    let mut t = lookups as u64;
    for e in events.iter().rev() {
        match *e {
            Event::Lookup(k) => {
                t -= 1;
                next[t as usize] = seen.insert(k, t).unwrap_or(NEVER);
            }
            Event::Invalidate(k) => {
                seen.remove(&k);
            }
        }
    }
    next
}

/// The future `opt-cost` replays: `next` with every interval the min-cost flow does not keep
/// cut (its start's next use set to [`NEVER`]), for a cache of `capacity` unit-size blocks.
/// `keys[t]` is the block of lookup `t`, priced by `cost`.
///
/// Why OPT's rule then realises the optimum: at a miss at `t` the resident blocks with a
/// finite next use `e > t` are exactly the kept intervals containing `t`, at most
/// `capacity - 1` of them, so a full cache always holds a block with no (kept) next use and
/// farthest-first evicts one of those, never a kept one; every kept interval therefore hits.
pub fn cut_future(keys: &[u64], next: &[u64], capacity: u64, cost: &dyn MissCost) -> Box<[u64]> {
    let starts: Vec<usize> = (0..next.len()).filter(|&t| next[t] != NEVER).collect();
    let intervals: Vec<mincost::Interval> = starts
        .iter()
        .map(|&t| mincost::Interval {
            start: t as u64,
            end: next[t],
            weight: cost.cost_of(keys[t]),
        })
        .collect();
    let kept = mincost::keep(&intervals, capacity);
    let mut cut = next.to_vec().into_boxed_slice();
    for (&t, &k) in starts.iter().zip(&kept) {
        if !k {
            cut[t] = NEVER;
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::belady::Belady;
    use super::*;
    use crate::cache::read::testutil::run_costed;
    use crate::cache::read::vdf::tests::Raid5;
    use crate::cache::read::{build, PolicySpec, ReadPolicy};
    use proptest::prelude::*;

    #[test]
    fn next_uses_worked_example() {
        // Lookups 0:a 1:b 2:a, then b invalidated, 3:b 4:a.
        let ev = [
            Event::Lookup(10),
            Event::Lookup(11),
            Event::Lookup(10),
            Event::Invalidate(11),
            Event::Lookup(11),
            Event::Lookup(10),
        ];
        assert_eq!(&*next_uses(ev.into_iter()), [2, NEVER, 4, NEVER, NEVER]);
    }

    fn missed_cost(p: &mut dyn ReadPolicy, keys: &[u64], cost: &Raid5) -> (u64, u64) {
        let (h, _) = run_costed(p, keys, cost);
        let misses = h.iter().filter(|&&x| !x).count() as u64;
        let paid = keys
            .iter()
            .zip(&h)
            .filter(|(_, &x)| !x)
            .map(|(&k, _)| u64::from(cost.cost_of(k)))
            .sum();
        (misses, paid)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// OPT has the fewest misses and opt-cost the smallest missed cost of every policy
        /// (online ones and the heuristic), and replaying opt-cost's cut future costs exactly
        /// what the flow promised.
        #[test]
        fn bounds_bound_every_policy(
            keys in prop::collection::vec(0u64..24, 1..300),
            cap in 1u64..12,
            failed in prop::option::of(0u32..4),
        ) {
            let cost = Raid5 { disks: 4, failed };
            let events = keys.iter().map(|&k| Event::Lookup(k));
            let next = next_uses(events);
            let (opt_misses, _) = missed_cost(&mut Belady::opt(next.clone(), cap, 16), &keys, &cost);
            let cut = cut_future(&keys, &next, cap, &cost);
            let (_, opt_cost) = missed_cost(&mut Belady::opt(cut, cap, 16), &keys, &cost);
            let (_, heur) = missed_cost(&mut Belady::cost_aware(next, cap, 16), &keys, &cost);
            prop_assert!(opt_cost <= heur);
            for name in PolicySpec::NAMES.iter().filter(|n| !["xray"].contains(n)) {
                let spec = PolicySpec::from_name(name).expect("listed");
                let mut p = build(&spec, cap).expect("valid");
                let (m, c) = missed_cost(p.as_mut(), &keys, &cost);
                prop_assert!(opt_misses <= m, "{}: {} misses < OPT's {}", name, m, opt_misses);
                prop_assert!(opt_cost <= c, "{}: cost {} < optimum {}", name, c, opt_cost);
            }
        }
    }
}
