//! `[write_cache] unified = true`: the read cache (`[cache]`) and the write cache share one
//! memory of `cache.capacity_blocks + write_cache.capacity_pages` pages (RAPID-Cache Fig. 2a;
//! the bound is kept by `cache/write/unified.rs`). Both caches are given the whole total as
//! capacity here, so the write cache's water marks and the backup's checks see it.

use super::{CacheSpec, Capacity};
use crate::cache::read::PolicySpec;
use crate::cache::write::WriteSpec;
use crate::error::{Error, Result};

const KEY: &str = "write_cache.unified";

/// Check a unified cache against `[cache]` and give both caches the shared total.
pub(super) fn apply(
    mut cache: CacheSpec,
    write: Option<WriteSpec>,
) -> Result<(CacheSpec, Option<WriteSpec>)> {
    let mut w = match write {
        Some(w) if w.unified => w,
        other => return Ok((cache, other)),
    };
    if !w.read_cache {
        return Err(Error::config(
            KEY,
            "shares memory with the read cache: add a [cache] table (its capacity_blocks is \
             the clean pages' share of the total)",
        ));
    }
    let Capacity::Units(read_pages) = cache.capacity else {
        return Err(Error::config(
            KEY,
            "needs the read cache's size in blocks (cache.capacity_blocks), not a fraction \
             of the footprint",
        ));
    };
    if !cache.policy.evicts_one() {
        return Err(Error::config(
            KEY,
            format!(
                "gives clean pages' space to dirty ones, which cache.policy cannot do; use one \
                 of {:?}",
                PolicySpec::EVICTS_ONE
            ),
        ));
    }
    let total = read_pages + w.capacity_pages;
    cache.capacity = Capacity::Units(total);
    w.capacity_pages = total;
    Ok((cache, Some(w)))
}

#[cfg(test)]
mod tests {
    use crate::config::backup::tests::{config_error, BASE};
    use crate::config::{from_toml, Capacity};

    fn key_of(extra: &str) -> String {
        config_error(extra).0
    }

    #[test]
    fn both_caches_get_the_total() {
        let e = from_toml(
            &format!(
                "{BASE}[cache]\npolicy = \"lru\"\ncapacity_blocks = 8192\n\
                 [write_cache]\ncapacity_pages = 2048\nunified = true\n"
            ),
            "t.toml",
            None,
        )
        .unwrap();
        let w = e[0].write_cache.as_ref().unwrap();
        assert!(w.unified);
        assert_eq!(w.capacity_pages, 10240);
        assert_eq!(e[0].cache.capacity, Capacity::Units(10240));
    }

    #[test]
    fn bad_setups_name_the_key() {
        let wc = "[write_cache]\ncapacity_pages = 2048\nunified = true\n";
        assert_eq!(key_of(wc), "write_cache.unified");
        assert_eq!(
            key_of(&format!(
                "[cache]\npolicy = \"arc\"\ncapacity_blocks = 64\n{wc}"
            )),
            "write_cache.unified"
        );
        assert_eq!(
            key_of(&format!(
                "[cache]\npolicy = \"lru\"\ncapacity_fraction = 0.5\n{wc}"
            )),
            "write_cache.unified"
        );
        assert_eq!(
            key_of(
                "[cache]\npolicy = \"lru\"\ncapacity_blocks = 64\n[write_cache]\n\
                    capacity_pages = 2048\nunified = 1\n"
            ),
            "write_cache.unified"
        );
    }
}
