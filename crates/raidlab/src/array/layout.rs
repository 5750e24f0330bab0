//! Address maps of RAID-0, 1, 10, 5 and 6, in cache blocks.
//!
//! Every level is described as *rows*: a row is one stripe unit (`bpu` blocks) on every disk,
//! occupying disk blocks `row * bpu .. (row + 1) * bpu` on all disks alike. A row holds
//! `data_disks()` data units ("slots", numbered in logical order) and, for parity levels, one
//! (RAID-5) or two (RAID-6) parity units. Mirrors store one slot per copy set.
//!
//! Parity placement follows Linux md (`raid5_compute_sector`). In md a chunk number `c` is split
//! into the row `c / data_disks` and the slot `c % data_disks`; the parity disk and the disk of
//! each slot then depend only on the row number modulo the disk count:
//!
//! - "left" layouts start parity on the last disk and move it one disk to the left per row;
//!   "right" layouts start it on disk 0 and move it right.
//! - "asymmetric" layouts fill the remaining disks with the row's data in plain disk order,
//!   skipping the parity disk, so slot 0 is always on the lowest non-parity disk.
//! - "symmetric" layouts begin the data on the disk just after parity and wrap around, so
//!   consecutive chunks visit every disk in turn (the reason left-symmetric is md's default:
//!   a sequential read of `n` chunks touches all `n` disks).
//!
//! RAID-6 uses md's level-6 variants of the same four names: P goes where RAID-5 parity would
//! go and Q sits on the disk right after P (wrapping). Symmetric layouts start data just after
//! Q; asymmetric layouts fill the remaining disks in disk order, except that when P is on the
//! last disk Q wraps to disk 0 and data fills disks 1..n-2.

use crate::error::{Error, Result};

/// RAID level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    Raid0,
    Raid1,
    Raid10,
    Raid5,
    Raid6,
}

impl Level {
    /// Every accepted level name, for error messages and docs.
    pub const NAMES: &'static [&'static str] = &["raid0", "raid1", "raid10", "raid5", "raid6"];

    /// Parse a level name as used in configs (`"raid5"`).
    pub fn from_name(name: &str) -> Option<Level> {
        Some(match name {
            "raid0" => Level::Raid0,
            "raid1" => Level::Raid1,
            "raid10" => Level::Raid10,
            "raid5" => Level::Raid5,
            "raid6" => Level::Raid6,
            _ => return None,
        })
    }

    /// The config name of the level.
    pub fn name(self) -> &'static str {
        match self {
            Level::Raid0 => "raid0",
            Level::Raid1 => "raid1",
            Level::Raid10 => "raid10",
            Level::Raid5 => "raid5",
            Level::Raid6 => "raid6",
        }
    }

    /// Parity units per row (0 for RAID-0 and the mirrors).
    pub fn parity_units(self) -> u32 {
        match self {
            Level::Raid5 => 1,
            Level::Raid6 => 2,
            _ => 0,
        }
    }
}

/// Parity placement of RAID-5 and RAID-6 (md's names). Ignored by the other levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    LeftSymmetric,
    LeftAsymmetric,
    RightSymmetric,
    RightAsymmetric,
}

impl Layout {
    /// Every accepted layout name (md's spelling), for error messages and docs.
    pub const NAMES: &'static [&'static str] = &[
        "left-symmetric",
        "left-asymmetric",
        "right-symmetric",
        "right-asymmetric",
    ];

    /// Parse a layout name; md's short forms (`ls`, `la`, `rs`, `ra`) are accepted too.
    pub fn from_name(name: &str) -> Option<Layout> {
        Some(match name {
            "left-symmetric" | "ls" => Layout::LeftSymmetric,
            "left-asymmetric" | "la" => Layout::LeftAsymmetric,
            "right-symmetric" | "rs" => Layout::RightSymmetric,
            "right-asymmetric" | "ra" => Layout::RightAsymmetric,
            _ => return None,
        })
    }

    /// The config name of the layout.
    pub fn name(self) -> &'static str {
        match self {
            Layout::LeftSymmetric => "left-symmetric",
            Layout::LeftAsymmetric => "left-asymmetric",
            Layout::RightSymmetric => "right-symmetric",
            Layout::RightAsymmetric => "right-asymmetric",
        }
    }

    fn is_left(self) -> bool {
        matches!(self, Layout::LeftSymmetric | Layout::LeftAsymmetric)
    }

    fn is_symmetric(self) -> bool {
        matches!(self, Layout::LeftSymmetric | Layout::RightSymmetric)
    }
}

/// Where a logical block lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Location {
    pub disk: u32,
    /// Block number on that disk, in cache blocks.
    pub block: u64,
}

/// What a disk holds in a given row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Data slot `0..data_disks()` of the row (for mirrors: one copy of that slot).
    Data(u32),
    /// The row's P (RAID-5 parity, or RAID-6 P).
    P,
    /// The row's RAID-6 Q syndrome.
    Q,
}

/// The parity disks of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ParityDisks {
    pub p: Option<u32>,
    pub q: Option<u32>,
}

