//! A typed, path-tracking view of a config tree (`serde_json::Value`), so that every error
//! names the dotted key path and what was expected, and unknown keys are caught.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// A table being validated: remembers its path and which keys were read, so that
/// [`Table::finish`] can reject the rest as unknown.
pub struct Table<'a> {
    path: String,
    map: &'a Map<String, Value>,
    seen: Vec<&'static str>,
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
        match v {
            Value::Object(map) => Ok(Table {
                path: path.to_string(),
                map,
                seen: Vec::new(),
            }),
            other => Err(Error::config(
                path,
                format!("expected a table, got {}", describe(other)),
            )),
        }
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
        self.get(key).map(|v| Table::new(&path, v)).transpose()
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
    pub fn uint(&mut self, key: &'static str, min: u64, max: u64) -> Result<Option<u64>> {
        let path = self.key(key);
        match self.get(key) {
            None => Ok(None),
            Some(v) => uint_value(&path, v, min, max).map(Some),
        }
    }

    /// An optional finite number within `[min, max]` (integers are accepted).
    pub fn float(&mut self, key: &'static str, min: f64, max: f64) -> Result<Option<f64>> {
        let path = self.key(key);
        self.get(key)
            .map(|v| float_value(&path, v, min, max))
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
        self.list(key, "numbers", |path, v| float_value(path, v, min, max))
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
                    .map(|(j, v)| float_value(&format!("{path}[{i}][{j}]"), v, min, max))
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
                Err(Error::config(
                    self.key(k),
                    format!("unknown key; expected one of {}", quoted(&known)),
                ))
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

fn float_value(path: &str, v: &Value, min: f64, max: f64) -> Result<f64> {
    match v {
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

/// `"a", "b", "c"` for messages.
pub fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Deep-merge `over` into `base`: tables merge key by key, anything else replaces.
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
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
