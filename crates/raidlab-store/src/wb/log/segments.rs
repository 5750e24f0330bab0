//! The log's segment table in DRAM: every live record (a slab of entries, addressed by the
//! handles the cache holds) and, per segment, its live count and the handles placed in it in
//! log order (what the cleaner walks). Sized once at open: nothing here allocates per put.

use super::super::backup::Handle;
use super::super::format::{RecKind, RecMeta};

/// A live record: what it is and where its data block is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub meta: RecMeta,
    /// Virtual position of the data block, and its CRC (a void must not match it).
    pub pos: u64,
    pub crc: u32,
    /// Segment (physical index) holding it.
    pub seg: u32,
    /// Bumped when the entry is freed, so a stale handle (kept in a segment's list, or by a
    /// buggy caller) never names the entry's next record.
    gen: u32,
    live: bool,
}

#[derive(Debug)]
struct Seg {
    live: u32,
    /// Handles placed here, in log order (records moved away or released stay listed; the
    /// entry's `seg` and `gen` tell).
    handles: Vec<Handle>,
}

#[derive(Debug)]
pub(super) struct Table {
    entries: Vec<Entry>,
    free: Vec<u32>,
    segs: Vec<Seg>,
    live: u64,
}

fn handle(idx: u32, gen: u32) -> Handle {
    (u64::from(gen) << 32) | u64::from(idx)
}

fn split(h: Handle) -> (usize, u32) {
    ((h & 0xffff_ffff) as usize, (h >> 32) as u32)
}

impl Table {
    /// `segments` segments of at most `per_seg` records each: the log never holds more live
    /// records than that, so the slab never grows.
    pub fn new(segments: usize, per_seg: usize) -> Table {
        assert!(segments > 0 && per_seg > 0);
        let n = segments * per_seg;
        assert!(n < u32::MAX as usize, "segment table too large");
        let blank = Entry {
            meta: RecMeta {
                lba: 0,
                seq: 0,
                kind: RecKind::Data,
            },
            pos: 0,
            crc: 0,
            seg: 0,
            gen: 0,
            live: false,
        };
        Table {
            entries: vec![blank; n],
            // Popped from the end: entry 0 first.
            free: (0..n as u32).rev().collect(),
            segs: (0..segments)
                .map(|_| Seg {
                    live: 0,
                    handles: Vec::with_capacity(per_seg),
                })
                .collect(),
            live: 0,
        }
    }

    /// Live records.
    pub fn live(&self) -> u64 {
        self.live
    }

    /// Record `meta` (data CRC `crc`, data block at `pos`) in segment `seg`. `None` when every
    /// entry is taken (the log is full of live records).
    pub fn alloc(&mut self, meta: RecMeta, crc: u32, pos: u64, seg: usize) -> Option<Handle> {
        let idx = self.free.pop()?;
        let e = &mut self.entries[idx as usize];
        assert!(!e.live, "free entry {idx} is live");
        *e = Entry {
            meta,
            pos,
            crc,
            seg: seg as u32,
            gen: e.gen,
            live: true,
        };
        let h = handle(idx, e.gen);
        self.place(h, seg);
        Some(h)
    }

    fn place(&mut self, h: Handle, seg: usize) {
        let s = &mut self.segs[seg];
        assert!(
            s.handles.len() < s.handles.capacity(),
            "segment {seg} overfull"
        );
        s.handles.push(h);
        s.live += 1;
        self.live += 1;
    }

    /// The live record `h`. Panics on a released or unknown handle (a caller bug).
    pub fn entry(&self, h: Handle) -> Entry {
        assert!(self.is_live(h), "log handle {h:#x} is not live");
        self.entries[split(h).0]
    }

    /// Drop record `h`; returns its segment.
    pub fn release(&mut self, h: Handle) -> usize {
        let e = self.entry(h);
        let (idx, _) = split(h);
        let seg = e.seg as usize;
        self.unplace(seg);
        let slot = &mut self.entries[idx];
        slot.live = false;
        slot.gen = slot.gen.wrapping_add(1);
        self.free.push(idx as u32);
        seg
    }

