//! `create`: make a new array in a directory (sparse member files, or explicit devices).

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use raidlab::array::{Array, ArraySpec, Layout, Level};
use raidlab::{Error, Result};

use super::bitmap::encode_bitmap;
use super::manifest::{self, manifest_path, sync_dir, write_manifest};
use super::superblock::{check_shape, decode, DevRole, Superblock, NAME_BYTES};
use super::{
    new_uuid, uuid_string, BITMAP_OFFSET, CHUNK_MAX, CHUNK_MIN, DATA_OFFSET_BYTES, DISKS_MAX,
    MEMBER_DATA_MAX, SUPERBLOCK_BYTES, SUPERBLOCK_OFFSET,
};
use crate::ctrl::sync::{rows_per_region_of, REGION_BYTES_DEFAULT};
use crate::ctrl::{Shape, SlotState};
use crate::member::{FileMember, Member};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct CreateSpec {
    pub dir: PathBuf,
    pub name: String,
    pub level: Level,
    pub layout: Layout,
    pub disks: u32,
    pub chunk_bytes: u64,
    /// Data bytes per member; rounded down to whole chunks.
    pub member_data_bytes: u64,
    pub spares: u32,
    /// Explicit member paths (files or block devices), `disks` members then `spares` spares;
    /// `None` creates sparse files `DIR/disk0..` and `DIR/spare0..`.
    pub members: Option<Vec<PathBuf>>,
    /// Overwrite an array already in DIR, and reuse devices that carry a superblock.
    pub force: bool,
    /// Member bytes per write-intent bitmap region (`--bitmap-chunk`, whole chunks);
    /// `None`: `ctrl::sync::REGION_BYTES_DEFAULT`, md's default.
    pub bitmap_region_bytes: Option<u64>,
}

/// What `create` made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    pub dir: PathBuf,
    pub name: String,
    pub uuid: [u8; 16],
    pub shape: Shape,
    pub members: Vec<PathBuf>,
    pub spares: Vec<PathBuf>,
    /// The members' old contents were kept (explicit devices), so the array starts dirty
    /// with every bitmap region set: the first assembly resyncs parity in the background.
    pub initial_resync: bool,
}

fn display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The core's level and disk-count checks, under this API's argument names.
fn core_checks(spec: &CreateSpec) -> Result<()> {
    let a = ArraySpec {
        level: spec.level,
        disks: spec.disks,
        stripe_unit_bytes: spec.chunk_bytes,
        layout: spec.layout,
        failed: Vec::new(),
        block_size: CHUNK_MIN as u32,
    };
    Array::new(&a).map(|_| ()).map_err(|e| match e {
        Error::Config { key, msg } => {
            let key = match key.as_str() {
                "array.stripe_unit" => "chunk",
                k => k.strip_prefix("array.").unwrap_or(k),
            };
            Error::config(key, msg)
        }
        other => other,
    })
}

/// Check every argument; returns the member data size rounded down to whole chunks.
fn validate(spec: &CreateSpec) -> Result<u64> {
    let name = &spec.name;
    if name.is_empty() || name.len() > NAME_BYTES || name.chars().any(char::is_control) {
        return Err(Error::config(
            "name",
            format!(
                "{name:?}: expected 1 to {NAME_BYTES} bytes of UTF-8 without control characters"
            ),
        ));
    }
    if spec.disks > DISKS_MAX {
        return Err(Error::config(
            "disks",
            format!("expected at most {DISKS_MAX} members, got {}", spec.disks),
        ));
    }
    let c = spec.chunk_bytes;
    if !c.is_power_of_two() || !(CHUNK_MIN..=CHUNK_MAX).contains(&c) {
        return Err(Error::config(
            "chunk",
            format!("expected a power of two from {CHUNK_MIN} to {CHUNK_MAX} bytes, got {c}"),
        ));
    }
    core_checks(spec)?;
    if let Some(r) = spec.bitmap_region_bytes {
        if r == 0 || !r.is_multiple_of(c) {
            return Err(Error::config(
                "bitmap-chunk",
                format!("expected a whole number of chunks ({c} bytes each), got {r} bytes"),
            ));
        }
    }
    let size = spec.member_data_bytes / c * c;
    if size == 0 || size > MEMBER_DATA_MAX {
        return Err(Error::config(
            "size",
            format!(
                "{} bytes per member: expected at least one chunk ({c} bytes) and at most {MEMBER_DATA_MAX}",
                spec.member_data_bytes
            ),
        ));
    }
    let devices = spec.disks as usize + spec.spares as usize;
    if devices > manifest::PATHS_MAX {
        return Err(Error::config(
            "spares",
            format!(
                "{devices} devices in all, expected at most {}",
                manifest::PATHS_MAX
            ),
        ));
    }
    check_shape(
        spec.level,
        spec.layout,
        spec.disks,
        c,
        DATA_OFFSET_BYTES,
        size,
    )
    .map_err(|m| Error::config("size", m))?;
    Ok(size)
}

