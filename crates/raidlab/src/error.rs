//! The one error type of the core crate.
//!
//! Every input raidlab reads (trace files, configs, CLI arguments) is untrusted, so every way
//! it can be wrong is a value of [`Error`] that names *where* (file and line, or config key
//! path) and *what was expected*. The Python binding maps each variant to one exception class
//! of the `RaidlabError` hierarchy; keep the variants few and the messages self-contained.

use std::fmt;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Something raidlab was given is unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A trace record is malformed. `line` is 1-based: the text line for text formats, the
    /// record number for binary formats (`record = true`).
    Trace {
        file: String,
        line: u64,
        record: bool,
        msg: String,
    },
    /// A trace's format could not be recognised or is not supported.
    Format { file: String, msg: String },
    /// A config file is not valid TOML/JSON. `line` is 1-based.
    Syntax {
        file: String,
        line: u64,
        msg: String,
    },
    /// A configuration key is missing, unknown, or holds an unusable value. `key` is the
    /// dotted path (`array.failed[1]`, `runs[3].cache.policy`).
    Config { key: String, msg: String },
    /// The operating system refused a file operation.
    Io { path: String, msg: String },
    /// A store member, superblock, array directory or served request is unusable: `path`
    /// names the member file (or the array directory, or the request), `msg` what is wrong.
    Store { path: String, msg: String },
    /// The caller asked the run to stop (progress callback returned `false`).
    Cancelled,
}

impl Error {
    /// A config error at `key`.
    pub fn config(key: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Config {
            key: key.into(),
            msg: msg.into(),
        }
    }

    /// A malformed text line of `file`.
    pub fn trace_line(file: impl Into<String>, line: u64, msg: impl Into<String>) -> Self {
        Error::Trace {
            file: file.into(),
            line,
            record: false,
            msg: msg.into(),
        }
    }

    /// A malformed binary record of `file` (1-based record number).
    pub fn trace_record(file: impl Into<String>, record: u64, msg: impl Into<String>) -> Self {
        Error::Trace {
            file: file.into(),
            line: record,
            record: true,
            msg: msg.into(),
        }
    }

    /// An I/O failure on `path`.
    pub fn io(path: impl Into<String>, err: &std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            msg: err.to_string(),
        }
    }

    /// A store error about `path` (a member, the array directory or a request).
    pub fn store(path: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Store {
            path: path.into(),
            msg: msg.into(),
        }
    }

    /// A stable, short name of the variant; the Python binding keys its exception classes
    /// on it.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Trace { .. } => "trace",
            Error::Format { .. } => "format",
            Error::Config { .. } | Error::Syntax { .. } => "config",
            Error::Io { .. } => "io",
            Error::Store { .. } => "store",
            Error::Cancelled => "cancelled",
        }
    }

    /// Prefix a config key path (used when validating `[[runs]]` overrides and nested tables).
    pub fn in_key(self, prefix: &str) -> Self {
        match self {
            Error::Config { key, msg } if !prefix.is_empty() => Error::Config {
                key: if key.is_empty() {
                    prefix.to_string()
                } else {
                    format!("{prefix}.{key}")
                },
                msg,
            },
            other => other,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Trace {
                file,
                line,
                record,
                msg,
            } => {
                let unit = if *record { "record" } else { "line" };
                write!(f, "{file}: {unit} {line}: {msg}")
            }
            Error::Format { file, msg } => write!(f, "{file}: {msg}"),
            Error::Syntax { file, line, msg } => write!(f, "{file}: line {line}: {msg}"),
            Error::Config { key, msg } => write!(f, "config key `{key}`: {msg}"),
            Error::Io { path, msg } | Error::Store { path, msg } => write!(f, "{path}: {msg}"),
            Error::Cancelled => write!(f, "run cancelled"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_place() {
        let e = Error::trace_line("a.csv", 7, "expected 5 fields, found 3");
        assert_eq!(e.to_string(), "a.csv: line 7: expected 5 fields, found 3");
        let e = Error::trace_record("b.bin", 2, "truncated record");
        assert_eq!(e.to_string(), "b.bin: record 2: truncated record");
        let e = Error::config("disks", "expected >= 3 for raid5, got 2").in_key("array");
        assert_eq!(
            e.to_string(),
            "config key `array.disks`: expected >= 3 for raid5, got 2"
        );
        assert_eq!(e.kind(), "config");
    }
}
