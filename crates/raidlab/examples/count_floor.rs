//! How close any LRU can come to the bare read rate: `cargo run --release --example
//! count_floor -- TRACE.oracleGeneral CAPACITY_BLOCKS [CAPACITY_BLOCKS ...]`.
//!
//! Reads the trace as counting mode's fast path reads it, three ways, best of 5 each, in
//! this process (no Python start-up in any of them):
//! - `read`: decode the keys and nothing else (`oracle::read_all`);
//! - `probe`: plus one load and test of a bit per request in a dense bitmap of the key space
//!   (a fixed set, never updated: the least a cache can do is ask whether it holds the key);
//! - `dense-lru`: plus an LRU of the given capacity written for this measurement only, as
//!   lean as it can be: keys index a dense array (no hashing, no chains: valid only because
//!   the key space is known and small), the list is three `u32` arrays, no metrics but the
//!   miss count.
//!
//! A general simulator must hash 64-bit keys and keep its metrics, so `dense-lru` is a floor
//! for raidlab's LRU, not a design for it; its misses are printed to check it against
//! `raidlab run` at the same capacity.

use raidlab::workload::oracle;
use std::path::Path;
use std::time::Instant;

const NONE: u32 = u32::MAX;

/// An LRU over keys below `slot_of.len()`; the list is circular with a sentinel at index
/// `cap` (the most recent block is `next[cap]`, the least `prev[cap]`).
struct DenseLru {
    slot_of: Vec<u32>,
    key: Vec<u32>,
    prev: Vec<u32>,
    next: Vec<u32>,
    len: u32,
    cap: u32,
    misses: u64,
}

impl DenseLru {
    fn new(keys: usize, cap: u32) -> Self {
        assert!(cap > 0 && (cap as usize) < keys.min(NONE as usize));
        let n = cap as usize + 1;
        DenseLru {
            slot_of: vec![NONE; keys],
            key: vec![0; n],
            prev: vec![cap; n],
            next: vec![cap; n],
            len: 0,
            cap,
            misses: 0,
        }
    }

    #[inline(always)]
    fn unlink(&mut self, s: u32) {
        let (p, n) = (self.prev[s as usize], self.next[s as usize]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
    }

    #[inline(always)]
    fn push_front(&mut self, s: u32) {
        let h = self.next[self.cap as usize];
        self.prev[s as usize] = self.cap;
        self.next[s as usize] = h;
        self.prev[h as usize] = s;
        self.next[self.cap as usize] = s;
    }

    #[inline(always)]
    fn access(&mut self, k: u32) {
        let s = self.slot_of[k as usize];
        if s != NONE {
            self.unlink(s);
            self.push_front(s);
            return;
        }
        self.misses += 1;
        let s = if self.len < self.cap {
            self.len += 1;
            self.len - 1
        } else {
            let v = self.prev[self.cap as usize];
            self.unlink(v);
            self.slot_of[self.key[v as usize] as usize] = NONE;
            v
        };
        self.key[s as usize] = k;
        self.slot_of[k as usize] = s;
        self.push_front(s);
    }
}

/// Calls `f` with each batch of keys the fast path decodes; returns the records read.
fn each_batch(path: &Path, mut f: impl FnMut(&[u64])) -> u64 {
    let mut reader = oracle::open_batched(path).unwrap_or_else(|e| die(&e.to_string()));
    let (mut keys, mut sizes) = ([0u64; 64], [0u32; 64]);
    let mut records = 0u64;
    // Bounded by the trace: every pass reads at least one record or ends the loop.
    loop {
        let n = reader
            .next_keys(&mut keys, &mut sizes)
            .unwrap_or_else(|e| die(&e.to_string()));
        if n == 0 {
            return records;
        }
        records += n as u64;
        f(&keys[..n]);
    }
}

fn die(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(2);
}

/// The least wall time of 5 runs of `f`, and what the last run returned.
fn best_of_5<T>(mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..5 {
        let start = Instant::now();
        let v = f();
        best = best.min(start.elapsed().as_secs_f64());
        out = Some(v);
    }
    (best, out.expect("five runs"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        die("usage: count_floor TRACE.oracleGeneral CAPACITY_BLOCKS [CAPACITY_BLOCKS ...]");
    }
    let path = Path::new(&args[0]);
    let caps: Vec<u32> = args[1..]
        .iter()
        .map(|a| {
            a.parse()
                .unwrap_or_else(|_| die(&format!("not a capacity: {a}")))
        })
        .collect();
    let mut key_max = 0u64;
    let records = each_batch(path, |ks| {
        key_max = ks.iter().fold(key_max, |m, &k| m.max(k))
    });
    if key_max >= 1 << 30 {
        die("keys above 2^30: this floor needs a small dense key space");
    }
    let keys = key_max as usize + 1;

    let (read_s, (n, sum)) = best_of_5(|| oracle::read_all(path).unwrap());
    assert_eq!(n, records);
    let rate = |s: f64| records as f64 / s;
    println!("{records} records, keys below {keys}, key checksum {sum}");
    println!("case              capacity        s          req/s   vs read       misses");
    println!(
        "read                      -  {read_s:7.3}  {:13.0}      1.00            -",
        rate(read_s)
    );
    for &cap in &caps {
        // A fixed set of `cap` keys (those below `cap`), one bit each.
        let mut bits = vec![0u64; keys.div_ceil(64)];
        (0..(cap as usize).min(keys)).for_each(|k| bits[k / 64] |= 1 << (k % 64));
        let (probe_s, held) = best_of_5(|| {
            let mut held = 0u64;
            each_batch(path, |ks| {
                for &k in ks {
                    held += (bits[(k / 64) as usize] >> (k % 64)) & 1;
                }
            });
            held
        });
        println!(
            "probe      {cap:>14}  {probe_s:7.3}  {:13.0}  {:8.2}  {:>11}",
            rate(probe_s),
            read_s / probe_s,
            records - held
        );
        let (lru_s, misses) = best_of_5(|| {
            let mut lru = DenseLru::new(keys, cap);
            each_batch(path, |ks| ks.iter().for_each(|&k| lru.access(k as u32)));
            lru.misses
        });
        println!(
            "dense-lru  {cap:>14}  {lru_s:7.3}  {:13.0}  {:8.2}  {misses:>11}",
            rate(lru_s),
            read_s / lru_s
        );
    }
}
