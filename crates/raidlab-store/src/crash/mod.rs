//! Crash-consistency testing: record what the store issues to its members, then materialise
//! the states a power loss could leave behind (CrashMonkey, ALICE, dm-log-writes).
//!
//! - [`RecordingMember`] wraps a member and appends every write and every `sync` (fdatasync)
//!   to a shared, globally ordered [`Journal`]. A test adds [`Event::Ack`] markers for the
//!   client-visible returns (a write or a flush came back), in the same order.
//! - [`crash_states`] enumerates crash states over a journal: a cut point (a prefix of the
//!   events), and which of the writes still in flight at the cut reached the media, in which
//!   order. A write is durable once a later `Sync` of its own member precedes the cut.
//! - [`Materialiser`] writes a state onto copies of the members' initial images, so the
//!   ordinary assembly and recovery run on it.
//!
//! The checker of the store's promises is in `check` (tests only); the write-back cache's
//! log (part 2) reuses the recorder and the generator.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::member::Member;

pub mod check;
#[cfg(test)]
mod tests;

/// The media's atomic unit: an in-flight write may land in pieces of this size (a torn
/// write), each piece whole.
pub const SECTOR: u64 = 4096;

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `data` was written at `offset` of `member` (in the page cache or the disk's cache).
    Write {
        member: usize,
        offset: u64,
        data: Vec<u8>,
    },
    /// fdatasync of `member` returned: its earlier writes are durable (a barrier for that
    /// member only).
    Sync { member: usize },
    /// A client-visible call returned (the test's numbering).
    Ack { id: u64 },
}

/// The globally ordered record of a run.
#[derive(Debug, Default)]
pub struct Journal {
    pub events: Vec<Event>,
    /// While false nothing is appended (setup I/O that is not part of the run).
    pub paused: bool,
}

/// A journal shared by the recorders of one run.
pub type SharedJournal = Arc<Mutex<Journal>>;

/// A new, empty journal.
pub fn journal() -> SharedJournal {
    Arc::new(Mutex::new(Journal::default()))
}

fn lock(j: &SharedJournal) -> MutexGuard<'_, Journal> {
    j.lock().unwrap_or_else(|e| e.into_inner())
}

/// Record a client-visible return; returns its event index.
pub fn ack(j: &SharedJournal, id: u64) -> usize {
    let mut g = lock(j);
    g.events.push(Event::Ack { id });
    g.events.len() - 1
}

/// The number of events recorded so far (the index the next one gets).
pub fn position(j: &SharedJournal) -> usize {
    lock(j).events.len()
}

/// A copy of the events recorded so far.
pub fn snapshot(j: &SharedJournal) -> Vec<Event> {
    lock(j).events.clone()
}

/// A member whose writes and syncs are recorded; reads pass through unrecorded.
#[derive(Debug)]
pub struct RecordingMember {
    inner: Arc<dyn Member>,
    member: usize,
    journal: SharedJournal,
}

impl RecordingMember {
    /// Record `inner`'s I/O as member number `member` (an index into the test's images).
    pub fn new(inner: Arc<dyn Member>, member: usize, journal: SharedJournal) -> Self {
        RecordingMember {
            inner,
            member,
            journal,
        }
    }

    /// Wrapped as the controller takes it.
    pub fn wrap(inner: Arc<dyn Member>, member: usize, journal: &SharedJournal) -> Arc<dyn Member> {
        Arc::new(RecordingMember::new(inner, member, journal.clone()))
    }
}

impl Member for RecordingMember {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        // The journal lock is held across the write, so the journal's order is the order in
        // which the writes reached the member (concurrent writers included).
        let mut j = lock(&self.journal);
        self.inner.write_at(buf, offset)?;
        if !j.paused {
            j.events.push(Event::Write {
                member: self.member,
                offset,
                data: buf.to_vec(),
            });
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut j = lock(&self.journal);
        self.inner.sync()?;
        if !j.paused {
            j.events.push(Event::Sync {
                member: self.member,
            });
        }
        Ok(())
    }

