//! The `[reliability]` table: inputs of the write-cache MTTDL and cost model
//! (`crate::reliability`). Every key is optional; the defaults are the RAPID-Cache paper's.
//!
//! A reliability config is a file (or dict) whose only table is `[reliability]`; it runs no
//! simulation, so it is parsed apart from experiments.

use serde_json::Value;

use super::toml_value;
use super::tree::Table;
use crate::error::{Error, Result};
use crate::reliability::compare::WRITE_SIZES_MAX;
use crate::reliability::Inputs;

/// Largest time, size or price the model accepts: far beyond any real part, small enough that
/// the products in the equations stay finite.
const BIG: f64 = 1e12;
/// Smallest positive time or size (a zero would divide by zero).
const TINY: f64 = 1e-9;

/// An optional number in `[TINY, BIG]` (`[0, BIG]` with `zero_ok`), with a message that says
/// "> 0" rather than printing the bounds.
fn number(t: &mut Table<'_>, key: &'static str, zero_ok: bool) -> Result<Option<f64>> {
    let path = t.key(key);
    let Some(v) = t.float(key, f64::MIN, f64::MAX)? else {
        return Ok(None);
    };
    let low_ok = if zero_ok { v >= 0.0 } else { v >= TINY };
    if low_ok && v <= BIG {
        Ok(Some(v))
    } else {
        let bound = if zero_ok { ">= 0" } else { "> 0" };
        Err(Error::config(
            path,
            format!("expected a number {bound} and at most 1e12, got {v}"),
        ))
    }
}

/// Parse a TOML reliability config; `file` names it in syntax errors.
pub fn reliability_from_toml(text: &str, file: &str) -> Result<Inputs> {
    reliability_from_value(&toml_value(text, file)?)
}

/// Validate a reliability config tree: `{"reliability": {...}}` (the table may be absent:
/// every input then takes its default).
pub fn reliability_from_value(root: &Value) -> Result<Inputs> {
    let mut root = Table::new("", root)?;
    let inputs = match root.table("reliability")? {
        Some(t) => inputs(t)?,
        None => Inputs::default(),
    };
    root.finish()?;
    Ok(inputs)
}

