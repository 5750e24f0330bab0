//! A mechanical HDD: zoned geometry (`zones.rs`), rotation tracked in simulated time, a seek
//! curve (`seek.rs`), head switch, write settle, per-command overhead and an optional
//! read-ahead segment.
//!
//! Cost of one operation, in order:
//! 1. `command_overhead_ns` (the drive's controller);
//! 2. positioning: seek `max(seek(d), head_switch)` for d > 0 cylinders, `head_switch` for
//!    another surface of the same cylinder, nothing otherwise; plus `write_settle_ns` for
//!    writes; then the rotational latency until the first sector comes under the head;
//! 3. media transfer track by track at the zone's rate; each track boundary inside the
//!    operation costs a head switch (or a seek to the next zone's first cylinder) and the
//!    short wait for the skewed first sector (see `zones.rs`). Writes settle once, before the
//!    first sector. The interface transfer of media operations overlaps the media transfer
//!    (every preset's bus is faster than its media) and is not charged.
//!
//! Read-ahead: after a read, the drive keeps reading the following `read_ahead_sectors`
//! sectors at media rate (crossing tracks like a transfer) until the next command arrives.
//! The segment holds the read's own sectors and what was read ahead by then. A read lying
//! entirely in it is a buffer hit: `command_overhead_ns` + the interface transfer at
//! `bus_mb_s`, no media access; the read-ahead goes on undisturbed. Any other command stops
//! the read-ahead and discards the segment; the arm is then where the read-ahead left it.

use super::seek::{Seek, SeekSpec};
pub use super::zones::Zone;
use super::zones::{Chs, Geometry};
use super::{DiskModel, Service};
use crate::disk::{DiskIo, SECTOR_BYTES};
use crate::error::{Error, Result};
use crate::workload::Op;

/// Parameters of a mechanical HDD.
#[derive(Debug, Clone, PartialEq)]
pub struct MechanicalSpec {
    pub cylinders: u32,
    pub surfaces: u32,
    pub rpm: u32,
    /// Ascending, non-overlapping cylinder ranges with their sectors per track; cylinders
    /// outside every zone are spares.
    pub zones: Vec<Zone>,
    pub seek: SeekSpec,
    pub head_switch_ns: u64,
    pub write_settle_ns: u64,
    /// Per-command controller overhead of the drive.
    pub command_overhead_ns: u64,
    /// Sectors read ahead after each read (0 = no read-ahead).
    pub read_ahead_sectors: u64,
    /// Interface rate (10^6 bytes/s) for buffer hits.
    pub bus_mb_s: u32,
}

/// Bounds that keep every product of the integer arithmetic inside `u64`/`u128`.
const MAX_CYLINDERS: u64 = 1 << 24;
const MAX_SURFACES: u64 = 64;
const MAX_SPT: u64 = 1 << 16;
const MAX_RPM: u64 = 100_000;
const MAX_TIME_NS: u64 = 10_000_000_000;
const MAX_BUS_MB_S: u64 = 100_000;

impl MechanicalSpec {
    /// Capacity in sectors implied by the zones (no validation).
    pub fn capacity_sectors(&self) -> u64 {
        self.zones
            .iter()
            .map(|z| {
                (z.last_cyl as u64 + 1).saturating_sub(z.first_cyl as u64)
                    * self.surfaces as u64
                    * z.sectors_per_track as u64
            })
            .sum()
    }

    /// Rotation period in ns, rounded.
    pub fn period_ns(&self) -> u64 {
        (60_000_000_000 + self.rpm as u64 / 2) / self.rpm.max(1) as u64
    }

