//! `assemble`: find an array's members from its directory and decide, md-style, which of
//! them are current. It only reads: the caller writes (superblocks, bitmap) once it serves.
//!
//! Rules, in order:
//! 1. every device listed in `DIR/members.json` is opened; one that cannot be opened or read
//!    is a missing member; one whose superblock is unusable (corrupt, no magic, a newer
//!    format) is left out with a warning and kept as a faulty device (`ctl re-add` rebuilds
//!    onto it); one too small to hold a superblock is an error;
//! 2. all superblocks must carry the same array UUID (the one most of them carry) and shape;
//! 3. the freshest event counter wins: its superblocks' slot table says what each slot is;
//! 4. per slot, the device holding it at the freshest event count is used; an older device
//!    claiming a slot held by a fresher one is left out; an older device alone in a slot the
//!    table records in sync is stale (an error: its data may be out of date) unless it is
//!    just one event behind, which a crash in the middle of a superblock update leaves (the
//!    superblocks are written, then synced member by member, and no data is written during
//!    an update; mdadm allows the same margin); a device whose slot is recorded failed, or
//!    whose superblock says faulty, is left out;
//! 5. the level must survive the slots left without a device (a recovering slot counts as
//!    missing until its rebuild completes);
//! 6. an array whose freshest superblocks record it failed is refused, as is a stale
//!    member, unless forced (`serve --force`, md's `--assemble --force`): then the stale
//!    member is used as it is, the failure record is cleared at the start, and every region
//!    is resynced;
//! 7. an unclean array's dirty regions are the OR of the live members' bitmaps; if any of
//!    them cannot be read or is corrupt (a torn write), every region is dirty: a full resync
//!    is always safe, a missed region is not. The bitmaps are read on a clean start too:
//!    their bits (kept while a slot was not in sync) and the event of their last clear
//!    (the latest of the members', unknown when one is unreadable) decide which `ctl
//!    re-add` may be partial.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use raidlab::array::Level;
use raidlab::{Error, Result};

use super::bitmap::decode_bitmap;
use super::manifest::read_manifest;
use super::superblock::{decode, DevRole, Superblock};
use super::{uuid_string, BITMAP_BYTES, BITMAP_OFFSET, SUPERBLOCK_BYTES, SUPERBLOCK_OFFSET};
use crate::ctrl::sync::{regions_fit, rows_per_region_of, REGION_BYTES_DEFAULT};
use crate::ctrl::{Shape, SlotState};
use crate::member::Member;

/// An array ready to be served (see `crate::ctrl::Controller::new`).
#[derive(Debug, Clone)]
pub struct Assembled {
    pub dir: PathBuf,
    pub name: String,
    pub uuid: [u8; 16],
    pub shape: Shape,
    /// Per slot: its device, `None` when missing or failed.
    pub devs: Vec<Option<Arc<dyn Member>>>,
    pub spares: Vec<Arc<dyn Member>>,
    /// A slot being rebuilt onto its device, and the rows below which it is rebuilt.
    pub recovering: Option<(u32, u64)>,
    pub events: u64,
    pub clean: bool,
    /// None when the array was stopped cleanly; otherwise the regions to resync (all of them
    /// when a live member's bitmap could not be read).
    pub dirty_regions: Option<Vec<bool>>,
    /// Rows per write-intent bitmap region, as the array's bitmaps record it (chosen at
    /// creation, `--bitmap-chunk`).
    pub rows_per_region: u64,
    /// The bits the live members' bitmaps hold (OR-ed; all set when one cannot be read),
    /// clean or not: bits kept while a slot was not in sync stay set for `ctl re-add`.
    pub kept_regions: Vec<bool>,
    /// When the bitmaps' bits were last cleared (the latest of the live members'), `None`
    /// when a bitmap is unreadable or does not record it: then no re-add is partial.
    pub cleared_events: Option<u64>,
    /// Devices left out and slots missing, for the operator.
    pub warnings: Vec<String>,
    /// Devices left out as faulty (recorded failed or faulty, or an unusable superblock),
    /// with the slot each was taken out of (`u32::MAX` when unknown).
    pub faulty: Vec<(Arc<dyn Member>, u32)>,
    /// What `force` overrode (a failure record, stale members); empty when nothing was.
    pub forced: Vec<String>,
    /// Remote members (NBD URIs) that could not be reached: their hosts may come back
    /// (`serve` watches them as missing members).
    pub away: Vec<String>,
    /// Remote members whose slot is recorded failed while their own superblock still
    /// claims it (they were away when the array stopped), with the slot: missing at start.
    pub returned: Vec<(Arc<dyn Member>, u32)>,
}

