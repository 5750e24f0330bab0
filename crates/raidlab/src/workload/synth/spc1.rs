//! An SPC-1-like generator (the workload of the STOW paper), after the public SPC-1
//! specification as summarised in `ALGORITHM-NOTES.md`.
//!
//! # Layout
//!
//! The backend (`space_bytes`, divided by 100 for the "partial backend") is cut into three
//! application storage units laid out as the STOW paper did: ASU-3 (log, 10%) at the start of
//! the address space (the outer rim of every disk), then ASU-1 (data store, 45%), then ASU-2
//! (user store, 45%). Addresses are 4 KiB pages.
//!
//! # Streams
//!
//! Each request picks one of eight streams by its share of all I/O, then a direction by the
//! stream's read fraction:
//!
//! | stream | share | reads | pattern |
//! | --- | --- | --- | --- |
//! | ASU1-1 | 0.035 | 0.5 | uniform over ASU-1, 4 KiB |
//! | ASU1-2 | 0.281 | 0.5 | hierarchical reuse in ASU-1's 15%-20% |
//! | ASU1-3 | 0.070 | 1.0 | sequential, start 40% +/- 20%, run 10% of ASU-1 |
//! | ASU1-4 | 0.210 | 0.5 | hierarchical reuse in ASU-1's 70%-75% |
//! | ASU2-1 | 0.018 | 0.3 | uniform over ASU-2, 4 KiB |
//! | ASU2-2 | 0.070 | 0.3 | hierarchical reuse in ASU-2's 47%-52% |
//! | ASU2-3 | 0.035 | 1.0 | sequential, start 40% +/- 20%, run 10% of ASU-2 |
//! | ASU3-1 | 0.281 | 0.0 | sequential, start 35% +/- 35%, run 30% of ASU-3 |
//!
//! (shares sum to 1.0; about 39% reads.) Sequential requests are 4, 8, 16, 32 or 64 KiB with
//! probabilities 0.40, 0.24, 0.20, 0.08, 0.08 and follow each other; when a stream's run is
//! used up it restarts at a new uniform start in its range.
//!
//! *Unsure* (parameters explicit below): the hot spots are read as address ranges of the ASU
//! ("15-20%" = from 15% to 20% of it); the hierarchical-reuse walk keeps the stream's last
//! 32 KiB leaf of a binary tree over the hot spot, climbs one level with probability 0.44 (again
//! and again while the draw succeeds), then picks a uniform leaf under the node reached and a
//! uniform 4 KiB page in it.
//!
//! # Business scaling units
//!
//! SPC-1 offers load in business scaling units (BSUs): one BSU is the eight streams above at
//! 50 IOPS in all, each stream issuing its share of those 50 (SPC-1 Official Specification,
//! Storage Performance Council, clause 2 "Workload": "BSU ... 50 I/O requests per second",
//! and the eight streams' intensity multipliers 0.035, 0.281, 0.070, 0.210, 0.018, 0.070,
//! 0.035, 0.281; the open-source SPC-1 generator of Daniel and Faith, IISWC 2005, has
//! `IOPS_PER_BSU = 50` and tags each I/O with its BSU and stream). A load of `L` IOPS is
//! therefore `B = ceil(L / 50)` BSUs, `8 x B` streams: e.g. 750 IOPS = 15 BSUs, 15
//! independent log writers in ASU-3 and 15 reuse walks in each hot spot. Each BSU's streams
//! keep their own state (sequential position and run, reuse leaf); the regions are shared.
//! A request picks a stream class by its share, then one of the `B` BSUs uniformly, which is
//! the superposition of the `8 x B` Poisson streams exactly.
//!
//! `bsu_iops` (default 50) sets the IOPS per BSU; `bsu_iops = 0` keeps one set of streams at
//! every load (this generator's behaviour before the scaling; the same requests bit for bit).
//! The ramp driver tells the generator each level's load
//! ([`RequestSource::set_load`](crate::workload::RequestSource::set_load)); otherwise the
//! load is `iops` (also for the closed loop, whose throughput is not known in advance). BSUs
//! are created the first time a load needs them (their state drawn then, so a run is a pure
//! function of its seed and its loads) and sit idle, state kept, when the load drops.
//!
//! Arrivals are Poisson at `iops` (the ramp driver replaces the times with its own).

