//! A web-search-like workload with temporal locality: a working set of hot areas that
//! drifts over the address space, short-lived hot spots hopping inside it, and arrivals whose
//! rate switches between a busy and a lull level. Built for the PRO reproduction
//! (`experiments/pro-locality.toml`): its parameters come from the WebSearch sample
//! (`websearch/wsrch-small.mqsim.txt`) and the published WebSearch characteristics, and were
//! fixed before any rebuild was run on it. `docs/reproductions.md` gives the measurements.
//!
//! # The model
//!
//! The space is cut into `N` areas of `area_bytes` (16 MiB: the grain at which the WebSearch
//! sample's popularity shows, as in `websearch.rs`); a tail smaller than an area is unused.
//!
//! * **Working set**: `M = round(set_fraction * N)` distinct areas, drawn uniformly. Each
//!   member stays for an exponential time of mean `set_life_s`, then its slot takes a new
//!   area drawn uniformly among the areas outside the set (so the set keeps `M` members and a
//!   replaced member really moves). Since every member has the same rate, the changes form
//!   one Poisson stream of rate `M / set_life_s`, each replacing a uniformly drawn slot.
//! * **Hot spots**: `K = max(1, round(spot_fraction * N))` spots, each on a slot of the
//!   working set (uniformly drawn; two spots may share one). A spot stays for an exponential
//!   time of mean `spot_life_s`, then jumps to a uniformly drawn slot; again one Poisson
//!   stream of rate `K / spot_life_s`, each moving a uniformly drawn spot.
//! * **A request** goes with probability `spot_share` to a uniformly drawn spot's area,
//!   otherwise to a uniformly drawn member of the working set. Inside its area it starts at
//!   a uniformly drawn multiple of its own size.
//! * **Arrivals**: a two-state Markov-modulated Poisson process. In the busy state requests
//!   arrive `rate_ratio` times as fast as in the lull; the busy state holds a share
//!   `high_share` of the time, with exponential stays of mean `high_s` (lulls: mean
//!   `high_s * (1 - high_share) / high_share`). The two rates are solved so that the mean
//!   inter-arrival time is `mean_interarrival_ns`. The first request arrives at 0.
//! * **Sizes and directions**: the WebSearch generator's (`websearch::op_and_size`): 8, 16
//!   or 32 KiB with the sample's weights, writes with probability 1/5000 (99.98% reads).
//!
//! The process starts in its stationary state (members and spots uniform, the arrival state
//! drawn with probability `high_share`, exponential residual times), so no warm-up is needed.
//!
//! # Where the default values come from ([`HotspotsSpec::websearch`])
//!
//! Fixed before any rebuild ran on this generator; the fits are in `hotspots_fit.rs`.
//!
//! * Locality (`set_fraction` 0.27, `spot_fraction` 0.025, `spot_share` 0.8,
//!   `spot_life_s` 2.5): fitted on the WebSearch sample one device at a time (devices 0 and
//!   1: 8,340 and 8,231 requests over 60 s, spans of 1,068 and 1,058 areas), by simulating
//!   this generator under the same conditions (20 seeds) and matching the same estimator
//!   (`locality.rs`, 5 s windows) on a grid: areas touched per window (sample 0.110 of the
//!   areas, model 0.141), share of a window's requests on the areas touched 1, 2, 4 and 8
//!   windows earlier (sample 0.673, 0.556, 0.531, 0.503; model 0.673, 0.549, 0.522, 0.523)
//!   and areas touched over the 60 s (sample 0.283, model 0.272). The static WebSearch
//!   generator sampled the same way touches 0.298 of the areas per window and 0.936 in
//!   60 s, and keeps the second statistic flat at 0.68; the sample's falls within 10 s and
//!   then holds: spots that hop within seconds inside a set that holds for minutes.
//! * `set_life_s` 4,000: 60 s cannot show it. Solved so that, over WebSearch1's length
//!   (842,535 requests at 3.74 ms: 52.5 min, a third of them on one device), the hottest 20%
//!   of areas receive 70% of requests, as the PRO paper's Table 2 reports (model: 69.9%).
//!   WebSearch2 and 3 (62 and 95 min, also 70%) would need about 5,000 and over 6,000 s: one
//!   drift rate does not give 70% over all three lengths.
//! * Arrivals (`rate_ratio` 1.54, `high_share` 0.74, `high_s` 15): the whole sample's
//!   variance-to-mean ratios of request counts in bins of 0.5, 1 and 2 s (6.74, 11.87,
//!   21.24) fitted with [`HotspotsSpec::arrival_idc`] (rate variance over mean 11.9,
//!   correlation time 3.9 s), and the skew of its per-second counts (-1.09: lulls are the
//!   rarer state, 26% of the time). The formula then gives 2.2 at 0.1 s and 41 at 5 s
//!   against the sample's 2.1 and 44.

