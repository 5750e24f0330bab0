//! Cost of the cache memory and backup space of each write-cache architecture (RAPID-Cache
//! paper, section 5.2). Prices are inputs; the defaults are the paper's (December 2000).
//!
//! - single NVRAM: DRAM read cache + NVRAM write cache;
//! - dual NVRAM: DRAM read cache + two NVRAM write caches;
//! - RAPID, DRAM primary: DRAM read and write caches + backup NVRAM + log space on disk;
//! - RAPID, NVRAM primary: DRAM read cache + NVRAM write cache + backup NVRAM + log space.
//!
//! The log space is priced per MB: it lives on the hot spare (physical cache disk) or in a
//! partition of each data disk (logical). A RAID without a spare needs a dedicated cache disk,
//! which adds the price of the smallest disk on the market (`dedicated_cache_disk`).

use super::mttdl::{positive, Architecture};
use crate::error::{Error, Result};

/// Prices and the backup's disk space. Defaults are the paper's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// DRAM, $0.5/MB.
    pub dram_usd_per_mb: f64,
    /// NVRAM, $55/MB (a manufacturer's quote for battery-backed modules).
    pub nvram_usd_per_mb: f64,
    /// Disk space, 0.5 cents/MB.
    pub disk_usd_per_mb: f64,
    /// Log space of the RAPID backup on disk (256 MB in all the paper's runs).
    pub cache_disk_mb: f64,
    /// Whether RAPID needs a disk of its own (no hot spare to borrow).
    pub dedicated_cache_disk: bool,
    /// Price of that disk ($100, the smallest on the market).
    pub cache_disk_usd: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            dram_usd_per_mb: 0.5,
            nvram_usd_per_mb: 55.0,
            disk_usd_per_mb: 0.005,
            cache_disk_mb: 256.0,
            dedicated_cache_disk: false,
            cache_disk_usd: 100.0,
        }
    }
}

/// Prices may be zero (a free spare, donated memory) but not negative or infinite.
fn non_negative(key: &str, v: f64) -> Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(Error::config(
            format!("reliability.{key}"),
            format!("expected a finite number >= 0, got {v}"),
        ))
    }
}

impl CostModel {
    /// Check every price is finite and >= 0 and the log space > 0.
    pub fn validate(&self) -> Result<()> {
        non_negative("dram_usd_per_mb", self.dram_usd_per_mb)?;
        non_negative("nvram_usd_per_mb", self.nvram_usd_per_mb)?;
        non_negative("disk_usd_per_mb", self.disk_usd_per_mb)?;
        non_negative("cache_disk_usd", self.cache_disk_usd)?;
        positive("cache_disk_mb", self.cache_disk_mb)
    }

    /// Dollars for `arch` with a `read_mb` DRAM read cache, a `write_mb` primary write cache
    /// and, for RAPID, a `backup_nvram_mb` backup NVRAM.
    pub fn cost_usd(
        &self,
        arch: Architecture,
        read_mb: f64,
        write_mb: f64,
        backup_nvram_mb: f64,
    ) -> Result<f64> {
        self.validate()?;
        non_negative("read_cache_mb", read_mb)?;
        positive("write_cache_mb", write_mb)?;
        positive("backup_nvram_mb", backup_nvram_mb)?;
        let dram = |mb: f64| mb * self.dram_usd_per_mb;
        let nvram = |mb: f64| mb * self.nvram_usd_per_mb;
        let backup = nvram(backup_nvram_mb)
            + self.cache_disk_mb * self.disk_usd_per_mb
            + if self.dedicated_cache_disk {
                self.cache_disk_usd
            } else {
                0.0
            };
        Ok(match arch {
            Architecture::SingleNvram => dram(read_mb) + nvram(write_mb),
            Architecture::DualNvram => dram(read_mb) + 2.0 * nvram(write_mb),
            Architecture::RapidDramPrimary => dram(read_mb + write_mb) + backup,
            Architecture::RapidNvramPrimary => dram(read_mb) + nvram(write_mb) + backup,
            // Two backups: two NVRAMs and two cache disks (or disk spaces).
            Architecture::TripleRapid => dram(read_mb + write_mb) + 2.0 * backup,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's Table 3 cost columns in dollars, read cache 64 MB, backup NVRAM 2 MB:
    /// (write MB, single, dual, RAPID-DP, RAPID-NP).
    const TABLE3_COST_USD: [(f64, [f64; 4]); 3] = [
        (16.0, [912.0, 1792.0, 151.0, 1023.0]),
        (32.0, [1792.0, 3552.0, 159.0, 1903.0]),
        (64.0, [3552.0, 7072.0, 175.0, 3663.0]),
    ];

    #[test]
    fn table3_cost_columns_within_one_percent() {
        let c = CostModel::default();
        for (write_mb, want) in TABLE3_COST_USD {
            for (arch, want) in Architecture::ALL.into_iter().zip(want) {
                let got = c.cost_usd(arch, 64.0, write_mb, 2.0).unwrap();
                assert!(
                    (got / want - 1.0).abs() <= 0.01,
                    "{} at {write_mb} MB: ${got:.2} vs paper ${want}",
                    arch.name()
                );
                // The paper prints whole dollars: ours round to the same figure.
                assert_eq!(got.round(), want, "{} at {write_mb} MB", arch.name());
            }
        }
    }

    #[test]
    fn worked_example_and_dedicated_disk() {
        // RAPID-DP 64/16: 80 MB DRAM ($40) + 2 MB NVRAM ($110) + 256 MB disk ($1.28).
        let c = CostModel::default();
        let dp = c
            .cost_usd(Architecture::RapidDramPrimary, 64.0, 16.0, 2.0)
            .unwrap();
        assert!((dp - 151.28).abs() < 1e-9, "{dp}");
        let dedicated = CostModel {
            dedicated_cache_disk: true,
            ..c
        };
        let with_disk = dedicated
            .cost_usd(Architecture::RapidDramPrimary, 64.0, 16.0, 2.0)
            .unwrap();
        assert!((with_disk - 251.28).abs() < 1e-9);
        // The dedicated disk does not touch the NVRAM-only architectures.
        for a in [Architecture::SingleNvram, Architecture::DualNvram] {
            assert_eq!(
                dedicated.cost_usd(a, 64.0, 16.0, 2.0).unwrap(),
                c.cost_usd(a, 64.0, 16.0, 2.0).unwrap()
            );
        }
    }

    #[test]
    fn bad_prices_name_their_key() {
        let c = CostModel {
            nvram_usd_per_mb: -55.0,
            ..CostModel::default()
        };
        let e = c
            .cost_usd(Architecture::SingleNvram, 64.0, 16.0, 2.0)
            .unwrap_err();
        assert!(matches!(e, Error::Config { key, .. } if key == "reliability.nvram_usd_per_mb"));
        let c = CostModel {
            cache_disk_mb: 0.0,
            ..CostModel::default()
        };
        assert!(c.validate().is_err());
        let e = CostModel::default()
            .cost_usd(Architecture::DualNvram, -1.0, 16.0, 2.0)
            .unwrap_err();
        assert!(matches!(e, Error::Config { key, .. } if key == "reliability.read_cache_mb"));
    }
}