struct Found {
    name: String,
    dev: Arc<dyn Member>,
    sb: Superblock,
}

fn shape_text(sb: &Superblock) -> String {
    format!(
        "{:?}: {} {} disks, {}-byte chunks, layout {}, data at {} ({} bytes per member)",
        sb.name,
        sb.level.name(),
        sb.disks,
        sb.chunk_bytes,
        sb.layout.name(),
        sb.data_offset_bytes,
        sb.member_data_bytes
    )
}

/// A device that could not be opened or read: its path and why.
type Unread = (String, String);

/// A listed device whose superblock is unusable: its index in the manifest, the device and
/// why.
type Unusable = (usize, Arc<dyn Member>, String);

/// Read every listed device's superblock. Unopenable or unreadable devices are returned in
/// the second list with the reason, devices with an unusable superblock in the third.
fn read_all(paths: &[PathBuf]) -> Result<(Vec<Found>, Vec<Unread>, Vec<Unusable>)> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    let mut unusable = Vec::new();
    for (index, p) in paths.iter().enumerate() {
        let name = p.to_string_lossy().into_owned();
        let dev = match crate::member::open_device(&name) {
            Ok(d) => d,
            Err(e) => {
                missing.push((name, format!("cannot be opened ({e})")));
                continue;
            }
        };
        let min = SUPERBLOCK_OFFSET + SUPERBLOCK_BYTES as u64;
        if dev.len_bytes() < min {
            return Err(Error::store(
                &name,
                format!(
                    "{} bytes: too small to hold a superblock (at least {min} bytes expected)",
                    dev.len_bytes()
                ),
            ));
        }
        let mut b = [0u8; SUPERBLOCK_BYTES];
        if let Err(e) = dev.read_at(&mut b, SUPERBLOCK_OFFSET) {
            missing.push((name, format!("its superblock cannot be read ({e})")));
            continue;
        }
        let sb = match decode(&b, &name) {
            Ok(sb) => sb,
            Err(e) => {
                unusable.push((index, dev, e.to_string()));
                continue;
            }
        };
        found.push(Found { name, dev, sb });
    }
    Ok((found, missing, unusable))
}

/// The array UUID most devices carry (the first listed on a tie); errors on any other.
fn check_uuids(found: &[Found]) -> Result<[u8; 16]> {
    let count = |u: &[u8; 16]| found.iter().filter(|f| &f.sb.array_uuid == u).count();
    let mut best = &found[0];
    for f in found {
        if count(&f.sb.array_uuid) > count(&best.sb.array_uuid) {
            best = f;
        }
    }
    let want = best.sb.array_uuid;
    if let Some(f) = found.iter().find(|f| f.sb.array_uuid != want) {
        return Err(Error::store(
            &f.name,
            format!(
                "belongs to another array (uuid {}, named {:?}), expected uuid {} (the array of {})",
                uuid_string(&f.sb.array_uuid),
                f.sb.name,
                uuid_string(&want),
                best.name
            ),
        ));
    }
    Ok(want)
}

