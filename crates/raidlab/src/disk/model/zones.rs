//! Geometry of a zoned HDD: which sector is where (cylinder, surface, angle), and the
//! integer arithmetic of rotation.
//!
//! Layout: zones in cylinder order; within a zone, sectors fill a track (surface 0), then the
//! next surface of the same cylinder, then the next cylinder. Cylinders between zones (and
//! after the last zone) are spares and hold no sectors.
//!
//! Angles are measured in sector slots of the track's zone: slot `j` of a track with `spt`
//! sectors passes under the head at `j * period_ns / spt` (rounded down) after each start of
//! revolution; the platter is at angle 0 at time 0. Logical sector `s` of a track sits in slot
//! `(s + skew) mod spt`, where the skew grows by `track_skew` sectors per head switch and
//! `cyl_skew` sectors per cylinder step inside the zone (each zone starts at skew 0). The
//! skews are the switch times rounded up to whole sectors, so that a transfer or a sequential
//! stream crossing a track boundary loses only the switch time, never a revolution (the
//! "ideal skew" real drives are formatted with).

use std::cell::Cell;

/// One zone as configured: cylinders `first_cyl..=last_cyl`, `sectors_per_track` sectors
/// of 512 bytes on each track.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Zone {
    pub first_cyl: u32,
    pub last_cyl: u32,
    pub sectors_per_track: u32,
}

/// A zone with its derived placement.
#[derive(Debug, Clone, Copy)]
pub(super) struct ZoneGeom {
    pub first_lba: u64,
    /// The first sector after the zone (the next zone's `first_lba`).
    pub end_lba: u64,
    pub first_cyl: u32,
    pub last_cyl: u32,
    pub spt: u32,
    pub sectors_per_cyl: u64,
    pub track_skew: u32,
    pub cyl_skew: u32,
}

/// Where a sector is: zone index, cylinder, surface, and logical sector within its track.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Chs {
    pub zone: u32,
    pub cyl: u32,
    pub surface: u32,
    pub sector: u32,
}

/// The placement of every sector of the disk.
#[derive(Debug, Clone)]
pub(super) struct Geometry {
    pub zones: Vec<ZoneGeom>,
    /// The zone the last [`Geometry::locate`] found: tried first, since a workload's sectors
    /// are mostly in a few zones (a cache of the search, not state: answers do not depend on
    /// it).
    hot_zone: Cell<u32>,
    pub surfaces: u32,
    pub capacity_sectors: u64,
    pub period_ns: u64,
}

impl Geometry {
    /// `zones` must be validated (ordered, non-overlapping, spt > 0). `switch_ns` and
    /// `cyl_step_ns` are the head-switch and one-cylinder-step times the skews absorb.
    pub fn new(
        zones: &[Zone],
        surfaces: u32,
        period_ns: u64,
        switch_ns: u64,
        cyl_step_ns: u64,
    ) -> Geometry {
        let mut first_lba = 0u64;
        let zones = zones
            .iter()
            .map(|z| {
                let spt = z.sectors_per_track;
                let sectors_per_cyl = spt as u64 * surfaces as u64;
                // Whole sectors covering the switch: ceil(t * spt / period), kept below spt.
                let skew = |t: u64| {
                    let s = (t as u128 * spt as u128).div_ceil(period_ns as u128);
                    (s % spt as u128) as u32
                };
                let end_lba = first_lba + (z.last_cyl - z.first_cyl + 1) as u64 * sectors_per_cyl;
                let g = ZoneGeom {
                    first_lba,
                    end_lba,
                    first_cyl: z.first_cyl,
                    last_cyl: z.last_cyl,
                    spt,
                    sectors_per_cyl,
                    track_skew: skew(switch_ns),
                    cyl_skew: skew(cyl_step_ns),
                };
                first_lba = end_lba;
                g
            })
            .collect();
        Geometry {
            zones,
            hot_zone: Cell::new(0),
            surfaces,
            capacity_sectors: first_lba,
            period_ns,
        }
    }

