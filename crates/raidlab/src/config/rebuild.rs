//! `[rebuild]` and the `rebuild` events of `[[events]]`: hot spares, the rebuild order and
//! executor, rate control, redirection and piggybacking (see `docs/rebuild.md`).

use super::timed::{Action, TimedSpec};
use super::tree::Table;
use crate::array::{ArraySpec, Level};
use crate::error::{Error, Result};
use crate::rebuild::{ExecutorSpec, OrderSpec, ProSpec, RateSpec, RebuildSpec};

/// md's defaults: `speed_limit_min` 1,000 KiB/s, `speed_limit_max` 200,000 KiB/s.
const MD_MIN_KIB_S: f64 = 1_000.0;
const MD_MAX_KIB_S: f64 = 200_000.0;
/// Most units one DOR read may merge (`read_units`): 16 MiB of 64 KiB units, far above the
/// block layer's merged resync reads.
const READ_UNITS_MAX: u32 = 256;

/// One `[[events]]` table with a `rebuild` key: `rebuild = disk`, optional `spare = index`.
pub(super) fn event_action(t: &mut Table<'_>) -> Result<Action> {
    let disk = t.uint_or("rebuild", 0, u32::MAX as u64, 0)? as u32;
    if t.has("fail") {
        return Err(Error::config(
            t.key("fail"),
            "give one of `fail` or `rebuild` per event (use two events at the same time)",
        ));
    }
    let spare = t.uint("spare", 0, u32::MAX as u64)?.map(|s| s as u32);
    Ok(Action::Rebuild { disk, spare })
}

/// `[rebuild]`, checked against the array and the events: every rebuild event must name a
/// disk failed by then and not rebuilding, and get a hot spare not used before.
pub(super) fn rebuild_spec(
    t: Option<Table<'_>>,
    timed: Option<&TimedSpec>,
    array: Option<&ArraySpec>,
) -> Result<Option<RebuildSpec>> {
    let Some(mut t) = t else {
        if let Some(i) = rebuild_events(timed).next() {
            return Err(Error::config(
                format!("events[{i}].rebuild"),
                "no hot spare to rebuild onto: add a [rebuild] table (spares = 1 by default)",
            ));
        }
        return Ok(None);
    };
    let Some(timed) = timed else {
        return Err(Error::config(
            "rebuild",
            "only applies to run.mode = \"timed\"",
        ));
    };
    let Some(array) = array else {
        return Err(Error::config("rebuild", "needs an [array] to rebuild"));
    };
    if array.level == Level::Raid0 {
        return Err(Error::config(
            "rebuild",
            "raid0 has no redundancy, so a lost disk cannot be rebuilt; use raid1, raid10, \
             raid5 or raid6",
        ));
    }
    let spares = t.uint_or("spares", 0, 64, 1)? as u32;
    let mut order = match t.choice("order", OrderSpec::NAMES)? {
        None | Some("sequential") => OrderSpec::Sequential,
        Some(_) => OrderSpec::Pro(ProSpec::default()),
    };
    if let Some(mut p) = t.table("pro")? {
        let OrderSpec::Pro(spec) = &mut order else {
            return Err(Error::config(
                t.key("pro"),
                "only applies to order = \"pro\"",
            ));
        };
        spec.zone_units = p.uint_or("zone_units", 1, 1 << 40, spec.zone_units)?;
        spec.zones_max = p
            .uint("zones_max", 1, 1 << 20)?
            .unwrap_or(u64::from(spec.zones_max)) as u32;
        spec.slice_units = p
            .uint("slice_units", 1, 1 << 30)?
            .unwrap_or(u64::from(spec.slice_units)) as u32;
        spec.fallback_sequential =
            p.choice_or("fallback", &["sequential", "zones"], "sequential")? == "sequential";
        p.finish()?;
    }
    let executor_name = t.choice("executor", ExecutorSpec::NAMES)?.unwrap_or("dor");
    for (key, owner) in [
        ("buffers", "dor"),
        ("depth", "dor"),
        ("read_units", "dor"),
        ("stripes", "sor"),
    ] {
        if t.has(key) && owner != executor_name {
            return Err(Error::config(
                t.key(key),
                format!("only applies to executor = \"{owner}\""),
            ));
        }
    }
    let executor = if executor_name == "sor" {
        ExecutorSpec::Sor {
            stripes: t.uint_or("stripes", 1, 4096, 1)? as u32,
        }
    } else {
        ExecutorSpec::Dor {
            buffers: t.uint_or("buffers", 1, 1 << 20, 64)? as u32,
            depth: t.uint_or("depth", 1, 64, 2)? as u32,
            read_units: t.uint_or("read_units", 1, u64::from(READ_UNITS_MAX), 1)? as u32,
        }
    };
    let md = t.choice("rate", &["full", "md"])? == Some("md");
    for key in ["min_kib_s", "max_kib_s"] {
        if t.has(key) && !md {
            return Err(Error::config(t.key(key), "only applies to rate = \"md\""));
        }
    }
    let min = t.float_or("min_kib_s", 0.001, 1e9, MD_MIN_KIB_S)?;
    let max = t.float_or("max_kib_s", 0.001, 1e9, MD_MAX_KIB_S)?;
    if md && min > max {
        return Err(Error::config(
            t.key("min_kib_s"),
            format!("the minimum rate ({min} KiB/s) exceeds the maximum ({max} KiB/s)"),
        ));
    }
    let rate = if md {
        RateSpec::Md {
            min_bytes_s: min * 1024.0,
            max_bytes_s: max * 1024.0,
        }
    } else {
        RateSpec::Full
    };
    let redirect = t.bool_or("redirect", true)?;
    let piggyback = t.bool_or("piggyback", false)?;
    let extent_bytes = t.float("extent_gib", 1e-6, 1e9)?.map(super::gib_bytes);
    if extent_bytes.is_some_and(|b| b < array.stripe_unit_bytes) {
        return Err(Error::config(
            t.key("extent_gib"),
            "smaller than one stripe unit",
        ));
    }
    let mttf_hours = t.float_or("mttf_hours", 1.0, 1e12, 1_000_000.0)?;
    let as_user = t.choice_or("priority", &["below_user", "user"], "below_user")? == "user";
    t.finish()?;
    check_events(timed, array, spares)?;
    Ok(Some(RebuildSpec {
        spares,
        order,
        executor,
        rate,
        redirect,
        piggyback,
        extent_bytes,
        mttf_hours,
        as_user,
    }))
}

