//! A generator calibrated to the published characteristics of the UMass WebSearch traces
//! (a web search engine's storage, SPC format), whose originals could not be obtained.
//!
//! # What is matched
//!
//! * **Direction**: 99.98% reads. A request is a write when a 64-bit draw falls below
//!   `u64::MAX / 5000`, i.e. with probability 0.0002.
//! * **Concentration**: about 70% of requests fall on 20% of the address space. The space is
//!   cut into 32 KiB chunks (the largest request size); chunk popularity is Zipf(alpha) over
//!   the chunks, and alpha is solved numerically at construction so that the hottest
//!   `round(0.2 * chunks)` chunks carry exactly 70% of the probability. Ranks are scattered
//!   over the chunks by a seeded bijection, so the hot 20% is spread over the whole space.
//!   For 2^15 chunks (1 GiB) alpha comes out near 0.8.
//! * **Sizes**: 8, 16 and 32 KiB, the sizes the published description lists, mixed as in
//!   the WebSearch sample shipped with the project (`websearch/wsrch-small.mqsim.txt`, 24,783
//!   requests of the same trace): 14,890 requests of 8 KiB, 3,034 of 16 KiB, 4,909 of 32 KiB.
//!   Only these three sizes are kept, with weights 14890 : 3034 : 4909 (65.21% / 13.29% /
//!   21.50%). The sample also holds 1,924 requests of 24 KiB (7.8%), 24 of 512 B and two of
//!   about 1.1 MB; they fall outside the published size set and are left out.
//! * **Arrivals**: exponential inter-arrival times with the given mean (3.7 ms for
//!   WebSearch1/2, 5.7 ms for WebSearch3), rounded to whole nanoseconds.
//! * **Alignment**: every request starts at a multiple of its own size, at a uniformly drawn
//!   aligned slot inside its chunk.
//! * **Spatial locality** (optional, `cluster_kib`): by default every chunk is placed on its
//!   own, so the hot 20% is spread evenly at 32 KiB grain. With clusters of `k` chunks,
//!   ranks `c k .. (c + 1) k` stay adjacent and the clusters are scattered instead, so the
//!   hottest 20% of *areas* of that size also carry 70% of requests. The WebSearch sample
//!   (`websearch/wsrch-small.mqsim.txt`) has this shape at about 16 MiB: its hottest 20% of
//!   16 MiB areas receive 74% of its requests (65% at 64 MiB, 98% at 1 MiB), which a
//!   scatter of single chunks cannot give (about 20% at any grain above a chunk).
//!
//! # What is assumed
//!
//! Zipf is the assumed shape of popularity (the published figure is one point of it, 70/20);
//! chunk popularity does not change over time (no phases, no sequential runs); sizes,
//! directions and addresses are independent of each other; the rare writes follow the same
//! address distribution as reads. 32 KiB chunks, rather than 8 KiB extents rounded down to
//! each request's alignment, keep the calibrated concentration exact: rounding a hot 8 KiB
//! extent down to a 32 KiB boundary would move requests onto neighbouring cold extents.
//! Nothing here is tuned to any cache result.

use rand_chacha::rand_core::RngCore;
use rand_chacha::ChaCha8Rng;

use super::{bad, below, rng, PoissonClock, Scatter, ZipfSampler};
use crate::error::Result;
use crate::workload::{Addressing, Op, Request, RequestSource};

/// Bytes of one chunk, the unit of popularity.
pub const CHUNK_BYTES: u64 = 32 * 1024;
/// Share of the address space that is hot.
pub const HOT_SPACE: f64 = 0.2;
/// Share of requests that the hot space receives.
pub const HOT_REQUESTS: f64 = 0.7;
/// Request sizes and their weights, measured on the WebSearch sample (see the module doc).
pub const SIZE_MIX: [(u64, u64); 3] = [(8192, 14_890), (16_384, 3_034), (32_768, 4_909)];
/// A draw below this is a write: 1/5000 = 0.02% of requests.
const WRITE_BELOW: u64 = u64::MAX / 5000;
/// Fewest chunks for which "20% of the space" means something.
const MIN_CHUNKS: u64 = 10;