/// Can `level` with `disks` slots serve with the slots in `lost` empty? `Err` says why not.
pub(crate) fn survives(level: Level, disks: u32, lost: &[u32]) -> std::result::Result<(), String> {
    let n = lost.len();
    match level {
        Level::Raid0 if n > 0 => Err("raid0 has no redundancy: every member is needed".into()),
        Level::Raid1 if n >= disks as usize => Err("raid1 needs at least one copy".into()),
        Level::Raid5 if n > 1 => Err("raid5 survives 1 missing member".into()),
        Level::Raid6 if n > 2 => Err("raid6 survives 2 missing members".into()),
        Level::Raid10 => {
            // Mirror pairs are slots (2k, 2k+1), as in the core's layout.
            match lost.iter().find(|&&s| lost.contains(&(s ^ 1))) {
                Some(&s) => Err(format!(
                    "raid10 survives one missing member per mirror pair, and slots {} and {} are a pair",
                    s & !1,
                    s | 1
                )),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// Assemble the array in `dir`. Reads only.
pub fn assemble(dir: &Path) -> Result<Assembled> {
    assemble_with(dir, false)
}

/// Assemble the array in `dir`; `force` starts a failed array and uses stale members (see
/// rule 6). Reads only.
pub fn assemble_with(dir: &Path, force: bool) -> Result<Assembled> {
    let dname = dir.to_string_lossy().into_owned();
    let paths = read_manifest(dir)?;
    let (found, missing, unusable) = read_all(&paths)?;
    let mut warnings: Vec<String> = missing
        .iter()
        .map(|(n, why)| format!("{n}: {why}: treated as a missing member"))
        .collect();
    for (_, d, why) in &unusable {
        warnings.push(format!(
            "{why}: left out as a faulty device (`ctl re-add {}` rebuilds onto it, `ctl remove` forgets it)",
            d.path()
        ));
    }
    let mut forced: Vec<String> = Vec::new();
    let mut faulty: Vec<(Arc<dyn Member>, u32)> = Vec::new();
    let mut returned: Vec<(Arc<dyn Member>, u32)> = Vec::new();
    if found.is_empty() {
        let list: Vec<String> = missing
            .iter()
            .map(|(n, w)| format!("{n} {w}"))
            .chain(unusable.iter().map(|(_, _, w)| w.clone()))
            .collect();
        return Err(Error::store(
            &dname,
            format!("no member of the array can be read: {}", list.join("; ")),
        ));
    }
    let uuid = check_uuids(&found)?;
    let max = found.iter().map(|f| f.sb.events).max().unwrap_or(0);
    let fresh = found
        .iter()
        .find(|f| f.sb.events == max)
        .unwrap_or(&found[0]);
    let sb0 = &fresh.sb;
    for f in &found {
        if f.sb.shape() != sb0.shape() || f.sb.name != sb0.name {
            return Err(Error::store(
                &f.name,
                format!(
                    "superblock disagrees with {} about the array: {} here, {} there",
                    fresh.name,
                    shape_text(&f.sb),
                    shape_text(sb0)
                ),
            ));
        }
    }
    if sb0.failed {
        let what = format!(
            "the array failed (its superblocks at event {max} record that it lost more members than {} survives)",
            sb0.level.name()
        );
        if !force {
            return Err(Error::store(
                &dname,
                format!("{what}: check its members, then `raidlab serve --force` starts it with the members it has (rows being written at the failure may be inconsistent; every region is resynced)"),
            ));
        }
        forced.push(what);
    }
    let shape = sb0.shape();
    let need = shape.data_offset_bytes + shape.member_data_bytes;
    let table = &sb0.slots;
    let disks = shape.disks as usize;
    let mut holder: Vec<Option<usize>> = vec![None; disks];
    let mut why: Vec<Option<String>> = vec![None; disks];
    let mut spares: Vec<Arc<dyn Member>> = Vec::new();
    let mut recovering: Option<(u32, u64)> = None;
    let too_small = |f: &Found| {
        Error::store(
            &f.name,
            format!(
                "{} bytes is too small for a member of this array (needs data offset {} + member data {} = {need} bytes)",
                f.dev.len_bytes(),
                shape.data_offset_bytes,
                shape.member_data_bytes
            ),
        )
    };

    // Fresh claimants first, then older ones, freshest first: a slot goes to its freshest
    // claimant.
    let mut order: Vec<usize> = (0..found.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(found[i].sb.events));
    for i in order {
        let f = &found[i];
        let s = match f.sb.role {
            DevRole::Slot(s) => s as usize,
            DevRole::Spare => {
                if f.dev.len_bytes() < need {
                    return Err(too_small(f));
                }
                spares.push(Arc::clone(&f.dev));
                continue;
            }
            DevRole::Faulty => {
                warnings.push(format!(
                    "{}: its superblock says faulty (it failed and was taken out): left out",
                    f.name
                ));
                faulty.push((Arc::clone(&f.dev), f.sb.former_slot.unwrap_or(u32::MAX)));
                continue;
            }
        };
        let e = f.sb.events;
        if table[s] == SlotState::Failed && f.dev.link().is_some() {
            // A remote member that missed the updates failing it: its host was away when
            // the array was stopped. Watched as missing, and re-added by bitmap (`serve`).
            warnings.push(format!(
                "{}: slot {s} is recorded failed (events {max}) and its superblock still claims it (events {e}): its host was away; it is re-added when it has settled",
                f.name
            ));
            why[s] = Some(format!("{} was away", f.name));
            returned.push((Arc::clone(&f.dev), s as u32));
            continue;
        }
        if table[s] == SlotState::Failed {
            warnings.push(format!(
                "{}: slot {s} is recorded failed (events {max}): left out; add it back as a spare to rebuild onto it",
                f.name
            ));
            why[s] = Some(format!("{} is recorded failed", f.name));
            faulty.push((Arc::clone(&f.dev), s as u32));
            continue;
        }
        if let Some(h) = holder[s] {
            if e == max {
                return Err(Error::store(
                    &f.name,
                    format!(
                        "claims slot {s}, which {} also claims, both at event {max}: remove one of them from the manifest",
                        found[h].name
                    ),
                ));
            }
            warnings.push(format!(
                "{}: an older holder of slot {s} (events {e}), now held by {} (events {max}): left out",
                f.name, found[h].name
            ));
            continue;
        }
        if f.dev.len_bytes() < need {
            return Err(too_small(f));
        }
        match table[s] {
            // One event behind is a crash while the superblocks were being written (they
            // are written, then synced member by member): no data moves during an update,
            // so the member is current. mdadm allows the same margin of one.
            SlotState::InSync if e + 1 == max => warnings.push(format!(
                "{}: missed the last superblock update (events {e}, the array is at {max}; a crash while superblocks were written): used",
                f.name
            )),
            SlotState::InSync if e < max && force => {
                let what = format!(
                    "{}: stale member of slot {s} (events {e}, the array is at {max}) used as it is: its data may be out of date",
                    f.name
                );
                warnings.push(format!("forced: {what}"));
                forced.push(what);
            }
            SlotState::InSync if e < max => {
                return Err(Error::store(
                    &f.name,
                    format!(
                        "stale member of slot {s}: its superblock is at event {e}, but {} is at event {max} and records the slot in sync, so its data may be out of date (`raidlab serve --force` uses it anyway)",
                        fresh.name
                    ),
                ))
            }
            SlotState::Recovering { checkpoint } => {
                if recovering.is_some() {
                    warnings.push(format!(
                        "{}: a second slot ({s}) being rebuilt; one rebuild resumes at a time: left out",
                        f.name
                    ));
                    why[s] = Some(format!("{} was being rebuilt", f.name));
                    continue;
                }
                // An older superblock may have missed checkpoint updates: restart from row 0.
                let cp = if e == max { checkpoint } else { 0 };
                if e < max {
                    warnings.push(format!(
                        "{}: replacement in slot {s} has an older superblock (events {e} < {max}): its rebuild restarts from row 0",
                        f.name
                    ));
                }
                recovering = Some((s as u32, cp));
            }
            _ => {}
        }
        holder[s] = Some(i);
    }

    let devs: Vec<Option<Arc<dyn Member>>> = holder
        .iter()
        .map(|h| h.map(|i| Arc::clone(&found[i].dev)))
        .collect();
    let mut lost: Vec<u32> = Vec::new();
    let mut lost_text: Vec<String> = Vec::new();
    for s in 0..disks {
        let reason = if holder[s].is_none() {
            why[s]
                .clone()
                .or_else(|| {
                    // The manifest lists members in slot order at creation: name that path.
                    let p = paths.get(s)?.to_string_lossy().into_owned();
                    match missing.iter().find(|(n, _)| *n == p) {
                        Some((_, w)) => Some(format!("{p} {w}")),
                        None => unusable
                            .iter()
                            .find(|(i, _, _)| *i == s)
                            .map(|(_, _, w)| w.clone()),
                    }
                })
                .unwrap_or_else(|| "no listed device holds it".into())
        } else if recovering.is_some_and(|(r, _)| r as usize == s) {
            "its replacement is still being rebuilt".into()
        } else {
            continue;
        };
        lost.push(s as u32);
        lost_text.push(format!("slot {s}: {reason}"));
    }
    if let Err(rule) = survives(shape.level, shape.disks, &lost) {
        return Err(Error::store(
            &dname,
            format!(
                "cannot assemble: {rule}, but {} of {} slots have no usable member ({})",
                lost.len(),
                shape.disks,
                lost_text.join("; ")
            ),
        ));
    }
    for t in &lost_text {
        warnings.push(format!("degraded: {t}"));
    }
    // A device with an unusable superblock: the manifest lists members in slot order at
    // creation, so its index names the slot it most likely held when that slot is empty.
    for (index, d, _) in unusable {
        let slot = u32::try_from(index)
            .ok()
            .filter(|&s| s < shape.disks && holder[s as usize].is_none())
            .unwrap_or(u32::MAX);
        faulty.push((d, slot));
    }

    // Clean only if every current superblock says so.
    let clean = found
        .iter()
        .filter(|f| f.sb.events == max)
        .all(|f| f.sb.clean);
    let mut bitmap_warnings = Vec::new();
    let (mut kept_regions, mut cleared_events, rows_per_region) =
        read_dirty(&shape, &holder, &found, &mut bitmap_warnings);
    let dirty_regions = if !forced.is_empty() {
        // Forced past a failure record or a stale member: nothing vouches for any row.
        kept_regions.iter_mut().for_each(|b| *b = true);
        cleared_events = None;
        Some(kept_regions.clone())
    } else if clean {
        None
    } else {
        warnings.extend(bitmap_warnings);
        Some(kept_regions.clone())
    };
    let clean = clean && forced.is_empty();
    Ok(Assembled {
        dir: dir.to_path_buf(),
        name: sb0.name.clone(),
        uuid,
        shape,
        devs,
        spares,
        recovering,
        events: max,
        clean,
        dirty_regions,
        rows_per_region,
        kept_regions,
        cleared_events,
        warnings,
        faulty,
        forced,
        away: missing
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| crate::member::nbd::is_uri(n))
            .collect(),
        returned,
    })
}

/// OR of the live members' bitmaps, the latest event their bits were cleared at, and their
/// rows per region (the first readable bitmap's; every other must agree); all regions and
/// an unknown clearing when any of them is unusable.
fn read_dirty(
    shape: &Shape,
    holder: &[Option<usize>],
    found: &[Found],
    warnings: &mut Vec<String>,
) -> (Vec<bool>, Option<u64>, u64) {
    let rows = shape.rows();
    let mut rpr: Option<u64> = None;
    let mut dirty: Vec<bool> = Vec::new();
    let mut cleared: Option<u64> = Some(0);
    let mut unusable = false;
    for f in holder.iter().flatten().map(|&i| &found[i]) {
        let mut b = vec![0u8; BITMAP_BYTES];
        let got = f
            .dev
            .read_at(&mut b, BITMAP_OFFSET)
            .map_err(|e| format!("{}: write-intent bitmap cannot be read ({e})", f.name))
            .and_then(|()| decode_bitmap(&b, &f.name).map_err(|e| e.to_string()))
            .and_then(|m| {
                let fits = regions_fit(rows, m.rows_per_region, m.dirty.len());
                if fits && rpr.is_none_or(|r| r == m.rows_per_region) {
                    Ok(m)
                } else {
                    Err(format!(
                        "{}: write-intent bitmap is for {} regions of {} rows, expected {}",
                        f.name,
                        m.dirty.len(),
                        m.rows_per_region,
                        match rpr {
                            Some(r) => format!("{} of {r} as the other members", rows.div_ceil(r)),
                            None => format!("regions covering the array's {rows} rows"),
                        }
                    ))
                }
            });
        match got {
            Ok(m) => {
                if rpr.is_none() {
                    rpr = Some(m.rows_per_region);
                    dirty = vec![false; m.dirty.len()];
                }
                dirty.iter_mut().zip(&m.dirty).for_each(|(d, &b)| *d |= b);
                cleared = cleared.zip(m.cleared_events).map(|(a, b)| a.max(b));
            }
            Err(e) => {
                warnings.push(format!("{e}: resyncing every region"));
                unusable = true;
            }
        }
    }
    // The regions the readable bitmaps record; with none, the default's.
    let r =
        rpr.unwrap_or_else(|| rows_per_region_of(rows, shape.chunk_bytes, REGION_BYTES_DEFAULT));
    let regions = rows.div_ceil(r) as usize;
    if unusable {
        return (vec![true; regions], None, r);
    }
    dirty.resize(regions, false);
    (dirty, cleared, r)
}

#[cfg(test)]
#[path = "assemble_tests.rs"]
mod tests;
