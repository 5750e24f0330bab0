//! `[workload.synthetic]` with `kind = "bursty"`: the RAPID-Cache paper's generator
//! (`workload/synth/bursty.rs`). `preset` picks synthetic-a/b/c/d; every other key overrides
//! the preset (or the synthetic-a defaults without one).

use super::tree::{quoted, Table};
use crate::error::{Error, Result};
use crate::workload::synth::{BurstySpec, Distance};
use crate::workload::SynthSpec;

const MIB: f64 = (1u64 << 20) as f64;

pub(super) fn bursty_spec(t: &mut Table<'_>, seed: u64) -> Result<SynthSpec> {
    let preset_key = t.key("preset");
    let preset = t.str("preset")?.unwrap_or("synthetic-a");
    let mut s = BurstySpec::preset(preset, seed).ok_or_else(|| {
        Error::config(
            &preset_key,
            format!(
                "expected one of {}, got {preset:?}",
                quoted(BurstySpec::PRESETS)
            ),
        )
    })?;
    // Ranges here only keep conversions sane; the generator's `validate` has the real rules
    // and names the same keys.
    if let Some(v) = t.uint("requests", 1, 1 << 40)? {
        s.requests = v;
    }
    for (key, field) in [
        ("rate_iops", &mut s.rate_iops),
        ("burst_len", &mut s.burst_len),
        ("gap_len", &mut s.gap_len),
        ("burst_speedup", &mut s.burst_speedup),
        ("read_ratio", &mut s.read_ratio),
        ("history_share", &mut s.history_share),
    ] {
        if let Some(v) = t.float(key, f64::MIN, f64::MAX)? {
            *field = v;
        }
    }
    if let Some(v) = t.uint("request_bytes", 1, 1 << 30)? {
        s.request_bytes = v;
    }
    if let Some(v) = t.float("space_gib", 1e-6, 1e6)? {
        s.space_bytes = super::gib_bytes(v);
    }
    if let Some(v) = t.float("working_set_mib", 1e-6, 1e9)? {
        s.working_set_bytes = (v * MIB) as u64;
    }
    let shape = t.choice("distance", &["exponential", "normal", "uniform"])?;
    let mean_key = t.key("distance_mean");
    let mean = t.float("distance_mean", f64::MIN, f64::MAX)?;
    let std_key = t.key("distance_std");
    let std = t.float("distance_std", f64::MIN, f64::MAX)?;
    let (old_mean, old_std) = match s.distance {
        Distance::Exponential { mean } => (Some(mean), None),
        Distance::Normal { mean, std } => (Some(mean), Some(std)),
        Distance::Uniform => (None, None),
    };
    let name = shape.unwrap_or(match s.distance {
        Distance::Exponential { .. } => "exponential",
        Distance::Normal { .. } => "normal",
        Distance::Uniform => "uniform",
    });
    // A given `distance` starts from its own defaults; without one the preset's shape keeps
    // its mean and deviation unless they are given.
    let pick = |v: Option<f64>, old: Option<f64>, default: f64| {
        v.or(if shape.is_none() { old } else { None })
            .unwrap_or(default)
    };
    s.distance = match name {
        "exponential" => {
            if std.is_some() {
                return Err(Error::config(
                    std_key,
                    "only applies to distance = \"normal\"",
                ));
            }
            Distance::Exponential {
                mean: pick(mean, old_mean, 0.25),
            }
        }
        "normal" => Distance::Normal {
            mean: pick(mean, old_mean, 0.5),
            std: pick(std, old_std, 0.2),
        },
        _ => {
            if mean.is_some() || std.is_some() {
                return Err(Error::config(
                    if mean.is_some() { mean_key } else { std_key },
                    "does not apply to distance = \"uniform\"",
                ));
            }
            Distance::Uniform
        }
    };
    s.validate()?;
    Ok(SynthSpec::Bursty(s))
}

#[cfg(test)]
mod tests {
    use crate::config::synth_test::{error_key, synthetic};
    use crate::workload::synth::{BurstySpec, Distance};
    use crate::workload::SynthSpec;

    fn spec(extra: &str) -> crate::error::Result<BurstySpec> {
        match synthetic("bursty", extra, "b.toml")? {
            SynthSpec::Bursty(s) => Ok(s),
            other => panic!("{other:?}"),
        }
    }

    fn key(extra: &str) -> String {
        error_key(spec(extra))
    }

    #[test]
    fn presets_and_overrides() {
        // Without a preset: synthetic-a, with the run's seed (1 by default).
        assert_eq!(
            spec("").unwrap(),
            BurstySpec::preset("synthetic-a", 1).unwrap()
        );
        let c = spec("preset = \"synthetic-c\"\nseed = 9\nrate_iops = 3000\n").unwrap();
        assert_eq!(
            c,
            BurstySpec {
                rate_iops: 3000.0,
                ..BurstySpec::preset("synthetic-c", 9).unwrap()
            }
        );
        // The preset's shape keeps its deviation when only the mean is given.
        let a = spec("distance_mean = 0.3\n").unwrap();
        assert_eq!(
            a.distance,
            Distance::Normal {
                mean: 0.3,
                std: 0.2
            }
        );
        // A new shape starts from its own defaults.
        let e = spec("distance = \"exponential\"\nworking_set_mib = 8\nspace_gib = 1\n").unwrap();
        assert_eq!(e.distance, Distance::Exponential { mean: 0.25 });
        assert_eq!((e.working_set_bytes, e.space_bytes), (8 << 20, 1 << 30));
        let u = spec("preset = \"synthetic-b\"\nread_ratio = 0.1\n").unwrap();
        assert_eq!((u.distance, u.read_ratio), (Distance::Uniform, 0.1));
    }

    #[test]
    fn bad_keys_are_named() {
        let k = |s: &str| format!("workload.synthetic.{s}");
        assert_eq!(key("preset = \"synthetic-z\"\n"), k("preset"));
        assert_eq!(key("read_ratio = 2\n"), k("read_ratio"));
        assert_eq!(key("rate_iops = -5\n"), k("rate_iops"));
        assert_eq!(key("burst_len = 0\n"), k("burst_len"));
        assert_eq!(key("distance = \"pareto\"\n"), k("distance"));
        assert_eq!(
            key("distance = \"uniform\"\ndistance_std = 0.1\n"),
            k("distance_std")
        );
        assert_eq!(
            key("distance = \"exponential\"\ndistance_std = 0.1\n"),
            k("distance_std")
        );
        assert_eq!(key("working_set_mib = 0.001\n"), k("working_set_mib"));
        assert_eq!(key("request_bytes = 1000\n"), k("request_bytes"));
        assert_eq!(key("lambda = 3\n"), k("lambda"));
    }
}
