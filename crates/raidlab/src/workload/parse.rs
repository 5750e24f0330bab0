//! Allocation-free field splitting and number parsing on byte slices, shared by the text
//! readers. Every parser returns `None` (or an error message) instead of panicking: all
//! arithmetic is checked, and nothing indexes past a slice's end.

use super::Op;
use crate::disk::SECTOR_BYTES;

/// Split `line` at `sep` into `out`, returning how many fields the line has. Fields beyond
/// `out.len()` are counted but not stored, so a caller can report "expected 5, found 9".
pub(crate) fn split_sep<'a>(line: &'a [u8], sep: u8, out: &mut [&'a [u8]]) -> usize {
    let mut n = 0;
    for field in line.split(|&b| b == sep) {
        if let Some(slot) = out.get_mut(n) {
            *slot = trim(field);
        }
        n += 1;
    }
    n
}

/// Split `line` at runs of ASCII whitespace (spaces and tabs) into `out`; see [`split_sep`].
pub(crate) fn split_ws<'a>(line: &'a [u8], out: &mut [&'a [u8]]) -> usize {
    let mut n = 0;
    for field in line
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
    {
        if let Some(slot) = out.get_mut(n) {
            *slot = field;
        }
        n += 1;
    }
    n
}

/// The line without surrounding ASCII whitespace (CSV writers often pad fields).
pub(crate) fn trim(s: &[u8]) -> &[u8] {
    s.trim_ascii()
}

/// True when the line holds nothing but whitespace.
pub(crate) fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

/// A decimal non-negative integer that fits `u64`.
#[inline]
pub(crate) fn u64_dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// A hexadecimal non-negative integer (optional `0x` prefix) that fits `u64`.
pub(crate) fn u64_hex(s: &[u8]) -> Option<u64> {
    let s = s
        .strip_prefix(b"0x")
        .or_else(|| s.strip_prefix(b"0X"))
        .unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | u64::from(d);
    }
    Some(v)
}

/// A non-negative decimal number such as `13.191135` scaled by `10^scale` and truncated to
/// an integer: seconds with `scale = 9` give nanoseconds exactly, without going through
/// floating point (so timestamps are the same on every platform).
pub(crate) fn scaled_dec(s: &[u8], scale: u32) -> Option<u64> {
    let (int, frac) = match s.iter().position(|&b| b == b'.') {
        Some(dot) => (s.get(..dot)?, s.get(dot + 1..)?),
        None => (s, &b""[..]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let int = if int.is_empty() { 0 } else { u64_dec(int)? };
    let mut v = int.checked_mul(10u64.checked_pow(scale)?)?;
    let mut unit = 10u64.pow(scale);
    for &b in frac {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        unit /= 10;
        // Digits past the scale are dropped (truncation), but still validated.
        v = v.checked_add(u64::from(d).checked_mul(unit)?)?;
    }
    Some(v)
}

/// At most 40 characters of `s`, lossily decoded, for error messages.
pub(crate) fn show(s: &[u8]) -> String {
    let cut = s.get(..40).unwrap_or(s);
    let mut out = String::from_utf8_lossy(cut).into_owned();
    if cut.len() < s.len() {
        out.push('…');
    }
    out
}

/// Parse field `what` with `f`, or explain what was expected and found.
#[inline]
pub(crate) fn field<T>(
    s: &[u8],
    what: &str,
    expected: &str,
    f: impl FnOnce(&[u8]) -> Option<T>,
) -> Result<T, String> {
    f(s).ok_or_else(|| format!("{what}: expected {expected}, found `{}`", show(s)))
}

/// Shorthand for a decimal `u64` field.
#[inline]
pub(crate) fn dec(s: &[u8], what: &str) -> Result<u64, String> {
    field(s, what, "a non-negative integer", u64_dec)
}

/// Check a field count: exactly `want` fields, or at least `want` when `extra_ok`.
pub(crate) fn expect_fields(found: usize, want: usize, extra_ok: bool) -> Result<(), String> {
    if found == want || (extra_ok && found > want) {
        Ok(())
    } else {
        let more = if extra_ok { "at least " } else { "" };
        Err(format!("expected {more}{want} fields, found {found}"))
    }
}

/// `a * b`, or a message saying which value overflowed.
pub(crate) fn mul(a: u64, b: u64, what: &str) -> Result<u64, String> {
    a.checked_mul(b)
        .ok_or_else(|| format!("{what}: {a} x {b} overflows 64 bits"))
}

/// A decimal count of 512-byte sectors, in bytes.
#[inline]
pub(crate) fn sectors(s: &[u8], what: &str) -> Result<u64, String> {
    mul(dec(s, what)?, SECTOR_BYTES, what)
}

/// Non-negative decimal seconds, in nanoseconds (exact).
#[inline]
pub(crate) fn seconds(s: &[u8], what: &str) -> Result<u64, String> {
    field(s, what, "non-negative seconds", |s| scaled_dec(s, 9))
}

/// A read/write field: `read` or `write`, ASCII case ignored.
#[inline]
pub(crate) fn read_write(
    s: &[u8],
    what: &str,
    expected: &str,
    read: &[u8],
    write: &[u8],
) -> Result<Op, String> {
    field(s, what, expected, |s| {
        if s.eq_ignore_ascii_case(read) {
            Some(Op::Read)
        } else if s.eq_ignore_ascii_case(write) {
            Some(Op::Write)
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(u64_dec(b"0"), Some(0));
        assert_eq!(u64_dec(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(u64_dec(b"18446744073709551616"), None);
        assert_eq!(u64_dec(b"-1"), None);
        assert_eq!(u64_dec(b""), None);
        assert_eq!(u64_dec(b"1e3"), None);
        assert_eq!(u64_hex(b"2a"), Some(42));
        assert_eq!(u64_hex(b"0x28"), Some(40));
        assert_eq!(u64_hex(b"g"), None);
        assert_eq!(scaled_dec(b"13.191135", 6), Some(13_191_135));
        assert_eq!(
            scaled_dec(b"1456095145.133076000", 9),
            Some(1_456_095_145_133_076_000)
        );
        assert_eq!(scaled_dec(b"0.0000000019", 9), Some(1));
        assert_eq!(scaled_dec(b"2", 3), Some(2000));
        assert_eq!(scaled_dec(b".5", 3), Some(500));
        assert_eq!(scaled_dec(b".", 3), None);
        assert_eq!(scaled_dec(b"1.2.3", 3), None);
        assert_eq!(scaled_dec(b"99999999999999999999", 9), None);
    }

    #[test]
    fn splitting() {
        let mut f = [&b""[..]; 3];
        assert_eq!(split_sep(b"a, b,c,d", b',', &mut f), 4);
        assert_eq!(f, [&b"a"[..], b"b", b"c"]);
        assert_eq!(split_ws(b"  1\t 2 3  ", &mut f), 3);
        assert_eq!(f, [&b"1"[..], b"2", b"3"]);
        assert_eq!(show(&[0xff, b'a']), "\u{fffd}a");
    }
}
