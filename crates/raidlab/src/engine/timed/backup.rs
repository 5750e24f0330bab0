//! The write cache's backup in timed mode: installs the `[backup]` into the write cache and
//! performs the large cache-disk writes RAPID's backup asks for (`cache/backup/`).
//!
//! - **Physical** cache disk: one extra device of the run's disk model after the members and
//!   hot spares; segment `s` lies at `s x segment` from sector 0, so consecutive segments are
//!   written in log order. A triple RAPID-Cache has two such devices, one per backup: its
//!   transfers number backup `k`'s segment `s` as `k x segments + s` (`cache/backup/triple.rs`),
//!   which lands on extra device `k` at `s x segment`.
//! - **Logical** cache disk: a partition at the end of every member (the members' usable space
//!   shrinks by it, so user data never reaches it); segment `s` lies on member `s mod disks`
//!   at `(s / disks) x segment` into the partition. Log writes bypass the array's parity and
//!   compete with user and destage I/O at the members. A triple RAPID-Cache's partition holds
//!   both backups' segments (`2 x segments`, numbered as above), spread the same way.
//!
//! Log writes queue in the foreground class: a write waits for them when no segment buffer is
//! free, so they are as urgent as user I/O. A write the backup cannot take waits in the write
//! cache's queue (`destage.rs`) until a log write completes and frees a buffer.

use super::rebuild::Owner;
use super::Sim;
use crate::cache::backup::{BackupSpec, CacheDisk};
use crate::cache::write::{BackupIo, WriteCache};
use crate::config::Experiment;
use crate::disk::{Class, DiskIo, SECTOR_BYTES};
use crate::error::{Error, Result};
use crate::metrics::backup::BackupMetrics;
use crate::workload::Op;

/// One transfer in flight.
#[derive(Debug, Clone, Copy)]
struct Flight {
    io: BackupIo,
    submitted_ns: u64,
    /// Issued to a physical cache disk that failed since (`cachefail.rs`): its completion
    /// is dropped.
    lost: bool,
}

pub(super) struct LogDisk {
    mode: CacheDisk,
    /// The (first) physical cache disk's device.
    device: usize,
    /// Segments per physical cache disk (a triple's second disk holds the next ones).
    disk_segments: u32,
    members: u32,
    /// Members that failed: no log transfer goes to them (`cachefail.rs`).
    dead: Vec<bool>,
    /// Logical: first sector of the partition on every member.
    part_start_sectors: u64,
    segment_sectors: u64,
    sectors_per_page: u64,
    flights: Vec<Flight>,
    free: Vec<u32>,
    /// Since when a write has waited for the backup (`None` while none does).
    stall_from: Option<u64>,
    m: BackupMetrics,
}

/// Extra devices the backup needs (a physical cache disk).
pub(super) fn extra_devices(exp: &Experiment) -> usize {
    match exp.backup.as_ref().and_then(BackupSpec::log_spec) {
        Some((r, disks)) if r.cache_disk == CacheDisk::Physical => disks as usize,
        _ => 0,
    }
}

/// Plug the configured backup into the write cache.
pub(super) fn install(exp: &Experiment, cache: &mut WriteCache) {
    if let Some(b) = &exp.backup {
        cache.set_backup(b.build(cache.capacity()));
    }
}

/// Carve a logical cache disk of `segments` segments off the end of every member; returns
/// the partition's first sector (`key` names the config key blamed when it does not fit).
pub(super) fn carve_partition(
    capacity_sectors: &mut [u64],
    members: u32,
    segments: u32,
    segment_sectors: u64,
    key: &str,
) -> Result<u64> {
    let per_member = u64::from(segments).div_ceil(u64::from(members));
    let part = per_member * segment_sectors;
    let smallest = capacity_sectors[..members as usize]
        .iter()
        .copied()
        .min()
        .unwrap_or(0);
    if part >= smallest {
        return Err(Error::config(
            key,
            format!(
                "a logical cache disk needs {} MiB on each data disk, which hold {} MiB",
                (part * SECTOR_BYTES) >> 20,
                (smallest * SECTOR_BYTES) >> 20
            ),
        ));
    }
    let start = smallest - part;
    for c in &mut capacity_sectors[..members as usize] {
        *c = start;
    }
    Ok(start)
}

