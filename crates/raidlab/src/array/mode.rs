//! Failed-disk state of an array, the rule for which failure sets a level survives, and the
//! rebuild state of failed disks.
//!
//! A member is normal, failed (degraded: its units are reconstructed from the survivors), or
//! rebuilding onto a replacement: then each of its units (rows) is either rebuilt — the
//! replacement holds it, and it is read and written there like a healthy disk's — or not yet,
//! and behaves as failed. [`Mode::lost`] answers per row; the planners use it everywhere, so
//! a write to a rebuilt row keeps the replacement current and a write to a row not yet
//! rebuilt follows the degraded plan. Finishing the rebuild makes the member normal again.

use super::layout::Level;
use crate::error::{Error, Result};
use crate::rebuild::SharedUnitMap;

/// The array as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArrayState {
    Normal,
    /// A member is failed and none is rebuilding.
    Degraded,
    Rebuilding,
}

/// Which disks are failed. Dense per-disk flags keep `is_failed` O(1) on the hot path; the
/// ordered list keeps the order in which disks failed (for reporting and for `ArraySpec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mode {
    mask: Vec<bool>,
    order: Vec<u32>,
    /// Per disk, while it is rebuilding: its units already on the replacement.
    rebuilt: Vec<Option<SharedUnitMap>>,
    /// Reads of rebuilt units go to the replacement (otherwise they still reconstruct).
    redirect: bool,
}

impl Mode {
    /// All `disks` healthy.
    pub fn healthy(disks: u32) -> Mode {
        Mode {
            mask: vec![false; disks as usize],
            order: Vec::new(),
            rebuilt: vec![None; disks as usize],
            redirect: true,
        }
    }

    /// Whether `disk` is failed (`false` for an index out of range). A rebuilding disk is
    /// failed until its rebuild finishes.
    #[inline]
    pub fn is_failed(&self, disk: u32) -> bool {
        self.mask.get(disk as usize).copied().unwrap_or(false)
    }

    /// Whether `row` of `disk` cannot be read or written: the disk is failed and the row is
    /// not rebuilt.
    #[inline]
    pub fn lost(&self, disk: u32, row: u64) -> bool {
        self.is_failed(disk)
            && !self.rebuilt[disk as usize]
                .as_ref()
                .is_some_and(|m| m.get(row))
    }

    /// Whether a read of `row` on `disk` must reconstruct: lost, or rebuilt while reads are
    /// not redirected to the replacement.
    #[inline]
    pub fn lost_for_read(&self, disk: u32, row: u64) -> bool {
        self.is_failed(disk) && (!self.redirect || self.lost(disk, row))
    }

    /// The rebuild progress of `disk`, while it is rebuilding.
    pub fn rebuilding(&self, disk: u32) -> Option<&SharedUnitMap> {
        self.rebuilt.get(disk as usize)?.as_ref()
    }

    pub fn state(&self) -> ArrayState {
        if self.order.is_empty() {
            ArrayState::Normal
        } else if self.rebuilt.iter().any(Option::is_some) {
            ArrayState::Rebuilding
        } else {
            ArrayState::Degraded
        }
    }

    /// Start rebuilding failed `disk` (`units` rows) onto a replacement; reads of rebuilt
    /// rows go to it when `redirect`. `key` names the config entry for errors.
    pub fn start_rebuild(
        &mut self,
        disk: u32,
        units: u64,
        redirect: bool,
        key: &str,
    ) -> Result<()> {
        if !self.is_failed(disk) {
            return Err(Error::config(
                key,
                format!("disk {disk} is not failed, so there is nothing to rebuild"),
            ));
        }
        if self.rebuilt[disk as usize].is_some() {
            return Err(Error::config(
                key,
                format!("disk {disk} is already rebuilding"),
            ));
        }
        self.rebuilt[disk as usize] = Some(SharedUnitMap::new(units));
        self.redirect = redirect;
        Ok(())
    }

    /// `row` of rebuilding `disk` is now on the replacement. Through a shared reference
    /// (see [`SharedUnitMap`]): the caller keeps the row's writers out meanwhile.
    pub fn mark_rebuilt(&self, disk: u32, row: u64) {
        let m = self.rebuilt[disk as usize]
            .as_ref()
            .expect("only a rebuilding disk has rows rebuilt");
        m.set(row);
    }

