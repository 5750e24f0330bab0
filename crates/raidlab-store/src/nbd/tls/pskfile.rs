//! GnuTLS PSK key files, as `nbdkit --tls-psk`, qemu's `tls-creds-psk` and libnbd's
//! `tls-psk-file` read them (and `psktool` writes them): one `username:hexkey` per line.
//! The username is everything before the first `:`, the key the hex digits after it. Blank
//! lines are skipped; there are no comments (GnuTLS has none: `#` would begin a username).
//! Parsed without OpenSSL, so a bad file is reported the same by every build.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::TlsConfigError;

/// Largest key file read.
pub const PSK_FILE_BYTES_MAX: u64 = 1 << 20;
/// Most users in one file.
pub const PSK_USERS_MAX: usize = 4096;
/// Longest username, in bytes (GnuTLS's `MAX_USERNAME_SIZE`).
pub const PSK_USERNAME_BYTES_MAX: usize = 128;
/// Longest key, in bytes (OpenSSL 1.1.1's `PSK_MAX_PSK_LEN`; 2048 bits).
pub const PSK_KEY_BYTES_MAX: usize = 256;

/// A pre-shared key; its bytes are overwritten when dropped and never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct PskKey(Vec<u8>);

impl PskKey {
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for PskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PskKey({} bytes)", self.0.len())
    }
}

impl Drop for PskKey {
    fn drop(&mut self) {
        for b in self.0.iter_mut() {
            // Volatile, so the compiler cannot drop the stores of a buffer about to be freed.
            // SAFETY: `b` is a valid, aligned, exclusive reference.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
    }
}

/// The keys of one PSK file, by username.
#[derive(Clone, Debug)]
pub struct PskKeys {
    file: PathBuf,
    keys: HashMap<String, PskKey>,
}

impl PskKeys {
    /// Read and check `path` for `option` (e.g. "--tls-psk"); each error names the file
    /// and, for a bad line, its number.
    pub fn load(option: &'static str, path: &Path) -> Result<PskKeys, TlsConfigError> {
        let fail = |m: String| TlsConfigError::new(option, Some(path), m);
        let f = std::fs::File::open(path).map_err(|e| fail(format!("cannot open: {e}")))?;
        let mut data = Vec::new();
        f.take(PSK_FILE_BYTES_MAX + 1)
            .read_to_end(&mut data)
            .map_err(|e| fail(format!("cannot read: {e}")))?;
        let keys = PskKeys::parse(option, path, &data);
        // The file's copy of the keys, overwritten as the parsed ones will be.
        drop(PskKey(data));
        keys
    }

    /// Parse the text of a PSK file (`path` only names it in errors).
    pub fn parse(
        option: &'static str,
        path: &Path,
        data: &[u8],
    ) -> Result<PskKeys, TlsConfigError> {
        if data.len() as u64 > PSK_FILE_BYTES_MAX {
            return Err(TlsConfigError::new(
                option,
                Some(path),
                format!("larger than {PSK_FILE_BYTES_MAX} bytes: not a PSK file"),
            ));
        }
        let mut keys: HashMap<String, PskKey> = HashMap::new();
        let mut first_line: HashMap<String, usize> = HashMap::new();
        for (i, raw) in data.split(|&b| b == b'\n').enumerate() {
            let line_no = i + 1;
            let fail = |m: String| TlsConfigError::at_line(option, path, line_no, m);
            let line = raw.strip_suffix(b"\r").unwrap_or(raw);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                return Err(fail("no ':' (want username:hexkey)".into()));
            };
            let (user, hex) = (&line[..colon], &line[colon + 1..]);
            let user = parse_user(user).map_err(fail)?;
            let key = parse_hex(hex).map_err(fail)?;
            if let Some(first) = first_line.get(&user) {
                return Err(fail(format!(
                    "username {user:?} again (first on line {first})"
                )));
            }
            if keys.len() == PSK_USERS_MAX {
                return Err(fail(format!("more than {PSK_USERS_MAX} users")));
            }
            first_line.insert(user.clone(), line_no);
            keys.insert(user, key);
        }
        if keys.is_empty() {
            return Err(TlsConfigError::new(
                option,
                Some(path),
                "no keys (want lines of username:hexkey)",
            ));
        }
        Ok(PskKeys {
            file: path.to_path_buf(),
            keys,
        })
    }

    /// The key of `user`, if the file has one.
    pub fn get(&self, user: &str) -> Option<&PskKey> {
        self.keys.get(user)
    }

