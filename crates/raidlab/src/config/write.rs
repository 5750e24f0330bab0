//! `[write_cache]`: the non-volatile write-back cache of timed mode (see `docs/write-cache.md`).
//!
//! ```toml
//! [write_cache]
//! capacity_pages = 32768   # pages of workload.block_size
//! group_stripes = 1        # write group = k stripe rows (or group_bytes = ...)
//! order = "stow"           # "lrw", "cscan", "wow", "stow"
//! rate = "linear"          # "linear" (high/low), "fixed" (threshold), "asap"
//! high = 90                # percent of the capacity
//! low = 80
//! max_destages = 20
//! unified = false          # share one memory with [cache] (config/unified.rs)
//! destage_priority = "below_user"  # or "user": destages in the user class (ablation)
//! shares = "pages"         # STOW only: RanRq/SeqRq in "pages" or "requests" (ablation)
//! desired_cap = true       # STOW only: DesiredSeqQSize kept within the cache (ablation)
//! ```

use super::tree::{quoted, Table};
use super::{CacheSpec, Capacity, Mode, Unit, Writes};
use crate::array::{Array, ArraySpec};
use crate::cache::read::PolicySpec;
use crate::cache::write::{OrderKind, RateSpec, StowKnobs, WriteSpec};
use crate::error::{Error, Result};
use crate::workload::{OpsFilter, WorkloadSpec};

/// The `[cache]` a run with a write cache but no `[cache]` table carries: never built (the
/// engine skips the read cache when `WriteSpec::read_cache` is false).
pub(super) fn no_read_cache() -> CacheSpec {
    CacheSpec {
        policy: PolicySpec::Lru,
        unit: Unit::Block,
        capacity: Capacity::Units(1),
        writes: Writes::Invalidate,
    }
}

/// A percentage in (0, 100].
fn percent(t: &mut Table<'_>, key: &'static str, default: f64) -> Result<f64> {
    let path = t.key(key);
    let v = t.float(key, f64::MIN, f64::MAX)?.unwrap_or(default);
    if v > 0.0 && v <= 100.0 {
        Ok(v)
    } else {
        Err(Error::config(
            path,
            format!("expected a percentage of the capacity in (0, 100], got {v}"),
        ))
    }
}