/// A request's direction and size as the WebSearch sample has them: a write with probability
/// 1/5000, then a size drawn from [`SIZE_MIX`] (two draws from `rng`, in that order).
#[inline]
pub(crate) fn op_and_size(rng: &mut ChaCha8Rng) -> (Op, u64) {
    let op = if rng.next_u64() < WRITE_BELOW {
        Op::Write
    } else {
        Op::Read
    };
    let total: u64 = SIZE_MIX.iter().map(|&(_, w)| w).sum();
    let mut pick = below(rng, total);
    for &(size, weight) in &SIZE_MIX {
        if pick < weight {
            return (op, size);
        }
        pick -= weight;
    }
    unreachable!("a draw below the weights' total falls on one of them")
}

/// The WebSearch-like generator.
pub struct WebSearch {
    sampler: ZipfSampler,
    scatter: Scatter,
    /// Chunks per popularity cluster (1: every chunk scattered on its own).
    cluster_chunks: u64,
    seed: u64,
    alpha: f64,
    rng: ChaCha8Rng,
    clock: PoissonClock,
    left: u64,
}

impl WebSearch {
    pub fn new(
        space_bytes: u64,
        requests: u64,
        mean_interarrival_ns: u64,
        seed: u64,
    ) -> Result<WebSearch> {
        let chunks = space_bytes / CHUNK_BYTES;
        if chunks < MIN_CHUNKS {
            return Err(bad(
                "space_bytes",
                format!(
                    "expected at least {} bytes ({MIN_CHUNKS} chunks of 32 KiB), got {space_bytes}",
                    MIN_CHUNKS * CHUNK_BYTES
                ),
            ));
        }
        let alpha = solve_alpha(chunks);
        Ok(WebSearch {
            sampler: ZipfSampler::new(chunks, alpha)?,
            scatter: Scatter::new(chunks, seed),
            cluster_chunks: 1,
            seed,
            alpha,
            rng: rng(seed, 3),
            clock: PoissonClock::new(mean_interarrival_ns as f64),
            left: requests,
        })
    }

    /// Keep ranks together in clusters of `cluster_bytes` (a multiple of 32 KiB, at most the
    /// space); the clusters are scattered over the space by the same seeded bijection.
    pub fn with_cluster(mut self, cluster_bytes: u64) -> Result<WebSearch> {
        let chunks = self.sampler.n();
        let k = cluster_bytes / CHUNK_BYTES;
        if !cluster_bytes.is_multiple_of(CHUNK_BYTES) || k == 0 || k > chunks {
            return Err(bad(
                "cluster_kib",
                format!(
                    "expected a multiple of 32 KiB no larger than the space, got {} KiB",
                    cluster_bytes >> 10
                ),
            ));
        }
        if k > 1 {
            self.cluster_chunks = k;
            self.scatter = Scatter::new(chunks / k, self.seed);
        }
        Ok(self)
    }

    /// The chunk of popularity rank `r` (0 = hottest).
    #[inline]
    fn place(&self, r: u64) -> u64 {
        let k = self.cluster_chunks;
        if k == 1 {
            return self.scatter.apply(r);
        }
        let clusters = self.sampler.n() / k;
        if r >= clusters * k {
            // The coldest ranks that fill no whole cluster keep the space's tail.
            return r;
        }
        self.scatter.apply(r / k) * k + r % k
    }

    /// The Zipf exponent solved for this address space.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Number of 32 KiB chunks.
    pub fn chunks(&self) -> u64 {
        self.sampler.n()
    }
}

/// Number of hot chunks among `chunks`.
pub fn hot_chunks(chunks: u64) -> u64 {
    ((chunks as f64 * HOT_SPACE).round() as u64).clamp(1, chunks)
}

/// Terms of [`harmonic`] summed exactly; the rest is approximated.
const HARMONIC_EXACT: u64 = 1000;

/// `sum_{k=1..n} k^-alpha`: exact for the first thousand terms, then the midpoint-rule
/// integral of `x^-alpha` with its first Euler-Maclaurin correction, whose error past a
/// thousand terms is far below what the bisection resolves.
pub fn harmonic(n: u64, alpha: f64) -> f64 {
    harmonic_tail(harmonic_head(0.0, 0, n, alpha), n, alpha)
}

