//! libCacheSim's generic CSV reader (`csv`), with its parameters: which 1-based column holds
//! the time, the object id, its size and the operation, whether the first line is a header,
//! the delimiter, and whether ids are numbers (otherwise their text is hashed to a key).
//!
//! | config key (`[workload.csv]`) | libCacheSim `-t` parameter | default |
//! | --- | --- | --- |
//! | `time_col` | `time-col` | 1 |
//! | `obj_id_col` | `obj-id-col` | 2 |
//! | `obj_size_col` | `obj-size-col` | 3 |
//! | `op_col` | `op-col` | none |
//! | `has_header` | `has-header` | false |
//! | `delimiter` | `delimiter` | `,` |
//! | `obj_id_is_num` | `obj-id-is-num` | true |
//!
//! The defaults are libCacheSim's usual `time-col=1,obj-id-col=2,obj-size-col=3`. A column of
//! 0 in `time_col`, `obj_size_col` or `op_col` means none: times are then 0 and sizes 0
//! (unknown, as for key streams). Requests are keyed ([`super::Addressing::Keys`]): `offset`
//! is the object id, `len` its size. Times are whole seconds (libCacheSim's clock). The op
//! column accepts `read`/`get`/`r` and `write`/`set`/`w` in any case; no op column means every
//! request is a read. Non-numeric ids are hashed with 64-bit FNV-1a, so the same text is the
//! same key in every run.

use super::parse::{dec, show, trim};
use super::text::{LineFormat, Rec};
use super::Op;

/// Most columns a line may have (the largest column number accepted).
pub const MAX_COLUMNS: u32 = 64;

/// The CSV reader's parameters. Columns are 1-based; 0 = absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsvSpec {
    pub time_col: u32,
    pub obj_id_col: u32,
    pub obj_size_col: u32,
    pub op_col: u32,
    pub has_header: bool,
    pub delimiter: u8,
    pub obj_id_is_num: bool,
}

impl CsvSpec {
    /// libCacheSim's usual layout: `time-col=1,obj-id-col=2,obj-size-col=3`, numeric ids.
    pub const DEFAULT: CsvSpec = CsvSpec {
        time_col: 1,
        obj_id_col: 2,
        obj_size_col: 3,
        op_col: 0,
        has_header: false,
        delimiter: b',',
        obj_id_is_num: true,
    };

    /// Check the columns: the id column is needed, all are at most [`MAX_COLUMNS`] and the
    /// given ones distinct. `Err` names the offending key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let cols = [
            ("time_col", self.time_col),
            ("obj_id_col", self.obj_id_col),
            ("obj_size_col", self.obj_size_col),
            ("op_col", self.op_col),
        ];
        if self.obj_id_col == 0 {
            return Err(("obj_id_col", "must be a column number >= 1".to_string()));
        }
        for (i, &(key, c)) in cols.iter().enumerate() {
            if c > MAX_COLUMNS {
                return Err((key, format!("must be at most {MAX_COLUMNS}, got {c}")));
            }
            if let Some(&(other, _)) = cols[..i].iter().find(|&&(_, d)| c != 0 && d == c) {
                return Err((key, format!("column {c} is also `{other}`")));
            }
        }
        if matches!(self.delimiter, b'\n' | b'\r' | b'"') {
            return Err(("delimiter", "must not be a line end or a quote".to_string()));
        }
        Ok(())
    }

    fn widest(&self) -> u32 {
        self.time_col
            .max(self.obj_id_col)
            .max(self.obj_size_col)
            .max(self.op_col)
    }
}

impl Default for CsvSpec {
    fn default() -> Self {
        CsvSpec::DEFAULT
    }
}

/// 64-bit FNV-1a: a fixed, seed-free hash so a text id is the same key in every run.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn op_of(s: &[u8]) -> Result<Op, String> {
    let lower = |w: &[u8]| s.eq_ignore_ascii_case(w);
    if lower(b"read") || lower(b"get") || lower(b"r") {
        Ok(Op::Read)
    } else if lower(b"write") || lower(b"set") || lower(b"w") {
        Ok(Op::Write)
    } else {
        Err(format!(
            "op: expected read, get, r, write, set or w, found `{}`",
            show(s)
        ))
    }
}

impl LineFormat for CsvSpec {
    const TICK_NS: u64 = 1_000_000_000;
    const MULTI_DEVICE: bool = false;
    const KEYED: bool = true;

