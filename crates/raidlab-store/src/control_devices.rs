//! The control requests that bring a device in: `add-spare`, and `re-add` of a device the
//! array no longer lists. Both lock the device before anything is written and list it in
//! the manifest only once its superblock is written.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

use super::fail;
use crate::ctrl::Controller;
use crate::device::{self, Locks};
use crate::format;
use crate::member::timed::TimingOptions;
use crate::member::Member;

/// A device named in a request: an NBD URI as it is, a relative path under DIR.
fn resolve(dir: &Path, name: &str) -> PathBuf {
    if Path::new(name).is_absolute() || crate::member::nbd::is_uri(name) {
        PathBuf::from(name)
    } else {
        dir.join(name)
    }
}

/// A device brought in at run time, timed as `serve --timing` times the spares.
fn timed(dev: Arc<dyn Member>, timing: &TimingOptions) -> Result<Arc<dyn Member>, String> {
    match timing.for_slot(None) {
        Some(spec) => spec.wrap(dev).map_err(|e| e.to_string()),
        None => Ok(dev),
    }
}

pub(super) fn add_spare(
    dir: &Path,
    ctl: &Controller,
    locks: &Locks,
    path: &str,
    timing: &TimingOptions,
) -> Value {
    let resolved = resolve(dir, path);
    let text = resolved.display().to_string();
    // By identity, not spelling: `arr/disk1`, `./arr/disk1` and a symlink are one device.
    let id = match crate::member::DevId::of_path(&resolved) {
        Ok(id) => id,
        Err(e) => return fail(format!("{text}: {e}")),
    };
    let known = format::read_manifest(dir)
        .map(|paths| {
            paths
                .iter()
                .any(|p| p == &resolved || crate::member::DevId::of_path(p).is_ok_and(|q| q == id))
        })
        .unwrap_or(false);
    if known {
        return fail(format!("{text}: already listed as a device of this array"));
    }
    // Locked before anything is written; the lock is kept while it is part of the array.
    let lock = match device::lock_exclusive(&resolved) {
        Ok(l) => l,
        Err(e) => return fail(e.to_string()),
    };
    let dev = match crate::member::open_device(&text) {
        Ok(d) => d,
        Err(e) => return fail(format!("{text}: {e}")),
    };
    let need = ctl.shape().data_offset_bytes + ctl.shape().member_data_bytes;
    if dev.len_bytes() >= need {
        // A regular file's blocks are reserved now, so a full file system is found here and
        // not by the rebuild's writes. Its length is kept: a smaller file is refused below.
        if let Err(e) = device::preallocate(&resolved, dev.len_bytes()) {
            return fail(e.to_string());
        }
    }
    let dev = match timed(dev, timing) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    // The superblock is written (as a spare) by the controller's persist before the
    // manifest names the device, so assembly never finds a listed device without one.
    if let Err(e) = ctl.add_spare(dev) {
        return fail(e.to_string());
    }
    locks.add(lock);
    if let Err(e) = format::add_to_manifest(dir, &resolved) {
        return fail(e.to_string());
    }
    json!({"ok": true, "state": ctl.state_word()})
}

/// `re-add PATH` of a device the array no longer lists (taken out with `remove`, or left
/// out at the start and removed): locked, re-added, and listed in the manifest again.
pub(super) fn re_add_path(
    dir: &Path,
    ctl: &Controller,
    locks: &Locks,
    target: &str,
    timing: &TimingOptions,
) -> Result<crate::ctrl::readd::ReAdded, String> {
    if target.parse::<u32>().is_ok() {
        return Err(format!(
            "no faulty device was taken out of slot {target} (`ctl status` lists them; a removed device is named by its path)"
        ));
    }
    let resolved = resolve(dir, target);
    let text = resolved.display().to_string();
    let id = crate::member::DevId::of_path(&resolved).map_err(|e| {
        format!("{text} is not a faulty device of this array (`ctl status` lists them), and cannot be opened as a former member: {e}")
    })?;
    let listed = format::read_manifest(dir)
        .map(|paths| {
            paths
                .iter()
                .any(|p| p == &resolved || crate::member::DevId::of_path(p).is_ok_and(|q| q == id))
        })
        .unwrap_or(false);
    if listed {
        return Err(format!(
            "{text} is listed as a device of this array and is not faulty (`ctl status` lists the faulty ones)"
        ));
    }
    let lock = device::lock_exclusive(&resolved).map_err(|e| e.to_string())?;
    let dev = crate::member::open_device(&text).map_err(|e| format!("{text}: {e}"))?;
    let r = ctl
        .re_add_device(timed(dev, timing)?)
        .map_err(|e| e.to_string())?;
    locks.add(lock);
    format::add_to_manifest(dir, &resolved).map_err(|e| e.to_string())?;
    Ok(r)
}