/// Whether each flight slot holds a transfer in flight (not in the free list).
fn in_flight(flights: usize, free: &[u32]) -> Vec<bool> {
    let mut live = vec![true; flights];
    for &i in free {
        live[i as usize] = false;
    }
    live
}

impl LogDisk {
    /// The physical cache disk failed: log to the partition at `part_start_sectors` of every
    /// member from now on. Transfers in flight on the lost disk complete as lost (the backup
    /// writes their data again); returns how many there were.
    pub(super) fn fail_physical(&mut self, part_start_sectors: u64) -> u64 {
        debug_assert_eq!(self.mode, CacheDisk::Physical);
        let mut lost = 0;
        let live = in_flight(self.flights.len(), &self.free);
        for (f, live) in self.flights.iter_mut().zip(live) {
            f.lost |= live;
            lost += u64::from(live);
        }
        self.mode = CacheDisk::Logical;
        self.part_start_sectors = part_start_sectors;
        lost
    }

    /// Data disk `member` failed. Under a logical cache disk its transfers in flight complete
    /// as lost: returns the members and the lost writes and reads (`None` while the cache
    /// disk is physical: the member is remembered for a later fallback, [`LogDisk::dead`]).
    pub(super) fn fail_member(&mut self, member: u32) -> Option<(u32, u64, u32)> {
        self.dead[member as usize] = true;
        if self.mode != CacheDisk::Logical {
            return None;
        }
        let (mut writes, mut reads) = (0, 0);
        let live = in_flight(self.flights.len(), &self.free);
        for (f, live) in self.flights.iter_mut().zip(live) {
            if live && !f.lost && f.io.segment % self.members == member {
                f.lost = true;
                writes += u64::from(!f.io.read);
                reads += u32::from(f.io.read);
            }
        }
        Some((self.members, writes, reads))
    }

    pub(super) fn members(&self) -> u32 {
        self.members
    }

    /// Members that failed so far.
    pub(super) fn dead(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.members).filter(|&m| self.dead[m as usize])
    }

    /// The cache disk of `exp`'s backup, if it has one. `capacity_sectors` holds every
    /// device's usable sectors; a logical disk's partition is carved off the members' ends.
    pub(super) fn new(
        exp: &Experiment,
        capacity_sectors: &mut [u64],
        members: u32,
        first_extra: usize,
    ) -> Result<Option<LogDisk>> {
        let Some((r, copies)) = exp.backup.as_ref().and_then(BackupSpec::log_spec) else {
            return Ok(None);
        };
        let page = u64::from(exp.workload.block_size);
        let sectors_per_page = page / SECTOR_BYTES;
        let segment_sectors = u64::from(r.segment_pages) * sectors_per_page;
        let mut part_start_sectors = 0;
        match r.cache_disk {
            CacheDisk::Physical => {
                let need = u64::from(r.segments) * segment_sectors;
                let have = capacity_sectors[first_extra..first_extra + copies as usize]
                    .iter()
                    .copied()
                    .min()
                    .unwrap_or(0);
                if need > have {
                    return Err(Error::config(
                        "backup.disk_mib",
                        format!(
                            "the cache disk holds {} MiB, less than the {} MiB asked for",
                            (have * SECTOR_BYTES) >> 20,
                            (need * SECTOR_BYTES) >> 20
                        ),
                    ));
                }
            }
            CacheDisk::Logical => {
                part_start_sectors = carve_partition(
                    capacity_sectors,
                    members,
                    r.segments * copies,
                    segment_sectors,
                    "backup.disk_mib",
                )?;
            }
        }
        Ok(Some(LogDisk {
            mode: r.cache_disk,
            device: first_extra,
            disk_segments: r.segments,
            members,
            dead: vec![false; members as usize],
            part_start_sectors,
            segment_sectors,
            sectors_per_page,
            flights: Vec::new(),
            free: Vec::new(),
            stall_from: None,
            m: BackupMetrics {
                kind: exp.backup.as_ref().map_or("rapid", BackupSpec::name),
                cache_disk: r.cache_disk.name(),
                ..BackupMetrics::default()
            },
        }))
    }
}

