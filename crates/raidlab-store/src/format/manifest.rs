//! `DIR/members.json`: the devices of an array, so arrays on explicit paths (block devices)
//! can be assembled from their directory alone.
//!
//! `{"format": "raidlab-members", "version": 1, "paths": [...]}`: members first, then
//! spares, each relative to DIR when inside it and absolute otherwise, or an NBD URI (a
//! remote member, `member::nbd`) as given. It is replaced
//! atomically (write a temporary file, fdatasync, rename, fsync the directory).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use raidlab::{Error, Result};

pub const FILE: &str = "members.json";
pub const FORMAT: &str = "raidlab-members";
pub const VERSION: u64 = 1;
/// More entries than any array holds (256 slots and their spares): bounds what we read.
pub const PATHS_MAX: usize = 1024;
/// A manifest larger than this is not one we wrote.
const BYTES_MAX: u64 = 1 << 20;

/// The manifest's path in `dir`.
pub fn manifest_path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

fn display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The listed devices, resolved against `dir` (relative entries joined to it).
pub fn read_manifest(dir: &Path) -> Result<Vec<PathBuf>> {
    let mp = manifest_path(dir);
    let name = display(&mp);
    let text =
        match std::fs::metadata(&mp) {
            Ok(m) if m.len() > BYTES_MAX => {
                return Err(Error::store(
                    &name,
                    format!(
                        "{} bytes: too large for a members manifest (at most {BYTES_MAX})",
                        m.len()
                    ),
                ))
            }
            Ok(_) => std::fs::read_to_string(&mp).map_err(|e| Error::io(&name, &e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::store(
                &name,
                "missing: not an array directory (expected the members manifest `create` writes)",
            )),
            Err(e) => return Err(Error::io(&name, &e)),
        };
    parse_manifest(&text, dir, &name)
}

/// The devices listed in manifest `text` (read from `name`), resolved against `dir`. Text
/// is untrusted: anything but a valid manifest is an error naming `name`.
pub fn parse_manifest(text: &str, dir: &Path, name: &str) -> Result<Vec<PathBuf>> {
    let corrupt = |msg: String| Error::store(name, format!("corrupt members manifest: {msg}"));
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| corrupt(e.to_string()))?;
    if v.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(corrupt(format!("expected \"format\": \"{FORMAT}\"")));
    }
    match v.get("version").and_then(|f| f.as_u64()) {
        Some(VERSION) => {}
        Some(n) if n > VERSION => {
            return Err(Error::store(
                name,
                format!(
                    "members manifest version {n} is newer than this raidlab reads ({VERSION})"
                ),
            ))
        }
        _ => return Err(corrupt(format!("expected \"version\": {VERSION}"))),
    }
    let list = v
        .get("paths")
        .and_then(|p| p.as_array())
        .ok_or_else(|| corrupt("expected \"paths\": a list of device paths".into()))?;
    if list.is_empty() || list.len() > PATHS_MAX {
        return Err(corrupt(format!(
            "{} paths, expected 1 to {PATHS_MAX}",
            list.len()
        )));
    }
    let mut out: Vec<PathBuf> = Vec::with_capacity(list.len());
    for (i, p) in list.iter().enumerate() {
        let s = p
            .as_str()
            .filter(|s| !s.is_empty() && !s.contains('\0'))
            .ok_or_else(|| corrupt(format!("paths[{i}] is not a non-empty path string")))?;
        // An NBD URI names a remote member as it is; a path is relative to DIR.
        let full = if crate::member::nbd::is_uri(s) {
            PathBuf::from(s)
        } else {
            dir.join(s)
        };
        if out.contains(&full) {
            return Err(corrupt(format!("paths[{i}] ({s}) is listed twice")));
        }
        out.push(full);
    }
    Ok(out)
}

/// How `path` is recorded: relative to `dir` when inside it, absolute otherwise.
fn entry(dir: &Path, path: &Path) -> Result<String> {
    if let Some(uri) = path.to_str().filter(|p| crate::member::nbd::is_uri(p)) {
        return Ok(uri.to_string());
    }
    let abs = |p: &Path| std::path::absolute(p).map_err(|e| Error::io(display(p), &e));
    let (d, p) = (abs(dir)?, abs(path)?);
    let rec = p.strip_prefix(&d).map(Path::to_path_buf).unwrap_or(p);
    rec.to_str().map(str::to_string).ok_or_else(|| {
        Error::config(
            "members",
            format!("{}: device paths must be UTF-8", display(path)),
        )
    })
}

/// Write the manifest of `dir` listing `paths` (members, then spares).
pub fn write_manifest(dir: &Path, paths: &[PathBuf]) -> Result<()> {
    let entries = paths
        .iter()
        .map(|p| entry(dir, p))
        .collect::<Result<Vec<_>>>()?;
    let doc = serde_json::json!({"format": FORMAT, "version": VERSION, "paths": entries});
    let mut text = serde_json::to_string_pretty(&doc)
        .map_err(|e| Error::store(display(dir), format!("encoding the manifest: {e}")))?;
    text.push('\n');
    let mp = manifest_path(dir);
    let tmp = dir.join(format!("{FILE}.tmp"));
    let tname = display(&tmp);
    let mut f = File::create(&tmp).map_err(|e| Error::io(&tname, &e))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_data())
        .map_err(|e| Error::io(&tname, &e))?;
    drop(f);
    std::fs::rename(&tmp, &mp).map_err(|e| Error::io(display(&mp), &e))?;
    sync_dir(dir)
}

