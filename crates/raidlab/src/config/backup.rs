//! `[backup]`: the write cache's backup (see `docs/rapid.md`).
//!
//! ```toml
//! [backup]
//! kind = "rapid"            # "none", "dual", "rapid", "triple" (two identical RAPID backups)
//! cache_disk = "physical"   # "physical" (a dedicated disk) or "logical" (on the data disks)
//! nvram_kib = 2048          # backup NVRAM: LRU cache + segment buffers
//! segment_kib = 128         # segment (and segment buffer) size
//! segment_buffers = 4
//! disk_mib = 256            # cache-disk space
//! gc_free_segments = 8      # collect garbage when fewer segments are free
//! ```

use super::tree::Table;
use crate::array::ArraySpec;
use crate::cache::backup::{BackupSpec, CacheDisk, RapidSpec};
use crate::cache::write::WriteSpec;
use crate::error::{Error, Result};

/// Keys only the RAPID backups (`rapid`, `triple`) take.
const RAPID_KEYS: [&str; 6] = [
    "cache_disk",
    "nvram_kib",
    "segment_kib",
    "segment_buffers",
    "disk_mib",
    "gc_free_segments",
];

/// Parse `[backup]` (if present) against the write cache, the block size and the array.
pub(super) fn backup_spec(
    t: Option<Table<'_>>,
    write: Option<&WriteSpec>,
    block_size: u32,
    array: Option<&ArraySpec>,
) -> Result<Option<BackupSpec>> {
    let Some(mut t) = t else {
        return Ok(None);
    };
    let Some(write) = write else {
        return Err(Error::config(
            "backup",
            "backs up the write cache: add a [write_cache] table",
        ));
    };
    let kind = t.choice("kind", BackupSpec::NAMES)?.unwrap_or("rapid");
    if !matches!(kind, "rapid" | "triple") {
        if let Some(k) = RAPID_KEYS.iter().find(|k| t.has(k)) {
            return Err(Error::config(
                t.key(k),
                "only applies to kind = \"rapid\" or \"triple\"",
            ));
        }
        t.finish()?;
        return Ok(Some(match kind {
            "none" => BackupSpec::None,
            _ => BackupSpec::Dual,
        }));
    }
    let page = u64::from(block_size);
    let cache_disk = match t.choice("cache_disk", CacheDisk::NAMES)? {
        Some("logical") => CacheDisk::Logical,
        _ => CacheDisk::Physical,
    };
    if cache_disk == CacheDisk::Logical && array.is_none() {
        return Err(Error::config(
            t.key("cache_disk"),
            "a logical cache disk lives on the data disks: it needs an [array]",
        ));
    }
    let segment_key = t.key("segment_kib");
    let segment_bytes = t.uint_or("segment_kib", 1, 1 << 20, 128)? * 1024;
    if segment_bytes % page != 0 {
        return Err(Error::config(
            &segment_key,
            format!(
                "a segment of {segment_bytes} bytes is not a whole number of pages ({page} bytes)"
            ),
        ));
    }
    let segment_pages = segment_bytes / page;
    let buffers_key = t.key("segment_buffers");
    let segment_buffers = t.uint_or("segment_buffers", 1, 64, 4)? as u32;
    let nvram_key = t.key("nvram_kib");
    let nvram_bytes = t.uint_or("nvram_kib", 1, 1 << 30, 2048)? * 1024;
    let buffers_bytes = u64::from(segment_buffers) * segment_bytes;
    if nvram_bytes < buffers_bytes + page {
        return Err(Error::config(
            &nvram_key,
            format!(
                "{} KiB of NVRAM cannot hold {segment_buffers} segment buffers of {} KiB and \
                 one page of LRU cache; give more NVRAM, fewer buffers ({buffers_key}) or \
                 smaller segments ({segment_key})",
                nvram_bytes / 1024,
                segment_bytes / 1024
            ),
        ));
    }
    let disk_key = t.key("disk_mib");
    let disk_bytes = t.uint_or("disk_mib", 1, 1 << 30, 256)? << 20;
    if disk_bytes < segment_bytes {
        return Err(Error::config(
            &disk_key,
            format!(
                "a cache disk of {} MiB is smaller than one segment ({} KiB)",
                disk_bytes >> 20,
                segment_bytes / 1024
            ),
        ));
    }
    let segments = (disk_bytes / segment_bytes).min(u64::from(u32::MAX - 1)) as u32;
    let gc_key = t.key("gc_free_segments");
    let gc_free_segments = t
        .uint("gc_free_segments", 1, 1 << 20)?
        .unwrap_or(u64::from(segment_buffers) + 4) as u32;
    // Garbage collection always finds two segments that fit in one when the live pages (at
    // most the primary's capacity) fill no more than half the segments it may use.
    let live_segments = write.capacity_pages.div_ceil(segment_pages);
    let needed = 2 * live_segments + u64::from(segment_buffers) + u64::from(gc_free_segments) + 2;
    if u64::from(segments) < needed {
        return Err(Error::config(
            &disk_key,
            format!(
                "{segments} segments are too few for a {} MiB write cache: at least {needed} \
                 ({} MiB) so garbage collection always has room (twice the cache, the \
                 segment buffers, {gc_key} and two spare)",
                (write.capacity_pages * page) >> 20,
                (needed * segment_bytes).div_ceil(1 << 20)
            ),
        ));
    }
    t.finish()?;
    let spec = RapidSpec {
        nvram_pages: nvram_bytes / page,
        segment_pages: segment_pages as u32,
        segment_buffers,
        segments,
        gc_free_segments,
        cache_disk,
    };
    // A triple's two backups are identical: each gets these keys (its own NVRAM and disk).
    Ok(Some(if kind == "triple" {
        BackupSpec::Triple(spec)
    } else {
        BackupSpec::Rapid(spec)
    }))
}

