//! A typed, path-tracking view of a config tree (`serde_json::Value`), so that every error
//! names the dotted key path and what was expected, and unknown keys are caught.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Defaults applied while validating one config, as `(dotted key path, value)`; shared by a
/// table and the sub-tables read from it, so that the run's resolved config can show them.
pub type Defaults = Rc<RefCell<Vec<(String, Value)>>>;

/// A table being validated: remembers its path and which keys were read, so that
/// [`Table::finish`] can reject the rest as unknown.
pub struct Table<'a> {
    path: String,
    map: &'a Map<String, Value>,
    seen: Vec<&'static str>,
    defaults: Defaults,
}

/// Short description of a JSON value's type and content for error messages.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Null => "nothing".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "a table".into(),
    }
}

impl<'a> Table<'a> {
    /// View `v` as the table at `path`.
    pub fn new(path: &str, v: &'a Value) -> Result<Table<'a>> {
        Table::with_defaults(path, v, Defaults::default())
    }

    fn with_defaults(path: &str, v: &'a Value, defaults: Defaults) -> Result<Table<'a>> {
        match v {
            Value::Object(map) => Ok(Table {
                path: path.to_string(),
                map,
                seen: Vec::new(),
                defaults,
            }),
            other => Err(Error::config(
                path,
                format!("expected a table, got {}", describe(other)),
            )),
        }
    }

    /// The defaults this table and its sub-tables applied so far.
    pub fn defaults(&self) -> Defaults {
        self.defaults.clone()
    }

    /// Note that `key` was absent and `value` was used for it (shown in the resolved
    /// config). Keys of tables inside arrays (`events[0]`) are not noted.
    pub fn default_used(&self, key: &str, value: impl Into<Value>) {
        let path = self.key(key);
        if !path.contains('[') {
            self.defaults.borrow_mut().push((path, value.into()));
        }
    }

    /// A key that is missing: reported as such, unless the table holds an unread key that
    /// looks like a misspelling of it (then that key is reported as unknown, with a
    /// did-you-mean), so that a typo is not hidden behind a "missing" message.
    pub fn missing(&self, key: &str, msg: impl Into<String>) -> Error {
        self.typo_of(&[key])
            .unwrap_or_else(|| Error::config(self.key(key), msg))
    }

    /// An unread key of this table that is a near miss of one of `wanted`, as an
    /// unknown-key error.
    pub fn typo_of(&self, wanted: &[&str]) -> Option<Error> {
        let mut keys: Vec<&String> = self.map.keys().collect();
        keys.sort();
        keys.into_iter()
            .filter(|k| !self.seen.contains(&k.as_str()) && !wanted.contains(&k.as_str()))
            .find_map(|k| {
                nearest(k, wanted).map(|w| {
                    Error::config(self.key(k), format!("unknown key; did you mean {w:?}?"))
                })
            })
    }

    /// The dotted path of `key` inside this table.
    pub fn key(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.seen.push(key);
        self.map.get(key)
    }

    /// Whether `key` is present (does not count as reading it).
    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// A sub-table, if present.
    pub fn table(&mut self, key: &'static str) -> Result<Option<Table<'a>>> {
        let path = self.key(key);
        let defaults = self.defaults.clone();
        self.get(key)
            .map(|v| Table::with_defaults(&path, v, defaults))
            .transpose()
    }

    /// An optional non-negative integer within `[min, max]`, `default` when absent.
    pub fn uint_or(&mut self, key: &'static str, min: u64, max: u64, default: u64) -> Result<u64> {
        let v = self.uint(key, min, max)?;
        Ok(v.unwrap_or_else(|| {
            self.default_used(key, default);
            default
        }))
    }

    /// An optional finite number within `[min, max]`, `default` when absent.
    pub fn float_or(&mut self, key: &'static str, min: f64, max: f64, default: f64) -> Result<f64> {
        let v = self.float(key, min, max)?;
        Ok(v.unwrap_or_else(|| {
            self.default_used(key, default);
            default
        }))
    }

    /// An optional boolean, `default` when absent.
    pub fn bool_or(&mut self, key: &'static str, default: bool) -> Result<bool> {
        let v = self.bool(key)?;
        Ok(v.unwrap_or_else(|| {
            self.default_used(key, default);
            default
        }))
    }

    /// An optional string restricted to `choices`, `default` when absent.
    pub fn choice_or(
        &mut self,
        key: &'static str,
        choices: &[&str],
        default: &'static str,
    ) -> Result<&'a str> {
        let v = self.choice(key, choices)?;
        Ok(v.unwrap_or_else(|| {
            self.default_used(key, default);
            default
        }))
    }

    /// An optional size: an integer in the key's own unit (`unit` bytes each) or a string
    /// with a unit (`"128MiB"`, `"1GiB"`, `"4k"`, `"1.5GB"`), rounded down to whole units and
    /// checked against `[min, max]` units.
    pub fn size(
        &mut self,
        key: &'static str,
        min: u64,
        max: u64,
        unit: u64,
    ) -> Result<Option<u64>> {
        let path = self.key(key);
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => {
                let bytes = parse_size(s).map_err(|m| Error::config(&path, m))?;
                let n = (bytes / unit as f64).floor();
                if n >= min as f64 && n <= max as f64 {
                    Ok(Some(n as u64))
                } else {
                    Err(Error::config(
                        path,
                        format!(
                            "expected a size of {min} to {max} units of {unit} bytes, got {s:?} ({n} units)"
                        ),
                    ))
                }
            }
            Some(v) => uint_value(&path, v, min, max).map(Some),
        }
    }

    /// An optional string.
    pub fn str(&mut self, key: &'static str) -> Result<Option<&'a str>> {
        let path = self.key(key);
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => Err(Error::config(
                path,
                format!("expected a string, got {}", describe(other)),
            )),
        }
    }

    /// An optional boolean.
    pub fn bool(&mut self, key: &'static str) -> Result<Option<bool>> {
        let path = self.key(key);
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(Error::config(
                path,
                format!("expected true or false, got {}", describe(other)),
            )),
        }
    }