fn inputs(mut t: Table<'_>) -> Result<Inputs> {
    let mut out = Inputs::default();
    let r = &mut out.rates;
    for (key, field) in [
        ("mttf_nvram_h", &mut r.mttf_nvram_h),
        ("mttf_dram_h", &mut r.mttf_dram_h),
        ("mttf_disk_h", &mut r.mttf_disk_h),
        ("mttr_h", &mut r.mttr_h),
        ("mttpf_h", &mut r.mttpf_h),
        ("mttf_ups_h", &mut r.mttf_ups_h),
        ("mtthf_h", &mut r.mtthf_h),
        ("module_mb", &mut r.module_mb),
    ] {
        if let Some(v) = number(&mut t, key, false)? {
            *field = v;
        }
    }
    let c = &mut out.costs;
    for (key, field) in [
        ("dram_usd_per_mb", &mut c.dram_usd_per_mb),
        ("nvram_usd_per_mb", &mut c.nvram_usd_per_mb),
        ("disk_usd_per_mb", &mut c.disk_usd_per_mb),
        ("cache_disk_usd", &mut c.cache_disk_usd),
    ] {
        if let Some(v) = number(&mut t, key, true)? {
            *field = v;
        }
    }
    if let Some(v) = number(&mut t, "cache_disk_mb", false)? {
        c.cache_disk_mb = v;
    }
    if let Some(v) = t.bool("dedicated_cache_disk")? {
        c.dedicated_cache_disk = v;
    }
    if let Some(v) = number(&mut t, "read_cache_mb", true)? {
        out.read_cache_mb = v;
    }
    if let Some(v) = number(&mut t, "backup_nvram_mb", false)? {
        out.backup_nvram_mb = v;
    }
    let sizes_key = t.key("write_cache_mb");
    if let Some(v) = t.float_list("write_cache_mb", f64::MIN, f64::MAX)? {
        if v.is_empty() || v.len() > WRITE_SIZES_MAX {
            return Err(Error::config(
                sizes_key,
                format!("expected 1 to {WRITE_SIZES_MAX} sizes, got {}", v.len()),
            ));
        }
        if let Some((i, x)) = v
            .iter()
            .enumerate()
            .find(|(_, &x)| !(TINY..=BIG).contains(&x))
        {
            return Err(Error::config(
                format!("{sizes_key}[{i}]"),
                format!("expected a size > 0 and at most 1e12 MB, got {x}"),
            ));
        }
        out.write_cache_mb = v;
    }
    t.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reliability::compare;

    fn key_of(text: &str) -> String {
        match reliability_from_toml(text, "r.toml").unwrap_err() {
            Error::Config { key, .. } => key,
            other => panic!("not a config error: {other}"),
        }
    }

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(
            reliability_from_toml("", "r.toml").unwrap(),
            Inputs::default()
        );
        let i = reliability_from_toml(
            "[reliability]\nbackup_nvram_mb = 4\nwrite_cache_mb = [8, 128]\n\
             mttf_nvram_h = 15000\ndedicated_cache_disk = true\nread_cache_mb = 0\n",
            "r.toml",
        )
        .unwrap();
        assert_eq!(i.backup_nvram_mb, 4.0);
        assert_eq!(i.write_cache_mb, vec![8.0, 128.0]);
        assert_eq!(i.rates.mttf_nvram_h, 15_000.0);
        assert!(i.costs.dedicated_cache_disk);
        assert_eq!(compare(&i).unwrap().len(), 10);
    }

    #[test]
    fn sizes_take_units() {
        // `_mb` keys are in 2^20-byte megabytes; a string with a unit converts to them.
        let i = reliability_from_toml(
            "[reliability]\nbackup_nvram_mb = \"512KiB\"\nwrite_cache_mb = [\"8MiB\", \"1GiB\", 2]\n\
             module_mb = \"64M\"\ncache_disk_mb = \"1.5GiB\"\n",
            "r.toml",
        )
        .unwrap();
        assert_eq!(i.backup_nvram_mb, 0.5);
        assert_eq!(i.write_cache_mb, vec![8.0, 1024.0, 2.0]);
        assert_eq!(i.rates.module_mb, 64.0);
        assert_eq!(i.costs.cache_disk_mb, 1536.0);
        // A price per megabyte is not a size.
        assert_eq!(
            key_of("[reliability]\ndram_usd_per_mb = \"1MiB\""),
            "reliability.dram_usd_per_mb"
        );
        assert_eq!(
            key_of("[reliability]\nwrite_cache_mb = [8, \"lots\"]"),
            "reliability.write_cache_mb[1]"
        );
    }

    #[test]
    fn bad_values_name_their_key() {
        assert_eq!(
            key_of("[reliability]\nmttf_nvram_h = -5"),
            "reliability.mttf_nvram_h"
        );
        assert_eq!(key_of("[reliability]\nmttr_h = 0"), "reliability.mttr_h");
        let e = reliability_from_toml("[reliability]\nmttf_disk_h = -1e6", "r.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "config key `reliability.mttf_disk_h`: expected a number > 0 and at most 1e12, got -1000000"
        );
        assert_eq!(
            key_of("[reliability]\nwrite_cache_mb = [16, 0]"),
            "reliability.write_cache_mb[1]"
        );
        assert_eq!(
            key_of("[reliability]\nwrite_cache_mb = []"),
            "reliability.write_cache_mb"
        );
        assert_eq!(
            key_of("[reliability]\nbackup_nvram_mb = \"2 parsecs\""),
            "reliability.backup_nvram_mb"
        );
        assert_eq!(
            key_of("[reliability]\nnvram_usd_per_mb = -1"),
            "reliability.nvram_usd_per_mb"
        );
        assert_eq!(key_of("[reliability]\nmtbf = 3"), "reliability.mtbf");
        assert_eq!(key_of("[workload]\nx = 1"), "workload");
        let e = reliability_from_toml("[reliability\n", "r.toml").unwrap_err();
        assert!(matches!(e, Error::Syntax { line: 1, .. }), "{e}");
    }
}
