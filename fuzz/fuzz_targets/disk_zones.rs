//! Fuzz the zone-file reader: any input parses or yields an error naming the line, never
//! panics; parsed zones are ascending and non-overlapping.
#![no_main]

use libfuzzer_sys::fuzz_target;
use raidlab::disk::files::parse_zones;

fuzz_target!(|data: &[u8]| {
    if let Ok(zones) = parse_zones(data, "fuzz") {
        for w in zones.windows(2) {
            assert!(w[0].last_cyl < w[1].first_cyl);
        }
        assert!(zones
            .iter()
            .all(|z| z.first_cyl <= z.last_cyl && z.sectors_per_track > 0));
    }
});