    /// The file the keys came from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

fn parse_user(user: &[u8]) -> Result<String, String> {
    if user.is_empty() {
        return Err("empty username before ':'".into());
    }
    if user.len() > PSK_USERNAME_BYTES_MAX {
        return Err(format!(
            "username of {} bytes (at most {PSK_USERNAME_BYTES_MAX})",
            user.len()
        ));
    }
    let text = std::str::from_utf8(user).map_err(|_| "username is not UTF-8".to_string())?;
    if text.chars().any(char::is_control) {
        return Err(format!("username {text:?} has a control character"));
    }
    Ok(text.to_string())
}

fn parse_hex(hex: &[u8]) -> Result<PskKey, String> {
    if hex.is_empty() {
        return Err("empty key after ':'".into());
    }
    if hex.len() > 2 * PSK_KEY_BYTES_MAX {
        return Err(format!(
            "key of {} hex digits (at most {}: {PSK_KEY_BYTES_MAX} bytes)",
            hex.len(),
            2 * PSK_KEY_BYTES_MAX
        ));
    }
    if let Some(at) = hex.iter().position(|b| !b.is_ascii_hexdigit()) {
        return Err(format!(
            "key has {:?} at column {}: want hex digits only",
            char::from(hex[at]),
            at + 1
        ));
    }
    if !hex.len().is_multiple_of(2) {
        return Err(format!(
            "key has an odd number of hex digits ({})",
            hex.len()
        ));
    }
    let digit = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
    Ok(PskKey(
        hex.chunks_exact(2)
            .map(|p| (digit(p[0]) << 4) | digit(p[1]))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<PskKeys, TlsConfigError> {
        PskKeys::parse("--tls-psk", Path::new("keys.psk"), text.as_bytes())
    }

    fn err(text: &str) -> String {
        parse(text).expect_err("must be refused").to_string()
    }

    #[test]
    fn worked_example() {
        // Two users as psktool writes them, a blank line and a CRLF line end.
        let k = parse("alice:0123456789abcdefABCDEF0011223344\n\nbob:ff00\r\n").unwrap();
        assert_eq!(k.len(), 2);
        assert_eq!(
            k.get("alice").unwrap().bytes(),
            &[
                0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xab, 0xcd, 0xef, 0x00, 0x11, 0x22,
                0x33, 0x44
            ]
        );
        assert_eq!(k.get("bob").unwrap().bytes(), &[0xff, 0x00]);
        assert!(k.get("carol").is_none());
        assert!(k.get("Alice").is_none(), "usernames are case-sensitive");
        assert_eq!(k.file(), Path::new("keys.psk"));
        // The key never shows in a debug print.
        assert!(!format!("{k:?}").contains("ff"), "{k:?}");
    }

    #[test]
    fn username_ends_at_the_first_colon() {
        // GnuTLS splits at the first ':'; a second one is then in the key and not hex.
        assert_eq!(
            err("a:b:00\n"),
            "keys.psk:1: key has ':' at column 2: want hex digits only"
        );
        let k = parse("user name with spaces:00\n").unwrap();
        assert_eq!(k.get("user name with spaces").unwrap().bytes(), &[0]);
    }

    #[test]
    fn every_error_names_file_and_line() {
        assert_eq!(
            err("alice:00\nbob\n"),
            "keys.psk:2: no ':' (want username:hexkey)"
        );
        assert_eq!(err(":00\n"), "keys.psk:1: empty username before ':'");
        assert_eq!(err("alice:\n"), "keys.psk:1: empty key after ':'");
        assert_eq!(
            err("alice:   \n"),
            "keys.psk:1: key has ' ' at column 1: want hex digits only"
        );
        assert_eq!(
            err("alice:0g\n"),
            "keys.psk:1: key has 'g' at column 2: want hex digits only"
        );
        assert_eq!(
            err("alice:abc\n"),
            "keys.psk:1: key has an odd number of hex digits (3)"
        );
        assert_eq!(
            err("alice:00\nbob:11\nalice:22\n"),
            "keys.psk:3: username \"alice\" again (first on line 1)"
        );
        assert_eq!(
            err(&format!(
                "alice:{}\n",
                "0".repeat(2 * PSK_KEY_BYTES_MAX + 2)
            )),
            "keys.psk:1: key of 514 hex digits (at most 512: 256 bytes)"
        );
        assert_eq!(
            err(&format!("{}:00\n", "u".repeat(PSK_USERNAME_BYTES_MAX + 1))),
            "keys.psk:1: username of 129 bytes (at most 128)"
        );
        assert_eq!(
            err("al\u{7}ice:00\n"),
            "keys.psk:1: username \"al\\u{7}ice\" has a control character"
        );
        let e = PskKeys::parse("--tls-psk", Path::new("keys.psk"), b"\xff\xfe:00\n").unwrap_err();
        assert_eq!(e.to_string(), "keys.psk:1: username is not UTF-8");
        assert_eq!(e.option, "--tls-psk");
        assert_eq!(e.line, Some(1));
    }

    #[test]
    fn empty_and_oversized_files() {
        assert_eq!(err(""), "keys.psk: no keys (want lines of username:hexkey)");
        assert_eq!(
            err("\n  \n\r\n"),
            "keys.psk: no keys (want lines of username:hexkey)"
        );
        let big = vec![b'\n'; PSK_FILE_BYTES_MAX as usize + 1];
        let e = PskKeys::parse("--tls-psk", Path::new("keys.psk"), &big).unwrap_err();
        assert_eq!(
            e.to_string(),
            "keys.psk: larger than 1048576 bytes: not a PSK file"
        );
        let many: String = (0..=PSK_USERS_MAX).map(|i| format!("u{i}:00\n")).collect();
        assert_eq!(err(&many), "keys.psk:4097: more than 4096 users");
        // The largest key and username are accepted.
        let k = parse(&format!(
            "{}:{}\n",
            "u".repeat(PSK_USERNAME_BYTES_MAX),
            "ab".repeat(PSK_KEY_BYTES_MAX)
        ))
        .unwrap();
        assert_eq!(k.len(), 1);
    }

    #[test]
    fn load_reads_a_file_and_names_a_missing_one() {
        let dir = crate::format::testutil::TempDir::new("pskfile");
        let path = dir.path().join("keys.psk");
        std::fs::write(&path, "alice:00ff\n").unwrap();
        let k = PskKeys::load("--tls-psk", &path).unwrap();
        assert_eq!(k.get("alice").unwrap().bytes(), &[0x00, 0xff]);
        let missing = dir.path().join("nope.psk");
        let e = PskKeys::load("--tls-psk", &missing).unwrap_err();
        assert_eq!(e.file.as_deref(), Some(missing.as_path()));
        assert!(e.message.starts_with("cannot open: "), "{e}");
    }

    /// Without the feature the file is still checked, then refused saying how to get PSK.
    #[cfg(not(feature = "tls-psk"))]
    #[test]
    fn a_build_without_tls_psk_refuses_it() {
        use super::super::{ServerTls, TlsMode, NO_PSK_BUILD};
        let dir = crate::format::testutil::TempDir::new("psknofeature");
        let path = dir.path().join("keys.psk");
        std::fs::write(&path, "alice:zz\n").unwrap();
        let e = ServerTls::load_psk(TlsMode::Require, Some(&path)).unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
        std::fs::write(&path, "alice:00ff\n").unwrap();
        let e = ServerTls::load_psk(TlsMode::Require, Some(&path)).unwrap_err();
        assert_eq!((e.option, e.message.as_str()), ("--tls-psk", NO_PSK_BUILD));
        assert!(e.message.contains("libssl-dev"), "{e}");
        let uri = format!("nbds://alice@127.0.0.1:1/?tls-psk-file={}", path.display());
        let e = crate::nbd::Client::connect(&uri).err().unwrap();
        assert!(e.to_string().contains("tls-psk"), "{e}");
    }

    proptest::proptest! {
        /// Any set of distinct users with keys, written as psktool does, reads back the same.
        #[test]
        fn round_trip(entries in proptest::collection::btree_map(
            "[a-zA-Z0-9._@-]{1,20}",
            proptest::collection::vec(proptest::num::u8::ANY, 1..64),
            1..20,
        )) {
            let text: String = entries
                .iter()
                .map(|(u, k)| {
                    let hex: String = k.iter().map(|b| format!("{b:02x}")).collect();
                    format!("{u}:{hex}\n")
                })
                .collect();
            let keys = parse(&text).unwrap();
            proptest::prop_assert_eq!(keys.len(), entries.len());
            for (u, k) in &entries {
                proptest::prop_assert_eq!(keys.get(u).unwrap().bytes(), &k[..]);
            }
        }
    }
}