/// The pure address map of an array (no failure state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geometry {
    level: Level,
    layout: Layout,
    disks: u32,
    /// Blocks per stripe unit.
    bpu: u32,
    /// Data slots per row.
    data: u32,
}

/// Upper bound on the member count: keeps per-disk tables small whatever a config says.
pub const MAX_DISKS: u32 = 1024;

impl Geometry {
    /// Check the disk count and stripe unit of `level` and build the map.
    // The workspace declares rust-version 1.80; `is_multiple_of` needs 1.87.
    #[allow(clippy::manual_is_multiple_of)]
    pub fn new(
        level: Level,
        layout: Layout,
        disks: u32,
        stripe_unit_bytes: u64,
        block_size: u32,
    ) -> Result<Geometry> {
        let name = level.name();
        let (min, what) = match level {
            Level::Raid0 => (1, "at least 1"),
            Level::Raid1 => (2, "at least 2"),
            Level::Raid10 => (4, "an even number, at least 4,"),
            Level::Raid5 => (3, "at least 3"),
            Level::Raid6 => (4, "at least 4"),
        };
        if disks < min || (level == Level::Raid10 && disks % 2 != 0) {
            return Err(Error::config(
                "array.disks",
                format!("{name} needs {what} disks, got {disks}"),
            ));
        }
        if disks > MAX_DISKS {
            return Err(Error::config(
                "array.disks",
                format!("at most {MAX_DISKS} disks are supported, got {disks}"),
            ));
        }
        if block_size == 0 {
            return Err(Error::config("array.block_size", "expected > 0, got 0"));
        }
        let bs = u64::from(block_size);
        if stripe_unit_bytes == 0 || stripe_unit_bytes % bs != 0 {
            return Err(Error::config(
                "array.stripe_unit",
                format!(
                    "expected a positive multiple of the block size ({bs} bytes), got {stripe_unit_bytes}"
                ),
            ));
        }
        let bpu = u32::try_from(stripe_unit_bytes / bs).map_err(|_| {
            Error::config(
                "array.stripe_unit",
                format!("expected at most {} blocks per stripe unit", u32::MAX),
            )
        })?;
        let data = match level {
            Level::Raid0 => disks,
            Level::Raid1 => 1,
            Level::Raid10 => disks / 2,
            Level::Raid5 => disks - 1,
            Level::Raid6 => disks - 2,
        };
        Ok(Geometry {
            level,
            layout,
            disks,
            bpu,
            data,
        })
    }

    pub fn level(&self) -> Level {
        self.level
    }
    pub fn layout(&self) -> Layout {
        self.layout
    }
    pub fn disks(&self) -> u32 {
        self.disks
    }
    /// Data slots per row: n (RAID-0), 1 (RAID-1), n/2 (RAID-10), n-1 (RAID-5), n-2 (RAID-6).
    pub fn data_disks(&self) -> u32 {
        self.data
    }
    pub fn blocks_per_stripe_unit(&self) -> u32 {
        self.bpu
    }
    /// Logical (data) blocks per row.
    pub fn blocks_per_stripe(&self) -> u64 {
        u64::from(self.data) * u64::from(self.bpu)
    }

    /// Split `lba` into (row, slot, offset within the unit).
    #[inline]
    pub fn split(&self, lba: u64) -> (u64, u32, u32) {
        let bpu = u64::from(self.bpu);
        let chunk = lba / bpu;
        let off = (lba % bpu) as u32;
        let data = u64::from(self.data);
        (chunk / data, (chunk % data) as u32, off)
    }

    /// The row (stripe) holding `lba`.
    #[inline]
    pub fn stripe_of(&self, lba: u64) -> u64 {
        self.split(lba).0
    }

    /// First disk block of `row` (the same on every disk).
    #[inline]
    pub fn row_block(&self, row: u64) -> u64 {
        // Cannot overflow for rows derived from a u64 lba: row * bpu <= lba / data.
        row.saturating_mul(u64::from(self.bpu))
    }

    /// The P disk of `row` under the md rule (parity levels only).
    #[inline]
    fn p_disk(&self, row: u64) -> u32 {
        let n = self.disks;
        let r = (row % u64::from(n)) as u32;
        if self.layout.is_left() {
            n - 1 - r
        } else {
            r
        }
    }

    /// The parity disks of `row`.
    #[inline]
    pub fn parity_disks(&self, row: u64) -> ParityDisks {
        match self.level {
            Level::Raid5 => ParityDisks {
                p: Some(self.p_disk(row)),
                q: None,
            },
            Level::Raid6 => {
                let p = self.p_disk(row);
                ParityDisks {
                    p: Some(p),
                    q: Some(if p + 1 == self.disks { 0 } else { p + 1 }),
                }
            }
            _ => ParityDisks::default(),
        }
    }

