//! Making a log (`create`) and finding one (`open`): the superblocks' checks.

use super::super::backup;
use super::super::format::{self, Super, KIND_LOG, LOG_MEMBERS_MAX, SUPERS_BYTES};
use super::geometry::{hex, size, Geometry, Leg};
use super::{LogBackup, BLOCK64, SPARE_SEGMENTS};

impl LogBackup {
    /// Make a new log on `legs` for array `uuid`: fresh superblocks of a new epoch (above
    /// any epoch found there, so no old record replays). The log must hold twice the cache's
    /// `pages` plus `SPARE_SEGMENTS` segments.
    pub fn create(
        legs: Vec<Leg>,
        uuid: [u8; 16],
        segment_bytes: u64,
        pages: u64,
    ) -> Result<LogBackup, raidlab::Error> {
        let geo = Geometry::new(legs, segment_bytes)?;
        let need = pages
            .saturating_mul(2 * BLOCK64)
            .div_ceil(segment_bytes)
            .saturating_add(SPARE_SEGMENTS);
        if geo.segments < need {
            let n = geo.legs.len() as u64;
            let small = geo.legs.iter().min_by_key(|l| l.2).expect("a leg");
            return Err(backup::bad(
                small.0.path(),
                format!(
                    "log area too small: {} segments of {}, but {pages} cache pages need {need} (twice the pages plus {SPARE_SEGMENTS}): at least {} bytes per leg over {n} leg(s)",
                    geo.segments,
                    size(segment_bytes),
                    SUPERS_BYTES + need.div_ceil(n) * segment_bytes
                ),
            ));
        }
        // The epoch and generation continue any superblock found; the clock keeps a log
        // whose superblocks were lost from reusing an epoch its old batches carry.
        let mut epoch = epoch_clock();
        let mut generation = 1;
        for (dev, base, _) in &geo.legs {
            if let Ok((a, b)) = backup::read_supers(dev, *base) {
                if let Ok(s) = format::newest_super(&a, &b) {
                    epoch = epoch.max(s.epoch.saturating_add(1));
                    generation = generation.max(s.generation.saturating_add(1));
                }
            }
        }
        let sup = geo.super_for(0, generation, epoch, 0, uuid);
        let log = LogBackup::new(geo, uuid, &sup, false);
        let mut st = log.lock();
        log.write_supers(&mut st)
            .map_err(|(path, e)| backup::bad(&path, format!("writing the log superblock: {e}")))?;
        drop(st);
        Ok(log)
    }

    /// Open the log on `legs` of array `uuid`. `scan` then returns its records; `reset`
    /// must follow before new records are put.
    pub fn open(legs: Vec<Leg>, uuid: [u8; 16]) -> Result<LogBackup, raidlab::Error> {
        assert!(!legs.is_empty() && legs.len() <= LOG_MEMBERS_MAX);
        let n = legs.len();
        let mut best: Option<Super> = None;
        for (i, (dev, base, _)) in legs.iter().enumerate() {
            let path = dev.path();
            let (a, b) = backup::read_supers(dev, *base)
                .map_err(|e| backup::bad(path, format!("reading the log superblock: {e}")))?;
            let s = format::newest_super(&a, &b)
                .map_err(|e| backup::bad(path, format!("no valid log superblock ({e})")))?;
            if s.kind != KIND_LOG {
                return Err(backup::bad(
                    path,
                    format!("backup kind {} is not a log", s.kind),
                ));
            }
            if s.uuid != uuid {
                return Err(backup::bad(
                    path,
                    format!(
                        "log of another array (uuid {}, expected {})",
                        hex(&s.uuid),
                        hex(&uuid)
                    ),
                ));
            }
            if s.members.len() != n || s.members[0] as usize != i {
                return Err(backup::bad(
                    path,
                    format!(
                        "opened as leg {i} of {n}, but its superblock says leg {:?} of {}",
                        s.members.first(),
                        s.members.len()
                    ),
                ));
            }
            if let Some(b) = &best {
                if (b.segment_bytes, b.capacity) != (s.segment_bytes, s.capacity) {
                    return Err(backup::bad(
                        path,
                        "its superblock's log geometry differs from leg 0's",
                    ));
                }
            }
            if best.as_ref().is_none_or(|b| s.generation > b.generation) {
                best = Some(s);
            }
        }
        let sup = best.expect("at least one leg");
        let geo = Geometry::new(legs, sup.segment_bytes)?;
        if geo.log_bytes() != sup.capacity || !sup.tail.is_multiple_of(geo.seg) {
            return Err(backup::bad(
                geo.legs[0].0.path(),
                format!(
                    "log of {} bytes here, but its superblock says {} (tail {}): the log area changed",
                    geo.log_bytes(),
                    sup.capacity,
                    sup.tail
                ),
            ));
        }
        Ok(LogBackup::new(geo, uuid, &sup, true))
    }
}

/// Where a new epoch starts: the wall clock in nanoseconds; under tests, a value a test set
/// for its thread instead (a seeded crash run then writes the same bytes every time).
fn epoch_clock() -> u64 {
    #[cfg(test)]
    if let Some(e) = TEST_EPOCH.with(std::cell::Cell::get) {
        return e;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

#[cfg(test)]
thread_local! {
    /// `epoch_clock`'s value on this thread when set.
    pub(super) static TEST_EPOCH: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}