use rand_chacha::ChaCha8Rng;

use super::websearch::op_and_size;
use super::{bad, below, exp_draw, rng, unit_f64};
use crate::error::Result;
use crate::workload::{Addressing, Request, RequestSource};

/// Largest request size: areas are whole multiples of it.
const MAX_REQUEST: u64 = 32 * 1024;
/// Fewest areas the model accepts.
pub const MIN_AREAS: u64 = 10;
/// Most areas the model accepts (its membership bitmap takes `N / 8` bytes).
pub const MAX_AREAS: u64 = 1 << 28;
/// Largest working-set share: drawing a new member outside the set takes
/// `1 / (1 - set_fraction)` tries on average.
pub const MAX_SET_FRACTION: f64 = 0.95;
const NS: f64 = 1e9;
/// Longest expected run, nanoseconds (2^60: 36 years, a factor 16 inside `u64`).
const SPAN_NS_MAX: f64 = 1_152_921_504_606_846_976.0;
/// Most background changes a request, on average.
const EVENTS_PER_REQUEST_MAX: f64 = 1_000.0;
/// Shortest mean gap of a background process, as a share of the run's span: 2^-40, so a
/// gap is at least 2^12 times the clock's `f64` resolution at the end of the run.
const SPAN_RESOLUTION: f64 = 1.0 / 1_099_511_627_776.0;

/// Parameters of the generator (`kind = "hotspots"` in `[workload.synthetic]`).
#[derive(Debug, Clone, PartialEq)]
pub struct HotspotsSpec {
    /// Logical address space in bytes.
    pub space_bytes: u64,
    pub requests: u64,
    /// Mean inter-arrival time over the whole stream, nanoseconds.
    pub mean_interarrival_ns: f64,
    /// Bytes of one area, a multiple of 32 KiB.
    pub area_bytes: u64,
    /// Share of the areas in the working set.
    pub set_fraction: f64,
    /// Mean time an area stays in the working set, seconds.
    pub set_life_s: f64,
    /// Number of hot spots as a share of the areas (at least one spot).
    pub spot_fraction: f64,
    /// Share of requests that go to the hot spots.
    pub spot_share: f64,
    /// Mean time a spot stays on one area, seconds.
    pub spot_life_s: f64,
    /// Busy rate over lull rate (1: Poisson arrivals).
    pub rate_ratio: f64,
    /// Share of the time in the busy state.
    pub high_share: f64,
    /// Mean stay in the busy state, seconds.
    pub high_s: f64,
    pub seed: u64,
}

impl HotspotsSpec {
    /// The values fitted on the WebSearch sample (see the module doc and
    /// `docs/reproductions.md`), over `space_bytes` at `mean_interarrival_ns`.
    pub fn websearch(
        space_bytes: u64,
        requests: u64,
        mean_interarrival_ns: f64,
        seed: u64,
    ) -> HotspotsSpec {
        HotspotsSpec {
            space_bytes,
            requests,
            mean_interarrival_ns,
            area_bytes: 16 << 20,
            set_fraction: 0.27,
            set_life_s: 4000.0,
            spot_fraction: 0.025,
            spot_share: 0.8,
            spot_life_s: 2.5,
            rate_ratio: 1.54,
            high_share: 0.74,
            high_s: 15.0,
            seed,
        }
    }

    /// Number of whole areas.
    pub fn areas(&self) -> u64 {
        self.space_bytes / self.area_bytes.max(1)
    }

    /// Members of the working set.
    pub fn set_areas(&self) -> u64 {
        ((self.areas() as f64 * self.set_fraction).round() as u64).max(1)
    }

    /// Number of hot spots.
    pub fn spots(&self) -> u64 {
        ((self.areas() as f64 * self.spot_fraction).round() as u64).max(1)
    }

    /// Mean gap between working-set changes (one stream over all members), nanoseconds.
    fn set_gap_ns(&self) -> f64 {
        self.set_life_s * NS / self.set_areas() as f64
    }

    /// Mean gap between spot moves (one stream over all spots), nanoseconds.
    fn spot_gap_ns(&self) -> f64 {
        self.spot_life_s * NS / self.spots() as f64
    }

