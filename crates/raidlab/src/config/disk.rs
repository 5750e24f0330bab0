//! The `[disk]` table: timing model (a preset and/or explicit parameters) and queue.
//!
//! PLACEHOLDER: only the constant model; replaced by the full parser.

use super::tree::Table;
use crate::disk::model::ConstantSpec;
use crate::disk::{ms_to_ns, DiskSpec, QueueSpec};
use crate::error::Result;

/// Parse `[disk]` (`None`: the defaults).
pub(super) fn disk_spec(t: Option<Table<'_>>) -> Result<(DiskSpec, QueueSpec)> {
    let mut read_ms = 10.0;
    let mut write_ms = 10.0;
    if let Some(mut t) = t {
        let _ = t.str("model")?;
        let ms = t.float("service_ms", 1e-6, 1e6)?;
        read_ms = t.float("read_ms", 1e-6, 1e6)?.or(ms).unwrap_or(read_ms);
        write_ms = t.float("write_ms", 1e-6, 1e6)?.or(ms).unwrap_or(write_ms);
        t.finish()?;
    }
    Ok((
        DiskSpec::Constant(ConstantSpec {
            read_ns: ms_to_ns(read_ms),
            write_ns: ms_to_ns(write_ms),
            capacity_sectors: 1 << 40,
        }),
        QueueSpec::default(),
    ))
}