    fn parse(&self, line_no: u64, line: &[u8]) -> Result<Option<Rec>, String> {
        if super::parse::is_blank(line) || (line_no == 1 && self.has_header) {
            return Ok(None);
        }
        let mut cols = [&b""[..]; MAX_COLUMNS as usize];
        let mut n = 0usize;
        for f in line.split(|&b| b == self.delimiter) {
            if n == cols.len() {
                return Err(format!("more than {MAX_COLUMNS} columns"));
            }
            cols[n] = trim(f);
            n += 1;
        }
        let want = self.widest() as usize;
        if n < want {
            return Err(format!("expected at least {want} columns, found {n}"));
        }
        let col = |c: u32| cols[c as usize - 1];
        let id = col(self.obj_id_col);
        let key = if self.obj_id_is_num {
            dec(id, "obj_id")?
        } else if id.is_empty() {
            return Err("obj_id: empty".to_string());
        } else {
            fnv1a(id)
        };
        let time = match self.time_col {
            0 => 0,
            c => dec(col(c), "time")?,
        };
        let size = match self.obj_size_col {
            0 => 0,
            c => dec(col(c), "obj_size")?,
        };
        let op = match self.op_col {
            0 => Op::Read,
            c => op_of(col(c))?,
        };
        Ok(Some(Rec {
            time,
            dev: 0,
            op,
            offset_bytes: key,
            len_bytes: size,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::text::{drain, error_of, rq};

    #[test]
    fn worked_example_default_layout() {
        let sample = b"100,7,4096\n\n102,8,512\n";
        assert_eq!(
            drain(sample, CsvSpec::DEFAULT, None).unwrap(),
            vec![
                rq(0, Op::Read, 7, 4096),
                rq(2_000_000_000, Op::Read, 8, 512)
            ]
        );
    }

    #[test]
    fn worked_example_cloudphysics_columns() {
        // libCacheSim's own example on cloudPhysicsIO.csv: time-col=2, obj-id-col=5,
        // obj-size-col=4, a header; here with op-col=3 on text ops, `;` delimited.
        let spec = CsvSpec {
            time_col: 2,
            obj_id_col: 5,
            obj_size_col: 4,
            op_col: 3,
            has_header: true,
            delimiter: b';',
            obj_id_is_num: true,
        };
        let sample = b"version;time;op;size;lbn\n1;5;write;512;42\n1;6;GET;4096;8\n";
        assert_eq!(
            drain(sample, spec, None).unwrap(),
            vec![
                rq(0, Op::Write, 42, 512),
                rq(1_000_000_000, Op::Read, 8, 4096)
            ]
        );
    }

    #[test]
    fn text_ids_hash_to_stable_keys() {
        let spec = CsvSpec {
            obj_id_is_num: false,
            time_col: 0,
            obj_size_col: 0,
            obj_id_col: 1,
            ..CsvSpec::DEFAULT
        };
        let got = drain(b"a\nb\na\n", spec, None).unwrap();
        // FNV-1a of "a" and "b" (the published 64-bit test vectors).
        assert_eq!(got[0].offset, 0xaf63_dc4c_8601_ec8c);
        assert_eq!(got[1].offset, 0xaf63_df4c_8601_f1a5);
        assert_eq!(got[2].offset, got[0].offset);
    }

    #[test]
    fn errors_name_the_line_and_column() {
        assert_eq!(
            error_of(b"1,2,3\n1,x,3\n", CsvSpec::DEFAULT),
            "t: line 2: obj_id: expected a non-negative integer, found `x`"
        );
        assert_eq!(
            error_of(b"1,2\n", CsvSpec::DEFAULT),
            "t: line 1: expected at least 3 columns, found 2"
        );
        let spec = CsvSpec {
            op_col: 4,
            ..CsvSpec::DEFAULT
        };
        assert_eq!(
            error_of(b"1,2,3,delete\n", spec),
            "t: line 1: op: expected read, get, r, write, set or w, found `delete`"
        );
    }

    #[test]
    fn validation_names_the_key() {
        let bad = CsvSpec {
            obj_size_col: 2,
            ..CsvSpec::DEFAULT
        };
        assert_eq!(
            bad.validate(),
            Err(("obj_size_col", "column 2 is also `obj_id_col`".to_string()))
        );
        let bad = CsvSpec {
            obj_id_col: 0,
            ..CsvSpec::DEFAULT
        };
        assert_eq!(bad.validate().unwrap_err().0, "obj_id_col");
    }

    #[test]
    fn config_keys_fill_the_spec_and_errors_are_located() {
        use crate::config;
        use crate::workload::{Format, SourceSpec};
        let text = "[workload]\ntrace = \"t.csv\"\nformat = \"csv\"\n\
                    csv = { time_col = 0, obj_id_col = 1, obj_size_col = 0, has_header = true, \
                    delimiter = \"\\t\", obj_id_is_num = false }\n\
                    [cache]\npolicy = \"lru\"\ncapacity_blocks = 4\n";
        let exp = config::from_toml(text, "t.toml", None).unwrap().remove(0);
        let SourceSpec::Trace { format, .. } = exp.workload.source else {
            panic!("a trace");
        };
        assert_eq!(
            format,
            Format::Csv(CsvSpec {
                time_col: 0,
                obj_id_col: 1,
                obj_size_col: 0,
                op_col: 0,
                has_header: true,
                delimiter: b'\t',
                obj_id_is_num: false,
            })
        );
        let bad = text.replace("obj_size_col = 0", "obj_size_col = 1");
        let err = config::from_toml(&bad, "t.toml", None).unwrap_err();
        assert!(
            err.to_string().contains("workload.csv.obj_size_col")
                && err.to_string().contains("also"),
            "{err}"
        );
        let stray = text.replace("format = \"csv\"", "format = \"mqsim\"");
        let err = config::from_toml(&stray, "t.toml", None).unwrap_err();
        assert!(err.to_string().contains("only applies to format"), "{err}");
    }
}