    crate::member::forward_identity!(inner);
}

/// A piece of a recorded write: event `event`'s bytes `[start, end)` (relative to the
/// write), which reach the media together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub event: usize,
    pub start: usize,
    pub end: usize,
}

/// One state a crash can leave: the events before `cut` happened; every durable write
/// landed; of the in-flight ones, `landed` reached the media, applied in this order (an
/// earlier write applied after a later one models the device reordering them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashState {
    pub cut: usize,
    pub landed: Vec<Piece>,
    /// How the state was chosen, for messages: "none", "all", "random".
    pub kind: &'static str,
}

/// Per member, the index just past its last `Sync` before `cut` (0: none).
fn barriers(events: &[Event], cut: usize, members: usize) -> Vec<usize> {
    let mut last = vec![0usize; members];
    for (i, e) in events[..cut].iter().enumerate() {
        if let Event::Sync { member } = e {
            last[*member] = i + 1;
        }
    }
    last
}

/// Whether write event `i` of `member` is durable at `cut` (a later sync of its member).
fn durable(i: usize, member: usize, last_sync: &[usize]) -> bool {
    i < last_sync[member]
}

/// The members a journal names (one more than the largest index).
pub fn member_count(events: &[Event]) -> usize {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Write { member, .. } | Event::Sync { member } => Some(*member + 1),
            Event::Ack { .. } => None,
        })
        .max()
        .unwrap_or(0)
}

/// The in-flight writes at `cut`, split into sector-aligned pieces (by member offset).
pub fn in_flight(events: &[Event], cut: usize, members: usize) -> Vec<Piece> {
    let last = barriers(events, cut, members);
    let mut out = Vec::new();
    for (i, e) in events[..cut].iter().enumerate() {
        if let Event::Write {
            member,
            offset,
            data,
        } = e
        {
            if durable(i, *member, &last) {
                continue;
            }
            let end = offset + data.len() as u64;
            let mut at = *offset;
            // Bounded: one piece per sector the write covers.
            while at < end {
                let next = ((at / SECTOR + 1) * SECTOR).min(end);
                out.push(Piece {
                    event: i,
                    start: (at - offset) as usize,
                    end: (next - offset) as usize,
                });
                at = next;
            }
        }
    }
    out
}

