//! The cost-aware offline optimum for unit-size blocks with per-block miss costs (weighted
//! caching), solved exactly as a min-cost flow.
//!
//! # The problem as intervals
//!
//! Between two consecutive lookups of the same block, at `s` and `e`, the block is either kept
//! (the lookup at `e` hits, saving its miss cost `w`) or not. A demand-paged cache of `k`
//! blocks holds the block looked up at `t` at time `t`, so at most `k - 1` kept intervals may
//! *strictly* contain any `t` (`s < t < e`). An interval with `e = s + 1` contains no `t` and
//! is always kept. The optimum keeps the set of intervals of largest total weight that
//! respects the bound: a maximum-weight `(k - 1)`-colourable set of intervals, i.e. a min-cost
//! flow on a line (Carlisle and Lloyd 1995; the weighted-caching formulation of Chrobak et al.).
//!
//! # The network
//!
//! Nodes are the distinct interval end points `s + 1` and `e` in order, joined by a chain of
//! arcs of capacity `k - 1` and cost 0; each interval adds an arc `s + 1 -> e` of capacity 1
//! and cost `-w`. A flow of `k - 1` units from the first node to the last crosses every time
//! `t` once per unit: through the chain or through an interval containing `t`, so at most
//! `k - 1` intervals containing `t` carry flow. The min-cost flow of value `k - 1` is the
//! optimum; the intervals whose arcs carry flow are the kept ones.
//!
//! # The solver
//!
//! Successive shortest paths with potentials (Johnson's reweighting). Every arc of the network
//! points forward, so the first potentials are the shortest distances of the DAG, computed in
//! one pass in node order despite the negative costs. Each phase runs Dijkstra on reduced costs,
//! shifts the potentials by the distances, and then pushes a blocking flow (Dinic) through
//! the arcs of reduced cost 0, i.e. along every shortest path of that length at once, instead
//! of one unit per Dijkstra. The depth-first search is iterative (paths can be 10^5 arcs
//! long). Every loop is bounded: each phase raises the shortest distance or ends the flow,
//! and each blocking-flow search advances a current-arc pointer or saturates an arc.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One interval: kept, the lookup at `end` hits and saves `weight`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    pub start: u64,
    pub end: u64,
    pub weight: u32,
}

const INF: i64 = i64::MAX / 4;

struct Network {
    /// Arcs in pairs: arc `i` and its reverse `i ^ 1`.
    to: Vec<u32>,
    cap: Vec<u64>,
    cost: Vec<i64>,
    /// Compressed adjacency: the arcs leaving node `v` are `adj[first[v]..first[v + 1]]`.
    first: Vec<u32>,
    adj: Vec<u32>,
}

impl Network {
    fn nodes(&self) -> usize {
        self.first.len() - 1
    }

    fn arcs(&self, v: usize) -> &[u32] {
        &self.adj[self.first[v] as usize..self.first[v + 1] as usize]
    }

    fn reduced(&self, a: usize, from: usize, pot: &[i64]) -> i64 {
        self.cost[a] + pot[from] - pot[self.to[a] as usize]
    }
}