/// Check an explicit member before anything is written: it exists, is big enough, and (unless
/// `force`) is not some array's member already.
fn check_explicit(path: &Path, need: u64, force: bool) -> Result<()> {
    let name = display(path);
    if crate::member::nbd::is_uri(&name) {
        let dev = crate::member::open_device(&name).map_err(|e| Error::io(&name, &e))?;
        let mut b = [0u8; SUPERBLOCK_BYTES];
        let sb = dev.read_at(&mut b, SUPERBLOCK_OFFSET).ok().map(|()| b);
        return check_found(&name, dev.len_bytes(), need, force, sb);
    }
    let mut f = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Error::store(
            &name,
            "does not exist (explicit members must exist: create the file or name a block device)",
        )),
        Err(e) => return Err(Error::io(&name, &e)),
    };
    // A block device's metadata length is 0: seek to its end instead.
    let len = f.seek(SeekFrom::End(0)).map_err(|e| Error::io(&name, &e))?;
    let mut b = [0u8; SUPERBLOCK_BYTES];
    let sb = f.read_exact_at(&mut b, SUPERBLOCK_OFFSET).ok().map(|()| b);
    check_found(&name, len, need, force, sb)
}

/// An explicit member's size is enough, and (unless `force`) `sb`, the bytes where its
/// superblock would be, hold none.
fn check_found(
    name: &str,
    len: u64,
    need: u64,
    force: bool,
    sb: Option<[u8; SUPERBLOCK_BYTES]>,
) -> Result<()> {
    if len < need {
        return Err(Error::store(
            name,
            format!(
                "{len} bytes is too small: a member needs data offset {DATA_OFFSET_BYTES} + member data {} = {need} bytes",
                need - DATA_OFFSET_BYTES
            ),
        ));
    }
    if let (false, Some(b)) = (force, sb) {
        if let Ok(sb) = decode(&b, name) {
            return Err(Error::store(
                name,
                format!(
                    "already a member of array {:?} (uuid {}); use --force to reuse it",
                    sb.name,
                    uuid_string(&sb.array_uuid)
                ),
            ));
        }
    }
    Ok(())
}

/// Write a member's metadata area: zeros up to the data offset (when it may hold old bytes),
/// then its superblock and bitmap.
fn write_meta(
    f: &dyn Member,
    name: &str,
    sb: &Superblock,
    bitmap: &[u8],
    zero: bool,
) -> Result<()> {
    let io = |e: std::io::Error| Error::io(name, &e);
    if zero {
        let zeros = vec![0u8; 64 << 10];
        // Bounded: DATA_OFFSET_BYTES / 64 KiB = 16 writes.
        let mut off = 0;
        while off < DATA_OFFSET_BYTES {
            f.write_at(&zeros, off).map_err(io)?;
            off += zeros.len() as u64;
        }
    }
    f.write_at(&sb.encode(), SUPERBLOCK_OFFSET).map_err(io)?;
    f.write_at(bitmap, BITMAP_OFFSET).map_err(io)?;
    f.sync().map_err(io)
}

/// Open (or make) one member and reserve its blocks: a new file is `need` bytes, allocated
/// with fallocate (it reads as zeros); an explicit regular file keeps its bytes and has its
/// first `need` bytes allocated; a block device is left as it is.
fn open_member(p: &Path, explicit: bool, need: u64) -> Result<Arc<dyn Member>> {
    let name = display(p);
    if crate::member::nbd::is_uri(&name) {
        // A remote export: its server owns its blocks.
        return crate::member::open_device(&name).map_err(|e| Error::io(&name, &e));
    }
    let f = if explicit {
        OpenOptions::new().read(true).write(true).open(p)
    } else {
        File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(p)
    }
    .map_err(|e| Error::io(&name, &e))?;
    let regular = f.metadata().map_err(|e| Error::io(&name, &e))?.is_file();
    if regular {
        crate::device::preallocate_file(&f, &name, need)?;
        if !explicit {
            // Where fallocate is not supported, the file is sparse.
            f.set_len(need).map_err(|e| Error::io(&name, &e))?;
        }
    }
    drop(f);
    let m = FileMember::open(&name).map_err(|e| Error::io(&name, &e))?;
    Ok(Arc::new(m))
}

