//! Fuzz the `[reliability]` parser and the model behind it: any text must yield a table of
//! finite, positive MTTDLs and costs or an error naming the key or the line, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(inputs) = raidlab::config::reliability_from_toml(text, "fuzz.toml") {
            if let Ok(rows) = raidlab::reliability::compare(&inputs) {
                for r in rows {
                    assert!(r.mttdl_h.is_finite() && r.mttdl_h > 0.0);
                    assert!(r.cost_usd.is_finite() && r.cost_usd >= 0.0);
                }
            }
        }
    }
});