    /// The disk of data `slot` in `row`. For mirrors this is the preferred copy, the one a
    /// healthy read goes to: copies alternate per row (RAID-10 pair members; RAID-1 all `n`
    /// copies in turn), a stateless stand-in for md's nearest-head read balancing that spreads
    /// reads evenly.
    #[inline]
    pub fn data_disk(&self, row: u64, slot: u32) -> u32 {
        debug_assert!(slot < self.data);
        let n = self.disks;
        match self.level {
            Level::Raid0 => slot,
            Level::Raid1 => (row % u64::from(n)) as u32,
            Level::Raid10 => 2 * slot + (row % 2) as u32,
            Level::Raid5 | Level::Raid6 => {
                let p = self.p_disk(row);
                let k = self.level.parity_units(); // disks after P that are not data
                if self.layout.is_symmetric() {
                    (p + k + slot) % n
                } else if self.level == Level::Raid6 && p == n - 1 {
                    // Q wrapped to disk 0: data fills 1..n-2.
                    slot + 1
                } else if slot >= p {
                    slot + k
                } else {
                    slot
                }
            }
        }
    }

    /// The data disk whose chunk Q weights by g^`i` in `row` (md's syndrome order). md sums
    /// Q over the row's disks walking from the disk after Q round the array (from disk 0
    /// when Q is the last disk: `raid6_d0`), skipping P and Q; since P and Q sit on
    /// consecutive disks they are the walk's last two, so the `i`-th data disk of the walk
    /// is `i` disks past its start. For the symmetric layouts this is data slot `i`; the
    /// asymmetric layouts start their data at disk 0 and differ. Without Q (RAID-5) the
    /// order does not matter and this is data slot `i`.
    #[inline]
    pub fn syndrome_disk(&self, row: u64, i: u32) -> u32 {
        debug_assert!(i < self.data);
        match self.parity_disks(row).q {
            Some(q) if self.level == Level::Raid6 => {
                let d0 = if q + 1 == self.disks { 0 } else { q + 1 };
                (d0 + i) % self.disks
            }
            _ => self.data_disk(row, i),
        }
    }

    /// The members of a parity row in the order parity arithmetic takes them: the data in
    /// Q's syndrome order ([`Geometry::syndrome_disk`]), then P, then Q (RAID-5: the data
    /// slots, then P). Empty for levels without parity.
    pub fn parity_order(&self, row: u64) -> impl Iterator<Item = u32> + '_ {
        let par = self.parity_disks(row);
        let data = if par.p.is_some() { self.data } else { 0 };
        (0..data)
            .map(move |i| self.syndrome_disk(row, i))
            .chain(par.p)
            .chain(par.q)
    }

    /// Every copy of data `slot` in `row`, for mirrors (`first..first + count`, step 1), and
    /// the single data disk otherwise.
    #[inline]
    pub fn copies(&self, row: u64, slot: u32) -> (u32, u32) {
        match self.level {
            Level::Raid1 => (0, self.disks),
            Level::Raid10 => (2 * slot, 2),
            _ => (self.data_disk(row, slot), 1),
        }
    }

    /// What `disk` holds in `row` (inverse of [`Geometry::data_disk`] and the parity rule).
    pub fn role(&self, row: u64, disk: u32) -> Role {
        debug_assert!(disk < self.disks);
        let n = self.disks;
        match self.level {
            Level::Raid0 => Role::Data(disk),
            Level::Raid1 => Role::Data(0),
            Level::Raid10 => Role::Data(disk / 2),
            Level::Raid5 | Level::Raid6 => {
                let par = self.parity_disks(row);
                if par.p == Some(disk) {
                    return Role::P;
                }
                if par.q == Some(disk) {
                    return Role::Q;
                }
                let p = self.p_disk(row);
                let k = self.level.parity_units();
                let slot = if self.layout.is_symmetric() {
                    (disk + 2 * n - p - k) % n
                } else if self.level == Level::Raid6 && p == n - 1 {
                    disk - 1
                } else if disk > p {
                    disk - k
                } else {
                    disk
                };
                Role::Data(slot)
            }
        }
    }

    /// Map a logical block to its (preferred) disk and disk block.
    #[inline]
    pub fn locate(&self, lba: u64) -> Location {
        if self.level == Level::Raid1 {
            let row = lba / u64::from(self.bpu);
            return Location {
                disk: (row % u64::from(self.disks)) as u32,
                block: lba,
            };
        }
        let (row, slot, off) = self.split(lba);
        Location {
            disk: self.data_disk(row, slot),
            block: self.row_block(row) + u64::from(off),
        }
    }

    /// The logical block stored at `disk`, `block` (any copy, for mirrors), or `None` for a
    /// parity position or an address beyond the logical space.
    pub fn logical_of(&self, disk: u32, block: u64) -> Option<u64> {
        if disk >= self.disks {
            return None;
        }
        let bpu = u64::from(self.bpu);
        let row = block / bpu;
        let off = block % bpu;
        match self.role(row, disk) {
            Role::Data(slot) => row
                .checked_mul(u64::from(self.data))?
                .checked_add(u64::from(slot))?
                .checked_mul(bpu)?
                .checked_add(off),
            Role::P | Role::Q => None,
        }
    }
}
