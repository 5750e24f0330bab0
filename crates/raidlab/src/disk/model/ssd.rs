//! PLACEHOLDER: replaced by the full model.

use super::{DiskModel, Service};
use crate::disk::DiskIo;
use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
pub struct SsdSpec {}

impl SsdSpec {
    pub fn build(&self) -> Result<Ssd> {
        Err(Error::config("disk.model", "not implemented yet"))
    }
}

#[derive(Debug, Clone)]
pub struct Ssd {}

impl DiskModel for Ssd {
    fn capacity_sectors(&self) -> u64 {
        0
    }
    fn parallelism(&self) -> u32 {
        1
    }
    fn position_of(&self, sector: u64) -> u64 {
        sector
    }
    fn head_position(&self) -> u64 {
        0
    }
    fn positioning_ns(&self, _io: &DiskIo, _now_ns: u64) -> u64 {
        0
    }
    fn service(&mut self, _io: &DiskIo, _now_ns: u64) -> Service {
        Service::default()
    }
}