    /// Cylinder, surface and sector of `lba` (< capacity).
    #[inline]
    pub fn locate(&self, lba: u64) -> Chs {
        debug_assert!(lba < self.capacity_sectors);
        let hot = self.hot_zone.get() as usize;
        let zi = if (self.zones[hot].first_lba..self.zones[hot].end_lba).contains(&lba) {
            hot
        } else {
            let zi = self.zones.partition_point(|z| z.first_lba <= lba) - 1;
            self.hot_zone.set(zi as u32);
            zi
        };
        debug_assert_eq!(zi, self.zones.partition_point(|z| z.first_lba <= lba) - 1);
        let z = &self.zones[zi];
        let off = lba - z.first_lba;
        let in_cyl = off % z.sectors_per_cyl;
        Chs {
            zone: zi as u32,
            cyl: z.first_cyl + (off / z.sectors_per_cyl) as u32,
            surface: (in_cyl / z.spt as u64) as u32,
            sector: (in_cyl % z.spt as u64) as u32,
        }
    }

    /// Inverse of [`Geometry::locate`].
    #[cfg(test)]
    pub fn lba_of(&self, p: Chs) -> u64 {
        let z = &self.zones[p.zone as usize];
        z.first_lba
            + (p.cyl - z.first_cyl) as u64 * z.sectors_per_cyl
            + p.surface as u64 * z.spt as u64
            + p.sector as u64
    }

    #[inline]
    pub fn spt(&self, p: Chs) -> u32 {
        self.zones[p.zone as usize].spt
    }

    /// The slot (angular position) of `p`'s logical sector.
    #[inline]
    pub fn slot(&self, p: Chs) -> u32 {
        let z = &self.zones[p.zone as usize];
        let cyls = (p.cyl - z.first_cyl) as u64;
        let head_switches = cyls * (self.surfaces as u64 - 1) + p.surface as u64;
        let skew = (head_switches * z.track_skew as u64 + cyls * z.cyl_skew as u64) % z.spt as u64;
        // sector < spt and skew < spt: one subtraction is the modulo.
        debug_assert!(p.sector < z.spt);
        let slot = p.sector as u64 + skew;
        (if slot >= z.spt as u64 {
            slot - z.spt as u64
        } else {
            slot
        }) as u32
    }

    /// Time from the start of a revolution to slot `j` (`j < 2 spt`: a slot of this track or
    /// of the next turn; `j + spt` is exactly one period later).
    #[inline]
    pub fn slot_ns(&self, spt: u32, j: u64) -> u64 {
        // The validated bounds (spt <= 2^16, period <= 60 s at 1 rpm < 2^36) keep j * period
        // below 2^53, so the product and quotient are exact in `u64`.
        debug_assert!(j < 2 * u64::from(spt) && spt <= 1 << 16 && self.period_ns < 1 << 36);
        j * self.period_ns / u64::from(spt)
    }

    /// Wait from `t_ns` until slot `j` (< spt) comes under the head.
    #[inline]
    pub fn wait_for_slot(&self, spt: u32, j: u32, t_ns: u64) -> u64 {
        self.wait_until(self.slot_ns(spt, j as u64), t_ns)
    }

    /// Wait from `t_ns` until the angle reached `target` ns after each start of revolution
    /// (`target < period`, a slot's [`Geometry::slot_ns`]) comes under the head.
    #[inline]
    pub fn wait_until(&self, target: u64, t_ns: u64) -> u64 {
        debug_assert!(target < self.period_ns);
        let phase = t_ns % self.period_ns;
        if target >= phase {
            target - phase
        } else {
            target + self.period_ns - phase
        }
    }

    /// Time to pass `k` sectors starting at slot `j` (k <= spt).
    #[inline]
    pub fn run_ns(&self, spt: u32, j: u32, k: u32) -> u64 {
        self.slot_ns(spt, j as u64 + k as u64) - self.slot_ns(spt, j as u64)
    }

    /// Sectors fully passed within `dt_ns` of the start of slot `j` (capped at `max`).
    #[inline]
    pub fn sectors_within(&self, spt: u32, j: u32, dt_ns: u64, max: u32) -> u32 {
        // Largest x with slot_ns(j + x) <= slot_ns(j) + dt, i.e. floor(xP/spt) <= T
        // <=> x P < (T + 1) spt.
        let t = self.slot_ns(spt, j as u64) as u128 + dt_ns as u128;
        let x = ((t + 1) * spt as u128 - 1) / self.period_ns as u128;
        (x.saturating_sub(j as u128)).min(max as u128) as u32
    }

