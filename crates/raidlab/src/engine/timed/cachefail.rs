//! Failures of the write cache's copies in timed mode (`[[events]] fail_cache = ...`; the
//! backups' side is `cache/backup/failure.rs` and `cache/backup/rapid/recover.rs`).
//!
//! - **primary**: dirty pages no copy of which survives are lost (counted, and they leave
//!   the cache). The backup restores the rest: memory copies are instantaneous; RAPID reads
//!   every cache-disk segment holding a valid page in one large read, queued in the
//!   foreground class like log writes. Until the last read completes the write cache is
//!   *offline*: writes wait in its queue (as when it is full), no destage starts, and a user
//!   read of any page the write cache holds waits too (reads of other pages go on); in-flight
//!   destages complete. The recovery time runs from the failure to the last read.
//! - **backup**: the dual NVRAM's mirror or RAPID's NVRAM fails (see the backups); RAPID
//!   borrows its NVRAM's size from the primary, whose capacity shrinks.
//! - **cache_disk**: RAPID's physical cache disk fails; the log moves to a partition on every
//!   data disk, reserved at run start only in runs with such an event (so other runs keep
//!   their whole disks). Transfers in flight on the lost disk are dropped and their data
//!   written again. The unprotected window runs from the failure until every page that lost
//!   its copy has one again (re-protected into a segment buffer, or destaged). A cache-disk
//!   failure during a primary recovery loses every page that was on the disk (counted
//!   conservatively: segments already read back are not credited).
//! - **data disk** (`fail = d`) while RAPID logs to a logical cache disk (configured, or after
//!   the fallback above): the member's log segments are retired and their pages re-protected
//!   as after a cache-disk failure (`cache/backup/rapid/member.rs`); its log transfers in
//!   flight are dropped. Scheduled as an engine event like the `fail_cache` ones.

use super::events::Kind;
use super::Sim;
use crate::cache::backup::{BackupSpec, CacheDisk, CacheFailure};
use crate::cache::write::BackupIo;
use crate::config::{Action, Experiment, TimedSpec};
use crate::disk::SECTOR_BYTES;
use crate::error::Result;
use crate::metrics::backup::BackupMetrics;
use crate::metrics::cachefail::CacheFailMetrics;

pub(super) struct CacheFail {
    m: CacheFailMetrics,
    /// A recovery of the primary is running: since when, and its segment reads left.
    recovering_from: Option<u64>,
    reads_left: u32,
    /// User reads waiting for the recovery: slot, and whether it has disk reads of its own.
    readers: Vec<(u32, bool)>,
    /// Pages lost their backup copy at this time and some still have none.
    exposed_from: Option<u64>,
    /// First sector of the logical cache disk reserved for a physical one's failure.
    fallback_start_sectors: Option<u64>,
}

impl CacheFail {
    /// The failure state of a run with `fail_cache` events, or with data-disk failures under
    /// a logical RAPID cache disk (`None` without). Reserves the
    /// fallback partition on the members when a cache-disk failure is configured.
    pub(super) fn new(
        exp: &Experiment,
        spec: &TimedSpec,
        capacity_sectors: &mut [u64],
        members: u32,
    ) -> Result<Option<CacheFail>> {
        let mut any = false;
        let mut disk_event = None;
        for (i, e) in spec.events.iter().enumerate() {
            if let Action::FailCache(what) = e.action {
                any = true;
                if what == CacheFailure::CacheDisk && disk_event.is_none() {
                    disk_event = Some(i);
                }
            }
        }
        // A data-disk failure loses the log segments of a logical cache disk.
        let logical =
            matches!(&exp.backup, Some(BackupSpec::Rapid(r)) if r.cache_disk == CacheDisk::Logical);
        let member_fails = spec
            .events
            .iter()
            .any(|e| matches!(e.action, Action::Fail(_)));
        if !(any || (logical && member_fails)) {
            return Ok(None);
        }
        let fallback_start_sectors = match (disk_event, &exp.backup) {
            (Some(i), Some(BackupSpec::Rapid(r))) => {
                let page_sectors = u64::from(exp.workload.block_size) / SECTOR_BYTES;
                Some(super::backup::carve_partition(
                    capacity_sectors,
                    members,
                    r.segments,
                    u64::from(r.segment_pages) * page_sectors,
                    &format!("events[{i}].fail_cache"),
                )?)
            }
            _ => None,
        };
        Ok(Some(CacheFail {
            m: CacheFailMetrics::default(),
            recovering_from: None,
            reads_left: 0,
            readers: Vec::new(),
            exposed_from: None,
            fallback_start_sectors,
        }))
    }
}

