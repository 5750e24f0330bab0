//! Property tests: the contract invariants of [`ReadPolicy`] for every policy on random
//! streams, and the cost-aware policies' "exactly the base policy while healthy" property
//! (VDF-LRU, VDF-LFU, VDF-CLOCK, VDF-SIEVE, VDF-ARC, VDF-S3FIFO, and GreedyDual, which is LRU at uniform cost).

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::vdf::tests::Raid5;
use super::{build_in, Access, MissCost, PolicySpec, ReadPolicy, Units};

#[derive(Clone, Debug)]
enum Op {
    /// Request `key` of `size`; `insert_on_miss` false models a caller that declines to cache.
    Req {
        key: u64,
        size: u32,
        insert_on_miss: bool,
    },
    Remove(u64),
}

fn ops(max_size: u32) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        12 => (0u64..48, 1..=max_size, prop::bool::weighted(0.9)).prop_map(|(key, size, ins)| {
            Op::Req { key, size, insert_on_miss: ins }
        }),
        1 => (0u64..48).prop_map(Op::Remove),
    ];
    prop::collection::vec(op, 1..400)
}

fn all_specs() -> Vec<PolicySpec> {
    let mut v: Vec<PolicySpec> = PolicySpec::NAMES
        .iter()
        .map(|n| PolicySpec::from_name(n).expect("listed name"))
        // X-RAY is not a block-stream policy (it needs the host's file-system traffic).
        .filter(|s| !matches!(s, PolicySpec::Xray { .. }) && !s.is_offline())
        .collect();
    // MQ with a short lifetime so that expiry paths run.
    v.push(PolicySpec::Mq {
        queues: 4,
        lifetime: 5,
        history_factor: 2,
    });
    v
}