    /// The replacement of rebuilding `disk` is gone (it failed too): the disk is failed again
    /// with nothing rebuilt. A no-op for a disk that is not rebuilding.
    pub fn abort_rebuild(&mut self, disk: u32) {
        if let Some(r) = self.rebuilt.get_mut(disk as usize) {
            *r = None;
        }
    }

    /// The rebuild of `disk` is complete: the replacement is a normal member.
    pub fn finish_rebuild(&mut self, disk: u32) {
        debug_assert!(self.rebuilt[disk as usize]
            .as_ref()
            .is_some_and(SharedUnitMap::is_full));
        self.rebuilt[disk as usize] = None;
        self.mask[disk as usize] = false;
        self.order.retain(|&d| d != disk);
    }

    /// Failed disks in the order they failed.
    pub fn failed(&self) -> &[u32] {
        &self.order
    }

    pub fn any_failed(&self) -> bool {
        !self.order.is_empty()
    }

    /// Fail `disk`, which becomes `array.failed[k]` with `k` the number of disks failed so
    /// far (so a run-time failure reports the same key a config listing it would). The state
    /// is unchanged when an error is returned.
    pub fn fail(&mut self, level: Level, disk: u32) -> Result<()> {
        let disks = self.mask.len() as u32;
        let key = format!("array.failed[{}]", self.order.len());
        if disk >= disks {
            return Err(Error::config(
                key,
                format!("expected a disk index below {disks}, got {disk}"),
            ));
        }
        if self.mask[disk as usize] {
            return Err(Error::config(key, format!("disk {disk} is already failed")));
        }
        let name = level.name();
        let survives = |extra: &str| {
            Err(Error::config(
                key.clone(),
                format!("failing disk {disk} would lose data: {name} {extra}"),
            ))
        };
        match level {
            Level::Raid0 => return survives("has no redundancy, so no disk may fail"),
            Level::Raid5 if !self.order.is_empty() => {
                return survives("survives at most 1 failed disk")
            }
            Level::Raid6 if self.order.len() >= 2 => {
                return survives("survives at most 2 failed disks")
            }
            Level::Raid1 if self.order.len() + 1 >= disks as usize => {
                return survives("needs at least one healthy copy")
            }
            Level::Raid10 if self.mask[(disk ^ 1) as usize] => {
                let partner = disk ^ 1;
                return survives(&format!(
                    "survives one failure per mirror pair, and its partner {partner} is failed"
                ));
            }
            _ => {}
        }
        self.mask[disk as usize] = true;
        self.order.push(disk);
        debug_assert_eq!(self.mask.iter().filter(|&&f| f).count(), self.order.len());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(e: Error) -> String {
        match e {
            Error::Config { key, .. } => key,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn survivable_sets() {
        let mut m = Mode::healthy(5);
        m.fail(Level::Raid5, 2).unwrap();
        assert!(m.is_failed(2) && !m.is_failed(1) && !m.is_failed(99));
        assert_eq!(
            key_of(m.fail(Level::Raid5, 3).unwrap_err()),
            "array.failed[1]"
        );
        assert_eq!(m.failed(), &[2]);

        let mut m = Mode::healthy(4);
        m.fail(Level::Raid6, 0).unwrap();
        m.fail(Level::Raid6, 3).unwrap();
        assert!(m.fail(Level::Raid6, 1).is_err());

        let mut m = Mode::healthy(3);
        m.fail(Level::Raid1, 0).unwrap();
        m.fail(Level::Raid1, 2).unwrap();
        assert!(m.fail(Level::Raid1, 1).is_err());

        let mut m = Mode::healthy(6);
        m.fail(Level::Raid10, 1).unwrap();
        m.fail(Level::Raid10, 2).unwrap();
        m.fail(Level::Raid10, 5).unwrap();
        assert!(m.fail(Level::Raid10, 0).is_err());
        assert!(m.fail(Level::Raid10, 3).is_err());

        assert!(Mode::healthy(2).fail(Level::Raid0, 0).is_err());
    }

    #[test]
    fn bad_indices() {
        let mut m = Mode::healthy(4);
        assert_eq!(
            key_of(m.fail(Level::Raid6, 4).unwrap_err()),
            "array.failed[0]"
        );
        m.fail(Level::Raid6, 1).unwrap();
        assert_eq!(
            key_of(m.fail(Level::Raid6, 1).unwrap_err()),
            "array.failed[1]"
        );
        assert_eq!(m.failed(), &[1]);
    }
}
