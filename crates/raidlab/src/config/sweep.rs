//! `[sweep]`: the grid of a config.
//!
//! Each entry maps a dotted key path to a list of values and is one axis of a cartesian
//! product (first axis outermost). `[[sweep.zip]]` tables are axes too, at the place of the
//! `zip` key: their lists, all of one length, are varied together (the i-th value of every
//! list in one run). The product is a list of override trees, each merged over the base config
//! (after its `[[runs]]` override) and validated like any config, so a key path the config
//! does not accept is rejected by the same parser that reads every other table.

use serde_json::{Map, Value};

use super::tree::{describe, merge};
use super::{short, RUNS_MAX};
use crate::error::{Error, Result};

/// One run's share of the grid: its label (`cache.policy=lru array.disks=5`) and the override
/// tree to merge over the base config.
pub(super) type Combo = (String, Value);

/// The grid's combinations (one empty combination without `[sweep]`) and the key paths it
/// sets, each with the config key that names it in errors (`sweep.cache.policy`,
/// `sweep.zip[0].cache.policy`).
pub(super) struct Grid {
    pub combos: Vec<Combo>,
    pub paths: Vec<(String, String)>,
}

impl Grid {
    /// Name the sweep entry that set `key` when a run built from this grid is rejected: an
    /// unknown key path or an unusable value in `[sweep]` is reported there (`Ok`), not as if
    /// it were written in the base config. Errors the grid did not cause come back as `Err`.
    pub fn blame(&self, e: Error) -> std::result::Result<Error, Error> {
        let Error::Config { key, msg } = &e else {
            return Err(e);
        };
        let hit = self.paths.iter().find(|(_, path)| {
            covers(path, key) || (covers(key, path) && msg.starts_with("unknown key"))
        });
        match hit {
            Some((origin, _)) => Ok(Error::config(origin.clone(), format!("`{key}`: {msg}"))),
            None => Err(e),
        }
    }
}

/// Whether `path` is `key` or one of its ancestors (`cache` covers `cache.policy`).
fn covers(path: &str, key: &str) -> bool {
    key == path
        || key
            .strip_prefix(path)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// Expand `[sweep]`.
pub(super) fn grid(sweep: Option<&Value>) -> Result<Grid> {
    let mut grid = Grid {
        combos: vec![(String::new(), Value::Object(Map::new()))],
        paths: Vec::new(),
    };
    let Some(sweep) = sweep else {
        return Ok(grid);
    };
    let Value::Object(map) = sweep else {
        return Err(Error::config(
            "sweep",
            format!(
                "expected a table of key paths to lists, got {}",
                describe(sweep)
            ),
        ));
    };
    if map.is_empty() {
        return Err(Error::config(
            "sweep",
            "empty grid; expected at least one key path with a list of values",
        ));
    }
    for (path, values) in map {
        if path == "zip" {
            let Value::Array(groups) = values else {
                return Err(Error::config(
                    "sweep.zip",
                    format!(
                        "expected an array of tables ([[sweep.zip]]), got {}",
                        describe(values)
                    ),
                ));
            };
            if groups.is_empty() {
                return Err(Error::config(
                    "sweep.zip",
                    "empty; expected [[sweep.zip]] tables",
                ));
            }
            for (g, group) in groups.iter().enumerate() {
                let axis = zip_axis(&format!("sweep.zip[{g}]"), group, &mut grid.paths)?;
                grid.combos = product(&grid.combos, &axis)?;
            }
        } else {
            let origin = format!("sweep.{path}");
            let values = list(&origin, path, values)?;
            let axis: Vec<Combo> = values
                .iter()
                .map(|v| (format!("{path}={}", short(v)), nested(path, v.clone())))
                .collect();
            grid.paths.push((origin, path.clone()));
            grid.combos = product(&grid.combos, &axis)?;
        }
    }
    Ok(grid)
}

/// The values of one key path, checked: a dotted path and a non-empty list.
fn list<'a>(origin: &str, path: &str, values: &'a Value) -> Result<&'a Vec<Value>> {
    let Value::Array(values) = values else {
        return Err(Error::config(
            origin,
            format!("expected a list of values, got {}", describe(values)),
        ));
    };
    if values.is_empty() || path.split('.').any(str::is_empty) {
        return Err(Error::config(
            origin,
            "expected a dotted key path (`cache.policy`) and a non-empty list",
        ));
    }
    Ok(values)
}

/// One `[[sweep.zip]]` table as an axis: its i-th combination sets the i-th value of every
/// list.
fn zip_axis(origin: &str, group: &Value, paths: &mut Vec<(String, String)>) -> Result<Vec<Combo>> {
    let Value::Object(map) = group else {
        return Err(Error::config(
            origin,
            format!(
                "expected a table of key paths to lists, got {}",
                describe(group)
            ),
        ));
    };
    if map.is_empty() {
        return Err(Error::config(
            origin,
            "empty; expected key paths with lists of values",
        ));
    }
    let mut axis: Vec<Combo> = Vec::new();
    for (k, (path, values)) in map.iter().enumerate() {
        let key = format!("{origin}.{path}");
        let values = list(&key, path, values)?;
        if k == 0 {
            axis = vec![(String::new(), Value::Object(Map::new())); values.len()];
        } else if values.len() != axis.len() {
            return Err(Error::config(
                key,
                format!(
                    "has {} values; every list of a zip group needs the same length ({})",
                    values.len(),
                    axis.len()
                ),
            ));
        }
        for ((label, tree), v) in axis.iter_mut().zip(values) {
            let item = format!("{path}={}", short(v));
            *label = if label.is_empty() {
                item
            } else {
                format!("{label} {item}")
            };
            merge(tree, &nested(path, v.clone()));
        }
        paths.push((key, path.clone()));
    }
    Ok(axis)
}

/// Every combination of `combos` (outer) with `axis` (inner), bounded by [`RUNS_MAX`].
fn product(combos: &[Combo], axis: &[Combo]) -> Result<Vec<Combo>> {
    if combos.len().saturating_mul(axis.len()) > RUNS_MAX {
        return Err(Error::config(
            "sweep",
            format!("expands to more than {RUNS_MAX} runs"),
        ));
    }
    let mut next = Vec::with_capacity(combos.len() * axis.len());
    for (label, tree) in combos {
        for (item, over) in axis {
            let mut t = tree.clone();
            merge(&mut t, over);
            let label = if label.is_empty() {
                item.clone()
            } else {
                format!("{label} {item}")
            };
            next.push((label, t));
        }
    }
    Ok(next)
}

/// `{"a": {"b": v}}` from `"a.b"`.
fn nested(path: &str, v: Value) -> Value {
    path.rsplit('.').fold(v, |acc, k| {
        let mut m = Map::new();
        m.insert(k.to_string(), acc);
        Value::Object(m)
    })
}

#[cfg(test)]
#[path = "sweep_tests.rs"]
mod tests;
