//! Recovery's walk of the log: follow the batch chain from the tail.

use std::collections::HashSet;
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

/// Follow the batch chain from `tail` in `epoch`: every record whose data matches, less
/// those a release entry found in the chain names (a release names only earlier records,
/// so the chain that holds it holds them too, or they are behind the tail).
pub(super) fn scan_from(
    geo: &Geometry,
    nv: Option<&Nvram>,
    voids: &[(Vec<u8>, u32); 2],
    epoch: u64,
    tail: u64,
) -> io::Result<Scan> {
    let mut scan = Scan::default();
    // The data block position of each record found, and the positions released.
    let mut found_at: Vec<u64> = Vec::new();
    let mut released: HashSet<u64> = HashSet::new();
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
        released.extend(&b.released);
        for (i, ((meta, crc), block)) in b.records.iter().zip(data.chunks(BLOCK)).enumerate() {
            if format::data_crc(block) == *crc {
                found_at.push(pos + (i as u64 + 1) * BLOCK64);
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
    if !released.is_empty() {
        let before = scan.records.len();
        let mut at = found_at.iter();
        scan.records
            .retain(|_| !released.contains(at.next().expect("a position per record")));
        scan.released = (before - scan.records.len()) as u64;
    }
    Ok(scan)
}