    /// Check every parameter; errors name the `[disk]` key.
    pub fn validate(&self) -> Result<Seek> {
        let range = |key: &str, v: u64, lo: u64, hi: u64| {
            if v < lo || v > hi {
                Err(Error::config(
                    format!("disk.{key}"),
                    format!("expected a value in [{lo}, {hi}], got {v}"),
                ))
            } else {
                Ok(())
            }
        };
        range("cylinders", self.cylinders as u64, 1, MAX_CYLINDERS)?;
        range("surfaces", self.surfaces as u64, 1, MAX_SURFACES)?;
        range("rpm", self.rpm as u64, 1, MAX_RPM)?;
        range("head_switch_ms", self.head_switch_ns, 1, MAX_TIME_NS)?;
        range("write_settle_ms", self.write_settle_ns, 0, MAX_TIME_NS)?;
        range("overhead_ms", self.command_overhead_ns, 0, MAX_TIME_NS)?;
        range("bus_mb_s", self.bus_mb_s as u64, 1, MAX_BUS_MB_S)?;
        if self.zones.is_empty() {
            return Err(Error::config("disk.zones", "expected at least one zone"));
        }
        let period = self.period_ns();
        let mut next_free = 0u64;
        for (i, z) in self.zones.iter().enumerate() {
            let key = format!("disk.zones[{i}]");
            let (first, last, spt) = (z.first_cyl, z.last_cyl, z.sectors_per_track);
            if first > last {
                return Err(Error::config(
                    key,
                    format!("first cylinder {first} is after last cylinder {last}"),
                ));
            }
            if (first as u64) < next_free {
                return Err(Error::config(
                    key,
                    format!(
                        "zones must be ascending and not overlap; cylinder {first} is not after the previous zone's last ({})",
                        next_free - 1
                    ),
                ));
            }
            if last >= self.cylinders {
                return Err(Error::config(
                    key,
                    format!(
                        "last cylinder {last} is beyond the disk (cylinders = {})",
                        self.cylinders
                    ),
                ));
            }
            if spt == 0 || spt as u64 > MAX_SPT || spt as u64 > period {
                return Err(Error::config(
                    key,
                    format!("expected 1..={MAX_SPT} sectors per track, got {spt}"),
                ));
            }
            next_free = last as u64 + 1;
        }
        self.seek.compile(self.cylinders)
    }

    pub fn build(&self) -> Result<Mechanical> {
        let seek = self.validate()?;
        let cyl_step_ns = seek.ns(1).max(self.head_switch_ns);
        let geo = Geometry::new(
            &self.zones,
            self.surfaces,
            self.period_ns(),
            self.head_switch_ns,
            cyl_step_ns,
        );
        let first = geo.locate(0);
        Ok(Mechanical {
            geo,
            seek,
            head_switch_ns: self.head_switch_ns,
            write_settle_ns: self.write_settle_ns,
            overhead_ns: self.command_overhead_ns,
            read_ahead_sectors: self.read_ahead_sectors,
            bus_mb_s: self.bus_mb_s as u64,
            head: Track {
                cyl: first.cyl,
                surface: 0,
            },
            segment: None,
        })
    }
}

/// A track: where the arm and the selected head are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Track {
    cyl: u32,
    surface: u32,
}

impl Track {
    fn of(p: Chs) -> Track {
        Track {
            cyl: p.cyl,
            surface: p.surface,
        }
    }
}

/// The read-ahead segment left by the last read.
#[derive(Debug, Clone, Copy)]
struct Segment {
    /// First sector held (the read's first).
    first: u64,
    /// First sector the read-ahead reads (the read's end).
    next: u64,
    /// The read-ahead stops before this sector.
    limit: u64,
    /// When the read ended; the head then was just past sector `next - 1` on `track`.
    t0_ns: u64,
    track: Track,
}

/// Where a read-ahead stands at some time.
#[derive(Debug, Clone, Copy)]
struct Progress {
    /// Sectors before this one are in the buffer.
    read_to: u64,
    /// The track the head is on.
    track: Track,
}

/// The positioning part of an operation: how the head gets to its first sector.
#[derive(Debug, Clone, Copy)]
struct Positioning {
    seek_ns: u64,
    seek_cylinders: u64,
    rotation_ns: u64,
    start: Chs,
    /// The slot of `start`, under the head when the positioning ends, and its angle
    /// ([`Geometry::slot_ns`]).
    slot: u32,
    slot_ns: u64,
}

