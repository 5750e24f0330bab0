//! Sizes given on the command line ("64K", "1MiB", "2G").

use raidlab::{Error, Result};

/// Parse a byte count: a whole number with an optional binary suffix (K, M, G, T, P, each
/// also spelled KiB, MiB, ...; case-insensitive). Errors name `key`.
pub fn parse_size(text: &str, key: &str) -> Result<u64> {
    let t = text.trim();
    let bad = |why: &str| {
        Error::config(
            key,
            format!("{why} in size {text:?}: expected a whole number of bytes with an optional binary suffix (K, M, G, T, P or KiB, MiB, ...), e.g. 64K or 1GiB"),
        )
    };
    if t.is_empty() {
        return Err(bad("nothing given"));
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(bad(if t.starts_with('-') {
            "negative"
        } else {
            "no number"
        }));
    }
    let (num, suffix) = t.split_at(digits);
    let shift = match suffix.trim_start().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        "p" | "pib" => 50,
        _ => return Err(bad(&format!("unknown suffix {:?}", suffix.trim_start()))),
    };
    let n: u64 = num.parse().map_err(|_| bad("too large"))?;
    n.checked_mul(1u64 << shift).ok_or_else(|| bad("too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples() {
        for (t, v) in [
            ("65536", 65536),
            ("64K", 65536),
            ("64KiB", 65536),
            ("64k", 65536),
            ("1M", 1 << 20),
            ("1MiB", 1 << 20),
            ("2G", 2 << 30),
            ("2GiB", 2 << 30),
            ("1T", 1 << 40),
            (" 4 K ", 4096),
            ("0", 0),
        ] {
            assert_eq!(parse_size(t, "size").unwrap(), v, "{t}");
        }
    }

    #[test]
    fn rejects() {
        for (t, want) in [
            ("", "nothing given"),
            ("-1", "negative"),
            ("K", "no number"),
            ("1.5G", "unknown suffix \".5G\""),
            ("10KB", "unknown suffix \"KB\""),
            ("3X", "unknown suffix"),
            ("99999999999999999999", "too large"),
            ("16777216T", "too large"),
        ] {
            let e = parse_size(t, "--size").unwrap_err().to_string();
            assert!(
                e.starts_with("config key `--size`: ") && e.contains(want),
                "{t}: {e}"
            );
        }
    }
}
