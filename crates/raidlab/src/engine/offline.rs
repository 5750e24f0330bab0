//! Counting mode's offline bounds (`cache/offline`): one extra pass over the workload that
//! records the block stream exactly as `count::run` will look it up, then the policy built
//! over that future.

use crate::cache::offline::{self, belady::Belady, Event};
use crate::cache::read::{MissCost, PolicySpec, ReadPolicy, Units};
use crate::config::{Experiment, Unit, Writes};
use crate::error::{Error, Result};
use crate::workload::{self, Op};

/// Most lookups `opt-cost` solves for: its min-cost flow holds about 100 bytes per lookup
/// and takes seconds per 10^5 lookups (docs/read-caches.md); use `workload.limit` for a prefix.
pub const OPT_COST_MAX_LOOKUPS: usize = 2_000_000;

/// Most lookups `opt` and `belady-cost` precompute (8 bytes each, plus the pass's 16).
pub const OFFLINE_MAX_LOOKUPS: usize = 1 << 30;

/// The events `count::run` will produce for `exp`: lookups (with their keys) and, with
/// `writes = "invalidate"`, the writes that drop blocks.
fn events(exp: &Experiment) -> Result<Vec<Event>> {
    let mut src = workload::open(&exp.workload)?;
    let addressing = src.addressing();
    let object_mode = exp.cache.unit == Unit::Object;
    let mut out = Vec::new();
    let mut lookups = 0usize;
    while let Some(req) = src.next_request()? {
        if object_mode {
            out.push(Event::Lookup(req.offset));
            lookups += 1;
        } else {
            let (first, count) = exp.workload.span(&req, addressing);
            let lookup = req.op == Op::Read || exp.cache.writes == Writes::Access;
            if !lookup && exp.cache.writes != Writes::Invalidate {
                continue;
            }
            for lba in first..first + count {
                out.push(if lookup {
                    Event::Lookup(lba)
                } else {
                    Event::Invalidate(lba)
                });
            }
            if lookup {
                lookups += count as usize;
            }
        }
        if lookups > OFFLINE_MAX_LOOKUPS {
            return Err(Error::config(
                "cache.policy",
                format!("an offline bound precomputes at most {OFFLINE_MAX_LOOKUPS} lookups"),
            ));
        }
    }
    Ok(out)
}

/// Build offline policy `spec` for `exp` with `capacity` units, its costs from `cost` (the
/// run's oracle, whose mode counting mode keeps constant).
pub fn build(
    exp: &Experiment,
    spec: &PolicySpec,
    capacity: u64,
    units: Units,
    cost: &dyn MissCost,
) -> Result<Box<dyn ReadPolicy + Send>> {
    let events = events(exp)?;
    let lookups = events
        .iter()
        .filter(|e| matches!(e, Event::Lookup(_)))
        .count();
    // Block mode sizes the arena from the capacity, as `read::build_in` does; object mode
    // grows it.
    let entries = match units {
        Units::Blocks => usize::try_from(capacity)
            .unwrap_or(usize::MAX)
            .min(lookups)
            .saturating_add(1),
        Units::Bytes => 1024,
    };
    Ok(match spec {
        PolicySpec::Opt => Box::new(Belady::opt(
            offline::next_uses(events.into_iter()),
            capacity,
            entries,
        )),
        PolicySpec::BeladyCost => Box::new(Belady::cost_aware(
            offline::next_uses(events.into_iter()),
            capacity,
            entries,
        )),
        PolicySpec::OptCost => {
            if units != Units::Blocks {
                return Err(Error::config(
                    "cache.unit",
                    "\"opt-cost\" is the optimum for unit-size blocks: block mode only",
                ));
            }
            if lookups > OPT_COST_MAX_LOOKUPS {
                return Err(Error::config(
                    "cache.policy",
                    format!(
                        "\"opt-cost\" solves at most {OPT_COST_MAX_LOOKUPS} lookups, this run \
                         has {lookups}: set workload.limit for a prefix, or use \"belady-cost\""
                    ),
                ));
            }
            let keys: Vec<u64> = events
                .iter()
                .filter_map(|e| match *e {
                    Event::Lookup(k) => Some(k),
                    Event::Invalidate(_) => None,
                })
                .collect();
            let next = offline::next_uses(events.into_iter());
            let cut = offline::cut_future(&keys, &next, capacity, cost);
            Box::new(Belady::opt(cut, capacity, entries))
        }
        _ => return Err(Error::config("cache.policy", "not an offline bound")),
    })
}