impl Sim<'_> {
    /// Schedule the `fail_cache` events, and data-disk failures under a cache disk, as engine
    /// events (they issue I/O).
    pub(super) fn schedule_cache_failures(&mut self) {
        for (i, ev) in self.spec.events.iter().enumerate() {
            // A data-disk failure under a logical cache disk (now or after a fallback) loses
            // its log segments: handled at its time, after the array took the disk out.
            let log_member =
                matches!(ev.action, Action::Fail(_)) && self.log.is_some() && self.cf.is_some();
            if matches!(ev.action, Action::FailCache(_)) || log_member {
                self.events.push(ev.at_ns, Kind::CacheFail, i as u32, 0);
            }
        }
    }

    /// The `fail_cache` event `index` fires.
    pub(super) fn cache_fail_event(&mut self, now: u64, index: u32) -> Result<()> {
        let what = match self.spec.events[index as usize].action {
            Action::FailCache(what) => what,
            Action::Fail(disk) => return self.log_member_failed(now, disk),
            Action::Rebuild { .. } => unreachable!("rebuilds are scheduled as RebuildStart"),
        };
        match what {
            CacheFailure::Primary => self.fail_primary(now),
            CacheFailure::Backup => self.fail_backup(now),
            CacheFailure::CacheDisk => self.fail_cache_disk(now),
        }
    }

    fn fail_primary(&mut self, now: u64) -> Result<()> {
        let wb = self.wb.as_mut().expect("validated: a write cache");
        let cf = self.cf.as_mut().expect("scheduled with its state");
        wb.integrate(now);
        cf.m.primary_failures += 1;
        cf.m.lost_pages += wb.cache.discard_lost();
        let r = wb.cache.backup_mut().primary_failed();
        cf.m.recovered_pages += r.memory_pages + r.disk_pages;
        cf.m.recovered_disk_pages += r.disk_pages;
        cf.m.recovery_reads += u64::from(r.segment_reads);
        if r.segment_reads > 0 {
            cf.reads_left += r.segment_reads;
            cf.recovering_from.get_or_insert(now);
            wb.cache.set_offline(true);
        }
        self.log_pump(now)?;
        // Lost pages may have freed room for waiting writes.
        self.admit_waiting(now)?;
        self.pump(now)
    }

    fn fail_backup(&mut self, now: u64) -> Result<()> {
        let wb = self.wb.as_mut().expect("validated: a write cache");
        let cf = self.cf.as_mut().expect("scheduled with its state");
        wb.integrate(now);
        let e = wb
            .cache
            .backup_mut()
            .backup_failed(CacheFailure::Backup, true);
        cf.m.backup_failures += 1;
        cf.m.unprotected_pages += e.pages;
        cf.m.borrowed_pages += e.borrowed_pages;
        if e.borrowed_pages > 0 {
            wb.cache.lend(e.borrowed_pages);
        }
        if wb.cache.backup().unprotected() > 0 {
            cf.exposed_from.get_or_insert(now);
        }
        self.pump(now)
    }

    fn fail_cache_disk(&mut self, now: u64) -> Result<()> {
        let wb = self.wb.as_mut().expect("validated: a write cache");
        let cf = self.cf.as_mut().expect("scheduled with its state");
        let log = self
            .log
            .as_mut()
            .expect("validated: RAPID has a cache disk");
        let start = cf
            .fallback_start_sectors
            .expect("reserved at run start for this event");
        wb.integrate(now);
        cf.m.cache_disk_failures += 1;
        cf.m.lost_log_ios += log.fail_physical(start);
        let recovering = cf.recovering_from.is_some();
        let e = wb
            .cache
            .backup_mut()
            .backup_failed(CacheFailure::CacheDisk, !recovering);
        cf.m.unprotected_pages += e.pages;
        // The fallback skips data disks that failed before it.
        let members = log.members();
        for d in log.dead() {
            let e = wb
                .cache
                .backup_mut()
                .log_member_failed(d, members, !recovering);
            cf.m.unprotected_pages += e.pages;
        }
        if wb.cache.backup().unprotected() > 0 {
            cf.exposed_from.get_or_insert(now);
        }
        if recovering {
            // The recovery's reads died with the disk: what it held is gone with the primary.
            cf.m.lost_pages += wb.cache.discard_lost();
            cf.reads_left = 0;
            self.recovery_done(now)?;
        }
        self.log_pump(now)?;
        self.admit_waiting(now)?;
        self.pump(now)
    }

    /// Data disk `disk` failed at `now`. Under a logical cache disk RAPID skips it: its log
    /// segments are retired, the pages whose copy was there are exposed and copied again from
    /// the primary, and its transfers in flight are dropped (buffers written again elsewhere).
    /// During a primary recovery the exposed pages are lost, and so are the recovery's reads
    /// of the disk (counted conservatively, as for a cache-disk failure).
    pub(super) fn log_member_failed(&mut self, now: u64, disk: u32) -> Result<()> {
        let Some(log) = self.log.as_mut() else {
            return Ok(());
        };
        let Some((members, writes, reads)) = log.fail_member(disk) else {
            return Ok(());
        };
        let wb = self.wb.as_mut().expect("a backup needs a write cache");
        let cf = self
            .cf
            .as_mut()
            .expect("created for a logical cache disk's runs");
        wb.integrate(now);
        let recovering = cf.recovering_from.is_some();
        let e = wb
            .cache
            .backup_mut()
            .log_member_failed(disk, members, !recovering);
        cf.m.log_member_failures += 1;
        cf.m.lost_log_ios += writes + u64::from(reads);
        cf.m.unprotected_pages += e.pages;
        if recovering {
            cf.m.lost_pages += wb.cache.discard_lost();
            debug_assert!(cf.reads_left >= reads);
            cf.reads_left -= reads;
        }
        if wb.cache.backup().unprotected() > 0 {
            cf.exposed_from.get_or_insert(now);
        }
        if recovering && cf.reads_left == 0 {
            self.recovery_done(now)?;
        }
        self.log_pump(now)?;
        self.admit_waiting(now)?;
        self.pump(now)
    }

    /// After every event: close the unprotected window once every page has a copy again.
    #[inline]
    pub(super) fn cache_fail_poll(&mut self, now: u64) {
        let Some(cf) = self.cf.as_mut() else {
            return;
        };
        let Some(from) = cf.exposed_from else {
            return;
        };
        let wb = self.wb.as_ref().expect("validated: a write cache");
        if wb.cache.backup().unprotected() == 0 {
            cf.m.unprotected_ns_max = cf.m.unprotected_ns_max.max(now - from);
            cf.exposed_from = None;
        }
    }

    /// A cache-disk transfer completed (after the backup was told): count recovery reads.
    pub(super) fn cache_fail_io_done(&mut self, now: u64, io: BackupIo) -> Result<()> {
        if !io.read {
            return Ok(());
        }
        let cf = self
            .cf
            .as_mut()
            .expect("only recoveries read the cache disk");
        debug_assert!(cf.reads_left > 0);
        cf.reads_left -= 1;
        if cf.reads_left == 0 {
            self.recovery_done(now)?;
        }
        Ok(())
    }

    /// The primary is rebuilt: the write cache comes back and waiting reads go on.
    fn recovery_done(&mut self, now: u64) -> Result<()> {
        let cf = self.cf.as_mut().expect("a recovery has its state");
        if let Some(from) = cf.recovering_from.take() {
            cf.m.recovery_ns_max = cf.m.recovery_ns_max.max(now - from);
        }
        let mut readers = std::mem::take(&mut cf.readers);
        self.wb
            .as_mut()
            .expect("validated: a write cache")
            .cache
            .set_offline(false);
        for &(slot, had_ops) in &readers {
            let s = &mut self.slots[slot as usize];
            debug_assert!(s.pending > 0);
            s.pending -= 1;
            if s.pending > 0 {
                continue;
            }
            if had_ops {
                self.rebuild_reads_done(now, slot)?;
                self.done_after(now, slot, self.spec.controller.miss_ns)?;
            } else {
                self.done_after(now, slot, self.spec.controller.hit_ns)?;
            }
        }
        readers.clear();
        self.cf.as_mut().expect("present").readers = readers;
        self.admit_waiting(now)?;
        self.pump(now)
    }

    /// A user read of pages `first..first + count` arriving at `now` during a recovery waits
    /// for it if the write cache holds any of them (its disk reads, if any, go on). `true`
    /// when the request was taken care of here.
    pub(super) fn recovery_read(
        &mut self,
        now: u64,
        slot: u32,
        first: u64,
        count: u64,
    ) -> Result<bool> {
        let (Some(cf), Some(wb)) = (self.cf.as_mut(), self.wb.as_ref()) else {
            return Ok(false);
        };
        if cf.recovering_from.is_none() || !(first..first + count).any(|l| wb.cache.holds(l)) {
            return Ok(false);
        }
        cf.m.recovery_waited_reads += 1;
        let had_ops = !self.acc.ops.is_empty();
        cf.readers.push((slot, had_ops));
        if had_ops {
            let ops = std::mem::take(&mut self.acc.ops);
            let r = self.submit_all(now, slot, &ops);
            self.acc.ops = ops;
            r?;
        }
        // One more thing to wait for: the recovery.
        self.slots[slot as usize].pending += 1;
        Ok(true)
    }

    /// Store the failure metrics with the backup's (created for a run without `[backup]`).
    pub(super) fn cache_fail_metrics(&mut self, end: u64) {
        let Some(cf) = self.cf.as_mut() else {
            return;
        };
        if let Some(from) = cf.exposed_from.take() {
            // Still unprotected at the end of the run.
            cf.m.unprotected_ns_max = cf.m.unprotected_ns_max.max(end.saturating_sub(from));
        }
        let Some(wc) = self.m.write_cache.as_mut() else {
            return;
        };
        let b = wc.backup.get_or_insert_with(|| BackupMetrics {
            kind: "none",
            ..BackupMetrics::default()
        });
        b.failures = Some(std::mem::take(&mut cf.m));
    }
}
