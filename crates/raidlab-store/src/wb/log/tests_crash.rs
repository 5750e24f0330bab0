//! Crash consistency: record a run's writes and syncs on a 2-leg log (wrapping laps, the
//! cleaner copying, tail superblocks, image voids), then open and scan every crash state
//! the recorder's generator makes (cuts at every barrier and return, in-flight writes
//! landing torn, reordered, or not at all).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::super::backup::{Backup, LiveData, Scan};
use super::super::format::{RecKind, RecMeta, SUPERS_BYTES};
use super::tests::image;
use super::*;
use crate::crash::{self, RecordingMember};
use crate::member::{MemMember, Member};

pub(super) const SEG: u64 = 16 << 10;
pub(super) const UUID: [u8; 16] = [3; 16];
const PAGES: u64 = 6;
/// Image records use their own page numbers.
const IMAGE_LBA: u64 = 1000;

pub(super) fn page(lba: u64, seq: u64) -> Vec<u8> {
    let mut b = vec![(seq as u8).wrapping_mul(31); BLOCK];
    b[..8].copy_from_slice(&lba.to_le_bytes());
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b
}

#[derive(Default)]
pub(super) struct Cache(BTreeMap<u64, (u64, Vec<u8>)>);

impl LiveData for Cache {
    fn newest(&self, lba: u64) -> Option<(u64, &[u8])> {
        self.0.get(&lba).map(|(s, d)| (*s, d.as_slice()))
    }
}

/// What recovery must find after an acknowledgement: per page, the oldest version a scan
/// may return as its newest, and whether it may return none (the members hold it); and the
/// images whose release was acknowledged (never to be seen again).
#[derive(Clone, Default)]
pub(super) struct Promise {
    floor: BTreeMap<u64, (u64, bool)>,
    voided: Vec<u64>,
}

pub(super) struct Run {
    pub(super) log: LogBackup,
    journal: crash::SharedJournal,
    cache: Cache,
    /// Per page, its unreleased records (seq, handle); the last one is the newest.
    recs: BTreeMap<u64, Vec<(u64, Handle)>>,
    promise: Promise,
    /// (event index of the acknowledgement, what it promised).
    acks: Vec<(usize, Promise)>,
    seq: u64,
    pending: usize,
    /// Drain a sealed NVRAM slot at random steps (an NVRAM with `Drain::Inline`).
    pub(super) nvram_drains: bool,
}

impl Run {
    pub(super) fn new(log: LogBackup, journal: &crash::SharedJournal) -> Run {
        Run {
            log,
            journal: journal.clone(),
            cache: Cache::default(),
            recs: BTreeMap::new(),
            promise: Promise::default(),
            acks: Vec::new(),
            seq: 0,
            pending: 0,
            nvram_drains: false,
        }
    }

    fn ack(&mut self) {
        let at = crash::ack(&self.journal, self.acks.len() as u64);
        self.acks.push((at, self.promise.clone()));
    }

    pub(super) fn put(&mut self, lba: u64) {
        self.seq += 1;
        self.cache.0.insert(lba, (self.seq, page(lba, self.seq)));
        let meta = RecMeta {
            lba,
            seq: self.seq,
            kind: RecKind::Data,
        };
        let h = self
            .log
            .put(meta, &page(lba, self.seq), &self.cache)
            .unwrap();
        self.recs.entry(lba).or_default().push((self.seq, h));
        self.pending += 1;
    }

    /// Commit, acknowledge, then release the versions the commit superseded.
    pub(super) fn commit(&mut self) {
        self.log.commit().unwrap();
        for (lba, rs) in &self.recs {
            let newest = rs.last().expect("a record").0;
            self.promise.floor.insert(*lba, (newest, false));
        }
        self.pending = 0;
        self.ack();
        for rs in self.recs.values_mut() {
            let keep = rs.pop().expect("a record");
            for (_, h) in rs.drain(..) {
                self.log.release(h, true);
            }
            rs.push(keep);
        }
    }

    /// The page's newest version reached the members (synced): release its records.
    pub(super) fn destage(&mut self, lba: u64) {
        let Some(rs) = self.recs.remove(&lba) else {
            return;
        };
        for (i, (_, h)) in rs.iter().enumerate() {
            self.log.release(*h, i + 1 < rs.len());
        }
        let (seq, _) = self.cache.0.remove(&lba).expect("dirty");
        self.promise.floor.insert(lba, (seq, true));
        self.ack();
    }

    pub(super) fn image(&mut self, n: u64) {
        self.seq += 1;
        let seq = self.seq;
        let h = self
            .log
            .put(
                image(IMAGE_LBA + n, seq),
                &page(IMAGE_LBA + n, seq),
                &self.cache,
            )
            .unwrap();
        self.commit();
        self.log.release_images(&[h]).unwrap();
        // The void is durable with the next commit.
        self.commit();
        self.promise.voided.push(seq);
        self.ack();
    }
}

