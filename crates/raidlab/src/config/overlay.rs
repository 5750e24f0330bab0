//! `[[workload.overlay]]`: several sources merged by arrival time (`workload/overlay.rs`).
//! Each part is a table with `trace` (and `format`) or `[synthetic]`, like `[workload]`
//! itself. A synthetic part without its own `seed` gets the run's seed plus its index, so
//! parts of one generator are different streams.

use std::path::Path;

use super::tables::source_spec;
use super::tree::Table;
use crate::error::{Error, Result};
use crate::workload::overlay::PARTS_MAX;
use crate::workload::SourceSpec;

pub(super) fn overlay_spec(
    parts: Vec<Table<'_>>,
    base_dir: Option<&Path>,
    seed: u64,
) -> Result<SourceSpec> {
    if parts.is_empty() || parts.len() > PARTS_MAX {
        return Err(Error::config(
            "workload.overlay",
            format!("expected 1 to {PARTS_MAX} parts, got {}", parts.len()),
        ));
    }
    let mut out = Vec::with_capacity(parts.len());
    for (i, mut part) in parts.into_iter().enumerate() {
        let spec = source_spec(&mut part, base_dir, seed.wrapping_add(i as u64))?;
        if spec.lacks_timestamps() {
            return Err(Error::config(
                format!("workload.overlay[{i}]"),
                "has no arrival times to merge by (zipf, uniform and key streams carry none)",
            ));
        }
        part.finish()?;
        out.push(spec);
    }
    Ok(SourceSpec::Overlay(out))
}

#[cfg(test)]
mod tests {
    use crate::config::from_toml;
    use crate::error::Error;
    use crate::workload::{self, SourceSpec, SynthSpec};

    const CACHE: &str = "[cache]\npolicy = \"lru\"\ncapacity_blocks = 10\n";
    const PART: &str = "[[workload.overlay]]\n[workload.overlay.synthetic]\nkind = \"bursty\"\n\
                        requests = 300\nspace_gib = 1\n";

    fn key(text: &str) -> String {
        match from_toml(&format!("{CACHE}{text}"), "o.toml", None).unwrap_err() {
            Error::Config { key, .. } => key,
            other => panic!("{other}"),
        }
    }

    #[test]
    fn parts_merge_by_time_with_their_own_seeds() {
        let text = format!("{CACHE}[workload]\nops = \"all\"\n{PART}{PART}");
        let exp = &from_toml(&text, "o.toml", None).unwrap()[0];
        let SourceSpec::Overlay(parts) = &exp.workload.source else {
            panic!("{:?}", exp.workload.source)
        };
        let seeds: Vec<u64> = parts
            .iter()
            .map(|p| match p {
                SourceSpec::Synthetic(SynthSpec::Bursty(b)) => b.seed,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(seeds, [1, 2]);
        let mut src = workload::open(&exp.workload).unwrap();
        assert_eq!(src.label(), "overlay");
        let (mut n, mut last) = (0, 0);
        while let Some(r) = src.next_request().unwrap() {
            assert!(r.time_ns >= last);
            last = r.time_ns;
            n += 1;
        }
        assert_eq!(n, 600);
    }

    #[test]
    fn bad_overlays_name_their_key() {
        let zipf = "[[workload.overlay]]\n[workload.overlay.synthetic]\nkind = \"zipf\"\n";
        assert_eq!(key(&format!("{PART}{zipf}")), "workload.overlay[1]");
        let both = format!("[workload]\ntrace = \"x.csv\"\n{PART}");
        assert_eq!(key(&both), "workload.trace");
        assert_eq!(key("[workload]\noverlay = []\n"), "workload.overlay");
        assert_eq!(key("[workload]\noverlay = 3\n"), "workload.overlay");
        assert_eq!(
            key("[[workload.overlay]]\nformat = \"msr\"\n"),
            "workload.overlay[0].trace"
        );
        // A part is one source: no nested overlay, no [workload]-wide keys.
        let nested = "[[workload.overlay]]\n[[workload.overlay.overlay]]\n";
        assert_eq!(key(nested), "workload.overlay[0].trace");
        let stray = "[[workload.overlay]]\nlimit = 3\n[workload.overlay.synthetic]\n\
                     kind = \"bursty\"\n";
        assert_eq!(key(stray), "workload.overlay[0].limit");
    }
}