/// Parse `[write_cache]` (if present) against the rest of the run.
pub(super) fn write_cache_spec(
    t: Option<Table<'_>>,
    read_cache: bool,
    workload: &WorkloadSpec,
    array: Option<&ArraySpec>,
    mode: Mode,
) -> Result<Option<WriteSpec>> {
    let Some(mut t) = t else {
        return Ok(None);
    };
    if mode != Mode::Timed {
        return Err(Error::config(
            "write_cache",
            "only applies to run.mode = \"timed\"",
        ));
    }
    if workload.ops == OpsFilter::Reads {
        return Err(Error::config(
            "workload.ops",
            "a write cache needs the workload's writes; set ops = \"all\"",
        ));
    }
    let page = u64::from(workload.block_size);
    let capacity_key = t.key("capacity_pages");
    let capacity_pages = t
        .uint("capacity_pages", 1, 1 << 32)?
        .ok_or_else(|| Error::config(&capacity_key, "missing; expected the size in pages"))?;
    // Pages of one stripe row, when there is an array (validated by `Array::new`).
    let row_pages = array
        .map(Array::new)
        .transpose()?
        .map(|a| a.blocks_per_stripe());
    let stripes_key = t.key("group_stripes");
    let bytes_key = t.key("group_bytes");
    let stripes = t.uint("group_stripes", 1, 1 << 20)?;
    let bytes = t.uint("group_bytes", 0, 1 << 40)?;
    let group_pages = match (stripes, bytes, row_pages) {
        (Some(_), Some(_), _) => {
            return Err(Error::config(
                &bytes_key,
                "give group_stripes or group_bytes, not both",
            ))
        }
        (Some(_), None, None) => {
            return Err(Error::config(
                &stripes_key,
                "needs an [array]; without one give group_bytes",
            ))
        }
        (Some(k), None, Some(row)) => k * row,
        (None, Some(b), row) => {
            if b < page {
                return Err(Error::config(
                    &bytes_key,
                    format!("a write group of {b} bytes is smaller than a page ({page} bytes)"),
                ));
            }
            let multiple = row.map_or(page, |r| r * page);
            if b % multiple != 0 {
                return Err(Error::config(
                    &bytes_key,
                    format!("expected a multiple of {multiple} bytes (a page, or a stripe row's data with an array), got {b}"),
                ));
            }
            b / page
        }
        (None, None, Some(row)) => row,
        // No array: the STOW paper's 256 KiB stripe.
        (None, None, None) => (256 * 1024 / page).max(1),
    };
    if group_pages > 1 << 20 {
        return Err(Error::config(
            &stripes_key,
            format!("a write group of {group_pages} pages is too large (at most 1,048,576)"),
        ));
    }
    if capacity_pages < group_pages {
        return Err(Error::config(
            &capacity_key,
            format!("{capacity_pages} pages cannot hold one write group ({group_pages} pages)"),
        ));
    }
    let order = t
        .choice("order", OrderKind::NAMES)?
        .and_then(OrderKind::from_name)
        .unwrap_or(OrderKind::Stow);
    let rate_name = t.choice("rate", RateSpec::NAMES)?.unwrap_or("linear");
    for (key, owners) in [
        ("high", &["linear", "rapid"][..]),
        ("low", &["linear", "rapid"][..]),
        ("threshold", &["fixed"][..]),
        ("idle_destage", &["rapid"][..]),
    ] {
        if t.has(key) && !owners.contains(&rate_name) {
            return Err(Error::config(
                t.key(key),
                format!("only applies to rate = {}", quoted(owners)),
            ));
        }
    }
    // RAPID-Cache's marks are 70/30 (section 2.4).
    let (high_default, low_default) = if rate_name == "rapid" {
        (70.0, 30.0)
    } else {
        (90.0, 80.0)
    };
    let rate = match rate_name {
        "linear" | "rapid" => {
            let high = percent(&mut t, "high", high_default)?;
            let low = percent(&mut t, "low", low_default)?;
            if high <= low {
                return Err(Error::config(
                    t.key("high"),
                    format!("the high threshold ({high}) must be above the low one ({low})"),
                ));
            }
            if rate_name == "rapid" {
                RateSpec::Rapid {
                    high_pct: high,
                    low_pct: low,
                    idle: t.bool_or("idle_destage", true)?,
                }
            } else {
                RateSpec::Linear {
                    high_pct: high,
                    low_pct: low,
                }
            }
        }
        "fixed" => RateSpec::Fixed {
            threshold_pct: percent(&mut t, "threshold", 80.0)?,
        },
        _ => RateSpec::Asap,
    };
    let max_destages = t.uint_or("max_destages", 1, 1 << 16, 20)? as u32;
    let seq_pages = t.uint_or("seq_pages", 1, 64, 2)? as u32;
    let drain = t.bool_or("drain", true)?;
    // Checked and applied against `[cache]` by `unified.rs`.
    let unified = t.bool_or("unified", false)?;
    // Ablations (docs/write-cache.md, "Reproducing STOW").
    let destage_as_user = t.choice("destage_priority", &["below_user", "user"])? == Some("user");
    for key in ["shares", "desired_cap"] {
        if t.has(key) && order != OrderKind::Stow {
            return Err(Error::config(
                t.key(key),
                "only applies to order = \"stow\"",
            ));
        }
    }
    let stow = StowKnobs {
        shares_in_requests: t.choice("shares", &["pages", "requests"])? == Some("requests"),
        desired_cap: t.bool_or("desired_cap", true)?,
    };
    t.finish()?;
    Ok(Some(WriteSpec {
        capacity_pages,
        group_pages,
        order,
        rate,
        max_destages,
        seq_pages,
        drain,
        read_cache,
        unified,
        destage_as_user,
        stow,
    }))
}

#[cfg(test)]
mod tests {
    use crate::config::from_toml;
    use crate::error::Error;

    const BASE: &str = "[workload]\nops = \"all\"\n\
        [workload.synthetic]\nkind = \"spc1\"\nrequests = 10\n\
        [array]\nlevel = \"raid5\"\ndisks = 5\nstripe_unit = 65536\n\
        [run]\nmode = \"timed\"\n";

