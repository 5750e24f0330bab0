//! Where the log's segments are: the legs, the stripe of segments over them, and the
//! superblock each leg carries.

use std::fmt::Write as _;
use std::sync::Arc;

use super::super::backup;
use super::super::format::{
    Super, BATCH_RECORDS_MAX, BLOCK, KIND_LOG, LOG_MEMBERS_MAX, SUPERS_BYTES,
};
use super::BLOCK64;
use crate::member::Member;
use std::io;

/// One leg: the device, the byte offset of the log's area on it and the area's size.
pub type Leg = (Arc<dyn Member>, u64, u64);

/// Where the log's segments are.
pub(super) struct Geometry {
    pub legs: Vec<Leg>,
    pub seg: u64,
    pub segments: u64,
}

impl Geometry {
    /// The legs whose bit is set in `dirty`.
    pub fn dirty_legs(dirty: &[u64; LOG_MEMBERS_MAX / 64], legs: usize) -> Vec<usize> {
        (0..legs)
            .filter(|&leg| dirty[leg / 64] & (1 << (leg % 64)) != 0)
            .collect()
    }

    /// Run `f` for each of `legs`, all at once when one is slow (remote, or disk-timed:
    /// `format::sink::each_device`, as the array's own superblocks): one after another, a
    /// superblock update of a logical log over 16 disk-timed members took 16 member writes'
    /// time under the log's lock, and every put waited that long. The first error, with its
    /// leg.
    /// Every leg's index.
    pub fn all_legs(&self) -> Vec<usize> {
        (0..self.legs.len()).collect()
    }

    pub fn each_leg(
        &self,
        legs: &[usize],
        f: impl Fn(usize) -> io::Result<()> + Sync,
    ) -> Result<(), (usize, io::Error)> {
        let results =
            crate::format::sink::each_device(legs, |&leg| self.legs[leg].0.as_ref(), |&leg| f(leg));
        match legs
            .iter()
            .zip(results)
            .find_map(|(&leg, r)| r.err().map(|e| (leg, e)))
        {
            Some(failed) => Err(failed),
            None => Ok(()),
        }
    }

    /// Check `legs` can hold segments of `seg` bytes; the segment count is the same on every
    /// leg (the smallest leg's), so the stripe stays regular.
    pub fn new(legs: Vec<Leg>, seg: u64) -> Result<Geometry, raidlab::Error> {
        assert!(!legs.is_empty(), "a log needs a leg");
        assert!(
            legs.len() <= LOG_MEMBERS_MAX,
            "at most {LOG_MEMBERS_MAX} legs"
        );
        let path0 = legs[0].0.path().to_string();
        if seg < 2 * BLOCK64 || !seg.is_multiple_of(BLOCK64) {
            return Err(backup::bad(
                &path0,
                format!("log segment of {seg} bytes: must be a multiple of {BLOCK} and at least 2 blocks"),
            ));
        }
        let mut per_leg = u64::MAX;
        for (dev, base, region) in &legs {
            let path = dev.path();
            if !base.is_multiple_of(BLOCK64) {
                return Err(backup::bad(
                    path,
                    format!("log area offset {base} is not a multiple of {BLOCK}"),
                ));
            }
            if base
                .checked_add(*region)
                .is_none_or(|end| end > dev.len_bytes())
            {
                return Err(backup::bad(
                    path,
                    format!(
                        "log area of {region} bytes at {base} ends past the device's {} bytes",
                        dev.len_bytes()
                    ),
                ));
            }
            if *region < SUPERS_BYTES + seg {
                return Err(backup::bad(
                    path,
                    format!(
                        "log area of {region} bytes is too small: it needs at least {} bytes (superblocks and one segment of {seg})",
                        SUPERS_BYTES + seg
                    ),
                ));
            }
            per_leg = per_leg.min((region - SUPERS_BYTES) / seg);
        }
        let segments = per_leg * legs.len() as u64;
        Ok(Geometry {
            legs,
            seg,
            segments,
        })
    }

    pub fn log_bytes(&self) -> u64 {
        self.segments * self.seg
    }

    pub fn seg_index(&self, pos: u64) -> usize {
        ((pos / self.seg) % self.segments) as usize
    }

    pub fn seg_end(&self, pos: u64) -> u64 {
        (pos / self.seg + 1) * self.seg
    }

    /// The leg and byte offset of virtual position `pos`.
    pub fn locate(&self, pos: u64) -> (usize, u64) {
        let s = self.seg_index(pos) as u64;
        let n = self.legs.len() as u64;
        let leg = (s % n) as usize;
        (
            leg,
            self.legs[leg].1 + SUPERS_BYTES + (s / n) * self.seg + pos % self.seg,
        )
    }

    pub fn blocks_per_seg(&self) -> u64 {
        self.seg / BLOCK64
    }

    /// Records a full segment holds (its data blocks; headers take the rest).
    pub fn records_per_seg(&self) -> u64 {
        let b = self.blocks_per_seg();
        b - b.div_ceil(BATCH_RECORDS_MAX as u64 + 1)
    }

    /// The superblock of leg `leg`: `members` lists the legs starting with this one, so a
    /// leg in the wrong place or a wrong count is noticed at open.
    pub fn super_for(
        &self,
        leg: usize,
        generation: u64,
        epoch: u64,
        tail: u64,
        uuid: [u8; 16],
    ) -> Super {
        let n = self.legs.len();
        Super {
            kind: KIND_LOG,
            uuid,
            generation,
            epoch,
            capacity: self.log_bytes(),
            segment_bytes: self.seg,
            tail,
            members: (0..n).map(|i| ((leg + i) % n) as u32).collect(),
        }
    }
}

pub(super) fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// `n` bytes as "N MiB", "N KiB" or "N bytes".
pub(super) fn size(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}