impl Sim<'_> {
    /// Issue the cache-disk transfers the backup has queued.
    pub(super) fn log_pump(&mut self, now: u64) -> Result<()> {
        loop {
            let (Some(wb), Some(log)) = (self.wb.as_mut(), self.log.as_mut()) else {
                return Ok(());
            };
            let Some(io) = wb.cache.backup_mut().next_io() else {
                return Ok(());
            };
            let offset = match log.mode {
                CacheDisk::Physical => {
                    u64::from(io.segment % log.disk_segments) * log.segment_sectors
                }
                CacheDisk::Logical => {
                    log.part_start_sectors
                        + u64::from(io.segment / log.members) * log.segment_sectors
                }
            };
            let dev = match log.mode {
                CacheDisk::Physical => log.device + (io.segment / log.disk_segments) as usize,
                CacheDisk::Logical => {
                    debug_assert!(
                        !log.dead[(io.segment % log.members) as usize],
                        "a log transfer to a failed member"
                    );
                    self.rebuild.dev_of(io.segment % log.members)
                }
            };
            let flight = Flight {
                io,
                submitted_ns: now,
                lost: false,
            };
            let id = match log.free.pop() {
                Some(i) => {
                    log.flights[i as usize] = flight;
                    i
                }
                None => {
                    log.flights.push(flight);
                    (log.flights.len() - 1) as u32
                }
            };
            let disk_io = DiskIo {
                op: if io.read { Op::Read } else { Op::Write },
                sector: offset,
                sectors: (u64::from(io.blocks) * log.sectors_per_page) as u32,
            };
            let token = self.alloc_token(dev, Owner::Backup(id));
            self.devices[dev].submit(now, disk_io, Class::Foreground, token);
            self.start_disk(now, dev);
        }
    }

    /// Cache-disk transfer `id` completed at `now`: the backup frees its buffer (or segments),
    /// and writes waiting for it are admitted.
    pub(super) fn backup_op_done(&mut self, now: u64, id: u32) -> Result<()> {
        let log = self.log.as_mut().expect("backup I/O needs a cache disk");
        let f = log.flights[id as usize];
        log.free.push(id);
        if f.lost {
            return Ok(());
        }
        log.m.log_ios_done += 1;
        log.m.log_io_ns += now - f.submitted_ns;
        let wb = self.wb.as_mut().expect("a backup needs a write cache");
        wb.cache.backup_mut().io_done(f.io);
        self.cache_fail_io_done(now, f.io)?;
        self.admit_waiting(now)?;
        self.pump(now)
    }

    /// A write waits because the backup cannot take its next page (`new_write`: a write
    /// arriving now, counted once).
    pub(super) fn stall(&mut self, now: u64, new_write: bool) {
        if let Some(log) = self.log.as_mut() {
            log.m.stalled_writes += u64::from(new_write);
            log.stall_from.get_or_insert(now);
        }
    }

    /// No write waits for the backup any more.
    pub(super) fn end_stall(&mut self, now: u64) {
        if let Some(log) = self.log.as_mut() {
            if let Some(from) = log.stall_from.take() {
                log.m.stall_ns += now - from;
            }
        }
    }

    /// The controller became idle or busy (RAPID's rate destages in idle periods).
    pub(super) fn wb_idle(&mut self, now: u64, idle: bool) -> Result<()> {
        let Some(wb) = self.wb.as_mut() else {
            return Ok(());
        };
        wb.cache.set_idle(idle);
        if idle {
            self.pump(now)?;
        }
        Ok(())
    }

    /// The backup's metrics, once the write cache's are stored.
    pub(super) fn backup_metrics(&mut self, end: u64) {
        let Some(wc) = self.m.write_cache.as_mut() else {
            return;
        };
        let Some(spec) = &self.exp.backup else {
            return;
        };
        let wb = self.wb.as_ref().expect("write-cache metrics come from it");
        let mut m = match self.log.as_mut() {
            Some(log) => {
                if let Some(from) = log.stall_from.take() {
                    log.m.stall_ns += end.saturating_sub(from);
                }
                std::mem::take(&mut log.m)
            }
            None => BackupMetrics {
                kind: spec.name(),
                ..BackupMetrics::default()
            },
        };
        m.stats = wb.cache.backup().stats();
        m.held_end = 0;
        wc.backup = Some(m);
    }
}