/// The exact part of [`harmonic`]: `sum` plus the terms `from + 1 ..= min(n, 1000)`. From
/// `(0.0, 0)` it is the first `min(n, 1000)` terms; from a shorter head it continues that
/// head with the same additions in the same order, so it gives the same value.
fn harmonic_head(mut sum: f64, from: u64, n: u64, alpha: f64) -> f64 {
    for k in from + 1..=n.min(HARMONIC_EXACT) {
        sum += libm::pow(k as f64, -alpha);
    }
    sum
}

/// [`harmonic`] from its exact part `sum` (`harmonic_head(0.0, 0, n, alpha)`).
fn harmonic_tail(mut sum: f64, n: u64, alpha: f64) -> f64 {
    let head = n.min(HARMONIC_EXACT);
    if n > head {
        let (a, b) = (head as f64 + 0.5, n as f64 + 0.5);
        let one_minus = 1.0 - alpha;
        sum += if one_minus.abs() < 1e-12 {
            libm::log(b / a)
        } else {
            (libm::pow(b, one_minus) - libm::pow(a, one_minus)) / one_minus
        };
        // - (f'(b) - f'(a)) / 24 with f'(x) = -alpha x^(-alpha-1).
        sum += alpha * (libm::pow(b, -alpha - 1.0) - libm::pow(a, -alpha - 1.0)) / 24.0;
    }
    sum
}

/// Share of Zipf(alpha) probability on the hottest `hot_chunks(chunks)` of `chunks`.
pub fn hot_share(chunks: u64, alpha: f64) -> f64 {
    let hot = hot_chunks(chunks);
    // hot <= chunks: the sum over all chunks continues the hot chunks' exact terms.
    let head_hot = harmonic_head(0.0, 0, hot, alpha);
    let head_all = harmonic_head(head_hot, hot.min(HARMONIC_EXACT), chunks, alpha);
    harmonic_tail(head_hot, hot, alpha) / harmonic_tail(head_all, chunks, alpha)
}