/// Drive `p` through `ops`, checking every invariant after every call. `sizes` models the
/// size each key the caller holds was inserted with (a hit does not change it); `pending`,
/// the keys among them that W-TinyLFU evicted inside a hit and reports at the next insert
/// (or `remove`): the policy no longer counts them, the caller still does.
fn check_invariants(
    p: &mut dyn ReadPolicy,
    ops: &[Op],
    cost: &dyn MissCost,
) -> Result<(), TestCaseError> {
    let mut sizes: BTreeMap<u64, u32> = BTreeMap::new();
    let mut pending: BTreeMap<u64, u32> = BTreeMap::new();
    let mut evicted = Vec::new();
    for (now, op) in ops.iter().enumerate() {
        match *op {
            Op::Req {
                key,
                size,
                insert_on_miss,
            } => {
                let acc = Access {
                    key,
                    size,
                    now: now as u64,
                    cost,
                };
                let was = p.contains(key);
                let hit = p.get(&acc);
                prop_assert_eq!(was, hit, "{}: contains disagrees with get", p.name());
                for (&k, &s) in &sizes {
                    if !pending.contains_key(&k) && !p.contains(k) {
                        prop_assert!(hit, "{}: {} gone outside a hit or insert", p.name(), k);
                        prop_assert_eq!(p.name(), "wtinylfu", "only W-TinyLFU evicts in a hit");
                        pending.insert(k, s);
                    }
                }
                if !hit && insert_on_miss {
                    evicted.clear();
                    let ok = p.insert(&acc, &mut evicted);
                    prop_assert_eq!(ok, u64::from(size) <= p.capacity());
                    let mut seen = evicted.clone();
                    seen.sort_unstable();
                    seen.dedup();
                    prop_assert_eq!(seen.len(), evicted.len(), "a key evicted twice");
                    for k in &evicted {
                        // (A key evicted inside a hit comes back with this very insert.)
                        prop_assert!(
                            *k == key || !p.contains(*k),
                            "{}: evicted {} still there",
                            p.name(),
                            k
                        );
                        prop_assert!(sizes.remove(k).is_some(), "evicted a non-resident key");
                        pending.remove(k);
                    }
                    if ok {
                        prop_assert!(pending.is_empty(), "keys evicted in a hit, not reported");
                        prop_assert!(p.contains(key));
                        sizes.insert(key, size);
                    }
                }
            }
            Op::Remove(key) => {
                let was = p.contains(key) || pending.remove(&key).is_some();
                prop_assert_eq!(p.remove(key), was);
                prop_assert!(!p.contains(key));
                sizes.remove(&key);
            }
        }
        prop_assert!(p.used() <= p.capacity(), "{}: over capacity", p.name());
        prop_assert_eq!(p.len(), sizes.len() - pending.len(), "{}: len", p.name());
        let model_used: u64 = sizes
            .iter()
            .filter(|(k, _)| !pending.contains_key(k))
            .map(|(_, &s)| u64::from(s))
            .sum();
        prop_assert_eq!(p.used(), model_used, "{}: used", p.name());
        for k in 0..48 {
            prop_assert_eq!(
                p.contains(k),
                sizes.contains_key(&k) && !pending.contains_key(&k),
                "{}: key {}",
                p.name(),
                k
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn invariants_block_mode(ops in ops(1), cap in 1u64..40, failed in prop::option::of(0u32..4)) {
        let cost = Raid5 { disks: 4, failed };
        for spec in all_specs() {
            let mut p = build_in(&spec, cap, Units::Blocks).expect("valid spec");
            check_invariants(p.as_mut(), &ops, &cost)?;
        }
    }

    #[test]
    fn invariants_object_mode(ops in ops(64), cap in 1u64..400, failed in prop::option::of(0u32..4)) {
        let cost = Raid5 { disks: 4, failed };
        for spec in all_specs() {
            let mut p = build_in(&spec, cap, Units::Bytes).expect("valid spec");
            check_invariants(p.as_mut(), &ops, &cost)?;
        }
    }

    #[test]
    fn healthy_cost_aware_is_the_plain_policy(ops in ops(8), cap in 1u64..60, disks in 1u32..9) {
        let cost = Raid5 { disks, failed: None };
        for (vdf, plain) in [
            (PolicySpec::VdfLru, PolicySpec::Lru),
            (PolicySpec::VdfLfu, PolicySpec::Lfu),
            (PolicySpec::VdfClock, PolicySpec::Clock),
            (PolicySpec::VdfSieve, PolicySpec::Sieve),
            (PolicySpec::VdfArc, PolicySpec::Arc),
            (
                PolicySpec::from_name("vdf-s3fifo").expect("listed"),
                PolicySpec::from_name("s3fifo").expect("listed"),
            ),
            (PolicySpec::GreedyDual, PolicySpec::Lru),
        ] {
            let mut a = build_in(&vdf, cap, Units::Bytes).expect("valid");
            let mut b = build_in(&plain, cap, Units::Bytes).expect("valid");
            let (mut ea, mut eb) = (Vec::new(), Vec::new());
            for (now, op) in ops.iter().enumerate() {
                match *op {
                    Op::Req { key, size, insert_on_miss } => {
                        let acc = Access { key, size, now: now as u64, cost: &cost };
                        let (ha, hb) = (a.get(&acc), b.get(&acc));
                        prop_assert_eq!(ha, hb);
                        if !ha && insert_on_miss {
                            ea.clear();
                            eb.clear();
                            a.insert(&acc, &mut ea);
                            b.insert(&acc, &mut eb);
                            prop_assert_eq!(&ea, &eb);
                        }
                    }
                    Op::Remove(key) => prop_assert_eq!(a.remove(key), b.remove(key)),
                }
            }
        }
    }

    /// `evict_one` takes exactly the entry the next insert would have evicted, and leaves the
    /// others in the order that insert would have: two copies, one made to evict by
    /// `evict_one` and then given a new key, the other by inserting that key into a full
    /// cache, stay identical on the rest of the stream.
    #[test]
    fn evict_one_is_the_next_inserts_victim(
        before in ops(1), after in ops(1), cap in 1u64..30, failed in prop::option::of(0u32..4)
    ) {
        let cost = Raid5 { disks: 4, failed };
        for name in PolicySpec::EVICTS_ONE {
            let spec = PolicySpec::from_name(name).expect("listed name");
            let mut a = build_in(&spec, cap, Units::Blocks).expect("valid spec");
            let mut b = build_in(&spec, cap, Units::Blocks).expect("valid spec");
            let mut ev = Vec::new();
            let mut now = 0u64;
            let step = |p: &mut dyn ReadPolicy, op: &Op, now: u64, ev: &mut Vec<u64>| -> bool {
                match *op {
                    Op::Req { key, size, insert_on_miss } => {
                        let acc = Access { key, size, now, cost: &cost };
                        let hit = p.get(&acc);
                        if !hit && insert_on_miss {
                            ev.clear();
                            p.insert(&acc, ev);
                        }
                        hit
                    }
                    Op::Remove(key) => p.remove(key),
                }
            };
            for op in &before {
                step(a.as_mut(), op, now, &mut ev);
                step(b.as_mut(), op, now, &mut ev);
                now += 1;
            }
            // Fill both to capacity with fresh keys, so that the next insert must evict.
            let mut fresh = 1000u64;
            while b.used() < cap {
                let op = Op::Req { key: fresh, size: 1, insert_on_miss: true };
                step(a.as_mut(), &op, now, &mut ev);
                step(b.as_mut(), &op, now, &mut ev);
                fresh += 1;
                now += 1;
            }
            let mut ea = Vec::new();
            prop_assert!(a.evict_one(&mut ea), "{}: nothing evicted from a full cache", name);
            let acc = Access { key: fresh, size: 1, now, cost: &cost };
            prop_assert!(!a.get(&acc) && !b.get(&acc));
            let mut ea2 = Vec::new();
            a.insert(&acc, &mut ea2);
            prop_assert!(ea2.is_empty(), "{}: evict_one left no room", name);
            let mut eb = Vec::new();
            b.insert(&acc, &mut eb);
            prop_assert_eq!(&ea, &eb, "{}: evict_one and insert chose different victims", name);
            now += 1;
            for op in &after {
                let (ha, hb) = (step(a.as_mut(), op, now, &mut ev), step(b.as_mut(), op, now, &mut ev));
                prop_assert_eq!(ha, hb, "{}: diverged after evict_one", name);
                now += 1;
            }
        }
    }
}