    /// Variance over mean of the number of arrivals in bins of `bin_s` seconds, for this
    /// two-state process: `1 + 2 v c / m (1 - (c / T) (1 - exp(-T / c)))` with `m` the mean
    /// rate, `v` the variance of the rate over time and `c` the correlation time
    /// `1 / (1 / busy stay + 1 / lull stay)` (the index of dispersion of a Markov-modulated
    /// Poisson process). 1 for Poisson arrivals; it grows with the bin towards
    /// `1 + 2 v c / m`.
    pub fn arrival_idc(&self, bin_s: f64) -> f64 {
        let m = 1e9 / self.mean_interarrival_ns;
        let p = self.high_share;
        let low = 1.0 / (p * self.rate_ratio + 1.0 - p);
        let high = self.rate_ratio * low;
        let v = p * (1.0 - p) * (high - low).powi(2) * m * m;
        let c = self.high_s * (1.0 - p);
        1.0 + 2.0 * v * c / m * (1.0 - c / bin_s * (1.0 - libm::exp(-bin_s / c)))
    }

    /// Check every parameter; errors name `workload.synthetic.<key>`.
    pub fn validate(&self) -> Result<()> {
        let in_range = |key: &str, v: f64, lo: f64, hi: f64| {
            if v.is_finite() && (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(bad(
                    key,
                    format!("expected a number in [{lo}, {hi}], got {v}"),
                ))
            }
        };
        if self.area_bytes < MAX_REQUEST || !self.area_bytes.is_multiple_of(MAX_REQUEST) {
            return Err(bad(
                "area_kib",
                format!(
                    "expected a multiple of 32 KiB, got {} bytes",
                    self.area_bytes
                ),
            ));
        }
        let areas = self.areas();
        if !(MIN_AREAS..=MAX_AREAS).contains(&areas) {
            return Err(bad(
                "space_gib",
                format!(
                    "expected room for {MIN_AREAS} to {MAX_AREAS} areas of {} KiB, got {} bytes \
                     ({areas} areas)",
                    self.area_bytes >> 10,
                    self.space_bytes
                ),
            ));
        }
        in_range(
            "mean_interarrival_ms",
            self.mean_interarrival_ns / 1e6,
            1e-6,
            1e9,
        )?;
        in_range("set_fraction", self.set_fraction, 1e-9, MAX_SET_FRACTION)?;
        if self.set_areas() >= areas {
            return Err(bad(
                "set_fraction",
                format!("leaves no area outside the working set of {areas} areas"),
            ));
        }
        in_range("set_life_s", self.set_life_s, 1e-3, 1e12)?;
        in_range("spot_fraction", self.spot_fraction, 0.0, 1.0)?;
        in_range("spot_share", self.spot_share, 0.0, 1.0)?;
        in_range("spot_life_s", self.spot_life_s, 1e-3, 1e12)?;
        in_range("rate_ratio", self.rate_ratio, 1.0, 1e6)?;
        in_range("high_share", self.high_share, 1e-6, 1.0 - 1e-6)?;
        in_range("high_s", self.high_s, 1e-3, 1e9)?;
        self.validate_rates()
    }