/// The alpha at which the hot 20% of chunks gets 70% of requests, by bisection (the share
/// grows with alpha: 0.2 at alpha = 0, towards 1 as alpha grows).
pub fn solve_alpha(chunks: u64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 8.0f64);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if hot_share(chunks, mid) < HOT_REQUESTS {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

impl RequestSource for WebSearch {
    fn next_request(&mut self) -> Result<Option<Request>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        // The first request arrives at 0 (times are relative to the first record everywhere).
        let time_ns = self.clock.next(&mut self.rng);
        let (op, len) = op_and_size(&mut self.rng);
        let rank = self.sampler.sample(&mut self.rng) - 1;
        let chunk = self.place(rank);
        let slot = below(&mut self.rng, CHUNK_BYTES / len);
        // chunk < space_bytes / CHUNK_BYTES, so this stays below space_bytes.
        let offset = chunk * CHUNK_BYTES + slot * len;
        debug_assert_eq!(offset % len, 0);
        Ok(Some(Request {
            time_ns,
            op,
            offset,
            len,
        }))
    }

    fn addressing(&self) -> Addressing {
        Addressing::Bytes
    }

    fn label(&self) -> &str {
        "websearch"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_share_is_the_ratio_of_the_two_sums_bit_for_bit() {
        for chunks in [
            10u64,
            999,
            1000,
            1001,
            4_000,
            5_000,
            6_000,
            1 << 15,
            1 << 30,
        ] {
            for alpha in [0.0, 0.3, 0.8, 1.0, 1.7] {
                let plain = harmonic(hot_chunks(chunks), alpha) / harmonic(chunks, alpha);
                assert_eq!(
                    hot_share(chunks, alpha).to_bits(),
                    plain.to_bits(),
                    "{chunks}"
                );
            }
        }
    }

    #[test]
    fn alpha_meets_the_70_20_target() {
        for chunks in [10u64, 2_000, 1 << 15, 1 << 30] {
            let a = solve_alpha(chunks);
            assert!((hot_share(chunks, a) - 0.7).abs() < 1e-9, "{chunks}: {a}");
        }
        // The tail approximation agrees with the exact sum.
        let exact: f64 = (1..=50_000u64).map(|k| (k as f64).powf(-0.8)).sum();
        assert!((harmonic(50_000, 0.8) / exact - 1.0).abs() < 1e-9);
    }

    #[test]
    fn matches_the_published_characteristics() {
        let space = 2_000 * CHUNK_BYTES;
        let n = 400_000u64;
        let mut g = WebSearch::new(space, n, 3_700_000, 11).unwrap();
        let mut per_chunk = vec![0u64; 2_000];
        let (mut reads, mut sizes, mut last_time) = (0u64, [0u64; 3], 0u64);
        while let Some(r) = g.next_request().unwrap() {
            assert!(r.offset + r.len <= space && r.offset % r.len == 0);
            assert!(r.time_ns >= last_time);
            last_time = r.time_ns;
            reads += u64::from(r.op == Op::Read);
            sizes[SIZE_MIX.iter().position(|&(s, _)| s == r.len).unwrap()] += 1;
            per_chunk[(r.offset / CHUNK_BYTES) as usize] += 1;
        }
        let read_share = reads as f64 / n as f64;
        assert!((0.9995..=1.0).contains(&read_share), "{read_share}");
        per_chunk.sort_unstable_by(|a, b| b.cmp(a));
        let hot: u64 = per_chunk[..400].iter().sum();
        let share = hot as f64 / n as f64;
        assert!((0.68..0.73).contains(&share), "hot share {share}");
        for (i, &(_, w)) in SIZE_MIX.iter().enumerate() {
            let want = w as f64 / 22_833.0;
            let got = sizes[i] as f64 / n as f64;
            assert!((got - want).abs() < 0.005, "size {i}: {got} vs {want}");
        }
        let mean = last_time as f64 / (n - 1) as f64;
        assert!((mean / 3.7e6 - 1.0).abs() < 0.01, "mean gap {mean}");
    }

    #[test]
    fn clusters_give_areas_the_70_20_shape_and_keep_the_chunk_shape() {
        // 4,000 chunks in clusters of 20: 200 areas of 640 KiB.
        let space = 4_000 * CHUNK_BYTES;
        let n = 100_000u64;
        let mut g = WebSearch::new(space, n, 1, 5)
            .unwrap()
            .with_cluster(20 * CHUNK_BYTES)
            .unwrap();
        let (mut per_chunk, mut per_area) = (vec![0u64; 4_000], vec![0u64; 200]);
        while let Some(r) = g.next_request().unwrap() {
            assert!(r.offset + r.len <= space);
            per_chunk[(r.offset / CHUNK_BYTES) as usize] += 1;
            per_area[(r.offset / CHUNK_BYTES / 20) as usize] += 1;
        }
        for (counts, top) in [(&mut per_chunk, 800), (&mut per_area, 40)] {
            counts.sort_unstable_by(|a, b| b.cmp(a));
            let share = counts[..top].iter().sum::<u64>() as f64 / n as f64;
            assert!((0.68..0.73).contains(&share), "hot share {share}");
        }
        // Without clusters areas are far less concentrated (a few top chunks still stand out).
        let mut g = WebSearch::new(space, n, 1, 5).unwrap();
        let mut per_area = vec![0u64; 200];
        while let Some(r) = g.next_request().unwrap() {
            per_area[(r.offset / CHUNK_BYTES / 20) as usize] += 1;
        }
        per_area.sort_unstable_by(|a, b| b.cmp(a));
        let share = per_area[..40].iter().sum::<u64>() as f64 / n as f64;
        assert!(share < 0.55, "{share}");
        // One-chunk clusters change nothing; bad sizes are config errors.
        let a: Vec<_> = std::iter::from_fn({
            let mut g = WebSearch::new(space, 50, 1, 5).unwrap();
            move || g.next_request().unwrap()
        })
        .collect();
        let b: Vec<_> = std::iter::from_fn({
            let mut g = WebSearch::new(space, 50, 1, 5)
                .unwrap()
                .with_cluster(CHUNK_BYTES)
                .unwrap();
            move || g.next_request().unwrap()
        })
        .collect();
        assert_eq!(a, b);
        for bad in [1000, 0, space + CHUNK_BYTES] {
            let e = WebSearch::new(space, 1, 1, 1).unwrap().with_cluster(bad);
            assert_eq!(e.err().unwrap().kind(), "config");
        }
    }

    #[test]
    fn too_small_a_space_is_a_config_error() {
        let e = WebSearch::new(9 * CHUNK_BYTES, 1, 1, 1).err().unwrap();
        assert_eq!(e.kind(), "config");
    }
}
