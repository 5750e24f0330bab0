//! `[workload.synthetic]` with `kind = "hotspots"`: the WebSearch-like generator with temporal
//! locality (`workload/synth/hotspots.rs`). Every key defaults to the value fitted on the
//! WebSearch sample ([`HotspotsSpec::websearch`]).

use super::tree::Table;
use crate::error::Result;
use crate::workload::synth::HotspotsSpec;
use crate::workload::SynthSpec;

pub(super) fn hotspots_spec(t: &mut Table<'_>, seed: u64) -> Result<SynthSpec> {
    let space_gib = t.float_or("space_gib", 1e-6, 1e6, 60.0)?;
    let requests = t.uint_or("requests", 1, 1 << 40, 1_000_000)?;
    let mean_ms = t.float_or("mean_interarrival_ms", f64::MIN, f64::MAX, 3.7)?;
    let mut s = HotspotsSpec::websearch(super::gib_bytes(space_gib), requests, mean_ms * 1e6, seed);
    s.area_bytes = t.uint_or("area_kib", 1, 1 << 30, s.area_bytes >> 10)? << 10;
    // Ranges here only keep conversions sane; the generator's `validate` has the real rules
    // and names the same keys.
    for (key, field) in [
        ("set_fraction", &mut s.set_fraction),
        ("set_life_s", &mut s.set_life_s),
        ("spot_fraction", &mut s.spot_fraction),
        ("spot_share", &mut s.spot_share),
        ("spot_life_s", &mut s.spot_life_s),
        ("rate_ratio", &mut s.rate_ratio),
        ("high_share", &mut s.high_share),
        ("high_s", &mut s.high_s),
    ] {
        *field = t.float_or(key, f64::MIN, f64::MAX, *field)?;
    }
    s.validate()?;
    Ok(SynthSpec::Hotspots(s))
}

#[cfg(test)]
mod tests {
    use crate::config::synth_test::{error_key, synthetic};
    use crate::workload::synth::HotspotsSpec;
    use crate::workload::SynthSpec;

    fn spec(extra: &str) -> crate::error::Result<HotspotsSpec> {
        match synthetic("hotspots", extra, "h.toml")? {
            SynthSpec::Hotspots(s) => Ok(s),
            other => panic!("{other:?}"),
        }
    }

    fn key(extra: &str) -> String {
        error_key(spec(extra))
    }

    #[test]
    fn defaults_and_overrides() {
        // Without keys: the fitted values over 60 GiB at 3.7 ms, the run's seed (1).
        assert_eq!(
            spec("").unwrap(),
            HotspotsSpec::websearch(60 << 30, 1_000_000, 3.7e6, 1)
        );
        let s = spec(
            "space_gib = 10\nrequests = 500\nmean_interarrival_ms = 2.5\nseed = 7\n\
             area_kib = 1024\nset_fraction = 0.1\nset_life_s = 50\nspot_fraction = 0.05\n\
             spot_share = 0.5\nspot_life_s = 2\nrate_ratio = 3\nhigh_share = 0.3\nhigh_s = 4\n",
        )
        .unwrap();
        assert_eq!(
            s,
            HotspotsSpec {
                space_bytes: 10 << 30,
                requests: 500,
                mean_interarrival_ns: 2.5e6,
                area_bytes: 1 << 20,
                set_fraction: 0.1,
                set_life_s: 50.0,
                spot_fraction: 0.05,
                spot_share: 0.5,
                spot_life_s: 2.0,
                rate_ratio: 3.0,
                high_share: 0.3,
                high_s: 4.0,
                seed: 7,
            }
        );
    }

    #[test]
    fn bad_keys_are_named() {
        let k = |s: &str| format!("workload.synthetic.{s}");
        assert_eq!(key("area_kib = 1000\n"), k("area_kib"));
        assert_eq!(key("space_gib = 0.1\n"), k("space_gib"));
        assert_eq!(key("mean_interarrival_ms = 0\n"), k("mean_interarrival_ms"));
        assert_eq!(key("set_fraction = 0\n"), k("set_fraction"));
        assert_eq!(key("set_fraction = 0.99\n"), k("set_fraction"));
        assert_eq!(key("set_life_s = -1\n"), k("set_life_s"));
        assert_eq!(key("spot_fraction = 2\n"), k("spot_fraction"));
        assert_eq!(key("spot_share = 1.5\n"), k("spot_share"));
        assert_eq!(key("spot_life_s = 0\n"), k("spot_life_s"));
        assert_eq!(key("rate_ratio = 0.5\n"), k("rate_ratio"));
        assert_eq!(key("high_share = 1\n"), k("high_share"));
        assert_eq!(key("high_s = 0\n"), k("high_s"));
        assert_eq!(key("requests = 0\n"), k("requests"));
        assert_eq!(key("spots = 3\n"), k("spots"));
        assert_eq!(key("set_life_s = \"long\"\n"), k("set_life_s"));
    }
}
