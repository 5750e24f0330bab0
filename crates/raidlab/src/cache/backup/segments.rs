//! RAPID's disk segment table: for every segment of the cache disk a state, a count of valid
//! slots and a slot map (slot -> LBA of the page it holds, or [`EMPTY_SLOT`]). Kept in DRAM
//! in the paper (it can be rebuilt from the hash table); here the source of truth for where
//! segments are and which ones garbage collection should take.
//!
//! Segments are filled append-only (a slot, once written, is only ever invalidated) and are
//! allocated in log order: the next free segment at or after the last one allocated, so a
//! dedicated cache disk sees mostly sequential large writes.
//!
//! INVARIANT (`check`): a segment's valid count equals the non-empty entries of its slot map;
//! a free or retired segment has none.

/// Slot map entry of a slot without a valid page.
pub const EMPTY_SLOT: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegState {
    Free,
    /// Assigned to a segment buffer being filled.
    Filling,
    /// Its buffer (or a GC buffer) is being written.
    Writing,
    /// On the cache disk.
    OnDisk,
    /// Its live pages were copied by a GC whose write is in flight; free when it completes
    /// (until then the old copies on disk are still the backup).
    Reclaiming,
    /// On a data disk that failed under a logical cache disk: never allocated again, and
    /// neither a collection's target nor its victim (`rapid/member.rs`).
    Retired,
}

pub struct Segments {
    slots: u32,
    state: Vec<SegState>,
    valid: Vec<u32>,
    /// Slots filled so far (the append point).
    used: Vec<u32>,
    map: Vec<u64>,
    free: u32,
    /// Where the next allocation starts looking.
    cursor: u32,
}

impl Segments {
    /// `segments` segments of `slots` slots each (both >= 1, validated by the config).
    pub fn new(segments: u32, slots: u32) -> Segments {
        debug_assert!(segments >= 1 && slots >= 1);
        Segments {
            slots,
            state: vec![SegState::Free; segments as usize],
            valid: vec![0; segments as usize],
            used: vec![0; segments as usize],
            map: vec![EMPTY_SLOT; segments as usize * slots as usize],
            free: segments,
            cursor: 0,
        }
    }

    pub fn count(&self) -> u32 {
        self.state.len() as u32
    }

    pub fn slots(&self) -> u32 {
        self.slots
    }

    pub fn free(&self) -> u32 {
        self.free
    }

    pub fn state(&self, seg: u32) -> SegState {
        self.state[seg as usize]
    }

    pub fn valid(&self, seg: u32) -> u32 {
        self.valid[seg as usize]
    }

    pub fn used(&self, seg: u32) -> u32 {
        self.used[seg as usize]
    }

    /// LBA held in `slot` of `seg`, or [`EMPTY_SLOT`].
    pub fn lba(&self, seg: u32, slot: u32) -> u64 {
        self.map[seg as usize * self.slots as usize + slot as usize]
    }

    /// The valid pages of `seg`, in slot order, into `out` (cleared first; failure paths).
    pub fn valid_pages(&self, seg: u32, out: &mut Vec<u64>) {
        out.clear();
        out.extend((0..self.used(seg)).map(|i| self.lba(seg, i)));
        out.retain(|&l| l != EMPTY_SLOT);
    }

    /// Take the next free segment in log order for filling.
    pub fn alloc(&mut self) -> Option<u32> {
        if self.free == 0 {
            return None;
        }
        let n = self.count();
        // Bounded: at most one pass over the table.
        for i in 0..n {
            let s = (self.cursor + i) % n;
            if self.state[s as usize] == SegState::Free {
                self.state[s as usize] = SegState::Filling;
                self.used[s as usize] = 0;
                debug_assert_eq!(self.valid[s as usize], 0);
                self.free -= 1;
                self.cursor = (s + 1) % n;
                return Some(s);
            }
        }
        unreachable!("free count > 0 but no free segment");
    }

    /// Append `lba` to filling segment `seg`; returns its slot.
    #[inline]
    pub fn append(&mut self, seg: u32, lba: u64) -> u32 {
        let s = seg as usize;
        debug_assert!(matches!(
            self.state[s],
            SegState::Filling | SegState::Writing
        ));
        let slot = self.used[s];
        debug_assert!(slot < self.slots, "append to a full segment");
        self.map[s * self.slots as usize + slot as usize] = lba;
        self.used[s] += 1;
        self.valid[s] += 1;
        slot
    }

    pub fn is_full(&self, seg: u32) -> bool {
        self.used[seg as usize] == self.slots
    }