    /// Bounds across parameters, which each key's own range cannot give: the run's expected
    /// span stays inside `u64` nanoseconds (arrival times are rounded to them), and every
    /// background process (working-set changes, spot moves, busy/lull switches) has a mean
    /// gap of at least 1/1,000 of a request's and well above the `f64` resolution of the
    /// run's clock. The generator applies every change due before each request in a loop, so
    /// without them a generator could spin millions of times a request, or forever once a
    /// gap fell below the clock's resolution.
    fn validate_rates(&self) -> Result<()> {
        let gap_ns = self.mean_interarrival_ns;
        let span_ns = self.requests as f64 * gap_ns;
        if span_ns > SPAN_NS_MAX {
            return Err(bad(
                "requests",
                format!(
                    "{} requests {} ms apart span {:.3e} ns, more than 2^60",
                    self.requests,
                    gap_ns / 1e6,
                    span_ns
                ),
            ));
        }
        let floor_ns = (gap_ns / EVENTS_PER_REQUEST_MAX).max(span_ns * SPAN_RESOLUTION);
        let [busy_ns, lull_ns] = stays_ns(self.high_share, self.high_s);
        for (key, what, mean_ns) in [
            ("set_life_s", "working-set changes", self.set_gap_ns()),
            ("spot_life_s", "spot moves", self.spot_gap_ns()),
            ("high_s", "busy periods", busy_ns),
            ("high_s", "lulls", lull_ns),
        ] {
            if mean_ns < floor_ns {
                return Err(bad(
                    key,
                    format!(
                        "{what} every {mean_ns:.3e} ns on average: at most \
                         {EVENTS_PER_REQUEST_MAX} a request ({gap_ns:.3e} ns apart) and no \
                         closer than {:.3e} ns over the run's span",
                        span_ns * SPAN_RESOLUTION
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Mean stays in the busy and in the lull state, nanoseconds: `high_s` seconds busy, and
/// lulls long enough that the busy state holds `high_share` of the time.
fn stays_ns(high_share: f64, high_s: f64) -> [f64; 2] {
    let busy = high_s * NS;
    [busy, busy * (1.0 - high_share) / high_share]
}

/// Arrival times of a two-state Markov-modulated Poisson process, in nanoseconds (kept as
/// `f64` so rounding errors do not accumulate; each time is rounded on output).
#[derive(Debug, Clone)]
pub struct TwoRateClock {
    /// Mean gap between arrivals in the busy and in the lull state.
    gap_ns: [f64; 2],
    /// Mean stay in the busy and in the lull state.
    stay_ns: [f64; 2],
    /// 0 = busy, 1 = lull.
    state: usize,
    switch_ns: f64,
    time_ns: f64,
    first: bool,
}

impl TwoRateClock {
    /// A clock whose long-run mean gap is `mean_ns`; draws its initial state from `rng`.
    pub fn new(
        mean_ns: f64,
        rate_ratio: f64,
        high_share: f64,
        high_s: f64,
        rng: &mut ChaCha8Rng,
    ) -> TwoRateClock {
        // p r l + (1 - p) l = 1 / mean: the lull rate l, the busy rate r l.
        let lull_gap = mean_ns * (high_share * rate_ratio + 1.0 - high_share);
        let stay_ns = stays_ns(high_share, high_s);
        let state = usize::from(unit_f64(rng) >= high_share);
        let switch_ns = exp_draw(rng, stay_ns[state]);
        TwoRateClock {
            gap_ns: [lull_gap / rate_ratio, lull_gap],
            stay_ns,
            state,
            switch_ns,
            time_ns: 0.0,
            first: true,
        }
    }

    /// The mean gaps of the busy and the lull state, nanoseconds.
    pub fn gaps_ns(&self) -> [f64; 2] {
        self.gap_ns
    }

    /// The mean stays in the busy and the lull state, nanoseconds.
    pub fn stays_ns(&self) -> [f64; 2] {
        self.stay_ns
    }

    /// The next arrival time. Exponential gaps are memoryless, so a gap that crosses a state
    /// change is cut there and drawn again at the new state's rate: exact, not approximate.
    pub fn next(&mut self, rng: &mut ChaCha8Rng) -> u64 {
        if self.first {
            self.first = false;
            return 0;
        }
        loop {
            let t = self.time_ns + exp_draw(rng, self.gap_ns[self.state]);
            if t < self.switch_ns {
                self.time_ns = t;
                return libm::round(t) as u64;
            }
            self.time_ns = self.switch_ns;
            self.state ^= 1;
            self.switch_ns += exp_draw(rng, self.stay_ns[self.state]);
        }
    }
}

/// A uniformly drawn area of `[0, areas)` outside the bitmap `in_set`.
fn outside(in_set: &[u64], areas: u64, rng: &mut ChaCha8Rng) -> u64 {
    loop {
        let a = below(rng, areas);
        if in_set[(a / 64) as usize] & (1 << (a % 64)) == 0 {
            return a;
        }
    }
}

fn flip(in_set: &mut [u64], a: u64) {
    in_set[(a / 64) as usize] ^= 1 << (a % 64);
}

/// The generator.
pub struct Hotspots {
    spec: HotspotsSpec,
    areas: u64,
    /// Working-set slot -> area.
    members: Vec<u64>,
    /// Membership bitmap over the areas.
    in_set: Vec<u64>,
    /// Spot -> working-set slot.
    spots: Vec<u32>,
    /// Next working-set change and next spot move, nanoseconds.
    next_set_ns: f64,
    next_spot_ns: f64,
    /// Mean gaps between set changes and between spot moves, nanoseconds.
    set_gap_ns: f64,
    spot_gap_ns: f64,
    clock: TwoRateClock,
    clock_rng: ChaCha8Rng,
    set_rng: ChaCha8Rng,
    spot_rng: ChaCha8Rng,
    rng: ChaCha8Rng,
    set_changes: u64,
    spot_moves: u64,
    left: u64,
}

impl Hotspots {
    pub fn new(spec: HotspotsSpec) -> Result<Hotspots> {
        spec.validate()?;
        let areas = spec.areas();
        let m = spec.set_areas();
        let k = spec.spots();
        let mut clock_rng = rng(spec.seed, 21);
        let mut set_rng = rng(spec.seed, 22);
        let mut spot_rng = rng(spec.seed, 23);
        let clock = TwoRateClock::new(
            spec.mean_interarrival_ns,
            spec.rate_ratio,
            spec.high_share,
            spec.high_s,
            &mut clock_rng,
        );
        let mut in_set = vec![0u64; areas.div_ceil(64) as usize];
        let mut members = Vec::with_capacity(m as usize);
        for _ in 0..m {
            let a = outside(&in_set, areas, &mut set_rng);
            flip(&mut in_set, a);
            members.push(a);
        }
        let spots = (0..k).map(|_| below(&mut spot_rng, m) as u32).collect();
        let (set_gap_ns, spot_gap_ns) = (spec.set_gap_ns(), spec.spot_gap_ns());
        Ok(Hotspots {
            areas,
            members,
            in_set,
            spots,
            next_set_ns: exp_draw(&mut set_rng, set_gap_ns),
            next_spot_ns: exp_draw(&mut spot_rng, spot_gap_ns),
            set_gap_ns,
            spot_gap_ns,
            clock,
            clock_rng,
            set_rng,
            spot_rng,
            rng: rng(spec.seed, 24),
            set_changes: 0,
            spot_moves: 0,
            left: spec.requests,
            spec,
        })
    }

    /// Apply every set change and spot move due by `t` (nanoseconds), in time order per kind
    /// (the two kinds do not interact: spots name slots, not areas).
    fn advance(&mut self, t: f64) {
        let m = self.members.len() as u64;
        while self.next_set_ns <= t {
            let slot = below(&mut self.set_rng, m) as usize;
            let new = outside(&self.in_set, self.areas, &mut self.set_rng);
            let old = std::mem::replace(&mut self.members[slot], new);
            flip(&mut self.in_set, old);
            flip(&mut self.in_set, new);
            self.set_changes += 1;
            self.next_set_ns += exp_draw(&mut self.set_rng, self.set_gap_ns);
        }
        let k = self.spots.len() as u64;
        while self.next_spot_ns <= t {
            let spot = below(&mut self.spot_rng, k) as usize;
            self.spots[spot] = below(&mut self.spot_rng, m) as u32;
            self.spot_moves += 1;
            self.next_spot_ns += exp_draw(&mut self.spot_rng, self.spot_gap_ns);
        }
    }

    pub fn spec(&self) -> &HotspotsSpec {
        &self.spec
    }

    /// The working set's areas, by slot.
    pub fn members(&self) -> &[u64] {
        &self.members
    }

    /// Each spot's working-set slot.
    pub fn spot_slots(&self) -> &[u32] {
        &self.spots
    }

    /// Working-set changes and spot moves applied so far.
    pub fn moves(&self) -> (u64, u64) {
        (self.set_changes, self.spot_moves)
    }

    /// The arrival clock (its solved gaps and stays).
    pub fn clock(&self) -> &TwoRateClock {
        &self.clock
    }
}

impl RequestSource for Hotspots {
    fn next_request(&mut self) -> Result<Option<Request>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let time_ns = self.clock.next(&mut self.clock_rng);
        self.advance(time_ns as f64);
        let (op, len) = op_and_size(&mut self.rng);
        let slot = if unit_f64(&mut self.rng) < self.spec.spot_share {
            self.spots[below(&mut self.rng, self.spots.len() as u64) as usize] as usize
        } else {
            below(&mut self.rng, self.members.len() as u64) as usize
        };
        let area = self.members[slot];
        let pos = below(&mut self.rng, self.spec.area_bytes / len);
        Ok(Some(Request {
            time_ns,
            op,
            offset: area * self.spec.area_bytes + pos * len,
            len,
        }))
    }

    fn addressing(&self) -> Addressing {
        Addressing::Bytes
    }

    fn label(&self) -> &str {
        "hotspots"
    }
}

#[cfg(test)]
#[path = "hotspots_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "hotspots_fit.rs"]
mod fit;
