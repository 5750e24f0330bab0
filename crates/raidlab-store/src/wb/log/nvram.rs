//! RAPID-Cache's NVRAM segment buffers in front of the log's legs (`--log-nvram`).
//!
//! A file (tmpfs emulates NVRAM: memory speed, no model disk time) holds N slots, each a
//! header block (`slot.rs`) and one segment image. When the log's head enters a segment, a
//! free slot is assigned to it (its header written, state staged); every batch of that
//! segment is written into the slot, and a group commit syncs the NVRAM file instead of
//! the leg. When the head enters the next segment the slot is sealed and queued to its
//! leg's drainer thread, which writes the whole image to the leg (through the leg's
//! member, so a disk-timed member charges model disk time, in the foreground class as the
//! log's own writes), syncs the leg, then rewrites the header as free and syncs the NVRAM
//! file; only then may the slot be assigned again. A writer whose segment needs a slot
//! while every slot is staged waits for a drain (RAPID's stall). One drainer per leg keeps
//! a leg's segment writes in sealing order, so an older lap never lands after a newer one.
//!
//! A released image's void write (`LogBackup::release_images`) to a segment that still
//! has a slot goes to the slot, so a replay cannot bring the image back; if the drainer is
//! copying the slot at that moment it rewrites the void on the leg after its copy
//! (`redo`), and once the copy is done the void goes to the leg as well (and the leg is
//! synced by the next commit).
//!
//! Durability. A batch is acknowledged after the NVRAM sync that follows its write to the
//! slot, and the slot's staged header was written before that batch, so an acknowledged
//! batch is durable in a slot whose header is valid and staged, or (once the header says
//! free) on its leg: the free header is written only after the leg's copy is synced.
//! Recovery (`replay`) writes every staged slot's image onto its leg, oldest assignment
//! first, syncs the legs, marks the slots free, and only then opens the log, so the log's
//! own rules (the chain of batch headers, the superblock's tail) see the legs as if every
//! batch had been written there directly. A header that fails to decode (torn, blank, bad
//! CRC) is ignored: a header is written only when its slot holds nothing unacknowledged
//! that is not also on a synced leg (at assignment, the slot's previous image is on its
//! leg and its free header synced; at release, the image is on its synced leg), so no
//! acknowledged batch depends on a header write that a crash could tear. Stale bytes past
//! the last batch of a slot are an older segment's; the log's headers name their own
//! position and epoch, so a scan never takes them for batches. A valid staged header that
//! names another array or a place outside the log is not a crash state: recovery refuses
//! it with an error naming the NVRAM file.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;

use super::geometry::Leg;
use super::slot::{SlotHeader, SlotState, SLOT_HEADER_BLOCK};
use crate::member::Member;
use crate::sync::{thread, Condvar, Mutex, MutexGuard};

mod replay;
pub use replay::{replay, NvramReplay};

/// Slots when `--log-nvram-slots` is not given (the RAPID experiment's segment buffers).
pub const NVRAM_SLOTS_DEFAULT: u32 = 4;
/// Most slots.
pub const NVRAM_SLOTS_MAX: u32 = 256;

/// Bytes an NVRAM file of `slots` slots of `seg`-byte segments needs.
pub fn nvram_bytes(slots: u32, seg: u64) -> u64 {
    slot_offset(u64::from(slots), seg)
}

/// Where slot `i` (its header block, then its segment image) starts in the NVRAM file.
fn slot_offset(i: u64, seg: u64) -> u64 {
    i * (SLOT_HEADER_BLOCK + seg)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    Free,
    /// The head's segment: batches are written here.
    Open,
    /// Queued to its leg's drainer.
    Sealed,
    /// The drainer is copying it to the leg.
    Draining,
    /// Copied to the leg; the leg's sync and the free header are pending.
    Drained,
}

#[derive(Debug)]
struct Slot {
    state: Use,
    pos: u64,
    leg: usize,
    leg_off: u64,
    /// Void blocks written while the drainer copied the slot: (offset in the segment, bytes).
    redo: Vec<(u64, Vec<u8>)>,
}

#[derive(Debug, Default)]
struct State {
    slots: Vec<Slot>,
    /// Per leg, its sealed slots in sealing order.
    queues: Vec<VecDeque<usize>>,
    next_generation: u64,
    failed: Option<String>,
    stop: bool,
    /// Segments that waited for a free slot, and slots drained.
    stalls: u64,
    drained: u64,
    /// Voids a drainer wrote again on the leg after its copy (`redo`).
    redo_writes: u64,
}

