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

/// Hit sequence and evicted keys of unit-size requests priced by `cost`.
pub(crate) fn run_costed(
    p: &mut dyn ReadPolicy,
    keys: &[u64],
    cost: &dyn MissCost,
) -> (Vec<bool>, Vec<u64>) {
    let mut ev = Vec::new();
    let h = keys
        .iter()
        .enumerate()
        .map(|(i, &k)| step(p, k, 1, i as u64, cost, &mut ev))
        .collect();
    (h, ev)
}

/// A 6-disk left-symmetric RAID-6 with one-block stripe units and disks `failed` failed: the
/// array's own miss-cost oracle (a block of a failed disk costs n - 2 = 4).
pub(crate) fn raid6(failed: &[u32]) -> crate::array::Array {
    use crate::array::{Array, ArraySpec, Layout, Level};
    Array::new(&ArraySpec {
        level: Level::Raid6,
        disks: 6,
        stripe_unit_bytes: 4096,
        layout: Layout::LeftSymmetric,
        failed: failed.to_vec(),
        block_size: 4096,
    })
    .expect("valid array")
}

#[test]
fn raid6_two_failed_costs() {
    // The oracle the RAID-6 worked examples use: blocks 0..3 sit on disks 1..4, 4..7 on
    // disks 0..3, 8..11 on disks 5, 0, 1, 2. Those on disks 0 and 1 cost n - 2 = 4.
    let a = raid6(&[0, 1]);
    let disks: Vec<u32> = (0..12).map(|k| a.disk_of(k)).collect();
    assert_eq!(disks, [1, 2, 3, 4, 0, 1, 2, 3, 5, 0, 1, 2]);
    let costs: Vec<u32> = (0..12).map(|k| a.cost_of(k)).collect();
    assert_eq!(costs, [4, 1, 1, 1, 4, 4, 1, 1, 1, 4, 4, 1]);
}
