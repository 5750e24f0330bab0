//! PLACEHOLDER: drive presets.

use super::model::DiskSpec;

pub const NAMES: &[&str] = &[];

pub fn get(_name: &str) -> Option<DiskSpec> {
    None
}