fn rebuild_events(timed: Option<&TimedSpec>) -> impl Iterator<Item = usize> + '_ {
    timed
        .into_iter()
        .flat_map(|t| t.events.iter().enumerate())
        .filter(|(_, e)| matches!(e.action, Action::Rebuild { .. }))
        .map(|(i, _)| i)
}

/// Replay the events: failures (already checked in `timed.rs`) and rebuilds.
fn check_events(timed: &TimedSpec, array: &ArraySpec, spares: u32) -> Result<()> {
    let n = array.disks as usize;
    let mut failed = vec![false; n];
    for &d in &array.failed {
        failed[d as usize] = true;
    }
    let mut rebuilding = vec![false; n];
    // The event that took each spare.
    let mut taken: Vec<Option<usize>> = vec![None; spares as usize];
    for (i, e) in timed.events.iter().enumerate() {
        let (disk, spare) = match e.action {
            Action::Fail(d) => {
                failed[d as usize] = true;
                continue;
            }
            Action::FailCache(_) => continue,
            Action::Rebuild { disk, spare } => (disk, spare),
        };
        let key = format!("events[{i}].rebuild");
        if disk as usize >= n {
            return Err(Error::config(
                key,
                format!("expected a disk index below {n}, got {disk}"),
            ));
        }
        if !failed[disk as usize] {
            return Err(Error::config(
                key,
                format!("disk {disk} is not failed at that time, so there is nothing to rebuild"),
            ));
        }
        if rebuilding[disk as usize] {
            return Err(Error::config(
                key,
                format!("disk {disk} is already rebuilding"),
            ));
        }
        if spares == 0 {
            return Err(Error::config(
                key,
                "no hot spare to rebuild onto (rebuild.spares = 0)",
            ));
        }
        let s = match spare {
            Some(s) => {
                let skey = format!("events[{i}].spare");
                if s >= spares {
                    return Err(Error::config(
                        skey,
                        format!("expected a spare index below {spares} (rebuild.spares), got {s}"),
                    ));
                }
                if let Some(j) = taken[s as usize] {
                    return Err(Error::config(
                        skey,
                        format!("spare {s} is already in use (taken by events[{j}])"),
                    ));
                }
                s
            }
            None => taken.iter().position(Option::is_none).ok_or_else(|| {
                Error::config(
                    &key,
                    format!("no free hot spare: all {spares} are in use (raise rebuild.spares)"),
                )
            })? as u32,
        };
        taken[s as usize] = Some(i);
        rebuilding[disk as usize] = true;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::from_toml;
    use crate::error::Error;
    use crate::rebuild::{ExecutorSpec, OrderSpec, ProSpec, RateSpec};

    const BASE: &str = "[workload.synthetic]\nkind = \"uniform\"\nkeys = 4\nrequests = 1\n\
        [cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n\
        [run]\nmode = \"timed\"\ndriver = \"closed\"\n";

    fn load(extra: &str) -> Result<Vec<crate::config::Experiment>, Error> {
        from_toml(&format!("{BASE}{extra}"), "t.toml", None)
    }

    fn key_of(extra: &str) -> (String, String) {
        match load(extra) {
            Err(Error::Config { key, msg }) => (key, msg),
            other => panic!("expected a config error for {extra:?}, got {other:?}"),
        }
    }

    const R5: &str = "[array]\nlevel = \"raid5\"\ndisks = 4\n";
    const FAIL_REBUILD: &str =
        "[[events]]\nat_s = 1\nfail = 1\n[[events]]\nat_s = 2\nrebuild = 1\n";

    #[test]
    fn defaults_and_every_key() {
        let e = &load(&format!("{R5}[rebuild]\n{FAIL_REBUILD}")).unwrap()[0];
        let r = e.rebuild.as_ref().unwrap();
        assert_eq!(r.spares, 1);
        assert_eq!(r.order, OrderSpec::Sequential);
        assert_eq!(
            r.executor,
            ExecutorSpec::Dor {
                buffers: 64,
                depth: 2,
                read_units: 1
            }
        );
        let e = &load(&format!(
            "{R5}[rebuild]\nbuffers = 32\ndepth = 3\nread_units = 16\n{FAIL_REBUILD}"
        ))
        .unwrap()[0];
        assert_eq!(
            e.rebuild.as_ref().unwrap().executor,
            ExecutorSpec::Dor {
                buffers: 32,
                depth: 3,
                read_units: 16
            }
        );
        assert_eq!(r.rate, RateSpec::Full);
        assert!(r.redirect && !r.piggyback && r.extent_bytes.is_none());
        let e = &load(&format!(
            "{R5}[rebuild]\nspares = 2\norder = \"pro\"\nexecutor = \"sor\"\nstripes = 4\n\
             rate = \"md\"\nmin_kib_s = 10\nmax_kib_s = 20\nredirect = false\npiggyback = true\n\
             extent_gib = 1\nmttf_hours = 5e5\n[rebuild.pro]\nzone_units = 16\nzones_max = 4\n\
             slice_units = 8\nfallback = \"zones\"\n{FAIL_REBUILD}"
        ))
        .unwrap()[0];
        let r = e.rebuild.as_ref().unwrap();
        assert_eq!(
            r.order,
            OrderSpec::Pro(ProSpec {
                zone_units: 16,
                zones_max: 4,
                slice_units: 8,
                fallback_sequential: false,
            })
        );
        assert_eq!(r.executor, ExecutorSpec::Sor { stripes: 4 });
        assert_eq!(
            r.rate,
            RateSpec::Md {
                min_bytes_s: 10240.0,
                max_bytes_s: 20480.0
            }
        );
        assert!(!r.redirect && r.piggyback);
        assert_eq!(r.extent_bytes, Some(1 << 30));
        assert_eq!(r.mttf_hours, 5e5);
    }

    #[test]
    fn bad_input_names_its_key() {
        let cases: &[(String, &str, &str)] = &[
            // A rebuild with no spare.
            (format!("{R5}{FAIL_REBUILD}"), "events[1].rebuild", "no hot spare"),
            (
                format!("{R5}[rebuild]\nspares = 0\n{FAIL_REBUILD}"),
                "events[1].rebuild",
                "no hot spare",
            ),
            // A spare index in use, or out of range.
            (
                ("[array]\nlevel = \"raid6\"\ndisks = 5\n[rebuild]\nspares = 2\n\
                     [[events]]\nat_s = 1\nfail = 1\n[[events]]\nat_s = 1\nrebuild = 1\nspare = 1\n\
                     [[events]]\nat_s = 2\nfail = 3\n[[events]]\nat_s = 2\nrebuild = 3\nspare = 1\n").to_string(),
                "events[3].spare",
                "already in use",
            ),
            (
                format!("{R5}[rebuild]\n[[events]]\nat_s = 1\nfail = 1\n[[events]]\nat_s = 1\nrebuild = 1\nspare = 1\n"),
                "events[1].spare",
                "below 1",
            ),
            // No spare left for a second rebuild.
            (
                ("[array]\nlevel = \"raid6\"\ndisks = 5\n[rebuild]\n\
                     [[events]]\nat_s = 1\nfail = 1\n[[events]]\nat_s = 1\nrebuild = 1\n\
                     [[events]]\nat_s = 2\nfail = 3\n[[events]]\nat_s = 2\nrebuild = 3\n").to_string(),
                "events[3].rebuild",
                "no free hot spare",
            ),
            // A level without redundancy.
            (
                "[array]\nlevel = \"raid0\"\ndisks = 4\n[rebuild]\n".to_string(),
                "rebuild",
                "no redundancy",
            ),
            // min > max.
            (
                format!("{R5}[rebuild]\nrate = \"md\"\nmin_kib_s = 300\nmax_kib_s = 200\n"),
                "rebuild.min_kib_s",
                "exceeds the maximum",
            ),
            (
                format!("{R5}[rebuild]\nmax_kib_s = 200\n"),
                "rebuild.max_kib_s",
                "rate = \"md\"",
            ),
            // Rebuilding a disk that is not failed, or twice.
            (
                format!("{R5}[rebuild]\n[[events]]\nat_s = 1\nrebuild = 2\n"),
                "events[0].rebuild",
                "not failed",
            ),
            (
                format!(
                    "{R5}[rebuild]\nspares = 2\n{FAIL_REBUILD}[[events]]\nat_s = 3\nrebuild = 1\n"
                ),
                "events[2].rebuild",
                "already rebuilding",
            ),
            (
                format!("{R5}[rebuild]\n[[events]]\nat_s = 1\nfail = 1\nrebuild = 1\n"),
                "events[0].fail",
                "one of",
            ),
            (
                format!("{R5}[rebuild]\nstripes = 2\n"),
                "rebuild.stripes",
                "executor = \"sor\"",
            ),
            (
                format!("{R5}[rebuild]\nexecutor = \"sor\"\nread_units = 16\n"),
                "rebuild.read_units",
                "executor = \"dor\"",
            ),
            (
                format!("{R5}[rebuild]\nread_units = 0\n"),
                "rebuild.read_units",
                "",
            ),
            (
                format!("{R5}[rebuild]\n[rebuild.pro]\nzone_units = 2\n"),
                "rebuild.pro",
                "order = \"pro\"",
            ),
            (
                format!("{R5}[rebuild]\nordr = \"pro\"\n"),
                "rebuild.ordr",
                "",
            ),
            ("[rebuild]\n".to_string(), "rebuild", "needs an [array]"),
        ];
        for (extra, key, msg) in cases {
            let (k, m) = key_of(extra);
            assert_eq!(&k, key, "{extra}: {m}");
            assert!(m.contains(msg), "{extra}: {m}");
        }
        // Counting mode has no rebuild.
        let text = "[workload.synthetic]\nkind = \"uniform\"\nkeys = 4\nrequests = 1\n\
            [cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[array]\ndisks = 4\n[rebuild]\n";
        match from_toml(text, "t.toml", None) {
            Err(Error::Config { key, .. }) => assert_eq!(key, "rebuild"),
            other => panic!("{other:?}"),
        }
    }
}