use rand_chacha::ChaCha8Rng;

use super::{bad, below, rng, unit_f64, PoissonClock};
use crate::error::Result;
use crate::workload::{Addressing, Op, Request, RequestSource};

/// Bytes of one page, SPC-1's unit of transfer.
pub const PAGE_BYTES: u64 = 4096;
/// Pages of one leaf of the hierarchical-reuse tree (32 KiB).
pub const LEAF_PAGES: u64 = 8;
/// Probability of climbing one more level of the reuse tree.
pub const CLIMB: f64 = 0.44;
/// ASU shares of the backend, in layout order (ASU-3, ASU-1, ASU-2).
pub const ASU_SHARES: [f64; 3] = [0.10, 0.45, 0.45];
/// Sequential request sizes in pages and their probabilities.
pub const SEQ_SIZES: [(u64, f64); 5] = [(1, 0.40), (2, 0.24), (4, 0.20), (8, 0.08), (16, 0.08)];
/// The partial backend's fraction of the full one.
pub const PARTIAL: f64 = 0.01;
/// IOPS of one business scaling unit (SPC-1).
pub const BSU_IOPS: f64 = 50.0;
/// Most BSUs a load may need (the open-source generator's 16-bit BSU field).
pub const BSUS_MAX: usize = 1 << 16;

#[derive(Debug, Clone, Copy)]
enum Pattern {
    Uniform,
    /// Hot spot `[lo, hi)` as fractions of the ASU.
    Reuse {
        lo: f64,
        hi: f64,
    },
    /// Run starts uniform in `[lo, hi]`, runs last `len` (fractions of the ASU).
    Seq {
        lo: f64,
        hi: f64,
        len: f64,
    },
}

/// (ASU index into `ASU_SHARES` layout order, share of I/O, read fraction, pattern).
const STREAMS: [(usize, f64, f64, Pattern); 8] = [
    (1, 0.035, 0.5, Pattern::Uniform),
    (1, 0.281, 0.5, Pattern::Reuse { lo: 0.15, hi: 0.20 }),
    (
        1,
        0.070,
        1.0,
        Pattern::Seq {
            lo: 0.20,
            hi: 0.60,
            len: 0.10,
        },
    ),
    (1, 0.210, 0.5, Pattern::Reuse { lo: 0.70, hi: 0.75 }),
    (2, 0.018, 0.3, Pattern::Uniform),
    (2, 0.070, 0.3, Pattern::Reuse { lo: 0.47, hi: 0.52 }),
    (
        2,
        0.035,
        1.0,
        Pattern::Seq {
            lo: 0.20,
            hi: 0.60,
            len: 0.10,
        },
    ),
    (
        0,
        0.281,
        0.0,
        Pattern::Seq {
            lo: 0.0,
            hi: 0.70,
            len: 0.30,
        },
    ),
];

/// One of the eight stream classes, in pages; `kind` is the state a new BSU's stream starts
/// from (its reuse leaf is drawn when the BSU is created).
#[derive(Debug, Clone, Copy)]
struct Stream {
    /// First page and pages of the region the stream addresses (ASU, hot spot or run range).
    base: u64,
    pages: u64,
    read: f64,
    kind: Kind,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Uniform,
    /// Leaves in the hot spot, tree height, current leaf.
    Reuse {
        leaves: u64,
        height: u32,
        leaf: u64,
    },
    /// Starts uniform in `base..base + span`; `run` pages per run; `pos` next page, `left`
    /// pages left in the current run.
    Seq {
        span: u64,
        run: u64,
        pos: u64,
        left: u64,
    },
}