    /// The first sector of the track after `p`'s (`None` after the last track).
    #[inline]
    pub fn next_track(&self, p: Chs) -> Option<Chs> {
        let z = &self.zones[p.zone as usize];
        if p.surface + 1 < self.surfaces {
            return Some(Chs {
                surface: p.surface + 1,
                sector: 0,
                ..p
            });
        }
        if p.cyl < z.last_cyl {
            return Some(Chs {
                cyl: p.cyl + 1,
                surface: 0,
                sector: 0,
                ..p
            });
        }
        let zi = p.zone as usize + 1;
        self.zones.get(zi).map(|n| Chs {
            zone: zi as u32,
            cyl: n.first_cyl,
            surface: 0,
            sector: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        // Two zones, 2 surfaces, period 1000 ns: zone 0 = cylinders 0..=1 with 10 sectors per
        // track (40 sectors), spare cylinder 2, zone 1 = cylinders 3..=4 with 5 spt (20).
        Geometry::new(
            &[
                Zone {
                    first_cyl: 0,
                    last_cyl: 1,
                    sectors_per_track: 10,
                },
                Zone {
                    first_cyl: 3,
                    last_cyl: 4,
                    sectors_per_track: 5,
                },
            ],
            2,
            1000,
            150,
            250,
        )
    }

    #[test]
    fn locate_round_trips() {
        let g = geo();
        assert_eq!(g.capacity_sectors, 60);
        let c = |zone, cyl, surface, sector| Chs {
            zone,
            cyl,
            surface,
            sector,
        };
        assert_eq!(g.locate(0), c(0, 0, 0, 0));
        assert_eq!(g.locate(13), c(0, 0, 1, 3));
        assert_eq!(g.locate(39), c(0, 1, 1, 9));
        assert_eq!(g.locate(40), c(1, 3, 0, 0));
        assert_eq!(g.locate(59), c(1, 4, 1, 4));
        for lba in 0..60 {
            assert_eq!(g.lba_of(g.locate(lba)), lba);
        }
        assert_eq!(g.next_track(c(0, 1, 1, 9)), Some(c(1, 3, 0, 0)));
        assert_eq!(g.next_track(c(1, 4, 1, 0)), None);
    }

    #[test]
    fn skews_and_slots() {
        let g = geo();
        // Zone 0: a sector passes in 100 ns; head switch 150 ns -> 2 sectors, cylinder step
        // 250 ns -> 3 sectors. Track (cyl 0, surface 1): skew 2; (cyl 1, surface 0): one head
        // switch and one cylinder step before it -> 2 + 3 = 5; (1, 1): 2 + 2 + 3 = 7.
        let z = g.zones[0];
        assert_eq!((z.track_skew, z.cyl_skew), (2, 3));
        let slot = |lba| g.slot(g.locate(lba));
        assert_eq!(slot(0), 0);
        assert_eq!(slot(10), 2);
        assert_eq!(slot(20), 5);
        assert_eq!(slot(30), 7);
        assert_eq!(slot(39), 6); // (9 + 7) mod 10
                                 // Rotation: at t = 1234 the phase is 234; slot 5 is at 500 -> wait 266; slot 1 (100)
                                 // has passed -> wait 866.
        assert_eq!(g.wait_for_slot(10, 5, 1234), 266);
        assert_eq!(g.wait_for_slot(10, 1, 1234), 866);
        assert_eq!(g.run_ns(10, 8, 4), 400);
        // Zone 1 (5 spt, period 1000): slot j at 200 j. 3 sectors pass within 650 ns of slot 1
        // (slots 1..4 end at 200, 400, 600 after it).
        assert_eq!(g.sectors_within(5, 1, 650, 5), 3);
        assert_eq!(g.sectors_within(5, 1, 600, 5), 3);
        assert_eq!(g.sectors_within(5, 1, 599, 5), 2);
        assert_eq!(g.sectors_within(5, 1, 99_999, 4), 4);
    }
}
