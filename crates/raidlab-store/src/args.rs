//! Command-line facing conversions: `raidlab array create`'s arguments into a `CreateSpec`,
//! and what `create` and assembly found, as JSON for the CLI to print.

use std::path::{Path, PathBuf};

use raidlab::array::{Layout, Level};
use raidlab::{Error, Result};
use serde_json::{json, Value};

use crate::ctrl::SlotState;
use crate::format::{self, parse_size, uuid_string, Assembled, CreateSpec, Created};

/// `raidlab array create DIR --level L --disks N --chunk C --size S [--layout] [--spares K]
/// [--name] [--force] [--bitmap-chunk B] [MEMBER...]`.
#[allow(clippy::too_many_arguments)]
pub fn create_spec(
    dir: &str,
    level: &str,
    disks: u32,
    chunk: &str,
    size: &str,
    layout: Option<&str>,
    spares: u32,
    name: Option<&str>,
    members: &[String],
    force: bool,
    bitmap_chunk: Option<&str>,
) -> Result<CreateSpec> {
    let level = Level::from_name(level).ok_or_else(|| {
        Error::config(
            "--level",
            format!("unknown level {level:?}; expected raid0, raid1, raid10, raid5 or raid6"),
        )
    })?;
    let layout = match layout {
        None => Layout::LeftSymmetric,
        Some(l) => Layout::from_name(l).ok_or_else(|| {
            Error::config(
                "--layout",
                format!("unknown layout {l:?}; expected left-symmetric, left-asymmetric, right-symmetric or right-asymmetric"),
            )
        })?,
    };
    let chunk_bytes = parse_size(chunk, "--chunk")?;
    let member_data_bytes = parse_size(size, "--size")?;
    let bitmap_region_bytes = bitmap_chunk
        .map(|b| parse_size(b, "--bitmap-chunk"))
        .transpose()?;
    let dir_path = PathBuf::from(dir);
    let name = match name {
        Some(n) => n.to_string(),
        None => dir_path
            .canonicalize()
            .ok()
            .as_deref()
            .unwrap_or(&dir_path)
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "raidlab".into()),
    };
    let members = (!members.is_empty()).then(|| members.iter().map(PathBuf::from).collect());
    Ok(CreateSpec {
        dir: dir_path,
        name,
        level,
        layout,
        disks,
        chunk_bytes,
        member_data_bytes,
        spares,
        members,
        force,
        bitmap_region_bytes,
    })
}

fn paths(p: &[PathBuf]) -> Vec<String> {
    p.iter().map(|x| x.display().to_string()).collect()
}

pub fn created_json(c: &Created) -> Value {
    json!({
        "dir": c.dir.display().to_string(),
        "name": c.name,
        "uuid": uuid_string(&c.uuid),
        "level": c.shape.level.name(),
        "layout": c.shape.layout.name(),
        "disks": c.shape.disks,
        "chunk_bytes": c.shape.chunk_bytes,
        "data_offset_bytes": c.shape.data_offset_bytes,
        "member_data_bytes": c.shape.member_data_bytes,
        "size_bytes": c.shape.size_bytes(),
        "members": paths(&c.members),
        "spares": paths(&c.spares),
        "initial_resync": c.initial_resync,
    })
}

/// What assembly finds (read-only, like `mdadm --examine`); for a member file or block
/// device instead of a directory, what its own superblock and bitmap say.
pub fn examine(dir: &Path) -> Result<Value> {
    if dir.exists() && !dir.is_dir() {
        return examine_member(dir);
    }
    let a = format::assemble(dir)?;
    Ok(assembled_json(&a))
}

