//! A disk that takes a fixed time per operation, whatever its size and position (X-RAY's
//! evaluation charges 10 ms per disk access).

use super::{DiskModel, Service};
use crate::disk::DiskIo;
use crate::error::{Error, Result};
use crate::workload::Op;

/// Parameters of the constant model.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstantSpec {
    pub read_ns: u64,
    pub write_ns: u64,
    /// Capacity in sectors (the address space the disk accepts).
    pub capacity_sectors: u64,
}

impl ConstantSpec {
    pub fn build(&self) -> Result<Constant> {
        if self.read_ns == 0 {
            return Err(Error::config("disk.read_ms", "expected a time > 0"));
        }
        if self.write_ns == 0 {
            return Err(Error::config("disk.write_ms", "expected a time > 0"));
        }
        if self.capacity_sectors == 0 {
            return Err(Error::config(
                "disk.capacity_gib",
                "expected a capacity > 0",
            ));
        }
        Ok(Constant { spec: self.clone() })
    }
}

/// The constant model; it has no head state.
#[derive(Debug, Clone)]
pub struct Constant {
    spec: ConstantSpec,
}

impl DiskModel for Constant {
    fn capacity_sectors(&self) -> u64 {
        self.spec.capacity_sectors
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
    fn service(&mut self, io: &DiskIo, _now_ns: u64) -> Service {
        let total_ns = match io.op {
            Op::Read => self.spec.read_ns,
            Op::Write => self.spec.write_ns,
        };
        Service {
            total_ns,
            transfer_ns: total_ns,
            ..Service::default()
        }
    }
}
