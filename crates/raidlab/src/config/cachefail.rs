//! The `fail_cache` events of `[[events]]`: a failure of one copy of the write cache's data
//! (see `docs/rapid.md`, "Failures and recovery").
//!
//! ```toml
//! [[events]]
//! at_s = 20.0
//! fail_cache = "primary"     # "primary", "backup" or "cache_disk"
//! ```

use super::timed::{Action, TimedSpec};
use super::tree::{quoted, Table};
use crate::cache::backup::{BackupSpec, CacheDisk, CacheFailure};
use crate::cache::write::WriteSpec;
use crate::error::{Error, Result};

/// One `[[events]]` table with a `fail_cache` key (and nothing else but `at_s`).
pub(super) fn event_action(t: &mut Table<'_>) -> Result<Action> {
    let key = t.key("fail_cache");
    for other in ["fail", "rebuild", "spare"] {
        if t.has(other) {
            return Err(Error::config(
                &key,
                format!(
                    "give one of `fail`, `rebuild` or `fail_cache` per event, not `{other}` \
                     too (use two events at the same time)"
                ),
            ));
        }
    }
    let name = t
        .choice("fail_cache", CacheFailure::NAMES)?
        .unwrap_or("primary");
    let what = CacheFailure::from_name(name).expect("choice checked the name");
    Ok(Action::FailCache(what))
}