#[derive(Debug)]
struct Shared {
    dev: Arc<dyn Member>,
    legs: Vec<Arc<dyn Member>>,
    seg: u64,
    uuid: [u8; 16],
    state: Mutex<State>,
    /// A slot became free, or a drainer failed.
    freed: Condvar,
    /// A slot was sealed, or stop.
    work: Condvar,
}

/// The NVRAM slots and their drainers (stopped and joined on drop).
#[derive(Debug)]
pub(super) struct Nvram {
    sh: Arc<Shared>,
    threads: Vec<thread::JoinHandle<()>>,
    drain: Drain,
}

/// Who copies sealed slots to their legs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// A drainer thread per leg (`serve`).
    Threads,
    /// Nobody in the background: a writer that needs a slot drains the oldest sealed one
    /// itself, and a test may drain one at any point (`LogBackup::nvram_drain_step`). One
    /// thread then does everything in an order its seed fixes, so a crash test's states are
    /// the same on every run (the drainers' races with voids are left to the threaded
    /// tests and the scheduled ones).
    Inline,
}

/// NVRAM counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NvramStats {
    pub slots: u64,
    pub stalls: u64,
    pub drained: u64,
    /// Voids written to a leg again after the drainer's copy of their slot.
    pub redo_writes: u64,
}

fn free_header(uuid: [u8; 16]) -> Vec<u8> {
    SlotHeader {
        state: SlotState::Free,
        uuid,
        generation: 0,
        leg: 0,
        leg_offset: 0,
        pos: 0,
        len: 0,
    }
    .encode()
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn slot_off(&self, i: usize) -> u64 {
        slot_offset(i as u64, self.seg)
    }

    fn seg_start(&self, pos: u64) -> u64 {
        pos - pos % self.seg
    }

    /// The slot holding the segment of `pos` (any state but free).
    fn find(&self, st: &State, pos: u64) -> Option<usize> {
        let start = self.seg_start(pos);
        st.slots
            .iter()
            .position(|s| s.state != Use::Free && s.pos == start)
    }

    /// A drainer's failure (on `dev`): the backup is lost, waiters wake to the error.
    fn fail(&self, dev: &dyn Member, e: io::Error, what: &str) {
        let mut st = self.lock();
        st.failed
            .get_or_insert_with(|| format!("{}: {what}: {e}", dev.path()));
        drop(st);
        self.freed.notify_all();
    }

    /// Leg `leg`'s drainer: copy each sealed slot to the leg, sync it, free the slot.
    fn drain(&self, leg: usize) {
        let mut image = vec![0u8; self.seg as usize];
        while let Some((i, leg_off)) = self.next_sealed(leg, true) {
            if self.copy_out(leg, i, leg_off, &mut image).is_err() {
                return;
            }
        }
    }

    /// Take leg `leg`'s oldest sealed slot for copying (marked draining); `None` when the
    /// NVRAM stops or failed, or (unless `block`) when none is sealed.
    fn next_sealed(&self, leg: usize, block: bool) -> Option<(usize, u64)> {
        let mut st = self.lock();
        let i = loop {
            if st.stop || st.failed.is_some() {
                return None;
            }
            if let Some(i) = st.queues[leg].pop_front() {
                break i;
            }
            if !block {
                return None;
            }
            st = self.work.wait(st).unwrap_or_else(|e| e.into_inner());
        };
        // From here a void written to the slot is also queued for the leg.
        st.slots[i].state = Use::Draining;
        Some((i, st.slots[i].leg_off))
    }

    /// Copy slot `i` (taken by `next_sealed`) to leg `leg` at `leg_off`, sync the leg, and
    /// free the slot. `Err` after a failure (recorded: the backup is lost).
    fn copy_out(&self, leg: usize, i: usize, leg_off: u64, image: &mut [u8]) -> Result<(), ()> {
        let dev = &self.legs[leg];
        let at = self.slot_off(i) + SLOT_HEADER_BLOCK;
        if let Err(e) = self.dev.read_at(image, at) {
            self.fail(&*self.dev, e, "reading a slot");
            return Err(());
        }
        if let Err(e) = dev.write_at(image, leg_off) {
            self.fail(&**dev, e, "writing a segment to its leg");
            return Err(());
        }
        // Bounded: each pass takes the voids written meanwhile, and the slot's segment
        // holds finitely many blocks to void (a void is written once per record).
        loop {
            let redo = {
                let mut st = self.lock();
                if st.slots[i].redo.is_empty() {
                    st.slots[i].state = Use::Drained;
                    break;
                }
                st.redo_writes += st.slots[i].redo.len() as u64;
                std::mem::take(&mut st.slots[i].redo)
            };
            for (off, b) in redo {
                if let Err(e) = dev.write_at(&b, leg_off + off) {
                    self.fail(&**dev, e, "writing a void to its leg");
                    return Err(());
                }
            }
        }
        if let Err(e) = dev.sync() {
            self.fail(&**dev, e, "syncing a leg");
            return Err(());
        }
        let r = self
            .dev
            .write_at(&free_header(self.uuid), self.slot_off(i))
            .and_then(|()| self.dev.sync());
        if let Err(e) = r {
            self.fail(&*self.dev, e, "freeing a slot");
            return Err(());
        }
        let mut st = self.lock();
        st.slots[i].state = Use::Free;
        st.drained += 1;
        drop(st);
        self.freed.notify_all();
        Ok(())
    }

    /// Drain one sealed slot now, in the caller's thread (the first leg with one queued).
    /// False when none is sealed (or the NVRAM failed).
    fn drain_one_inline(&self) -> bool {
        let mut image = vec![0u8; self.seg as usize];
        for leg in 0..self.legs.len() {
            if let Some((i, leg_off)) = self.next_sealed(leg, false) {
                let _ = self.copy_out(leg, i, leg_off, &mut image);
                return true;
            }
        }
        false
    }
}

