//! Fuzz the config parser: any text must parse to experiments or yield an error naming the
//! key or the line, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = raidlab::config::from_toml(text, "fuzz.toml", None);
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
            let _ = raidlab::config::from_value(&value, None);
        }
    }
});