/// One device's superblock and write-intent bitmap, as JSON (reads only).
pub fn examine_member(path: &Path) -> Result<Value> {
    use format::{BITMAP_BYTES, BITMAP_OFFSET, SUPERBLOCK_BYTES, SUPERBLOCK_OFFSET};
    use std::os::unix::fs::FileExt;
    let name = path.to_string_lossy().into_owned();
    // Opened read-only: a member of a running array can be examined.
    let dev = std::fs::File::open(path).map_err(|e| Error::io(&name, &e))?;
    let mut b = [0u8; SUPERBLOCK_BYTES];
    dev.read_exact_at(&mut b, SUPERBLOCK_OFFSET)
        .map_err(|e| Error::store(&name, format!("its superblock cannot be read ({e})")))?;
    let sb = format::decode(&b, &name)?;
    let mut bm = vec![0u8; BITMAP_BYTES];
    let bitmap = match dev
        .read_exact_at(&mut bm, BITMAP_OFFSET)
        .map_err(|e| e.to_string())
        .and_then(|()| format::decode_bitmap(&bm, &name).map_err(|e| e.to_string()))
    {
        Ok(m) => json!({
            "events": m.events,
            "rows_per_region": m.rows_per_region,
            "regions": m.dirty.len(),
            "dirty_regions": m.dirty.iter().filter(|&&d| d).count(),
            "cleared_events": m.cleared_events,
        }),
        Err(e) => json!({"error": e}),
    };
    let role = match sb.role {
        format::DevRole::Slot(s) => json!(s),
        format::DevRole::Spare => json!("spare"),
        format::DevRole::Faulty => json!("faulty"),
    };
    let shape = sb.shape();
    Ok(json!({
        "member": name,
        "name": sb.name,
        "uuid": uuid_string(&sb.array_uuid),
        "device_uuid": uuid_string(&sb.device_uuid),
        "level": shape.level.name(),
        "layout": shape.layout.name(),
        "disks": shape.disks,
        "chunk_bytes": shape.chunk_bytes,
        "data_offset_bytes": shape.data_offset_bytes,
        "member_data_bytes": shape.member_data_bytes,
        "size_bytes": shape.size_bytes(),
        "role": role,
        "former_slot": sb.former_slot,
        "left_in_sync": sb.left_in_sync,
        "events": sb.events,
        "clean": sb.clean,
        "failed": sb.failed,
        "slots": sb.slots.iter().map(|s| slot_state_name(*s)).collect::<Vec<_>>(),
        "bitmap": bitmap,
    }))
}

pub fn assembled_json(a: &Assembled) -> Value {
    let recovering = a.recovering;
    let members: Vec<Value> = a
        .devs
        .iter()
        .enumerate()
        .map(|(s, d)| {
            let state = match (d, recovering) {
                (Some(_), Some((r, cp))) if r as usize == s => {
                    json!(format!("recovering (checkpoint row {cp})"))
                }
                (Some(_), _) => json!("in_sync"),
                (None, _) => json!("missing or failed"),
            };
            json!({"slot": s, "path": d.as_ref().map(|d| d.path().to_string()), "state": state})
        })
        .collect();
    json!({
        "dir": a.dir.display().to_string(),
        "name": a.name,
        "uuid": uuid_string(&a.uuid),
        "level": a.shape.level.name(),
        "layout": a.shape.layout.name(),
        "disks": a.shape.disks,
        "chunk_bytes": a.shape.chunk_bytes,
        "data_offset_bytes": a.shape.data_offset_bytes,
        "member_data_bytes": a.shape.member_data_bytes,
        "size_bytes": a.shape.size_bytes(),
        "events": a.events,
        "clean": a.clean,
        "dirty_regions": a.dirty_regions.as_ref().map(|d| d.iter().filter(|&&b| b).count()),
        "kept_regions": a.kept_regions.iter().filter(|&&b| b).count(),
        "bitmap_cleared_events": a.cleared_events,
        "members": members,
        "spares": a.spares.iter().map(|d| d.path().to_string()).collect::<Vec<_>>(),
        "faulty": a.faulty.iter().map(|(d, s)| json!({"path": d.path(), "slot": (*s != u32::MAX).then_some(*s)})).collect::<Vec<_>>(),
        "warnings": a.warnings,
    })
}

/// The state word of a slot for messages.
pub fn slot_state_name(s: SlotState) -> &'static str {
    match s {
        SlotState::InSync => "in_sync",
        SlotState::Failed => "failed",
        SlotState::Recovering { .. } => "recovering",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_name_their_option() {
        let bad = |level: &str, chunk: &str, layout: Option<&str>, bitmap: Option<&str>| {
            create_spec(
                "d",
                level,
                4,
                chunk,
                "1M",
                layout,
                0,
                None,
                &[],
                false,
                bitmap,
            )
            .unwrap_err()
            .to_string()
        };
        let e = bad("raid7", "64K", None, None);
        assert!(e.contains("--level"), "{e}");
        let e = bad("raid5", "64Q", None, None);
        assert!(e.contains("--chunk"), "{e}");
        let e = bad("raid5", "64K", Some("diagonal"), None);
        assert!(e.contains("--layout"), "{e}");
        let e = bad("raid5", "64K", None, Some("lots"));
        assert!(e.contains("--bitmap-chunk"), "{e}");
        let s = create_spec(
            "some/dir",
            "raid6",
            6,
            "64KiB",
            "1GiB",
            None,
            1,
            None,
            &[],
            false,
            None,
        )
        .unwrap();
        assert_eq!(
            (s.chunk_bytes, s.member_data_bytes, s.name.as_str()),
            (65536, 1 << 30, "dir")
        );
    }
}
