//! An SSD as channels x dies: pages are striped over the dies (page `p` on die
//! `p mod dies`, die `d` on channel `d mod channels`, so consecutive pages use different
//! channels first). No seek, no rotation; contention is for dies, channel buses and the host
//! interface, each tracked as a busy-until time.
//!
//! Per page of an operation, in the operation's page order:
//! - read: the die reads the page into its register (`read_ns`) once it is free, the channel
//!   moves the requested sectors out (`transfer_ns_per_page` pro rata), then the host
//!   interface (at `bus_mb_s`); the die stays busy until its register is drained;
//! - write: the host interface first, then the channel moves the sectors into the die's
//!   register once both are free, then the die programs the page (`program_ns`). A partial
//!   page is programmed as a whole page (no read-modify-write is charged) and there is no
//!   DRAM write buffer: a write completes when its last page is programmed.
//!
//! The operation completes when its last page does. Several operations may be in service at
//! once (`parallelism` = dies); each reserves the resources it needs, so later ones queue
//! behind earlier ones on the same die, channel or interface (first come, first served).

use super::{DiskModel, Service};
use crate::disk::{DiskIo, SECTOR_BYTES};
use crate::error::{Error, Result};
use crate::workload::Op;

/// Parameters of the SSD model.
#[derive(Debug, Clone, PartialEq)]
pub struct SsdSpec {
    pub channels: u32,
    pub dies_per_channel: u32,
    /// Flash page size, a multiple of 512 bytes.
    pub page_bytes: u32,
    /// Array read of one page into the die's register.
    pub read_ns: u64,
    /// Program of one page from the die's register.
    pub program_ns: u64,
    /// Channel bus time of a full page (between controller and die).
    pub transfer_ns_per_page: u64,
    pub capacity_sectors: u64,
    /// Host interface rate, 10^6 bytes/s (0 = not limited).
    pub bus_mb_s: u32,
}

impl SsdSpec {
    pub fn build(&self) -> Result<Ssd> {
        let positive = |key: &str, v: u64, max: u64| {
            if v == 0 || v > max {
                Err(Error::config(
                    format!("disk.{key}"),
                    format!("expected a value in [1, {max}]"),
                ))
            } else {
                Ok(())
            }
        };
        positive("channels", self.channels as u64, 1024)?;
        positive("dies_per_channel", self.dies_per_channel as u64, 1024)?;
        positive("read_us", self.read_ns, 10_000_000_000)?;
        positive("program_us", self.program_ns, 10_000_000_000)?;
        positive("transfer_us", self.transfer_ns_per_page, 10_000_000_000)?;
        positive("capacity_gib", self.capacity_sectors, 1 << 48)?;
        if self.page_bytes == 0
            || !(self.page_bytes as u64).is_multiple_of(SECTOR_BYTES)
            || self.page_bytes > 1 << 20
        {
            return Err(Error::config(
                "disk.page_kib",
                format!(
                    "expected a page size that is a multiple of 512 bytes up to 1 MiB, got {} bytes",
                    self.page_bytes
                ),
            ));
        }
        if self.bus_mb_s > 100_000 {
            return Err(Error::config("disk.bus_mb_s", "expected at most 100000"));
        }
        let dies = (self.channels * self.dies_per_channel) as usize;
        Ok(Ssd {
            spec: self.clone(),
            sectors_per_page: self.page_bytes as u64 / SECTOR_BYTES,
            die_free_ns: vec![0; dies],
            channel_free_ns: vec![0; self.channels as usize],
            bus_free_ns: 0,
            last_end: 0,
        })
    }
}

/// The SSD model with its busy-until state.
#[derive(Debug, Clone)]
pub struct Ssd {
    spec: SsdSpec,
    sectors_per_page: u64,
    die_free_ns: Vec<u64>,
    channel_free_ns: Vec<u64>,
    bus_free_ns: u64,
    /// The sector after the last operation (the "head position" of an armless device).
    last_end: u64,
}