impl Nvram {
    /// Take `dev` as the NVRAM of a log on `legs` with `seg`-byte segments: every slot is
    /// marked free (whatever an earlier run left was replayed before this), then synced.
    pub fn create(
        dev: Arc<dyn Member>,
        legs: &[Leg],
        seg: u64,
        uuid: [u8; 16],
        slots: u32,
        drain: Drain,
    ) -> Result<Nvram, raidlab::Error> {
        let bad = |msg: String| raidlab::Error::Store {
            path: dev.path().to_string(),
            msg,
        };
        if slots == 0 || slots > NVRAM_SLOTS_MAX {
            return Err(raidlab::Error::config(
                "--log-nvram-slots",
                format!("expected 1 to {NVRAM_SLOTS_MAX}, got {slots}"),
            ));
        }
        let need = nvram_bytes(slots, seg);
        if dev.len_bytes() < need {
            return Err(bad(format!(
                "{} bytes is too small for {slots} NVRAM slots of {seg}-byte segments (needs {need})",
                dev.len_bytes()
            )));
        }
        let sh = Shared {
            dev: dev.clone(),
            legs: legs.iter().map(|l| l.0.clone()).collect(),
            seg,
            uuid,
            state: Mutex::new(State {
                slots: (0..slots)
                    .map(|_| Slot {
                        state: Use::Free,
                        pos: 0,
                        leg: 0,
                        leg_off: 0,
                        redo: Vec::new(),
                    })
                    .collect(),
                queues: vec![VecDeque::new(); legs.len()],
                // Generations only order slots of one run (recovery frees every slot
                // before a new run assigns one).
                next_generation: 1,
                ..State::default()
            }),
            freed: Condvar::new(),
            work: Condvar::new(),
        };
        let free = free_header(uuid);
        for i in 0..slots as usize {
            dev.write_at(&free, sh.slot_off(i))
                .map_err(|e| bad(format!("writing an NVRAM slot header: {e}")))?;
        }
        dev.sync()
            .map_err(|e| bad(format!("syncing the NVRAM: {e}")))?;
        let sh = Arc::new(sh);
        let threads = match drain {
            Drain::Threads => (0..legs.len())
                .map(|leg| {
                    let sh = sh.clone();
                    thread::spawn(move || sh.drain(leg))
                })
                .collect(),
            Drain::Inline => Vec::new(),
        };
        Ok(Nvram { sh, threads, drain })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.sh.lock()
    }

    pub fn path(&self) -> &str {
        self.sh.dev.path()
    }

    /// The error that lost the NVRAM's backup, if any.
    pub fn failed(&self) -> Option<String> {
        self.lock().failed.clone()
    }

    fn seal_open(&self, st: &mut State) {
        if let Some(i) = st.slots.iter().position(|s| s.state == Use::Open) {
            st.slots[i].state = Use::Sealed;
            let leg = st.slots[i].leg;
            st.queues[leg].push_back(i);
            self.sh.work.notify_all();
        }
    }

    /// The head leaves its segment without entering another (a reset): seal its slot.
    pub fn seal(&self) {
        let mut st = self.lock();
        self.seal_open(&mut st);
    }