/// The cut points worth a crash: the start, just before and just after every barrier and
/// after every client-visible return, and the end.
pub fn cut_points(events: &[Event]) -> Vec<usize> {
    let mut cuts = vec![0, events.len()];
    for (i, e) in events.iter().enumerate() {
        match e {
            Event::Sync { .. } => cuts.extend([i, i + 1]),
            Event::Ack { .. } => cuts.push(i + 1),
            Event::Write { .. } => {}
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Enumerate crash states: at every cut point the state with none of the in-flight writes
/// and the one with all of them (in issue order), then `random_per_cut` random subsets in
/// random orders drawn from `rng` (a seeded generator keeps it deterministic; the caller
/// picks it, so this module needs no RNG crate).
pub fn crash_states(
    events: &[Event],
    random_per_cut: usize,
    rng: &mut dyn FnMut() -> u64,
) -> Vec<CrashState> {
    let members = member_count(events);
    let mut out = Vec::new();
    for cut in cut_points(events) {
        let flying = in_flight(events, cut, members);
        out.push(CrashState {
            cut,
            landed: Vec::new(),
            kind: "none",
        });
        if flying.is_empty() {
            continue;
        }
        out.push(CrashState {
            cut,
            landed: flying.clone(),
            kind: "all",
        });
        for _ in 0..random_per_cut {
            // A landing probability per state, so sparse and dense subsets both occur.
            let p = rng() % 101;
            let mut landed: Vec<Piece> =
                flying.iter().copied().filter(|_| rng() % 100 < p).collect();
            // Fisher-Yates.
            for i in (1..landed.len()).rev() {
                let j = (rng() % (i as u64 + 1)) as usize;
                landed.swap(i, j);
            }
            out.push(CrashState {
                cut,
                landed,
                kind: "random",
            });
        }
    }
    out
}

/// Apply a crash state: every durable write in order, then the landed pieces in the
/// state's order, each as `put(member, offset, bytes)`.
pub fn apply(
    events: &[Event],
    state: &CrashState,
    members: usize,
    put: &mut dyn FnMut(usize, u64, &[u8]),
) {
    let last = barriers(events, state.cut, members);
    for (i, e) in events[..state.cut].iter().enumerate() {
        if let Event::Write {
            member,
            offset,
            data,
        } = e
        {
            if durable(i, *member, &last) {
                put(*member, *offset, data);
            }
        }
    }
    for p in &state.landed {
        if let Event::Write {
            member,
            offset,
            data,
        } = &events[p.event]
        {
            put(*member, offset + p.start as u64, &data[p.start..p.end]);
        }
    }
}

/// The member images of a crash state, from the initial images.
pub fn images(initial: &[Vec<u8>], events: &[Event], state: &CrashState) -> Vec<Vec<u8>> {
    let mut img: Vec<Vec<u8>> = initial.to_vec();
    apply(events, state, initial.len(), &mut |m, at, bytes| {
        let at = at as usize;
        img[m][at..at + bytes.len()].copy_from_slice(bytes);
    });
    img
}

/// Writes crash states onto member files whose initial contents are known.
pub struct Materialiser {
    pub paths: Vec<PathBuf>,
    /// Per file, the byte ranges `[start, end)` that a run or a recovery may write; only
    /// they are kept and rewritten for each state (the rest keeps its initial bytes).
    pub extents: Vec<Vec<(u64, u64)>>,
    /// Per member, per extent: the initial bytes.
    initial: Vec<Vec<Vec<u8>>>,
}

impl Materialiser {
    /// Take the current contents of `paths` within `extents` (the same for every file) as
    /// the initial images.
    pub fn capture(paths: Vec<PathBuf>, extents: Vec<(u64, u64)>) -> io::Result<Self> {
        let each = vec![extents; paths.len()];
        Self::capture_each(paths, each)
    }

    /// As `capture`, with extents of each file's own (a backup file beside the members).
    pub fn capture_each(paths: Vec<PathBuf>, extents: Vec<Vec<(u64, u64)>>) -> io::Result<Self> {
        assert_eq!(paths.len(), extents.len(), "extents for every file");
        let mut initial = Vec::with_capacity(paths.len());
        for (p, ext) in paths.iter().zip(&extents) {
            let f = std::fs::File::open(p)?;
            let mut per = Vec::with_capacity(ext.len());
            for &(s, e) in ext {
                let mut b = vec![0u8; (e - s) as usize];
                f.read_exact_at(&mut b, s)?;
                per.push(b);
            }
            initial.push(per);
        }
        Ok(Materialiser {
            paths,
            extents,
            initial,
        })
    }

    /// Put `state` on the files. A recorded write outside the extents is an error: the
    /// extents would not restore it for the next state.
    pub fn write(&self, events: &[Event], state: &CrashState) -> io::Result<()> {
        let mut img = self.initial.clone();
        let mut outside = None;
        apply(events, state, self.paths.len(), &mut |m, at, bytes| {
            let end = at + bytes.len() as u64;
            let ext = &self.extents[m];
            match ext.iter().position(|&(s, e)| s <= at && end <= e) {
                Some(x) => {
                    let o = (at - ext[x].0) as usize;
                    img[m][x][o..o + bytes.len()].copy_from_slice(bytes);
                }
                None => outside = Some((m, at)),
            }
        });
        if let Some((m, at)) = outside {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("member {m}: a write at {at} lies outside the materialised extents"),
            ));
        }
        for ((path, per), ext) in self.paths.iter().zip(&img).zip(&self.extents) {
            let f = OpenOptions::new().write(true).open(path)?;
            for (&(s, _), bytes) in ext.iter().zip(per) {
                f.write_all_at(bytes, s)?;
            }
        }
        Ok(())
    }
}