/// fsync a directory, so the names created or renamed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(display(dir), &e))
}

/// Append `path` (a new spare) to the manifest of `dir`; nothing changes if it is listed.
/// Call it once the device carries this array's superblock: assembly rejects a listed
/// device without one.
pub fn add_to_manifest(dir: &Path, path: &Path) -> Result<()> {
    let mut paths = read_manifest(dir)?;
    let want = entry(dir, path)?;
    let listed = paths
        .iter()
        .map(|p| entry(dir, p))
        .collect::<Result<Vec<_>>>()?;
    if listed.contains(&want) {
        return Ok(());
    }
    if paths.len() >= PATHS_MAX {
        return Err(Error::store(
            display(&manifest_path(dir)),
            format!("already lists {PATHS_MAX} devices, the most an array directory holds"),
        ));
    }
    paths.push(path.to_path_buf());
    write_manifest(dir, &paths)
}

/// Drop `path` (a removed spare or failed device) from the manifest of `dir`.
pub fn remove_from_manifest(dir: &Path, path: &Path) -> Result<()> {
    let paths = read_manifest(dir)?;
    let want = entry(dir, path)?;
    let mut kept = Vec::with_capacity(paths.len());
    for p in paths {
        if entry(dir, &p)? != want {
            kept.push(p);
        }
    }
    if kept.is_empty() {
        return Err(Error::store(
            display(&manifest_path(dir)),
            format!("removing {} would leave no device listed", display(path)),
        ));
    }
    write_manifest(dir, &kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::testutil::TempDir;

    #[test]
    fn relative_inside_absolute_outside() {
        let t = TempDir::new("manifest");
        let d = t.path();
        let outside = std::env::temp_dir().join("raidlab-elsewhere-dev");
        write_manifest(d, &[d.join("disk0"), d.join("disk1"), outside.clone()]).unwrap();
        let text = std::fs::read_to_string(d.join(FILE)).unwrap();
        assert!(text.contains("\"disk0\""), "{text}");
        assert!(text.contains("\"format\": \"raidlab-members\""), "{text}");
        assert_eq!(
            read_manifest(d).unwrap(),
            vec![d.join("disk0"), d.join("disk1"), outside.clone()]
        );
        add_to_manifest(d, &d.join("spare0")).unwrap();
        add_to_manifest(d, &d.join("spare0")).unwrap();
        assert_eq!(read_manifest(d).unwrap().len(), 4);
        remove_from_manifest(d, &outside).unwrap();
        assert_eq!(
            read_manifest(d).unwrap(),
            vec![d.join("disk0"), d.join("disk1"), d.join("spare0")]
        );
    }

    #[test]
    fn missing_or_corrupt_names_the_manifest() {
        let t = TempDir::new("manifest-bad");
        let d = t.path();
        let e = read_manifest(d).unwrap_err().to_string();
        assert!(e.contains("members.json: missing"), "{e}");
        for (text, want) in [
            ("{", "corrupt members manifest"),
            (
                r#"{"format": "x", "version": 1, "paths": ["a"]}"#,
                "\"format\"",
            ),
            (
                r#"{"format": "raidlab-members", "version": 9, "paths": ["a"]}"#,
                "version 9 is newer",
            ),
            (
                r#"{"format": "raidlab-members", "version": 1, "paths": []}"#,
                "0 paths",
            ),
            (
                r#"{"format": "raidlab-members", "version": 1, "paths": ["a", 3]}"#,
                "paths[1]",
            ),
            (
                r#"{"format": "raidlab-members", "version": 1, "paths": ["a", "a"]}"#,
                "twice",
            ),
        ] {
            std::fs::write(d.join(FILE), text).unwrap();
            let e = read_manifest(d).unwrap_err().to_string();
            assert!(e.contains("members.json") && e.contains(want), "{e}");
        }
    }
}

#[cfg(test)]
mod parse_props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Untrusted manifest text never panics the parser, and an error names the file.
        #[test]
        fn any_text_parses_or_names_the_file(text in ".{0,200}") {
            if let Err(e) = parse_manifest(&text, Path::new("d"), "d/members.json") {
                prop_assert!(e.to_string().starts_with("d/members.json: "), "{e}");
            }
        }

        /// Near-valid manifests (valid JSON with random values) too.
        #[test]
        fn near_valid_manifests_never_panic(version in 0u64..4, paths in proptest::collection::vec(".{0,8}", 0..5)) {
            let text = serde_json::json!({"format": FORMAT, "version": version, "paths": paths}).to_string();
            let _ = parse_manifest(&text, Path::new("d"), "d/members.json");
        }
    }
}
