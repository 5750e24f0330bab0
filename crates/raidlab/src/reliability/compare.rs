//! The comparison table of `raidlab reliability`: MTTDL and cost of every architecture for
//! each primary write-cache size (the layout of the RAPID-Cache paper's Table 3).

use serde_json::{json, Value};

use super::cost::CostModel;
use super::mttdl::{Architecture, FailureRates};
use crate::error::{Error, Result};

/// Most write-cache sizes one comparison lists.
pub const WRITE_SIZES_MAX: usize = 64;

/// Every input of the comparison (the `[reliability]` table, validated).
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    pub rates: FailureRates,
    pub costs: CostModel,
    /// DRAM read cache, MB (priced, holds no dirty data).
    pub read_cache_mb: f64,
    /// Primary write-cache sizes, MB: one group of rows each.
    pub write_cache_mb: Vec<f64>,
    /// Backup NVRAM of the RAPID architectures, MB (2 MB in the paper's text).
    pub backup_nvram_mb: f64,
}

impl Default for Inputs {
    /// The paper's Table 3 setting: 64 MB read cache, 16/32/64 MB write caches, 2 MB backup.
    fn default() -> Self {
        Inputs {
            rates: FailureRates::default(),
            costs: CostModel::default(),
            read_cache_mb: 64.0,
            write_cache_mb: vec![16.0, 32.0, 64.0],
            backup_nvram_mb: 2.0,
        }
    }
}

/// One architecture at one write-cache size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    pub read_cache_mb: f64,
    pub write_cache_mb: f64,
    pub architecture: Architecture,
    pub mttdl_h: f64,
    pub cost_usd: f64,
}

/// Rows for every write size (in the given order), each with the architectures of
/// [`Architecture::COMPARED`].
pub fn compare(inputs: &Inputs) -> Result<Vec<Row>> {
    if inputs.write_cache_mb.is_empty() || inputs.write_cache_mb.len() > WRITE_SIZES_MAX {
        return Err(Error::config(
            "reliability.write_cache_mb",
            format!(
                "expected 1 to {WRITE_SIZES_MAX} sizes, got {}",
                inputs.write_cache_mb.len()
            ),
        ));
    }
    let mut rows = Vec::with_capacity(inputs.write_cache_mb.len() * Architecture::COMPARED.len());
    for (i, &write_mb) in inputs.write_cache_mb.iter().enumerate() {
        for arch in Architecture::COMPARED {
            let at = |e: Error| match e {
                Error::Config { key, msg } if key == "reliability.write_cache_mb" => {
                    Error::config(format!("{key}[{i}]"), msg)
                }
                other => other,
            };
            rows.push(Row {
                read_cache_mb: inputs.read_cache_mb,
                write_cache_mb: write_mb,
                architecture: arch,
                mttdl_h: inputs
                    .rates
                    .mttdl_h(arch, write_mb, inputs.backup_nvram_mb)
                    .map_err(at)?,
                cost_usd: inputs
                    .costs
                    .cost_usd(arch, inputs.read_cache_mb, write_mb, inputs.backup_nvram_mb)
                    .map_err(at)?,
            });
        }
    }
    Ok(rows)
}

impl Inputs {
    /// Every input by its config key, as the results echo it.
    pub fn to_json(&self) -> Value {
        let (r, c) = (&self.rates, &self.costs);
        json!({
            "read_cache_mb": self.read_cache_mb,
            "write_cache_mb": self.write_cache_mb,
            "backup_nvram_mb": self.backup_nvram_mb,
            "module_mb": r.module_mb,
            "mttf_nvram_h": r.mttf_nvram_h,
            "mttf_dram_h": r.mttf_dram_h,
            "mttf_disk_h": r.mttf_disk_h,
            "mttr_h": r.mttr_h,
            "mttpf_h": r.mttpf_h,
            "mttf_ups_h": r.mttf_ups_h,
            "mtthf_h": r.mtthf_h,
            "dram_usd_per_mb": c.dram_usd_per_mb,
            "nvram_usd_per_mb": c.nvram_usd_per_mb,
            "disk_usd_per_mb": c.disk_usd_per_mb,
            "cache_disk_mb": c.cache_disk_mb,
            "dedicated_cache_disk": c.dedicated_cache_disk,
            "cache_disk_usd": c.cache_disk_usd,
        })
    }
}

/// `{"inputs": {...}, "rows": [{read_cache_mb, write_cache_mb, architecture, mttdl_h,
/// cost_usd}, ...]}`.
pub fn to_json(inputs: &Inputs, rows: &[Row]) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "read_cache_mb": r.read_cache_mb,
                "write_cache_mb": r.write_cache_mb,
                "architecture": r.architecture.name(),
                "mttdl_h": r.mttdl_h,
                "cost_usd": r.cost_usd,
            })
        })
        .collect();
    json!({"inputs": inputs.to_json(), "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_cover_every_size_and_architecture() {
        let rows = compare(&Inputs::default()).unwrap();
        assert_eq!(rows.len(), 15);
        assert_eq!(rows[0].architecture, Architecture::SingleNvram);
        assert_eq!(rows[0].mttdl_h, 12_500.0);
        assert_eq!(rows[4].architecture, Architecture::TripleRapid);
        // DRAM 64 + 16 MB at $0.5 and two backups of 2 MB NVRAM + 256 MB of disk space.
        assert!((rows[4].cost_usd - (40.0 + 2.0 * (110.0 + 1.28))).abs() < 1e-9);
        assert_eq!(rows[14].write_cache_mb, 64.0);
        let v = to_json(&Inputs::default(), &rows);
        assert_eq!(v["rows"][2]["architecture"], "rapid-dp");
        assert_eq!(v["inputs"]["backup_nvram_mb"], 2.0);
    }

    #[test]
    fn a_bad_size_names_its_index() {
        let inputs = Inputs {
            write_cache_mb: vec![16.0, 0.0],
            ..Inputs::default()
        };
        let e = compare(&inputs).unwrap_err();
        assert!(
            matches!(&e, Error::Config { key, .. } if key == "reliability.write_cache_mb[1]"),
            "{e}"
        );
        let none = Inputs {
            write_cache_mb: vec![],
            ..Inputs::default()
        };
        assert!(compare(&none).is_err());
    }
}