/// The SPC-1-like generator.
pub struct Spc1 {
    rng: ChaCha8Rng,
    arrivals: ChaCha8Rng,
    streams: [Stream; 8],
    /// Per BSU, the state of each of its eight streams (`8 x b + i`); grown on demand.
    state: Vec<Kind>,
    /// IOPS per BSU; 0 = one BSU at every load.
    bsu_iops: f64,
    /// BSUs the current load uses (`<= state.len() / 8`).
    active: usize,
    /// Cumulative stream shares.
    cum: [f64; 8],
    clock: PoissonClock,
    left: u64,
}

/// BSUs that offer `iops` at `bsu_iops` each (one when the scaling is off).
pub fn bsus_for(iops: f64, bsu_iops: f64) -> usize {
    if bsu_iops <= 0.0 {
        return 1;
    }
    // A hair below an exact multiple still counts as that multiple (750 / 50 = 15, not 16).
    let b = libm::ceil(iops / bsu_iops - 1e-9);
    if b >= BSUS_MAX as f64 {
        BSUS_MAX + 1
    } else {
        (b as usize).max(1)
    }
}

impl Spc1 {
    /// `space_bytes` is the full backend; `partial` uses 1/100 of it; one BSU per `bsu_iops`
    /// of load (0: one BSU at every load).
    pub fn new(
        space_bytes: u64,
        partial: bool,
        iops: f64,
        bsu_iops: f64,
        requests: u64,
        seed: u64,
    ) -> Result<Spc1> {
        let space = if partial {
            (space_bytes as f64 * PARTIAL) as u64
        } else {
            space_bytes
        };
        let pages = space / PAGE_BYTES;
        // The smallest region is a 5% hot spot of a 45% ASU: it needs a few leaves.
        if pages < 4096 {
            return Err(bad(
                "space_gib",
                format!(
                    "the backend holds {pages} pages of 4 KiB; SPC-1's layout needs at least 4096{}",
                    if partial { " (after the partial backend's 1/100)" } else { "" }
                ),
            ));
        }
        let mut asu = [(0u64, 0u64); 3];
        let mut at = 0;
        for (i, share) in ASU_SHARES.iter().enumerate() {
            let n = (pages as f64 * share) as u64;
            asu[i] = (at, n);
            at += n;
        }
        let r = rng(seed, 0);
        let mut streams = [Stream {
            base: 0,
            pages: 0,
            read: 0.0,
            kind: Kind::Uniform,
        }; 8];
        let mut cum = [0.0; 8];
        let mut acc = 0.0;
        for (i, &(a, share, read, pattern)) in STREAMS.iter().enumerate() {
            let (base, n) = asu[a];
            let frac = |f: f64| (n as f64 * f) as u64;
            streams[i] = match pattern {
                Pattern::Uniform => Stream {
                    base,
                    pages: n,
                    read,
                    kind: Kind::Uniform,
                },
                Pattern::Reuse { lo, hi } => {
                    let leaves = ((frac(hi) - frac(lo)) / LEAF_PAGES).max(1);
                    Stream {
                        base: base + frac(lo),
                        pages: leaves * LEAF_PAGES,
                        read,
                        kind: Kind::Reuse {
                            leaves,
                            height: 64 - (leaves - 1).leading_zeros(),
                            leaf: 0,
                        },
                    }
                }
                Pattern::Seq { lo, hi, len } => Stream {
                    base: base + frac(lo),
                    pages: frac(hi) - frac(lo),
                    read,
                    kind: Kind::Seq {
                        span: (frac(hi) - frac(lo)).max(1),
                        run: frac(len).max(1),
                        pos: 0,
                        left: 0,
                    },
                },
            };
            acc += share;
            cum[i] = acc;
        }
        let mut g = Spc1 {
            rng: r,
            arrivals: rng(seed, 1),
            streams,
            state: Vec::new(),
            bsu_iops,
            active: 0,
            cum,
            clock: PoissonClock::new(1e9 / iops),
            left: requests,
        };
        g.load(iops)?;
        Ok(g)
    }