    fn key_of(extra: &str) -> String {
        match from_toml(&format!("{BASE}{extra}"), "t.toml", None) {
            Err(Error::Config { key, .. }) => key,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn defaults_follow_the_stow_paper() {
        let exps = from_toml(
            &format!("{BASE}[write_cache]\ncapacity_pages = 32768\n"),
            "t.toml",
            None,
        )
        .unwrap();
        let w = exps[0].write_cache.as_ref().unwrap();
        // One stripe of 4 x 64 KiB = 64 pages; STOW, linear 90/80, 20 in flight.
        assert_eq!(w.group_pages, 64);
        assert_eq!(w.order, crate::cache::write::OrderKind::Stow);
        assert_eq!(
            w.rate,
            crate::cache::write::RateSpec::Linear {
                high_pct: 90.0,
                low_pct: 80.0
            }
        );
        assert_eq!(w.max_destages, 20);
        assert!(!w.read_cache);
        let w2 = from_toml(
            &format!("{BASE}[cache]\npolicy = \"lru\"\ncapacity_blocks = 8\n[write_cache]\ncapacity_pages = 128\ngroup_stripes = 2\n"),
            "t.toml",
            None,
        )
        .unwrap();
        let w2 = w2[0].write_cache.as_ref().unwrap();
        assert_eq!(w2.group_pages, 128);
        assert!(w2.read_cache);
    }

    #[test]
    fn ablation_keys() {
        let exps = from_toml(
            &format!("{BASE}[write_cache]\ncapacity_pages = 4096\ndestage_priority = \"user\"\nshares = \"requests\"\ndesired_cap = false\n"),
            "t.toml",
            None,
        )
        .unwrap();
        let w = exps[0].write_cache.as_ref().unwrap();
        assert!(w.destage_as_user && w.stow.shares_in_requests && !w.stow.desired_cap);
        let wc = "[write_cache]\ncapacity_pages = 4096\n";
        assert_eq!(
            key_of(&format!("{wc}order = \"wow\"\nshares = \"requests\"\n")),
            "write_cache.shares"
        );
        assert_eq!(
            key_of(&format!("{wc}order = \"lrw\"\ndesired_cap = false\n")),
            "write_cache.desired_cap"
        );
        assert_eq!(
            key_of(&format!("{wc}destage_priority = \"high\"\n")),
            "write_cache.destage_priority"
        );
        assert_eq!(
            key_of(&format!("{wc}shares = \"bytes\"\n")),
            "write_cache.shares"
        );
    }

    #[test]
    fn bad_values_name_their_key() {
        let wc = "[write_cache]\ncapacity_pages = 32768\n";
        for (extra, key) in [
            ("high = 80\nlow = 80\n", "write_cache.high"),
            ("high = 70\nlow = 90\n", "write_cache.high"),
            ("high = 101\n", "write_cache.high"),
            ("low = 0\n", "write_cache.low"),
            ("low = -5\n", "write_cache.low"),
            ("rate = \"fixed\"\nthreshold = 0\n", "write_cache.threshold"),
            ("rate = \"fixed\"\nhigh = 90\n", "write_cache.high"),
            ("group_bytes = 2048\n", "write_cache.group_bytes"),
            ("group_bytes = 65536\n", "write_cache.group_bytes"),
            ("order = \"lru\"\n", "write_cache.order"),
            ("rate = \"slow\"\n", "write_cache.rate"),
            ("max_destages = 0\n", "write_cache.max_destages"),
            ("colour = 1\n", "write_cache.colour"),
        ] {
            assert_eq!(key_of(&format!("{wc}{extra}")), key, "{extra}");
        }
        // Too small for one 64-page group.
        assert_eq!(
            key_of("[write_cache]\ncapacity_pages = 63\n"),
            "write_cache.capacity_pages"
        );
        assert_eq!(key_of("[write_cache]\n"), "write_cache.capacity_pages");
    }

    #[test]
    fn needs_timed_mode_and_the_writes() {
        let text = "[workload]\nops = \"all\"\n[workload.synthetic]\nkind = \"spc1\"\n\
                    [write_cache]\ncapacity_pages = 256\n";
        match from_toml(text, "t.toml", None) {
            Err(Error::Config { key, .. }) => assert_eq!(key, "write_cache"),
            other => panic!("{other:?}"),
        }
        let text = BASE.replace("ops = \"all\"", "ops = \"reads\"");
        match from_toml(
            &format!("{text}[write_cache]\ncapacity_pages = 256\n"),
            "t.toml",
            None,
        ) {
            Err(Error::Config { key, .. }) => assert_eq!(key, "workload.ops"),
            other => panic!("{other:?}"),
        }
    }
}