    /// An optional string restricted to `choices`.
    pub fn choice(&mut self, key: &'static str, choices: &[&str]) -> Result<Option<&'a str>> {
        let path = self.key(key);
        match self.str(key)? {
            None => Ok(None),
            Some(s) if choices.contains(&s) => Ok(Some(s)),
            Some(s) => Err(Error::config(
                path,
                format!("expected one of {}, got {s:?}", quoted(choices)),
            )),
        }
    }

    /// An optional non-negative integer within `[min, max]`.
    /// Keys named for a size unit (`*_bytes`, `*_kib`, `*_mib`, `*_gib`) also take a string
    /// with a unit (`"128MiB"`), converted to the key's unit.
    pub fn uint(&mut self, key: &'static str, min: u64, max: u64) -> Result<Option<u64>> {
        if let Some(unit) = size_unit(key) {
            return self.size(key, min, max, unit);
        }
        let path = self.key(key);
        match self.get(key) {
            None => Ok(None),
            Some(v) => uint_value(&path, v, min, max).map(Some),
        }
    }

    /// An optional finite number within `[min, max]` (integers are accepted).
    /// Keys named for a size unit also take a string with a unit, as for [`Table::uint`].
    pub fn float(&mut self, key: &'static str, min: f64, max: f64) -> Result<Option<f64>> {
        let path = self.key(key);
        let unit = size_unit(key);
        self.get(key)
            .map(|v| float_value(&path, v, min, max, unit))
            .transpose()
    }

    /// An optional array of non-negative integers.
    pub fn uint_list(&mut self, key: &'static str, max: u64) -> Result<Option<Vec<u64>>> {
        self.list(key, "integers", |path, v| uint_value(path, v, 0, max))
    }

    /// An optional array of finite numbers, each within `[min, max]`.
    pub fn float_list(
        &mut self,
        key: &'static str,
        min: f64,
        max: f64,
    ) -> Result<Option<Vec<f64>>> {
        let unit = size_unit(key);
        self.list(key, "numbers", |path, v| {
            float_value(path, v, min, max, unit)
        })
    }

    /// An optional array whose items `item(path_of_item, value)` converts.
    fn list<T>(
        &mut self,
        key: &'static str,
        what: &str,
        item: impl Fn(&str, &'a Value) -> Result<T>,
    ) -> Result<Option<Vec<T>>> {
        let path = self.key(key);
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| item(&format!("{path}[{i}]"), v))
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(other) => Err(Error::config(
                path,
                format!("expected an array of {what}, got {}", describe(other)),
            )),
        }
    }