    /// The head enters the segment at virtual position `pos` (on leg `leg` at `leg_off`):
    /// seal the head's slot and assign a free one, waiting for a drain if none is free.
    pub fn enter(&self, pos: u64, leg: usize, leg_off: u64) -> io::Result<()> {
        let mut st = self.lock();
        self.seal_open(&mut st);
        let mut waited = false;
        let i = loop {
            if let Some(m) = &st.failed {
                return Err(io::Error::other(m.clone()));
            }
            if let Some(i) = st.slots.iter().position(|s| s.state == Use::Free) {
                break i;
            }
            if !waited {
                st.stalls += 1;
                waited = true;
            }
            if self.drain == Drain::Inline {
                drop(st);
                if !self.sh.drain_one_inline() {
                    return Err(io::Error::other(format!(
                        "{}: no NVRAM slot is free or sealed",
                        self.path()
                    )));
                }
                st = self.lock();
                continue;
            }
            st = self.sh.freed.wait(st).unwrap_or_else(|e| e.into_inner());
        };
        let generation = st.next_generation;
        st.next_generation += 1;
        let h = SlotHeader {
            state: SlotState::Staged,
            uuid: self.sh.uuid,
            generation,
            leg: leg as u32,
            leg_offset: leg_off,
            pos,
            len: self.sh.seg,
        };
        // Synced with the segment's first batch, by the commit that acknowledges it.
        self.sh.dev.write_at(&h.encode(), self.sh.slot_off(i))?;
        st.slots[i] = Slot {
            state: Use::Open,
            pos,
            leg,
            leg_off,
            redo: Vec::new(),
        };
        Ok(())
    }

    /// Write `b` at virtual position `pos` of the head's segment.
    pub fn write(&self, pos: u64, b: &[u8]) -> io::Result<()> {
        let st = self.lock();
        match self.sh.find(&st, pos) {
            Some(i) if st.slots[i].state == Use::Open => self.sh.dev.write_at(
                b,
                self.sh.slot_off(i) + SLOT_HEADER_BLOCK + pos % self.sh.seg,
            ),
            _ => Err(io::Error::other(format!(
                "{}: no open NVRAM slot for log position {pos}",
                self.path()
            ))),
        }
    }

    /// Write the void block `b` at `pos` into the slot holding its segment, if one does;
    /// true when the caller must also write it to the leg (no slot, or the slot's copy
    /// already reached the leg).
    pub fn void(&self, pos: u64, b: &[u8]) -> io::Result<bool> {
        let mut st = self.lock();
        let Some(i) = self.sh.find(&st, pos) else {
            return Ok(true);
        };
        let off = pos % self.sh.seg;
        self.sh
            .dev
            .write_at(b, self.sh.slot_off(i) + SLOT_HEADER_BLOCK + off)?;
        Ok(match st.slots[i].state {
            Use::Draining => {
                st.slots[i].redo.push((off, b.to_vec()));
                false
            }
            Use::Drained => true,
            _ => false,
        })
    }

    /// Read `buf` at virtual position `pos` from the slot holding its segment; false when
    /// no slot does (the leg holds it).
    pub fn read(&self, pos: u64, buf: &mut [u8]) -> io::Result<bool> {
        let st = self.lock();
        match self.sh.find(&st, pos) {
            Some(i) => {
                let at = self.sh.slot_off(i) + SLOT_HEADER_BLOCK + pos % self.sh.seg;
                self.sh.dev.read_at(buf, at)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Make every slot write so far durable.
    pub fn sync(&self) -> io::Result<()> {
        self.sh.dev.sync()
    }

    pub fn stats(&self) -> NvramStats {
        let st = self.lock();
        NvramStats {
            slots: st.slots.len() as u64,
            stalls: st.stalls,
            drained: st.drained,
            redo_writes: st.redo_writes,
        }
    }

    /// Drain one sealed slot in the caller's thread (`Drain::Inline`; tests); false when
    /// none is sealed.
    #[cfg(test)]
    pub fn drain_step(&self) -> bool {
        self.sh.drain_one_inline()
    }

    /// Wait until every sealed slot is drained (tests); false if a drainer failed.
    #[cfg(test)]
    pub fn wait_drained(&self) -> bool {
        // Bounded: each step frees a sealed slot, and nothing seals one meanwhile.
        while self.drain == Drain::Inline && self.sh.drain_one_inline() {}
        let mut st = self.lock();
        loop {
            if st.failed.is_some() {
                return false;
            }
            if st
                .slots
                .iter()
                .all(|s| matches!(s.state, Use::Free | Use::Open))
            {
                return true;
            }
            st = self.sh.freed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Nvram {
    /// Stop the drainers (each finishes the copy it is making); sealed slots left are
    /// replayed by the next start.
    fn drop(&mut self) {
        self.lock().stop = true;
        self.sh.work.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
