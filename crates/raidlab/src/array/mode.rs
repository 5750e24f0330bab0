//! Failed-disk state of an array and the rule for which failure sets a level survives.

use super::layout::Level;
use crate::error::{Error, Result};

/// Which disks are failed. Dense per-disk flags keep `is_failed` O(1) on the hot path; the
/// ordered list keeps the order in which disks failed (for reporting and for `ArraySpec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mode {
    mask: Vec<bool>,
    order: Vec<u32>,
}

impl Mode {
    /// All `disks` healthy.
    pub fn healthy(disks: u32) -> Mode {
        Mode {
            mask: vec![false; disks as usize],
            order: Vec::new(),
        }
    }

    /// Whether `disk` is failed (`false` for an index out of range).
    #[inline]
    pub fn is_failed(&self, disk: u32) -> bool {
        self.mask.get(disk as usize).copied().unwrap_or(false)
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