/// A mechanical HDD with its head state.
#[derive(Debug, Clone)]
pub struct Mechanical {
    geo: Geometry,
    seek: Seek,
    head_switch_ns: u64,
    write_settle_ns: u64,
    overhead_ns: u64,
    read_ahead_sectors: u64,
    bus_mb_s: u64,
    /// The head's track after the last media operation.
    head: Track,
    segment: Option<Segment>,
}

impl Mechanical {
    /// Rotation period in ns.
    pub fn period_ns(&self) -> u64 {
        self.geo.period_ns
    }

    /// Time of a `d`-cylinder seek as the curve gives it (0 for d = 0).
    pub fn seek_ns(&self, d: u64) -> u64 {
        self.seek.ns(d)
    }

    /// Cost of moving the head from track `a` to track `b`.
    #[inline]
    fn switch_ns(&self, a: Track, b: Track) -> u64 {
        if a.cyl != b.cyl {
            self.seek
                .ns(a.cyl.abs_diff(b.cyl) as u64)
                .max(self.head_switch_ns)
        } else if a.surface != b.surface {
            self.head_switch_ns
        } else {
            0
        }
    }

    /// Interface transfer of `sectors` at `bus_mb_s` (bytes * 1000 / MB/s = ns).
    #[inline]
    fn bus_ns(&self, sectors: u64) -> u64 {
        (sectors * SECTOR_BYTES * 1000).div_ceil(self.bus_mb_s)
    }

    /// How far the read-ahead of `seg` has got by `now_ns`. Walks track by track from the
    /// read's end: at most `read_ahead_sectors / spt + 1` tracks.
    fn progress(&self, seg: &Segment, now_ns: u64) -> Progress {
        let mut p = Progress {
            read_to: seg.next,
            track: seg.track,
        };
        let mut t = seg.t0_ns;
        while p.read_to < seg.limit {
            let pos = self.geo.locate(p.read_to);
            let track = Track::of(pos);
            let sw = self.switch_ns(p.track, track);
            if t + sw > now_ns {
                break;
            }
            t += sw;
            p.track = track;
            let spt = self.geo.spt(pos);
            let slot = self.geo.slot(pos);
            t += self.geo.wait_for_slot(spt, slot, t);
            let k = (spt - pos.sector).min((seg.limit - p.read_to).min(u32::MAX as u64) as u32);
            let run = self.geo.run_ns(spt, slot, k);
            if t + run > now_ns {
                if t < now_ns {
                    p.read_to += self.geo.sectors_within(spt, slot, now_ns - t, k) as u64;
                }
                break;
            }
            t += run;
            p.read_to += k as u64;
        }
        p
    }

    /// The segment's state at `now_ns` if `io` is a buffer hit, else the head's track then.
    fn lookup(&self, io: &DiskIo, now_ns: u64) -> (bool, Track) {
        match &self.segment {
            None => (false, self.head),
            Some(seg) => {
                let p = self.progress(seg, now_ns);
                let hit = io.op == Op::Read
                    && io.sector >= seg.first
                    && io.sector + io.sectors as u64 <= p.read_to;
                (hit, p.track)
            }
        }
    }

    /// Seek, settle and rotational latency of `io` from track `from`, positioning starting
    /// at `t_ns`.
    fn position(&self, io: &DiskIo, from: Track, t_ns: u64) -> Positioning {
        let start = self.geo.locate(io.sector);
        let to = Track::of(start);
        let mut seek_ns = self.switch_ns(from, to);
        if io.op == Op::Write {
            seek_ns += self.write_settle_ns;
        }
        let spt = self.geo.spt(start);
        let slot = self.geo.slot(start);
        let slot_ns = self.geo.slot_ns(spt, slot as u64);
        let rotation_ns = self.geo.wait_until(slot_ns, t_ns + seek_ns);
        Positioning {
            seek_ns,
            seek_cylinders: from.cyl.abs_diff(to.cyl) as u64,
            rotation_ns,
            start,
            slot,
            slot_ns,
        }
    }