    /// Use the BSUs that load `iops` needs, creating those never used before.
    fn load(&mut self, iops: f64) -> Result<()> {
        let b = bsus_for(iops, self.bsu_iops);
        if b > BSUS_MAX {
            return Err(bad(
                "bsu_iops",
                format!(
                    "a load of {iops} IOPS at {} IOPS per BSU needs more than {BSUS_MAX} BSUs",
                    self.bsu_iops
                ),
            ));
        }
        while self.state.len() < 8 * b {
            let mut kind = self.streams[self.state.len() % 8].kind;
            if let Kind::Reuse { leaves, leaf, .. } = &mut kind {
                *leaf = below(&mut self.rng, *leaves);
            }
            self.state.push(kind);
        }
        self.active = b;
        Ok(())
    }

    /// BSUs in use at the current load.
    pub fn bsus(&self) -> usize {
        self.active
    }

    /// The next (op, first page, pages) of stream `i` of BSU `b`.
    fn draw(&mut self, i: usize, b: usize) -> (Op, u64, u64) {
        let r = &mut self.rng;
        let s = &self.streams[i];
        let op = if unit_f64(r) < s.read {
            Op::Read
        } else {
            Op::Write
        };
        match &mut self.state[8 * b + i] {
            Kind::Uniform => (op, s.base + below(r, s.pages), 1),
            Kind::Reuse {
                leaves,
                height,
                leaf,
            } => {
                let mut h = 0;
                while h < *height && unit_f64(r) < CLIMB {
                    h += 1;
                }
                let start = (*leaf >> h) << h;
                let width = (1u64 << h).min(*leaves - start);
                *leaf = start + below(r, width);
                (op, s.base + *leaf * LEAF_PAGES + below(r, LEAF_PAGES), 1)
            }
            Kind::Seq {
                span,
                run,
                pos,
                left,
            } => {
                let u = unit_f64(r);
                let mut size = SEQ_SIZES[SEQ_SIZES.len() - 1].0;
                let mut c = 0.0;
                for &(n, p) in &SEQ_SIZES {
                    c += p;
                    if u < c {
                        size = n;
                        break;
                    }
                }
                if *left < size {
                    *pos = s.base + below(r, *span);
                    *left = *run;
                }
                let first = *pos;
                *pos += size;
                *left -= size;
                (op, first, size)
            }
        }
    }
}

