//! Placeholder until the log lands (replaced by the real RAPID log).
use std::sync::Arc;

use crate::member::Member;

pub struct Leg;
impl Leg {
    pub fn new(_dev: Arc<dyn Member>, _base: u64, _bytes: u64) -> Leg {
        Leg
    }
}
pub struct LogBackup;
impl LogBackup {
    pub fn open(
        _legs: Vec<Leg>,
        _uuid: [u8; 16],
    ) -> raidlab::Result<Option<super::mirror::MirrorBackup>> {
        Err(raidlab::Error::config("--backup", "log not built"))
    }
    pub fn create(
        _legs: Vec<Leg>,
        _uuid: [u8; 16],
        _seg: u64,
        _pages: u64,
        _after: u64,
    ) -> raidlab::Result<super::mirror::MirrorBackup> {
        Err(raidlab::Error::config("--backup", "log not built"))
    }
}