    /// An optional array of rows of exactly `width` finite numbers (`[[1, 0.83], [2, 1.0]]`),
    /// every number within `[min, max]`.
    pub fn float_rows(
        &mut self,
        key: &'static str,
        width: usize,
        min: f64,
        max: f64,
    ) -> Result<Option<Vec<Vec<f64>>>> {
        let path = self.key(key);
        let rows = match self.get(key) {
            None => return Ok(None),
            Some(Value::Array(rows)) => rows,
            Some(other) => {
                return Err(Error::config(
                    path,
                    format!(
                        "expected an array of {width}-number rows, got {}",
                        describe(other)
                    ),
                ))
            }
        };
        rows.iter()
            .enumerate()
            .map(|(i, row)| match row {
                Value::Array(items) if items.len() == width => items
                    .iter()
                    .enumerate()
                    .map(|(j, v)| float_value(&format!("{path}[{i}][{j}]"), v, min, max, None))
                    .collect(),
                other => Err(Error::config(
                    format!("{path}[{i}]"),
                    format!("expected a row of {width} numbers, got {}", describe(other)),
                )),
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// An optional array of tables (`[[events]]`), each viewed at `key[i]`.
    pub fn tables(&mut self, key: &'static str) -> Result<Option<Vec<Table<'a>>>> {
        self.list(key, "tables", Table::new)
    }

    /// Reject keys that were never read.
    pub fn finish(self) -> Result<()> {
        let mut unknown: Vec<&String> = self
            .map
            .keys()
            .filter(|k| !self.seen.contains(&k.as_str()))
            .collect();
        unknown.sort();
        match unknown.first() {
            None => Ok(()),
            Some(k) => {
                let mut known = self.seen.clone();
                known.sort_unstable();
                known.dedup();
                let hint = match nearest(k, &known) {
                    Some(near) => format!(
                        "did you mean {near:?}? (expected one of {})",
                        quoted(&known)
                    ),
                    None => format!("expected one of {}", quoted(&known)),
                };
                Err(Error::config(self.key(k), format!("unknown key; {hint}")))
            }
        }
    }
}

fn uint_value(path: &str, v: &Value, min: u64, max: u64) -> Result<u64> {
    let bad = |what: String| Error::config(path, what);
    match v {
        Value::Number(n) => match n.as_u64() {
            Some(x) if x >= min && x <= max => Ok(x),
            Some(x) => Err(bad(format!(
                "expected an integer in [{min}, {max}], got {x}"
            ))),
            None => Err(bad(format!(
                "expected a non-negative integer, got number {n}"
            ))),
        },
        other => Err(bad(format!("expected an integer, got {}", describe(other)))),
    }
}

/// A finite number within `[min, max]`; with a `unit` (a key named for a size unit) also a
/// string with a unit, in units of `unit` bytes.
fn float_value(path: &str, v: &Value, min: f64, max: f64, unit: Option<u64>) -> Result<f64> {
    match v {
        Value::String(s) if unit.is_some() => {
            let unit = unit.unwrap_or(1);
            let x = parse_size(s).map_err(|m| Error::config(path, m))? / unit as f64;
            if x >= min && x <= max {
                Ok(x)
            } else {
                Err(Error::config(
                    path,
                    format!("expected a size in [{min}, {max}] units of {unit} bytes, got {s:?}"),
                ))
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if x.is_finite() && x >= min && x <= max {
                Ok(x)
            } else {
                Err(Error::config(
                    path,
                    format!("expected a number in [{min}, {max}], got {n}"),
                ))
            }
        }
        other => Err(Error::config(
            path,
            format!("expected a number, got {}", describe(other)),
        )),
    }
}

/// Bytes per unit of a key named for a size unit. `_mb` is the reliability model's megabyte,
/// 2^20 bytes as memory is sized; a price per unit (`_per_mb`) is not a size.
fn size_unit(key: &str) -> Option<u64> {
    if key.contains("_per_") {
        return None;
    }
    [
        ("_bytes", 1u64),
        ("_kib", 1 << 10),
        ("_mib", 1 << 20),
        ("_mb", 1 << 20),
        ("_gib", 1 << 30),
    ]
    .iter()
    .find(|(suffix, _)| key.ends_with(suffix))
    .map(|&(_, unit)| unit)
}

/// `"128MiB"`, `"1 GiB"`, `"4k"`, `"1.5GB"`, `"4096"` -> bytes. `K`, `M`, `G`, `T` and
/// `KiB`.. `TiB` are powers of 1024; `KB`, `MB`, `GB`, `TB` powers of 1000; `B` or no unit
/// is bytes. Case-insensitive, except that the `i` forms are the only binary ones with `B`.
pub fn parse_size(text: &str) -> std::result::Result<f64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || {
        format!(
            "expected a size such as 4096, \"64KiB\", \"128MiB\", \"1GiB\" or \"1.5GB\", got {text:?}"
        )
    };
    let x: f64 = num.replace('_', "").parse().map_err(|_| bad())?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return Err(bad()),
    };
    let bytes = x * mult;
    if bytes.is_finite() {
        Ok(bytes)
    } else {
        Err(bad())
    }
}

/// The entry of `known` closest to `key` in edit distance, if close enough to be a typo.
pub fn nearest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let limit = (key.len() / 3).clamp(1, 3);
    known
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|&(d, _)| d <= limit)
        .min()
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// `"a", "b", "c"` for messages.
pub fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Deep-merge `over` into `base`: tables merge key by key, anything else replaces; a null
/// in `over` (`None` in a Python dict) removes the key.
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                if v.is_null() {
                    b.remove(k);
                    continue;
                }
                match b.get_mut(k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_key_path() {
        let v = json!({"disks": "six", "extra": 1});
        let mut t = Table::new("array", &v).unwrap();
        let e = t.uint("disks", 1, 64).unwrap_err();
        assert_eq!(
            e.to_string(),
            "config key `array.disks`: expected an integer, got string \"six\""
        );
        let e = t.finish().unwrap_err();
        assert_eq!(
            e.to_string(),
            "config key `array.extra`: unknown key; expected one of \"disks\""
        );
    }

    #[test]
    fn merge_is_deep() {
        let mut a = json!({"cache": {"policy": "lru", "capacity_blocks": 10}, "x": 1});
        merge(&mut a, &json!({"cache": {"policy": "arc"}, "x": [2]}));
        assert_eq!(
            a,
            json!({"cache": {"policy": "arc", "capacity_blocks": 10}, "x": [2]})
        );
    }
}