    /// The page in `slot` of `seg` is no longer valid. An on-disk segment left empty is free.
    #[inline]
    pub fn invalidate(&mut self, seg: u32, slot: u32) {
        let s = seg as usize;
        let i = s * self.slots as usize + slot as usize;
        debug_assert!(self.map[i] != EMPTY_SLOT && self.valid[s] > 0);
        self.map[i] = EMPTY_SLOT;
        self.valid[s] -= 1;
        if self.valid[s] == 0 && self.state[s] == SegState::OnDisk {
            self.release(seg);
        }
    }

    fn release(&mut self, seg: u32) {
        let s = seg as usize;
        self.state[s] = SegState::Free;
        self.used[s] = 0;
        self.free += 1;
    }

    /// Its buffer's write was issued.
    pub fn start_write(&mut self, seg: u32) {
        debug_assert_eq!(self.state[seg as usize], SegState::Filling);
        self.state[seg as usize] = SegState::Writing;
    }

    /// Its write completed: on disk, or free if every page was invalidated meanwhile.
    pub fn written(&mut self, seg: u32) {
        debug_assert_eq!(self.state[seg as usize], SegState::Writing);
        if self.valid[seg as usize] == 0 {
            self.release(seg);
        } else {
            self.state[seg as usize] = SegState::OnDisk;
        }
    }

    /// Garbage collection's victims: on-disk segments with the fewest valid slots (ties: lower
    /// number), as many as fit together in one segment; `out` is cleared first. Fewer than two
    /// victims would gain nothing, so then `out` is left empty.
    pub fn gc_victims(&mut self, out: &mut Vec<u32>) {
        out.clear();
        out.extend((0..self.count()).filter(|&s| self.state[s as usize] == SegState::OnDisk));
        out.sort_by_key(|&s| (self.valid[s as usize], s));
        let mut total = 0;
        let mut take = 0;
        for &s in out.iter() {
            let v = self.valid[s as usize];
            if total + v > self.slots {
                break;
            }
            total += v;
            take += 1;
        }
        out.truncate(take);
        if out.len() < 2 {
            out.clear();
        }
    }

    /// GC copied the live pages of on-disk `seg` elsewhere: its map is cleared now and the
    /// segment is reclaimed when the GC write completes ([`Segments::reclaimed`]).
    pub fn reclaim(&mut self, seg: u32) {
        let s = seg as usize;
        debug_assert_eq!(self.state[s], SegState::OnDisk);
        let base = s * self.slots as usize;
        self.map[base..base + self.slots as usize].fill(EMPTY_SLOT);
        self.valid[s] = 0;
        self.state[s] = SegState::Reclaiming;
    }

    pub fn reclaimed(&mut self, seg: u32) {
        debug_assert_eq!(self.state[seg as usize], SegState::Reclaiming);
        self.release(seg);
    }

    /// Take `seg` out of service for good (its disk failed): its slots are emptied (the
    /// caller has dealt with the pages they held) and it is never allocated again.
    pub fn retire(&mut self, seg: u32) {
        let s = seg as usize;
        if self.state[s] == SegState::Free {
            self.free -= 1;
        }
        let base = s * self.slots as usize;
        self.map[base..base + self.slots as usize].fill(EMPTY_SLOT);
        self.valid[s] = 0;
        self.used[s] = 0;
        self.state[s] = SegState::Retired;
    }

    /// Segments retired so far (tests).
    pub fn retired(&self) -> u32 {
        self.state
            .iter()
            .filter(|&&st| st == SegState::Retired)
            .count() as u32
    }

    /// Valid counts against slot maps, and the free count (tests).
    pub fn check(&self) -> Result<(), String> {
        let mut free = 0;
        for s in 0..self.count() {
            let base = s as usize * self.slots as usize;
            let live = self.map[base..base + self.slots as usize]
                .iter()
                .filter(|&&l| l != EMPTY_SLOT)
                .count() as u32;
            if live != self.valid[s as usize] {
                return Err(format!(
                    "segment {s}: valid count {} but {live} slots mapped",
                    self.valid[s as usize]
                ));
            }
            match self.state[s as usize] {
                SegState::Free | SegState::Retired if live != 0 => {
                    return Err(format!("free or retired segment {s} maps {live} slots"));
                }
                SegState::Free => free += 1,
                _ => {}
            }
        }
        if free != self.free {
            return Err(format!("free count {} but {free} free", self.free));
        }
        Ok(())
    }
}