/// Which intervals the optimum keeps, for a cache of `capacity` blocks. Intervals must have
/// `end > start`; those with `end = start + 1` are always kept.
pub fn keep(intervals: &[Interval], capacity: u64) -> Vec<bool> {
    let mut kept: Vec<bool> = intervals.iter().map(|i| i.end == i.start + 1).collect();
    let slots = capacity.saturating_sub(1);
    let open: Vec<usize> = (0..intervals.len()).filter(|&i| !kept[i]).collect();
    if slots == 0 || open.is_empty() {
        return kept;
    }
    // Node coordinates: the points `s + 1` and `e`, sorted and deduplicated.
    let mut coords: Vec<u64> = open
        .iter()
        .flat_map(|&i| [intervals[i].start + 1, intervals[i].end])
        .collect();
    coords.sort_unstable();
    coords.dedup();
    let node = |x: u64| coords.binary_search(&x).expect("a coordinate") as u32;
    let n = coords.len();
    // Arc list: chain arcs, then one per open interval.
    let mut ends: Vec<(u32, u32, u64, i64)> = Vec::with_capacity(n + open.len());
    for v in 0..n - 1 {
        ends.push((v as u32, v as u32 + 1, slots, 0));
    }
    let chain = ends.len();
    for &i in &open {
        let iv = intervals[i];
        ends.push((node(iv.start + 1), node(iv.end), 1, -i64::from(iv.weight)));
    }
    let net = build(n, &ends);
    let flow = solve(net, slots);
    for (j, &i) in open.iter().enumerate() {
        // The interval's forward arc is `2 * (chain + j)`: saturated means kept.
        kept[i] = flow.cap[2 * (chain + j)] == 0;
    }
    kept
}

fn build(n: usize, ends: &[(u32, u32, u64, i64)]) -> Network {
    let m = ends.len() * 2;
    let mut to = Vec::with_capacity(m);
    let mut cap = Vec::with_capacity(m);
    let mut cost = Vec::with_capacity(m);
    let mut from = Vec::with_capacity(m);
    for &(u, v, c, w) in ends {
        to.extend([v, u]);
        cap.extend([c, 0]);
        cost.extend([w, -w]);
        from.extend([u, v]);
    }
    let mut first = vec![0u32; n + 1];
    for &u in &from {
        first[u as usize + 1] += 1;
    }
    for v in 0..n {
        first[v + 1] += first[v];
    }
    let mut fill = first.clone();
    let mut adj = vec![0u32; m];
    for (a, &u) in from.iter().enumerate() {
        adj[fill[u as usize] as usize] = a as u32;
        fill[u as usize] += 1;
    }
    Network {
        to,
        cap,
        cost,
        first,
        adj,
    }
}

/// Push `want` units from node 0 to the last node at least cost; returns the residual network.
fn solve(mut net: Network, want: u64) -> Network {
    let n = net.nodes();
    let (src, sink) = (0, n - 1);
    // First potentials: DAG shortest paths (every arc with capacity points forward).
    let mut pot = vec![INF; n];
    pot[src] = 0;
    for v in 0..n {
        if pot[v] == INF {
            continue;
        }
        for &a in net.arcs(v) {
            let a = a as usize;
            if net.cap[a] > 0 {
                let w = net.to[a] as usize;
                pot[w] = pot[w].min(pot[v] + net.cost[a]);
            }
        }
    }
    let mut dist = vec![INF; n];
    let mut on_path = vec![false; n];
    let mut cur = vec![0u32; n];
    let mut path: Vec<u32> = Vec::with_capacity(n);
    let mut heap: BinaryHeap<Reverse<(i64, u32)>> = BinaryHeap::with_capacity(n);
    let mut sent = 0u64;
    // Each phase raises the shortest path's cost or saturates the sink: at most `want` phases.
    while sent < want {
        dist.fill(INF);
        dist[src] = 0;
        heap.push(Reverse((0, src as u32)));
        while let Some(Reverse((d, v))) = heap.pop() {
            let v = v as usize;
            if d > dist[v] {
                continue;
            }
            if v == sink {
                // Farther nodes' potentials are capped at the sink's distance below, which
                // keeps every reduced cost non-negative; no need to settle them.
                heap.clear();
                break;
            }
            for &a in net.arcs(v) {
                let a = a as usize;
                if net.cap[a] == 0 {
                    continue;
                }
                let w = net.to[a] as usize;
                let nd = d + net.reduced(a, v, &pot);
                if nd < dist[w] {
                    dist[w] = nd;
                    heap.push(Reverse((nd, w as u32)));
                }
            }
        }
        if dist[sink] == INF {
            break;
        }

        let cap_d = dist[sink];
        for v in 0..n {
            pot[v] += dist[v].min(cap_d);
        }
        // Push along admissible arcs (residual, reduced cost 0): every such path is a
        // shortest one. Current arcs persist through the phase, so each unit's search resumes
        // where the last one left off.
        let before = sent;
        // Rounds of searches until one pushes nothing; each round restarts the current arcs,
        // so an arc skipped while its head was on the path is tried again (O(arcs) a round,
        // against a Dijkstra's O(arcs log nodes) for a new phase).
        loop {
            cur.copy_from_slice(&net.first[..n]);
            let round = sent;
            while sent < want {
                let pushed = augment(
                    &mut net,
                    &pot,
                    &mut on_path,
                    &mut cur,
                    &mut path,
                    want - sent,
                );
                if pushed == 0 {
                    break;
                }
                sent += pushed;
            }
            if sent == round || sent >= want {
                break;
            }
        }
        debug_assert!(sent > before, "a phase with a shortest path pushes flow");
        if sent == before {
            break;
        }
    }
    net
}

