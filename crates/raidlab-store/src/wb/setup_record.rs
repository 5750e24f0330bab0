//! The record of the backup in use, `DIR/wb.json`: where the backup lives (and the log's
//! NVRAM), so a restart finds it.

use std::path::Path;

use raidlab::{Error, Result};
use serde_json::{json, Value};

use super::super::log::NVRAM_SLOTS_MAX;
use super::{write_durably, RECORD_FILE};

/// The record of the backup in use, as kept in `DIR/wb.json`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Record {
    pub kind: String,
    /// (path, base offset, bytes) of each place the backup lives.
    pub legs: Vec<(String, u64, u64)>,
    pub segment_bytes: u64,
    /// A log's NVRAM file and slot count.
    pub nvram: Option<(String, u32)>,
}

impl Record {
    pub(super) fn to_json(&self) -> Value {
        let mut v = json!({
            "kind": self.kind,
            "legs": self.legs.iter().map(|(p, b, n)| json!({"path": p, "base": b, "bytes": n})).collect::<Vec<_>>(),
            "segment_bytes": self.segment_bytes,
        });
        if let Some((path, slots)) = &self.nvram {
            v["nvram"] = json!({"path": path, "slots": slots});
        }
        v
    }

    pub(super) fn parse(text: &str, file: &str) -> Result<Record> {
        let bad = |m: &str| Error::Store {
            path: file.to_string(),
            msg: format!(
                "{m} (this file records where the write cache's backup is; do not edit it)"
            ),
        };
        let v: Value = serde_json::from_str(text)
            .map_err(|e| bad(&format!("not JSON: line {}: {e}", e.line())))?;
        let kind = v["kind"]
            .as_str()
            .ok_or_else(|| bad("no \"kind\""))?
            .to_string();
        if !["mirror", "log", "log-logical"].contains(&kind.as_str()) {
            return Err(bad(&format!("unknown kind {kind:?}")));
        }
        let legs = v["legs"]
            .as_array()
            .ok_or_else(|| bad("no \"legs\""))?
            .iter()
            .map(
                |l| match (l["path"].as_str(), l["base"].as_u64(), l["bytes"].as_u64()) {
                    (Some(p), Some(b), Some(n)) => Ok((p.to_string(), b, n)),
                    _ => Err(bad("a leg lacks path, base or bytes")),
                },
            )
            .collect::<Result<Vec<_>>>()?;
        if legs.is_empty() || legs.len() > super::super::format::LOG_MEMBERS_MAX {
            return Err(bad("no legs, or too many"));
        }
        let segment_bytes = v["segment_bytes"].as_u64().unwrap_or(0);
        let nvram = match &v["nvram"] {
            Value::Null => None,
            n => match (n["path"].as_str(), n["slots"].as_u64()) {
                (Some(p), Some(k))
                    if !kind.starts_with("log")
                        || k == 0
                        || k > u64::from(NVRAM_SLOTS_MAX)
                        || segment_bytes == 0 =>
                {
                    return Err(bad(&format!(
                        "an NVRAM ({p}) of {k} slots for a {kind} backup with segments of {segment_bytes} bytes"
                    )))
                }
                (Some(p), Some(k)) => Some((p.to_string(), k as u32)),
                _ => return Err(bad("\"nvram\" lacks path or slots")),
            },
        };
        Ok(Record {
            kind,
            legs,
            segment_bytes,
            nvram,
        })
    }
}

/// Check the text of a `wb.json` (the fuzz target's entry): `Err` names `file` and what
/// is wrong.
pub fn parse_record(text: &str, file: &str) -> Result<()> {
    Record::parse(text, file).map(|_| ())
}

/// Record a backup in `DIR/wb.json` (`kind`: mirror, log or log-logical; `legs`: path,
/// base and bytes of each place it lives), durably. `start` writes it itself; tests that
/// build a backup by hand call this.
pub fn write_record(
    dir: &Path,
    kind: &str,
    legs: &[(String, u64, u64)],
    segment_bytes: u64,
) -> Result<()> {
    write_record_with_nvram(dir, kind, legs, segment_bytes, None)
}

/// `write_record` of a log with an NVRAM (`nvram`: its file and slot count).
pub fn write_record_with_nvram(
    dir: &Path,
    kind: &str,
    legs: &[(String, u64, u64)],
    segment_bytes: u64,
    nvram: Option<(&str, u32)>,
) -> Result<()> {
    let rec = Record {
        kind: kind.to_string(),
        legs: legs.to_vec(),
        segment_bytes,
        nvram: nvram.map(|(p, k)| (p.to_string(), k)),
    };
    write_durably(dir, &dir.join(RECORD_FILE), &rec.to_json().to_string())
}
