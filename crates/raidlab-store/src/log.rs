//! The server's log: one line per record on stderr, timestamped (RFC 3339, UTC, millisecond)
//! and levelled, as text (the default) or as JSON lines (`serve --log-format json`).
//!
//! ```text
//! 2025-06-01T12:00:00.123Z WARN member arr/disk1 (slot 1) failed: read error: Input/output error; serving degraded slot=1 device="arr/disk1"
//! {"ts":"2025-06-01T12:00:00.123Z","level":"warn","msg":"member arr/disk1 (slot 1) failed: ...","slot":1,"device":"arr/disk1"}
//! ```
//!
//! The configuration is set once per process with [`init`] (`serve` does it from
//! `--log-format` and `--log-level`); before that, and in tests, records are text at `info`.
//!
//! # Writing a record
//!
//! Four macros, one per level: `crate::error!`, `crate::warn!`, `crate::info!`,
//! `crate::debug!` (`raidlab_store::info!` from other crates). Each takes `format!`
//! arguments, optionally preceded by a `{ "key": value, ... }` group of fields; a value is
//! anything `serde_json::json!` takes (numbers, strings, `Option`s, `&str`). The message is
//! formatted only when the level is enabled.
//!
//! ```ignore
//! crate::warn!("writing the write-intent bitmap failed: {e}");
//! crate::warn!(
//!     { "slot": slot, "device": name, "error": why },
//!     "member {name} (slot {slot}) failed: {why}; serving degraded"
//! );
//! crate::info!({ "event": "ClientConnected", "conn": id, "peer": peer },
//!     "client {id} connected from {peer}");
//! ```
//!
//! Conventions: the message reads on its own, without the fields (text mode prints both);
//! an `"event"` field marks the records of the event stream (`events.rs`: the names
//! `mdadm --monitor` uses, `Fail`, `RebuildStarted`, `DegradedArray`, ..., and the
//! server's own such as `ClientConnected`), so JSON consumers select records without
//! parsing messages; other records carry fields but no `"event"`. An OS error goes in an
//! `"error"` field as its text. Levels: `error`
//! for what loses data or fails the array, `warn` for what an operator should look at
//! (a failed member, a degraded start, a lost backup), `info` for the normal course of
//! things (start, stop, rebuild progress, client connections), `debug` for detail.
//!

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

#[doc(hidden)]
pub use serde_json::json as __json;

/// How severe a record is; a record is written when its level is at least the configured one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    /// `error`, `warn`, `info` or `debug`.
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "error" => Some(Level::Error),
            "warn" | "warning" => Some(Level::Warn),
            "info" => Some(Level::Info),
            "debug" => Some(Level::Debug),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
        }
    }
}

/// Text lines (`TIME LEVEL message key=value ...`) or JSON objects, one per line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

impl Format {
    /// `text` or `json`.
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "text" => Some(Format::Text),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// The log's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub format: Format,
    pub level: Level,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            format: Format::Text,
            level: Level::Info,
        }
    }
}