/// One augmenting path over admissible arcs by iterative DFS with current arcs; pushes its
/// bottleneck (at most `limit`) and returns it, 0 when the sink is cut off. An arc into a node
/// already on the path is skipped for good: every path through it has a cycle to cut, so no
/// simple path is lost to this search, and a later one that needs it (rare) is found by the
/// next phase, whose Dijkstra sees the same distance.
fn augment(
    net: &mut Network,
    pot: &[i64],
    on_path: &mut [bool],
    cur: &mut [u32],
    path: &mut Vec<u32>,
    limit: u64,
) -> u64 {
    let sink = net.nodes() - 1;
    path.clear();
    let mut v = 0usize;
    on_path[v] = true;
    loop {
        if v == sink {
            let push = path
                .iter()
                .map(|&a| net.cap[a as usize])
                .min()
                .unwrap_or(0)
                .min(limit);
            on_path[0] = false;
            for &a in path.iter() {
                net.cap[a as usize] -= push;
                net.cap[a as usize ^ 1] += push;
                on_path[net.to[a as usize] as usize] = false;
            }
            return push;
        }
        let end = net.first[v + 1];
        let mut advanced = false;
        while cur[v] < end {
            let a = net.adj[cur[v] as usize] as usize;
            let w = net.to[a] as usize;
            if net.cap[a] > 0 && !on_path[w] && net.reduced(a, v, pot) == 0 {
                path.push(a as u32);
                on_path[w] = true;
                v = w;
                advanced = true;
                break;
            }
            cur[v] += 1;
        }
        if !advanced {
            // Dead end: retreat one arc and skip it from its tail.
            on_path[v] = false;
            let Some(a) = path.pop() else {
                return 0;
            };
            let tail = net.to[a as usize ^ 1] as usize;
            cur[tail] += 1;
            v = tail;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Intervals of a key sequence with per-key costs.
    fn intervals(keys: &[u64], cost: impl Fn(u64) -> u32) -> Vec<Interval> {
        let mut last: HashMap<u64, u64> = HashMap::new();
        let mut out = Vec::new();
        for (t, &k) in keys.iter().enumerate() {
            if let Some(s) = last.insert(k, t as u64) {
                out.push(Interval {
                    start: s,
                    end: t as u64,
                    weight: cost(k),
                });
            }
        }
        out
    }

    /// Missed cost under the flow's choice: every lookup whose incoming interval is not kept.
    fn flow_cost(keys: &[u64], cap: u64, cost: &impl Fn(u64) -> u32) -> u64 {
        let iv = intervals(keys, cost);
        let kept = keep(&iv, cap);
        let total: u64 = keys.iter().map(|&k| u64::from(cost(k))).sum();
        let saved: u64 = iv
            .iter()
            .zip(&kept)
            .filter(|(_, &k)| k)
            .map(|(i, _)| u64::from(i.weight))
            .sum();
        total - saved
    }

    /// Exhaustive demand paging: every choice of victim at every miss.
    fn brute_force(keys: &[u64], cap: u64, cost: &impl Fn(u64) -> u32) -> u64 {
        let mut states: HashMap<u64, u64> = HashMap::from([(0u64, 0u64)]);
        for &k in keys {
            let bit = 1u64 << k;
            let mut next: HashMap<u64, u64> = HashMap::new();
            for (&s, &c) in &states {
                let mut put = |s: u64, c: u64| {
                    let e = next.entry(s).or_insert(u64::MAX);
                    *e = (*e).min(c);
                };
                if s & bit != 0 {
                    put(s, c);
                    continue;
                }
                let c = c + u64::from(cost(k));
                if u64::from(s.count_ones()) < cap {
                    put(s | bit, c);
                } else {
                    for v in 0..64 {
                        if s & (1 << v) != 0 {
                            put((s & !(1 << v)) | bit, c);
                        }
                    }
                }
            }
            states = next;
        }
        states.into_values().min().unwrap_or(0)
    }

    #[test]
    fn worked_example() {
        // Capacity 2 (one slot besides the block being looked up). Keys 0 (cost 3), 1, 2
        // (cost 1): 0 1 2 0 1 2. Intervals (0, 3, w 3), (1, 4, w 1), (2, 5, w 1) strictly
        // contain {1, 2}, {2, 3} and {3, 4}: the first and the last never overlap, the middle
        // one overlaps both. Keep the first and the last: saved 3 + 1 of the total 10.
        // (Demand paging: 2 evicts 1 at t2, 0 hits at t3, 1 evicts 0 at t4, 2 hits at t5.)
        let cost = |k: u64| if k == 0 { 3 } else { 1 };
        let keys = [0, 1, 2, 0, 1, 2];
        let iv = intervals(&keys, cost);
        assert_eq!(keep(&iv, 2), [true, false, true]);
        assert_eq!(flow_cost(&keys, 2, &cost), 6);
        assert_eq!(brute_force(&keys, 2, &cost), 6);
        // Capacity 3: two may overlap; t = 2 is inside (0, 3) and (1, 4), t = 3 inside
        // (1, 4) and (2, 5): all three fit. Only the three cold misses: 5.
        assert_eq!(keep(&iv, 3), [true, true, true]);
        assert_eq!(flow_cost(&keys, 3, &cost), 5);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// The flow's missed cost equals exhaustive search over every eviction choice.
        #[test]
        fn equals_brute_force(
            keys in prop::collection::vec(0u64..6, 1..14),
            costs in prop::collection::vec(1u32..6, 6),
            cap in 1u64..5,
        ) {
            let cost = |k: u64| costs[k as usize];
            prop_assert_eq!(flow_cost(&keys, cap, &cost), brute_force(&keys, cap, &cost));
        }
    }

    #[test]
    fn a_long_trace_solves_quickly() {
        // A skewed key stream over 20,000 keys, two costs. 10^5 lookups and a 1,000-block
        // cache take 2.9 s in a release build (docs/read-caches.md); debug builds run 2 x 10^4
        // lookups and 200 blocks.
        // A plain LCG keeps it deterministic.
        let (lookups, cap) = if cfg!(debug_assertions) {
            (20_000, 200)
        } else {
            (100_000, 1000)
        };
        let mut x: u64 = 12345;
        let keys: Vec<u64> = (0..lookups)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                (20_000f64.powf(u * u) as u64).min(19_999)
            })
            .collect();
        let cost = |k: u64| if k.is_multiple_of(5) { 4 } else { 1 };
        let iv = intervals(&keys, cost);
        let started = std::time::Instant::now();
        let kept = keep(&iv, cap);
        let took = started.elapsed();
        assert!(kept.iter().any(|&k| k) && kept.iter().any(|&k| !k));
        assert!(took.as_secs() < 60, "took {took:?}");
        eprintln!("min-cost flow, {lookups} lookups, {cap} blocks: {took:?}");
    }
}