impl RequestSource for Spc1 {
    fn next_request(&mut self) -> Result<Option<Request>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let time_ns = self.clock.next(&mut self.arrivals);
        let u = unit_f64(&mut self.rng);
        let i = self.cum.iter().position(|&c| u < c).unwrap_or(7);
        // No draw for a single BSU: `bsu_iops = 0` replays the unscaled stream exactly.
        let b = if self.active > 1 {
            below(&mut self.rng, self.active as u64) as usize
        } else {
            0
        };
        let (op, page, pages) = self.draw(i, b);
        Ok(Some(Request {
            time_ns,
            op,
            offset: page * PAGE_BYTES,
            len: pages * PAGE_BYTES,
        }))
    }

    fn addressing(&self) -> Addressing {
        Addressing::Bytes
    }

    fn label(&self) -> &str {
        "spc1"
    }

    fn set_load(&mut self, iops: f64) -> Result<()> {
        self.load(iops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(partial: bool, n: u64) -> Vec<Request> {
        gen_at(partial, n, 1000.0, 0.0)
    }

    fn gen_at(partial: bool, n: u64, iops: f64, bsu_iops: f64) -> Vec<Request> {
        let mut g = Spc1::new(100 << 30, partial, iops, bsu_iops, n, 7).unwrap();
        std::iter::from_fn(|| g.next_request().unwrap()).collect()
    }

    #[test]
    fn mix_matches_the_specification() {
        let reqs = gen(false, 200_000);
        let n = reqs.len() as f64;
        let reads = reqs.iter().filter(|r| r.op == Op::Read).count() as f64 / n;
        // 0.5 x (0.035 + 0.281 + 0.21) + 0.07 + 0.3 x (0.018 + 0.07) + 0.035 = 0.3944.
        assert!((reads - 0.3944).abs() < 0.005, "{reads}");
        // ASU-3 (the first 10% of the space) takes the log stream's 28.1%, all writes.
        let asu3_end = (100u64 << 30) / 10;
        let log = reqs
            .iter()
            .filter(|r| r.offset < asu3_end)
            .collect::<Vec<_>>();
        let share = log.len() as f64 / n;
        assert!((share - 0.281).abs() < 0.005, "{share}");
        assert!(log.iter().all(|r| r.op == Op::Write));
        // Mean sequential size: 4 x (0.4 + 2 x 0.24 + 4 x 0.2 + 8 x 0.08 + 16 x 0.08) KiB.
        let mean = log.iter().map(|r| r.len as f64).sum::<f64>() / log.len() as f64;
        assert!((mean / 4096.0 - 3.6).abs() < 0.1, "{mean}");
        // Every request stays in the backend.
        assert!(reqs.iter().all(|r| r.offset + r.len <= 100 << 30));
    }

    #[test]
    fn partial_backend_is_one_hundredth() {
        let reqs = gen(true, 50_000);
        let end = (100u64 << 30) / 100;
        assert!(reqs.iter().all(|r| r.offset + r.len <= end));
        assert!(reqs.iter().any(|r| r.offset > end / 2));
    }

    #[test]
    fn sequential_log_writes_follow_each_other() {
        let reqs = gen(false, 20_000);
        let asu3_end = (100u64 << 30) / 10;
        let log: Vec<_> = reqs.iter().filter(|r| r.offset < asu3_end).collect();
        let follow = log
            .windows(2)
            .filter(|w| w[0].offset + w[0].len == w[1].offset)
            .count();
        // A run is 30% of ASU-3 (~800K pages): restarts are rare.
        assert!(follow as f64 > 0.99 * (log.len() - 1) as f64);
    }

    #[test]
    fn reuse_walk_stays_in_its_hot_spot_and_reuses_leaves() {
        let reqs = gen(false, 100_000);
        let pages = (100u64 << 30) / PAGE_BYTES;
        let asu1 = (pages as f64 * 0.10) as u64;
        let n1 = (pages as f64 * 0.45) as u64;
        let lo = (asu1 + (n1 as f64 * 0.15) as u64) * PAGE_BYTES;
        let hi = (asu1 + (n1 as f64 * 0.20) as u64) * PAGE_BYTES;
        let hot: Vec<_> = reqs
            .iter()
            .filter(|r| r.offset >= lo && r.offset < hi)
            .collect();
        let share = hot.len() as f64 / reqs.len() as f64;
        assert!((share - 0.281).abs() < 0.01, "{share}");
        // Temporal locality: far fewer distinct leaves than requests.
        let leaves: std::collections::BTreeSet<u64> = hot
            .iter()
            .map(|r| r.offset / (LEAF_PAGES * PAGE_BYTES))
            .collect();
        assert!(
            leaves.len() * 2 < hot.len(),
            "{} of {}",
            leaves.len(),
            hot.len()
        );
    }

    #[test]
    fn same_seed_same_stream() {
        assert_eq!(gen(false, 1000), gen(false, 1000));
        let mut g = Spc1::new(100 << 30, false, 1000.0, 0.0, 1000, 8).unwrap();
        let other: Vec<_> = std::iter::from_fn(|| g.next_request().unwrap()).collect();
        assert_ne!(gen(false, 1000), other);
    }

    #[test]
    fn too_small_a_backend_is_an_error() {
        assert!(Spc1::new(1 << 20, false, 1000.0, 50.0, 10, 1).is_err());
    }

    #[test]
    fn one_bsu_per_50_iops() {
        // SPC-1: B = load / 50 BSUs of eight streams each.
        assert_eq!(bsus_for(50.0, BSU_IOPS), 1);
        assert_eq!(bsus_for(750.0, BSU_IOPS), 15);
        assert_eq!(bsus_for(1200.0, BSU_IOPS), 24);
        assert_eq!(bsus_for(760.0, BSU_IOPS), 16);
        assert_eq!(bsus_for(10.0, BSU_IOPS), 1);
        assert_eq!(bsus_for(5000.0, 0.0), 1);
        let mut g = Spc1::new(100 << 30, false, 750.0, BSU_IOPS, 10, 1).unwrap();
        assert_eq!((g.bsus(), g.state.len()), (15, 120));
        // A ramp level of 2000 IOPS: 40 BSUs; back at 100 IOPS the first 2 are used and the
        // other 38 keep their state.
        g.set_load(2000.0).unwrap();
        assert_eq!((g.bsus(), g.state.len()), (40, 320));
        g.set_load(100.0).unwrap();
        assert_eq!((g.bsus(), g.state.len()), (2, 320));
        // Beyond 2^16 BSUs: an error naming the key.
        let err = g.set_load(50.0 * 70_000.0).unwrap_err();
        assert!(
            err.to_string().contains("workload.synthetic.bsu_iops"),
            "{err}"
        );
    }

    /// Starts of the log stream's runs: requests in ASU-3 that do not follow the previous
    /// log request of any run in progress.
    fn log_heads(reqs: &[Request]) -> (usize, usize) {
        let asu3_end = (100u64 << 30) / 10;
        let mut ends = std::collections::BTreeSet::new();
        let (mut follow, mut all) = (0, 0);
        for r in reqs.iter().filter(|r| r.offset < asu3_end) {
            all += 1;
            if ends.remove(&r.offset) {
                follow += 1;
            }
            ends.insert(r.offset + r.len);
        }
        (follow, all)
    }

    #[test]
    fn each_bsu_has_its_own_sequential_position() {
        // 750 IOPS = 15 BSUs: 15 log writers, each continuing its own run. Consecutive log
        // requests rarely follow each other (1 in 15), but nearly every one continues one of
        // the runs in progress.
        let reqs = gen_at(false, 60_000, 750.0, BSU_IOPS);
        let asu3_end = (100u64 << 30) / 10;
        let log: Vec<_> = reqs.iter().filter(|r| r.offset < asu3_end).collect();
        let adjacent = log
            .windows(2)
            .filter(|w| w[0].offset + w[0].len == w[1].offset)
            .count() as f64
            / (log.len() - 1) as f64;
        assert!(adjacent < 0.15, "{adjacent}");
        let (follow, all) = log_heads(&reqs);
        // Each of the 15 runs starts once (a run is ~800K pages: no restarts here).
        assert_eq!(all - follow, 15);
        // The stream shares do not depend on the BSU count.
        let share = all as f64 / reqs.len() as f64;
        assert!((share - 0.281).abs() < 0.006, "{share}");
        let reads = reqs.iter().filter(|r| r.op == Op::Read).count() as f64 / reqs.len() as f64;
        assert!((reads - 0.3944).abs() < 0.006, "{reads}");
        // One set of streams (bsu_iops = 0): one run, every log request follows the last.
        let (follow, all) = log_heads(&gen_at(false, 60_000, 750.0, 0.0));
        assert_eq!(all - follow, 1);
    }

    #[test]
    fn one_bsu_is_the_unscaled_stream() {
        // At 50 IOPS the spec's scaling uses one BSU: the same requests (times aside) as one
        // set of streams at any load.
        let strip = |v: Vec<Request>| -> Vec<(Op, u64, u64)> {
            v.into_iter().map(|r| (r.op, r.offset, r.len)).collect()
        };
        assert_eq!(
            strip(gen_at(false, 5000, 50.0, BSU_IOPS)),
            strip(gen_at(false, 5000, 1000.0, 0.0))
        );
    }
}
