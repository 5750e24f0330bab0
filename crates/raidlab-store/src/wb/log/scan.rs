//! Recovery's walk of the log: follow the batch chain from the tail.

use std::io;

use super::super::backup::{Found, Scan};
use super::super::format::{self, BATCH_RECORDS_MAX, BLOCK};
use super::geometry::Geometry;
use super::nvram::Nvram;
use super::BLOCK64;

/// Read `buf` at virtual position `pos`: from its NVRAM slot if one holds the segment.
fn read(geo: &Geometry, nv: Option<&Nvram>, pos: u64, buf: &mut [u8]) -> io::Result<()> {
    if let Some(nv) = nv {
        if nv.read(pos, buf)? {
            return Ok(());
        }
    }
    let (leg, off) = geo.locate(pos);
    geo.legs[leg].0.read_at(buf, off)
}

/// Follow the batch chain from `tail` in `epoch`: every record whose data matches.
pub(super) fn scan_from(
    geo: &Geometry,
    nv: Option<&Nvram>,
    voids: &[(Vec<u8>, u32); 2],
    epoch: u64,
    tail: u64,
) -> io::Result<Scan> {
    let mut scan = Scan::default();
    let mut header = vec![0u8; BLOCK];
    let mut data = vec![0u8; BLOCK * BATCH_RECORDS_MAX];
    let limit = tail + geo.log_bytes();
    let mut pos = tail;
    // Every batch takes at least a block: a lap's worth of blocks bounds the walk.
    for _ in 0..geo.log_bytes() / BLOCK64 {
        if pos >= limit {
            break;
        }
        read(geo, nv, pos, &mut header)?;
        let Some(b) = format::decode_batch(&header, epoch, pos) else {
            break;
        };
        let n = b.records.len();
        let seg_end = geo.seg_end(pos);
        if pos + (n as u64 + 1) * BLOCK64 > seg_end
            || b.next > seg_end
            || !b.next.is_multiple_of(BLOCK64)
        {
            break; // not a header this log wrote
        }
        let data = &mut data[..n * BLOCK];
        if n > 0 {
            read(geo, nv, pos + BLOCK64, data)?;
        }
        for ((meta, crc), block) in b.records.iter().zip(data.chunks(BLOCK)) {
            if format::data_crc(block) == *crc {
                scan.records.push(Found {
                    meta: *meta,
                    data: block.to_vec(),
                });
            } else if !voids.iter().any(|(v, _)| v == block) {
                scan.torn += 1;
            }
        }
        pos = b.next;
    }
    Ok(scan)
}