/// Create the array `spec` describes. Everything is validated before the first write.
pub fn create(spec: &CreateSpec) -> Result<Created> {
    let size = validate(spec)?;
    let need = DATA_OFFSET_BYTES + size;
    let dir = &spec.dir;
    if dir.exists() && !dir.is_dir() {
        return Err(Error::store(display(dir), "exists and is not a directory"));
    }
    let mp = manifest_path(dir);
    // A running array is never overwritten, --force or not: its server would go on writing
    // the old layout over the new one.
    if crate::control::is_served(dir) {
        return Err(Error::store(
            display(dir),
            "holds a running array (its control socket answers): stop its server first; --force does not override this",
        ));
    }
    if mp.exists() && !spec.force {
        return Err(Error::store(
            display(&mp),
            "the directory already holds an array (use --force to overwrite it)",
        ));
    }
    let n = spec.disks as usize + spec.spares as usize;
    let (paths, explicit) = match &spec.members {
        Some(list) => {
            if list.len() != n {
                return Err(Error::config(
                    "members",
                    format!(
                        "{} paths given, expected {n} ({} members and {} spares)",
                        list.len(),
                        spec.disks,
                        spec.spares
                    ),
                ));
            }
            for (i, p) in list.iter().enumerate() {
                let abs = std::path::absolute(p).map_err(|e| Error::io(display(p), &e))?;
                // Two URIs of one export (`nbd://h/e`, `nbd://h:10809/e`) are one device.
                let id = |q: &Path| {
                    let s = display(q);
                    crate::member::nbd::is_uri(&s)
                        .then(|| crate::member::nbd::uri_identity(&s).ok())
                        .flatten()
                };
                for q in &list[..i] {
                    let same_id = id(p).is_some() && id(p) == id(q);
                    if same_id || std::path::absolute(q).ok().as_deref() == Some(abs.as_path()) {
                        return Err(Error::config(
                            "members",
                            format!("{} is listed twice", display(p)),
                        ));
                    }
                }
                check_explicit(p, need, spec.force)?;
            }
            (list.clone(), true)
        }
        None => {
            let list: Vec<PathBuf> = (0..spec.disks)
                .map(|i| dir.join(format!("disk{i}")))
                .chain((0..spec.spares).map(|i| dir.join(format!("spare{i}"))))
                .collect();
            if !spec.force {
                if let Some(p) = list.iter().find(|p| p.exists()) {
                    return Err(Error::store(
                        display(p),
                        "exists already (use --force to overwrite it)",
                    ));
                }
            }
            (list, false)
        }
    };

    // A device some server holds (this array's under another name, or another array's) is
    // refused even with --force.
    for p in &paths {
        crate::device::check_unlocked(p).map_err(|e| match e {
            Error::Store { path, msg } => Error::store(
                path,
                format!("{msg}; a device of a running array is never reused, even with --force"),
            ),
            other => other,
        })?;
    }

    // Validated: from here on, write.
    std::fs::create_dir_all(dir).map_err(|e| Error::io(display(dir), &e))?;
    let uuid = new_uuid();
    let shape = Shape {
        level: spec.level,
        layout: spec.layout,
        disks: spec.disks,
        chunk_bytes: spec.chunk_bytes,
        data_offset_bytes: DATA_OFFSET_BYTES,
        member_data_bytes: size,
    };
    // New sparse files read as zeros, and zeros are consistent for every level (the XOR and
    // the RAID-6 Q of zero chunks are zero), so such an array needs no initial resync.
    // Explicit devices keep whatever they held: their parity is resynced at first assembly,
    // as md does after a create (RAID-0 has no redundancy to make consistent).
    let initial_resync = explicit && spec.level != Level::Raid0;
    let rpr = rows_per_region_of(
        shape.rows(),
        shape.chunk_bytes,
        spec.bitmap_region_bytes.unwrap_or(REGION_BYTES_DEFAULT),
    );
    let regions = shape.rows().div_ceil(rpr) as usize;
    let bitmap = encode_bitmap(1, rpr, &vec![initial_resync; regions]);
    // Every device is opened (new files made) and its blocks reserved before any metadata is
    // written: a full file system stops the create here, and the new files are removed.
    let mut files = Vec::with_capacity(paths.len());
    for p in &paths {
        match open_member(p, explicit, need) {
            Ok(f) => files.push(f),
            Err(e) => {
                if !explicit {
                    for q in &paths[..files.len() + 1] {
                        let _ = std::fs::remove_file(q);
                    }
                }
                return Err(e);
            }
        }
    }
    for (i, (p, f)) in paths.iter().zip(&files).enumerate() {
        let name = display(p);
        let role = if i < spec.disks as usize {
            DevRole::Slot(i as u32)
        } else {
            DevRole::Spare
        };
        let sb = Superblock {
            array_uuid: uuid,
            device_uuid: new_uuid(),
            name: spec.name.clone(),
            level: spec.level,
            layout: spec.layout,
            disks: spec.disks,
            role,
            chunk_bytes: spec.chunk_bytes,
            data_offset_bytes: DATA_OFFSET_BYTES,
            member_data_bytes: size,
            events: 1,
            clean: !initial_resync,
            failed: false,
            former_slot: None,
            left_in_sync: None,
            slots: vec![SlotState::InSync; spec.disks as usize],
        };
        // A new file reads as zeros already.
        write_meta(f.as_ref(), &name, &sb, &bitmap, explicit)?;
    }
    // The manifest last: its presence marks a complete array. It syncs DIR, which also makes
    // the new member files' names durable.
    write_manifest(dir, &paths)?;
    sync_dir(dir)?;
    let members = paths[..spec.disks as usize].to_vec();
    let spares = paths[spec.disks as usize..].to_vec();
    Ok(Created {
        dir: dir.clone(),
        name: spec.name.clone(),
        uuid,
        shape,
        members,
        spares,
        initial_resync,
    })
}

#[cfg(test)]
#[path = "create_tests.rs"]
pub(crate) mod tests;