#[cfg(test)]
pub(super) mod tests {
    use crate::cache::backup::{BackupSpec, CacheDisk};
    use crate::config::from_toml;
    use crate::error::Error;

    /// A timed RAID-5 run the `[backup]`, cache-failure and unified-cache tests build on.
    pub(in crate::config) const BASE: &str = "[workload]\nops = \"all\"\nblock_size = 8192\n\
        [workload.synthetic]\nkind = \"bursty\"\nrequests = 10\n\
        [array]\nlevel = \"raid5\"\ndisks = 5\nstripe_unit = 32768\n\
        [run]\nmode = \"timed\"\n";
    pub(in crate::config) const WC: &str = "[write_cache]\ncapacity_pages = 2048\n";

    /// The key and message of the config error `BASE` + `extra` gives.
    pub(in crate::config) fn config_error(extra: &str) -> (String, String) {
        match from_toml(&format!("{BASE}{extra}"), "t.toml", None) {
            Err(Error::Config { key, msg, .. }) => (key, msg),
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    fn parse(extra: &str) -> Result<Option<BackupSpec>, Error> {
        from_toml(&format!("{BASE}{WC}{extra}"), "t.toml", None).map(|e| e[0].backup.clone())
    }

    fn key_of(extra: &str) -> String {
        config_error(&format!("{WC}{extra}")).0
    }

    #[test]
    fn defaults_follow_the_paper() {
        let Some(BackupSpec::Rapid(r)) = parse("[backup]\n").unwrap() else {
            panic!("rapid by default")
        };
        // 2 MiB of NVRAM in 8 KiB pages, 128 KiB segments = 16 pages, 256 MiB = 2048 segments.
        assert_eq!(
            (
                r.nvram_pages,
                r.segment_pages,
                r.segment_buffers,
                r.segments
            ),
            (256, 16, 4, 2048)
        );
        assert_eq!(r.lru_pages(), 256 - 64);
        assert_eq!(r.cache_disk, CacheDisk::Physical);
        assert_eq!(
            parse("[backup]\nkind = \"dual\"\n").unwrap(),
            Some(BackupSpec::Dual)
        );
        // A triple takes the same keys, for each of its two identical backups.
        let t = parse("[backup]\nkind = \"triple\"\nnvram_kib = 1024\n").unwrap();
        let Some(BackupSpec::Triple(t)) = t else {
            panic!("triple")
        };
        assert_eq!((t.nvram_pages, t.segments), (128, 2048));
        assert_eq!(
            key_of("[backup]\nkind = \"triple\"\ndisk_mib = 20\n"),
            "backup.disk_mib"
        );
    }

    #[test]
    fn bad_values_name_their_key() {
        assert_eq!(key_of("[backup]\nkind = \"quad\"\n"), "backup.kind");
        // 0.5 MiB cannot hold 4 x 128 KiB buffers plus a page.
        assert_eq!(key_of("[backup]\nnvram_kib = 512\n"), "backup.nvram_kib");
        assert_eq!(key_of("[backup]\nsegment_kib = 12\n"), "backup.segment_kib");
        // The segment is larger than the cache disk.
        assert_eq!(
            key_of("[backup]\nsegment_kib = 2048\nnvram_kib = 16384\ndisk_mib = 1\n"),
            "backup.disk_mib"
        );
        // 16 MiB of cache needs at least 2 x 16 MiB of log.
        assert_eq!(key_of("[backup]\ndisk_mib = 20\n"), "backup.disk_mib");
        assert_eq!(
            key_of("[backup]\nkind = \"dual\"\nnvram_kib = 4096\n"),
            "backup.nvram_kib"
        );
        assert_eq!(
            key_of("[backup]\nsegment_buffers = 0\n"),
            "backup.segment_buffers"
        );
        assert_eq!(key_of("[backup]\nlog = 1\n"), "backup.log");
    }

    #[test]
    fn needs_a_write_cache_and_an_array_for_a_logical_disk() {
        let no_wc = format!("{BASE}[cache]\npolicy = \"lru\"\ncapacity_blocks = 10\n");
        let e = from_toml(&format!("{no_wc}[backup]\n"), "t.toml", None).unwrap_err();
        assert!(
            matches!(e, Error::Config { ref key, .. } if key == "backup"),
            "{e:?}"
        );
        let no_array = format!("{BASE}{WC}").replace(
            "[array]\nlevel = \"raid5\"\ndisks = 5\nstripe_unit = 32768\n",
            "",
        );
        let e = from_toml(
            &format!("{no_array}[backup]\ncache_disk = \"logical\"\n"),
            "t.toml",
            None,
        )
        .unwrap_err();
        assert!(
            matches!(e, Error::Config { ref key, .. } if key == "backup.cache_disk"),
            "{e:?}"
        );
    }
}