    /// Media transfer of `sectors` from `p.start`, the head on its track and its first sector
    /// (slot `p.slot`) under it at `t_ns`. Returns the end time and the last track.
    fn transfer(&self, p: &Positioning, sectors: u64, mut t_ns: u64) -> (u64, Track) {
        let mut pos = p.start;
        let mut slot = p.slot;
        // The first track's run starts at the angle the positioning waited for.
        let mut slot_ns = p.slot_ns;
        let mut left = sectors;
        let mut track = Track::of(pos);
        // The positioning ended with the first sector under the head: no wait.
        debug_assert_eq!(self.geo.wait_for_slot(self.geo.spt(pos), slot, t_ns), 0);
        loop {
            let spt = self.geo.spt(pos);
            let k = (spt - pos.sector).min(left.min(u32::MAX as u64) as u32);
            debug_assert!(k >= 1, "every track passed transfers a sector");
            debug_assert_eq!(slot_ns, self.geo.slot_ns(spt, slot as u64));
            t_ns += self.geo.slot_ns(spt, slot as u64 + k as u64) - slot_ns;
            left -= k as u64;
            if left == 0 {
                return (t_ns, track);
            }
            // Invariant: the caller keeps the operation within capacity, so a next track
            // exists while sectors are left.
            let next = self.geo.next_track(pos).expect("operation within capacity");
            let next_track = Track::of(next);
            t_ns += self.switch_ns(track, next_track);
            track = next_track;
            pos = next;
            slot = self.geo.slot(pos);
            slot_ns = self.geo.slot_ns(self.geo.spt(pos), slot as u64);
            t_ns += self.geo.wait_until(slot_ns, t_ns);
        }
    }

    fn check(&self, io: &DiskIo) {
        debug_assert!(io.sectors > 0, "empty disk operation");
        debug_assert!(
            io.sector + io.sectors as u64 <= self.geo.capacity_sectors,
            "operation beyond capacity"
        );
    }
}

impl DiskModel for Mechanical {
    fn capacity_sectors(&self) -> u64 {
        self.geo.capacity_sectors
    }

    fn parallelism(&self) -> u32 {
        1
    }

    fn position_of(&self, sector: u64) -> u64 {
        debug_assert!(sector < self.geo.capacity_sectors);
        self.geo
            .locate(sector.min(self.geo.capacity_sectors - 1))
            .cyl as u64
    }

    fn head_position(&self) -> u64 {
        self.head.cyl as u64
    }

    fn positioning_ns(&self, io: &DiskIo, now_ns: u64) -> u64 {
        self.check(io);
        let (hit, from) = self.lookup(io, now_ns);
        if hit {
            return 0;
        }
        let p = self.position(io, from, now_ns + self.overhead_ns);
        p.seek_ns + p.rotation_ns
    }

    fn service(&mut self, io: &DiskIo, now_ns: u64) -> Service {
        self.check(io);
        let (hit, from) = self.lookup(io, now_ns);
        if hit {
            let transfer_ns = self.bus_ns(io.sectors as u64);
            return Service {
                total_ns: (self.overhead_ns + transfer_ns).max(1),
                transfer_ns,
                buffer_hit: true,
                ..Service::default()
            };
        }
        let t_pos = now_ns + self.overhead_ns;
        let p = self.position(io, from, t_pos);
        let t_first = t_pos + p.seek_ns + p.rotation_ns;
        let (t_end, track) = self.transfer(&p, io.sectors as u64, t_first);
        self.head = track;
        let end = io.sector + io.sectors as u64;
        self.segment = (io.op == Op::Read && self.read_ahead_sectors > 0).then(|| Segment {
            first: io.sector,
            next: end,
            limit: end
                .saturating_add(self.read_ahead_sectors)
                .min(self.geo.capacity_sectors),
            t0_ns: t_end,
            track,
        });
        let total_ns = t_end - now_ns;
        debug_assert!(total_ns > 0);
        Service {
            total_ns,
            seek_ns: p.seek_ns,
            rotation_ns: p.rotation_ns,
            transfer_ns: t_end - t_first,
            seek_cylinders: p.seek_cylinders,
            buffer_hit: false,
        }
    }
}

#[cfg(test)]
#[path = "mechanical_tests.rs"]
mod tests;