impl Ssd {
    fn channel_ns(&self, sectors: u64) -> u64 {
        (self.spec.transfer_ns_per_page * sectors).div_ceil(self.sectors_per_page)
    }

    fn bus_ns(&self, sectors: u64) -> u64 {
        match self.spec.bus_mb_s {
            0 => 0,
            mb_s => (sectors * SECTOR_BYTES * 1000).div_ceil(mb_s as u64),
        }
    }
}

impl Ssd {
    /// Move data over the host interface from `ready_ns` on; returns when it is across.
    /// An unlimited interface (`bus_mb_s` = 0) neither costs time nor orders transfers.
    fn host_transfer(&mut self, ready_ns: u64, bus_ns: u64) -> u64 {
        if self.spec.bus_mb_s == 0 {
            return ready_ns;
        }
        let done = ready_ns.max(self.bus_free_ns) + bus_ns;
        self.bus_free_ns = done;
        done
    }
}

impl DiskModel for Ssd {
    fn capacity_sectors(&self) -> u64 {
        self.spec.capacity_sectors
    }

    fn parallelism(&self) -> u32 {
        self.spec.channels * self.spec.dies_per_channel
    }

    fn position_of(&self, sector: u64) -> u64 {
        sector
    }

    fn head_position(&self) -> u64 {
        self.last_end
    }

    fn positioning_ns(&self, _io: &DiskIo, _now_ns: u64) -> u64 {
        0
    }