    /// Whether `h` is a live record (a superseded one the cleaner dropped is not).
    pub fn is_live(&self, h: Handle) -> bool {
        let (idx, gen) = split(h);
        self.entries
            .get(idx)
            .is_some_and(|e| e.live && e.gen == gen)
    }

    fn unplace(&mut self, seg: usize) {
        let s = &mut self.segs[seg];
        assert!(
            s.live > 0 && self.live > 0,
            "segment {seg} live count underflow"
        );
        s.live -= 1;
        self.live -= 1;
    }

    /// The cleaner copied `h` forward: it is now version `seq` at `pos` in segment `seg`.
    pub fn relocate(&mut self, h: Handle, seq: u64, crc: u32, pos: u64, seg: usize) {
        let e = self.entry(h);
        assert!(e.seg as usize != seg, "record relocated within its segment");
        self.unplace(e.seg as usize);
        let (idx, _) = split(h);
        let slot = &mut self.entries[idx];
        slot.meta.seq = seq;
        slot.crc = crc;
        slot.pos = pos;
        slot.seg = seg as u32;
        self.place(h, seg);
    }

    /// Live records in segment `seg`.
    pub fn seg_live(&self, seg: usize) -> u32 {
        self.segs[seg].live
    }

    /// Handles ever placed in `seg` since it was last freed.
    pub fn seg_len(&self, seg: usize) -> usize {
        self.segs[seg].handles.len()
    }

    /// The `i`-th handle placed in `seg`, if that record is still live there.
    pub fn live_at(&self, seg: usize, i: usize) -> Option<Handle> {
        let h = *self.segs[seg].handles.get(i)?;
        let (idx, gen) = split(h);
        let e = &self.entries[idx];
        (e.live && e.gen == gen && e.seg as usize == seg).then_some(h)
    }

    /// The tail left `seg`: it holds no live record and is free for the head.
    pub fn free_seg(&mut self, seg: usize) {
        let s = &mut self.segs[seg];
        assert!(s.live == 0, "freeing segment {seg} with {} live", s.live);
        s.handles.clear();
    }

    /// Forget every record (a new epoch); every handle given out so far goes stale.
    pub fn clear(&mut self) {
        self.free.clear();
        for (i, e) in self.entries.iter_mut().enumerate().rev() {
            if e.live {
                e.live = false;
                e.gen = e.gen.wrapping_add(1);
            }
            self.free.push(i as u32);
        }
        for s in &mut self.segs {
            s.live = 0;
            s.handles.clear();
        }
        self.live = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(lba: u64) -> RecMeta {
        RecMeta {
            lba,
            seq: lba,
            kind: RecKind::Data,
        }
    }

    #[test]
    fn handles_go_stale_and_relocation_moves_counts() {
        let mut t = Table::new(2, 3);
        let a = t.alloc(meta(1), 0, 4096, 0).unwrap();
        let b = t.alloc(meta(2), 0, 8192, 0).unwrap();
        assert_eq!((a, b), (0, 1));
        assert_eq!((t.seg_live(0), t.live()), (2, 2));
        t.relocate(a, 5, 9, 20480, 1);
        assert_eq!((t.seg_live(0), t.seg_live(1)), (1, 1));
        assert_eq!(t.live_at(0, 0), None, "moved away");
        assert_eq!(t.live_at(0, 1), Some(b));
        assert_eq!(t.entry(a).meta.seq, 5);
        assert_eq!(t.release(b), 0);
        t.free_seg(0);
        // Entry 1 comes back with a new generation: the old handle stays dead.
        let c = t.alloc(meta(3), 0, 4096, 0).unwrap();
        assert_eq!(c, (1 << 32) | 1);
        assert!(std::panic::catch_unwind(|| t.entry(b)).is_err());
        t.clear();
        assert_eq!(t.live(), 0);
        assert!(std::panic::catch_unwind(|| t.entry(a)).is_err());
    }
}
