//! Metrics of the write cache's failures (`fail_cache` events): recovery of the primary from
//! the backup, re-protection after a backup failure, and data loss. Present (as `bk_*` keys)
//! only in runs with such an event.

use serde_json::{json, Map, Value};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CacheFailMetrics {
    /// Failure events of each kind that fired.
    pub primary_failures: u64,
    pub backup_failures: u64,
    pub cache_disk_failures: u64,
    /// Longest recovery of the primary: from the failure to the last cache-disk read done
    /// (0 when everything is copied back from memory).
    pub recovery_ns_max: u64,
    /// Pages restored into the primary: all, and those read from the cache disk.
    pub recovered_pages: u64,
    pub recovered_disk_pages: u64,
    /// Segment reads of the recoveries.
    pub recovery_reads: u64,
    /// User reads that waited for a recovery (they read a page the write cache holds).
    pub recovery_waited_reads: u64,
    /// Acknowledged dirty pages no copy of which survived.
    pub lost_pages: u64,
    /// Pages that lost their backup copy in a backup or cache-disk failure, and the longest
    /// time until every one of them had a copy again (re-protected or destaged).
    pub unprotected_pages: u64,
    pub unprotected_ns_max: u64,
    /// Primary-cache pages lent to a failed backup NVRAM.
    pub borrowed_pages: u64,
    /// Cache-disk transfers in flight when the disk (or, logical, its member) failed: writes
    /// (their data is written again) and recovery reads.
    pub lost_log_ios: u64,
    /// Data disks that failed under a logical cache disk (their log segments retired).
    pub log_member_failures: u64,
}

impl CacheFailMetrics {
    /// Add the failure `bk_*` keys to a flat record.
    pub fn put(&self, m: &mut Map<String, Value>) {
        let pairs: [(&str, Value); 15] = [
            ("bk_primary_failures", json!(self.primary_failures)),
            ("bk_backup_failures", json!(self.backup_failures)),
            ("bk_cache_disk_failures", json!(self.cache_disk_failures)),
            ("bk_recovery_s", json!(self.recovery_ns_max as f64 / 1e9)),
            ("bk_recovered_pages", json!(self.recovered_pages)),
            ("bk_recovered_disk_pages", json!(self.recovered_disk_pages)),
            ("bk_recovery_reads", json!(self.recovery_reads)),
            (
                "bk_recovery_waited_reads",
                json!(self.recovery_waited_reads),
            ),
            ("bk_lost_pages", json!(self.lost_pages)),
            ("bk_unprotected_pages", json!(self.unprotected_pages)),
            (
                "bk_unprotected_s",
                json!(self.unprotected_ns_max as f64 / 1e9),
            ),
            ("bk_borrowed_pages", json!(self.borrowed_pages)),
            ("bk_lost_log_ios", json!(self.lost_log_ios)),
            ("bk_log_member_failures", json!(self.log_member_failures)),
            (
                "bk_failures",
                json!(self.primary_failures + self.backup_failures + self.cache_disk_failures),
            ),
        ];
        for (k, v) in pairs {
            m.insert(k.into(), v);
        }
    }
}