/// Check the `fail_cache` events against the write cache and its backup: there must be a copy
/// of the kind that fails, and a backup's memory or cache disk fails at most once.
pub(super) fn check_events(
    timed: Option<&TimedSpec>,
    write: Option<&WriteSpec>,
    backup: Option<&BackupSpec>,
    has_array: bool,
) -> Result<()> {
    let Some(timed) = timed else {
        return Ok(());
    };
    let mut backup_failed: Option<usize> = None;
    let mut disk_failed: Option<usize> = None;
    // RAPID skips a failed data disk's log segments (engine/timed/cachefail.rs); a triple
    // would have to do it for both its logs.
    let triple_logical = matches!(backup, Some(BackupSpec::Triple(_)))
        && backup
            .and_then(BackupSpec::log_spec)
            .is_some_and(|(r, _)| r.cache_disk == CacheDisk::Logical);
    for (i, e) in timed.events.iter().enumerate() {
        if triple_logical && matches!(e.action, Action::Fail(_)) {
            return Err(Error::config(
                format!("events[{i}].fail"),
                "a data-disk failure under the triple RAPID-Cache's logical cache disks (which \
                 loses that disk's log segments) is not modelled yet; use cache_disk = \
                 \"physical\" or kind = \"rapid\"",
            ));
        }
        let Action::FailCache(what) = e.action else {
            continue;
        };
        let key = format!("events[{i}].fail_cache");
        if write.is_none() {
            return Err(Error::config(
                key,
                "there is no write cache to fail: add a [write_cache] table",
            ));
        }
        let kind = backup.unwrap_or(&BackupSpec::None);
        if matches!(kind, BackupSpec::Triple(_)) {
            // Recovery reads and the logical fallback are built for one backup log; a triple
            // would have to choose which backup rebuilds the primary.
            return Err(Error::config(
                key,
                "cache failures are not modelled for the triple RAPID-Cache yet; use [backup] \
                 kind = \"rapid\" or \"dual\"",
            ));
        }
        match what {
            CacheFailure::Primary => {}
            CacheFailure::Backup => {
                if matches!(kind, BackupSpec::None) {
                    return Err(Error::config(
                        key,
                        format!(
                            "the write cache has no backup copy to fail; set [backup] kind to \
                             one of {}",
                            quoted(&["dual", "rapid"])
                        ),
                    ));
                }
                if let Some(j) = backup_failed {
                    return Err(Error::config(
                        key,
                        format!("the backup already failed at events[{j}]"),
                    ));
                }
                backup_failed = Some(i);
            }
            CacheFailure::CacheDisk => {
                let BackupSpec::Rapid(r) = kind else {
                    return Err(Error::config(
                        key,
                        format!(
                            "only RAPID-Cache has a cache disk ([backup] kind = \"rapid\"), not \
                             kind = \"{}\"",
                            kind.name()
                        ),
                    ));
                };
                if r.cache_disk == CacheDisk::Logical {
                    return Err(Error::config(
                        key,
                        "a logical cache disk is a partition of the data disks and fails with \
                         them (not modelled yet); use cache_disk = \"physical\"",
                    ));
                }
                if !has_array {
                    return Err(Error::config(
                        key,
                        "after losing its physical cache disk RAPID falls back to a logical \
                         one on the data disks: it needs an [array]",
                    ));
                }
                if let Some(j) = disk_failed {
                    return Err(Error::config(
                        key,
                        format!(
                            "the cache disk already failed at events[{j}] (the backup now \
                             logs to the data disks)"
                        ),
                    ));
                }
                disk_failed = Some(i);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cache::backup::CacheFailure;
    use crate::config::backup::tests::{config_error as key_of, BASE, WC};
    use crate::config::{from_toml, Action};

    #[test]
    fn events_parse_in_order() {
        let cfg = format!(
            "{BASE}{WC}[backup]\n[[events]]\nat_s = 1.0\nfail_cache = \"cache_disk\"\n\
             [[events]]\nat_s = 2.0\nfail_cache = \"backup\"\n\
             [[events]]\nat_s = 3.0\nfail_cache = \"primary\"\n"
        );
        let e = from_toml(&cfg, "t.toml", None).unwrap();
        let ev = &e[0].timed.as_ref().unwrap().events;
        let got: Vec<_> = ev.iter().map(|e| (e.at_ns, e.action)).collect();
        assert_eq!(
            got,
            vec![
                (1_000_000_000, Action::FailCache(CacheFailure::CacheDisk)),
                (2_000_000_000, Action::FailCache(CacheFailure::Backup)),
                (3_000_000_000, Action::FailCache(CacheFailure::Primary)),
            ]
        );
    }

    #[test]
    fn bad_events_name_their_key() {
        let ev = |what: &str| format!("[[events]]\nat_s = 1.0\nfail_cache = \"{what}\"\n");
        // No write cache at all.
        let no_wc = format!(
            "[cache]\npolicy = \"lru\"\ncapacity_blocks = 8\n{}",
            ev("primary")
        );
        assert_eq!(key_of(&no_wc).0, "events[0].fail_cache");
        // No backup to fail, or no cache disk.
        assert_eq!(
            key_of(&format!("{WC}{}", ev("backup"))).0,
            "events[0].fail_cache"
        );
        let dual = format!("{WC}[backup]\nkind = \"dual\"\n{}", ev("cache_disk"));
        assert!(key_of(&dual).1.contains("only RAPID-Cache"));
        // A logical cache disk fails with its data disk.
        let logical = format!(
            "{WC}[backup]\ncache_disk = \"logical\"\n{}",
            ev("cache_disk")
        );
        let (k, msg) = key_of(&logical);
        assert_eq!(k, "events[0].fail_cache");
        assert!(msg.contains("fails with"), "{msg}");
        // Twice the same backup failure; an unknown name; two actions in one event.
        let twice = format!("{WC}[backup]\n{}{}", ev("backup"), ev("backup"));
        assert_eq!(key_of(&twice).0, "events[1].fail_cache");
        assert_eq!(
            key_of(&format!("{WC}[backup]\n{}", ev("nvram"))).0,
            "events[0].fail_cache"
        );
        let both = format!("{WC}[[events]]\nat_s = 1.0\nfail_cache = \"primary\"\nfail = 0\n");
        assert_eq!(key_of(&both).0, "events[0].fail_cache");
        // Counting mode has no events.
        let count = format!("{BASE}{WC}{}", ev("primary")).replace("mode = \"timed\"", "");
        assert!(from_toml(&count, "t.toml", None).is_err());
    }
}