#[test]
fn every_crash_state_recovers_every_acknowledged_write() {
    let region = SUPERS_BYTES + 4 * SEG;
    let mems: Vec<Arc<MemMember>> = (0..2)
        .map(|i| Arc::new(MemMember::new(&format!("m{i}"), region)))
        .collect();
    let plain: Vec<Leg> = mems
        .iter()
        .map(|m| (m.clone() as Arc<dyn Member>, 0, region))
        .collect();
    LogBackup::create(plain, UUID, SEG, 8).unwrap();
    let initial: Vec<Vec<u8>> = mems.iter().map(|m| m.contents()).collect();
    let journal = crash::journal();
    let log = open_recorded(&mems, region, &journal);
    let mut run = Run::new(log, &journal);
    let mut rng = xorshift(0x9e37_79b9_7f4a_7c15);
    run.drive(220, &mut rng);
    let st = run.log.stats();
    assert!(st.gc_segments > 0 && st.gc_records > 0, "{st:?}");
    assert!(
        st.release_entries > 0 && st.image_void_leg_writes > 0,
        "images released both ways (a release entry, a void in place): {st:?}"
    );
    assert!(
        run.log.lock().head > 2 * run.log.geo.log_bytes(),
        "two laps"
    );

    let events = crash::snapshot(&journal);
    let states = crash::crash_states(&events, 2, &mut rng);
    assert!(states.len() > 500, "{} states", states.len());
    for state in &states {
        let imgs = crash::images(&initial, &events, state);
        let legs: Vec<Leg> = imgs
            .iter()
            .enumerate()
            .map(|(i, img)| {
                let m = MemMember::new(&format!("m{i}"), region);
                m.write_at(img, 0).unwrap();
                (Arc::new(m) as Arc<dyn Member>, 0, region)
            })
            .collect();
        let scan = LogBackup::open(legs, UUID).unwrap().scan().unwrap();
        run.check(state, &scan);
    }
}

/// A seeded xorshift generator.
/// The log on `mems` (regions of `region` bytes at 0), each leg recording its writes and
/// syncs into `journal` (leg i as member i), opened and reset for new records.
pub(super) fn open_recorded(
    mems: &[Arc<MemMember>],
    region: u64,
    journal: &crash::SharedJournal,
) -> LogBackup {
    let legs: Vec<Leg> = mems
        .iter()
        .enumerate()
        .map(|(i, m)| (RecordingMember::wrap(m.clone(), i, journal), 0, region))
        .collect();
    let log = LogBackup::open(legs, UUID).unwrap();
    log.reset().unwrap();
    log
}

pub(super) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

impl Run {
    /// `steps` random puts, commits, destages and images, then a last commit.
    pub(super) fn drive(&mut self, steps: usize, rng: &mut dyn FnMut() -> u64) {
        for _ in 0..steps {
            match rng() % 12 {
                0..=6 => self.put(rng() % PAGES),
                7..=8 => self.commit(),
                9 | 10 if self.pending == 0 => self.destage(rng() % PAGES),
                11 => self.image(rng() % 3),
                _ => {}
            }
            if self.pending >= 4 {
                self.commit();
            }
            if self.nvram_drains && rng().is_multiple_of(4) {
                self.log.nvram_drain_step();
            }
        }
        self.commit();
    }

    /// The scan of crash state `state` keeps every promise acknowledged before its cut.
    pub(super) fn check(&self, state: &crash::CrashState, scan: &Scan) {
        let run = self;
        let promise = run
            .acks
            .iter()
            .rev()
            .find(|(at, _)| *at < state.cut)
            .map(|(_, p)| p.clone())
            .unwrap_or_default();
        let mut newest: BTreeMap<u64, u64> = BTreeMap::new();
        for f in &scan.records {
            assert_eq!(f.data, page(f.meta.lba, f.meta.seq), "{state:?}");
            match f.meta.kind {
                RecKind::Data => {
                    let e = newest.entry(f.meta.lba).or_insert(0);
                    *e = (*e).max(f.meta.seq);
                }
                RecKind::Release => panic!("a scan returned a release entry: {state:?}"),
                RecKind::Image | RecKind::Plan | RecKind::Parity => assert!(
                    !promise.voided.contains(&f.meta.seq),
                    "released image {} replayed at cut {} ({})",
                    f.meta.seq,
                    state.cut,
                    state.kind
                ),
            }
        }
        for (lba, &(floor, may_be_gone)) in &promise.floor {
            match newest.get(lba) {
                None => assert!(may_be_gone, "page {lba} lost at cut {}", state.cut),
                Some(&s) => assert!(
                    s >= floor,
                    "page {lba}: version {s} older than {floor} at cut {} ({})",
                    state.cut,
                    state.kind
                ),
            }
        }
    }
}
