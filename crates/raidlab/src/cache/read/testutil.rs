//! Drivers shared by the policies' unit tests.

use super::{Access, MissCost, ReadPolicy, UniformCost};

/// One request through the get-then-insert protocol; returns whether it hit.
pub(crate) fn step(
    p: &mut dyn ReadPolicy,
    key: u64,
    size: u32,
    now: u64,
    cost: &dyn MissCost,
    evicted: &mut Vec<u64>,
) -> bool {
    let acc = Access {
        key,
        size,
        now,
        cost,
    };
    if p.get(&acc) {
        return true;
    }
    p.insert(&acc, evicted);
    false
}

/// Hit sequence of `(key, size)` requests.
pub(crate) fn hits(p: &mut dyn ReadPolicy, reqs: &[(u64, u32)]) -> Vec<bool> {
    let mut ev = Vec::new();
    reqs.iter()
        .enumerate()
        .map(|(i, &(k, s))| step(p, k, s, i as u64, &UniformCost, &mut ev))
        .collect()
}

/// Hit sequence and all evicted keys, in order, of unit-size requests.
pub(crate) fn run_evictions(p: &mut dyn ReadPolicy, keys: &[u64]) -> (Vec<bool>, Vec<u64>) {
    let mut ev = Vec::new();
    let h = keys
        .iter()
        .enumerate()
        .map(|(i, &k)| step(p, k, 1, i as u64, &UniformCost, &mut ev))
        .collect();
    (h, ev)
}