    fn service(&mut self, io: &DiskIo, now_ns: u64) -> Service {
        debug_assert!(io.sectors > 0, "empty disk operation");
        debug_assert!(io.sector + io.sectors as u64 <= self.spec.capacity_sectors);
        let spp = self.sectors_per_page;
        let dies = self.die_free_ns.len() as u64;
        let channels = self.channel_free_ns.len() as u64;
        let end = io.sector + io.sectors as u64;
        let mut done_ns = now_ns;
        let mut sector = io.sector;
        while sector < end {
            let page = sector / spp;
            let k = ((page + 1) * spp).min(end) - sector;
            let die = (page % dies) as usize;
            let ch = (die as u64 % channels) as usize;
            let xfer = self.channel_ns(k);
            let bus = self.bus_ns(k);
            let page_done = match io.op {
                Op::Read => {
                    let ready = now_ns.max(self.die_free_ns[die]) + self.spec.read_ns;
                    let out = ready.max(self.channel_free_ns[ch]) + xfer;
                    self.channel_free_ns[ch] = out;
                    self.die_free_ns[die] = out;
                    self.host_transfer(out, bus)
                }
                Op::Write => {
                    let host = self.host_transfer(now_ns, bus);
                    let into = host
                        .max(self.channel_free_ns[ch])
                        .max(self.die_free_ns[die])
                        + xfer;
                    self.channel_free_ns[ch] = into;
                    self.die_free_ns[die] = into + self.spec.program_ns;
                    self.die_free_ns[die]
                }
            };
            done_ns = done_ns.max(page_done);
            sector += k;
        }
        self.last_end = end;
        let total_ns = done_ns - now_ns;
        debug_assert!(total_ns > 0);
        Service {
            total_ns,
            transfer_ns: total_ns,
            ..Service::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 channels x 2 dies, 4 KiB pages (8 sectors), read 50 µs, program 500 µs, channel
    /// 10 µs per page; interface not limited unless set.
    fn spec(bus_mb_s: u32) -> SsdSpec {
        SsdSpec {
            channels: 2,
            dies_per_channel: 2,
            page_bytes: 4096,
            read_ns: 50_000,
            program_ns: 500_000,
            transfer_ns_per_page: 10_000,
            capacity_sectors: 1 << 20,
            bus_mb_s,
        }
    }

    fn io(op: Op, sector: u64, sectors: u32) -> DiskIo {
        DiskIo {
            op,
            sector,
            sectors,
        }
    }

    #[test]
    fn one_page() {
        let mut s = spec(0).build().unwrap();
        assert_eq!(s.parallelism(), 4);
        // Read: 50 µs array read + 10 µs channel.
        assert_eq!(s.service(&io(Op::Read, 0, 8), 0).total_ns, 60_000);
        // Half a page moves half the channel time: 50 + 5 µs (die 1 is idle).
        assert_eq!(s.service(&io(Op::Read, 8, 4), 0).total_ns, 55_000);
        // Write (on an idle SSD): 10 µs channel + 500 µs program.
        let mut s = spec(0).build().unwrap();
        assert_eq!(s.service(&io(Op::Write, 16, 8), 0).total_ns, 510_000);
        // With a 400 MB/s interface a 4 KiB read adds 4096 * 1000 / 400 = 10240 ns.
        let mut s = spec(400).build().unwrap();
        assert_eq!(s.service(&io(Op::Read, 0, 8), 0).total_ns, 70_240);
    }

    #[test]
    fn same_die_serializes_different_dies_overlap() {
        // Pages 0 and 4 are both on die 0 (4 dies): the second read waits for the first to
        // leave the die at 60 µs, then 50 + 10 -> done at 120 µs.
        let mut s = spec(0).build().unwrap();
        assert_eq!(s.service(&io(Op::Read, 0, 8), 0).total_ns, 60_000);
        assert_eq!(s.service(&io(Op::Read, 32, 8), 0).total_ns, 120_000);
        // Pages 1 and 2 (dies 1 and 2, channels 1 and 0) at the same time: both 60 µs.
        let mut s = spec(0).build().unwrap();
        assert_eq!(s.service(&io(Op::Read, 8, 8), 0).total_ns, 60_000);
        assert_eq!(s.service(&io(Op::Read, 16, 8), 0).total_ns, 60_000);
        // Pages 0 and 2 share channel 0 but not a die: the arrays read in parallel, the second
        // transfer waits for the first (50 + 10 + 10 = 70 µs).
        let mut s = spec(0).build().unwrap();
        assert_eq!(s.service(&io(Op::Read, 0, 8), 0).total_ns, 60_000);
        assert_eq!(s.service(&io(Op::Read, 16, 8), 0).total_ns, 70_000);
        // One 4-page read spreads over all dies: dies read in parallel, channel 0 carries pages
        // 0 and 2, channel 1 pages 1 and 3 -> done at 50 + 10 + 10 = 70 µs.
        let mut s = spec(0).build().unwrap();
        assert_eq!(s.service(&io(Op::Read, 0, 32), 0).total_ns, 70_000);
        // A write to die 0 keeps it busy until 510 µs; a read of page 4 (die 0) at 100 µs
        // waits: 510 + 50 + 10 = 570 µs -> 470 µs after it started.
        let mut s = spec(0).build().unwrap();
        s.service(&io(Op::Write, 0, 8), 0);
        assert_eq!(s.service(&io(Op::Read, 32, 8), 100_000).total_ns, 470_000);
    }

    #[test]
    fn bad_parameters_name_their_key() {
        let key = |f: &dyn Fn(&mut SsdSpec)| {
            let mut s = spec(0);
            f(&mut s);
            match s.build().unwrap_err() {
                Error::Config { key, .. } => key,
                other => panic!("{other}"),
            }
        };
        assert_eq!(key(&|s| s.channels = 0), "disk.channels");
        assert_eq!(key(&|s| s.dies_per_channel = 0), "disk.dies_per_channel");
        assert_eq!(key(&|s| s.read_ns = 0), "disk.read_us");
        assert_eq!(key(&|s| s.program_ns = 0), "disk.program_us");
        assert_eq!(key(&|s| s.transfer_ns_per_page = 0), "disk.transfer_us");
        assert_eq!(key(&|s| s.capacity_sectors = 0), "disk.capacity_gib");
        assert_eq!(key(&|s| s.page_bytes = 1000), "disk.page_kib");
    }
}