impl Config {
    /// From `--log-format` and `--log-level`; a bad value is a config error naming its option.
    pub fn parse(format: &str, level: &str) -> raidlab::Result<Config> {
        let format = Format::parse(format).ok_or_else(|| {
            raidlab::Error::config(
                "--log-format",
                format!("unknown format {format:?}; expected text or json"),
            )
        })?;
        let level = Level::parse(level).ok_or_else(|| {
            raidlab::Error::config(
                "--log-level",
                format!("unknown level {level:?}; expected error, warn, info or debug"),
            )
        })?;
        Ok(Config { format, level })
    }
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Set the process's log configuration; the first call wins. Returns whether this call set it.
pub fn init(config: Config) -> bool {
    CONFIG.set(config).is_ok()
}

/// The configuration in force.
pub fn config() -> Config {
    CONFIG.get().copied().unwrap_or_default()
}

/// Whether records of `level` are written.
pub fn enabled(level: Level) -> bool {
    level >= config().level
}

/// Write one record to stderr (one `write` call per line, so concurrent records do not
/// interleave). Use the macros; they skip the formatting when the level is off.
pub fn emit(level: Level, msg: &str, fields: &[(&str, Value)]) {
    let line = format_record(
        config().format,
        &timestamp(SystemTime::now()),
        level,
        msg,
        fields,
    );
    // The crate's own tests: through the test harness's capture, shown only on a failure.
    #[cfg(test)]
    eprint!("{line}");
    #[cfg(not(test))]
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
}

/// One record as the line written (with its newline).
pub fn format_record(
    format: Format,
    ts: &str,
    level: Level,
    msg: &str,
    fields: &[(&str, Value)],
) -> String {
    match format {
        Format::Json => {
            let mut m = Map::new();
            m.insert("ts".into(), Value::from(ts));
            m.insert("level".into(), Value::from(level.name()));
            m.insert("msg".into(), Value::from(msg));
            for (k, v) in fields {
                if !matches!(*k, "ts" | "level" | "msg") {
                    m.insert((*k).to_string(), v.clone());
                }
            }
            format!("{}\n", Value::Object(m))
        }
        Format::Text => {
            let mut s = format!("{ts} {} {msg}", level.tag());
            for (k, v) in fields {
                match v {
                    Value::Null => continue,
                    Value::String(t) if !t.is_empty() && !t.contains([' ', '"', '=', '\n']) => {
                        s.push_str(&format!(" {k}={t}"))
                    }
                    other => s.push_str(&format!(" {k}={other}")),
                }
            }
            s.push('\n');
            s
        }
    }
}

/// RFC 3339 in UTC with milliseconds: `2025-06-01T12:00:00.123Z`.
pub fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Year, month, day of the `days`-th day since 1970-01-01 (proleptic Gregorian; Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[doc(hidden)]
#[macro_export]
macro_rules! __log_at {
    ($lvl:expr, { $($k:literal : $v:expr),* $(,)? }, $($fmt:tt)+) => {
        if $crate::log::enabled($lvl) {
            $crate::log::emit(
                $lvl,
                &::std::format!($($fmt)+),
                &[$(($k, $crate::log::__json!($v))),*],
            );
        }
    };
}

/// A record at `error` level; see [`crate::log`].
#[macro_export]
macro_rules! error {
    ({ $($k:literal : $v:expr),* $(,)? }, $($fmt:tt)+) => {
        $crate::__log_at!($crate::log::Level::Error, { $($k: $v),* }, $($fmt)+)
    };
    ($($fmt:tt)+) => { $crate::__log_at!($crate::log::Level::Error, {}, $($fmt)+) };
}

/// A record at `warn` level; see [`crate::log`].
#[macro_export]
macro_rules! warn {
    ({ $($k:literal : $v:expr),* $(,)? }, $($fmt:tt)+) => {
        $crate::__log_at!($crate::log::Level::Warn, { $($k: $v),* }, $($fmt)+)
    };
    ($($fmt:tt)+) => { $crate::__log_at!($crate::log::Level::Warn, {}, $($fmt)+) };
}

/// A record at `info` level; see [`crate::log`].
#[macro_export]
macro_rules! info {
    ({ $($k:literal : $v:expr),* $(,)? }, $($fmt:tt)+) => {
        $crate::__log_at!($crate::log::Level::Info, { $($k: $v),* }, $($fmt)+)
    };
    ($($fmt:tt)+) => { $crate::__log_at!($crate::log::Level::Info, {}, $($fmt)+) };
}

/// A record at `debug` level; see [`crate::log`].
#[macro_export]
macro_rules! debug {
    ({ $($k:literal : $v:expr),* $(,)? }, $($fmt:tt)+) => {
        $crate::__log_at!($crate::log::Level::Debug, { $($k: $v),* }, $($fmt)+)
    };
    ($($fmt:tt)+) => { $crate::__log_at!($crate::log::Level::Debug, {}, $($fmt)+) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(951_782_400_123); // a leap day
        assert_eq!(timestamp(t), "2000-02-29T00:00:00.123Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_748_779_199);
        assert_eq!(timestamp(t), "2025-06-01T11:59:59.000Z");
        let t = UNIX_EPOCH + Duration::from_secs(4_102_444_800 - 1);
        assert_eq!(timestamp(t), "2099-12-31T23:59:59.000Z");
    }

    #[test]
    fn records_as_text_and_json() {
        let fields = [
            ("slot", Value::from(1)),
            ("device", Value::from("arr/disk1")),
            ("error", Value::from("Input/output error")),
            ("none", Value::Null),
        ];
        let ts = "2025-06-01T12:00:00.000Z";
        let t = format_record(Format::Text, ts, Level::Warn, "member failed", &fields);
        assert_eq!(
            t,
            "2025-06-01T12:00:00.000Z WARN member failed slot=1 device=arr/disk1 error=\"Input/output error\"\n"
        );
        let j = format_record(Format::Json, ts, Level::Info, "x", &fields);
        let v: Value = serde_json::from_str(j.trim_end()).unwrap();
        assert_eq!(v["ts"], ts);
        assert_eq!(v["level"], "info");
        assert_eq!(v["msg"], "x");
        assert_eq!(v["slot"], 1);
        assert!(j.ends_with('\n') && !j.trim_end().contains('\n'));
    }

    #[test]
    fn levels_and_options_parse() {
        assert!(Level::Error > Level::Warn && Level::Info > Level::Debug);
        let c = Config::parse("json", "debug").unwrap();
        assert_eq!((c.format, c.level), (Format::Json, Level::Debug));
        let e = Config::parse("xml", "info").unwrap_err().to_string();
        assert!(e.contains("--log-format"), "{e}");
        let e = Config::parse("text", "loud").unwrap_err().to_string();
        assert!(e.contains("--log-level"), "{e}");
        // The macros compile with and without fields (the default config writes to stderr).
        let slot = 3;
        crate::debug!({ "slot": slot, "what": "test" }, "a debug record of slot {slot}");
        crate::debug!("a plain debug record");
    }
}
