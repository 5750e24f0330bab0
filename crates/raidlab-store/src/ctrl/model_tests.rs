//! Model-based tests: random sequences of reads, writes, TRIMs, member failures (commanded
//! and injected I/O errors), spare additions, rebuild steps, resyncs and restarts against a
//! flat in-memory model of the logical device. The device always equals the model, and no
//! request fails while the level still has redundancy. proptest shrinks a failure to a
//! minimal sequence.

use std::sync::Arc;

use proptest::prelude::*;
use raidlab::array::Level;

use super::tests::{pattern, shape, Recorder};
use super::*;
use crate::member::{FaultMember, MemMember, Member};

#[derive(Debug, Clone)]
enum Step {
    Write {
        block: u64,
        blocks: u64,
        seed: u64,
        fua: bool,
    },
    Trim {
        block: u64,
        blocks: u64,
    },
    Read {
        block: u64,
        blocks: u64,
    },
    /// `ctl fail` of a slot.
    Fail {
        slot: u32,
    },
    /// The member of a slot starts returning EIO (found by the next I/O that touches it).
    Inject {
        slot: u32,
    },
    AddSpare,
    Rebuild {
        units: u32,
    },
    Resync,
    /// Stop (cleanly or not) and assemble again from the last persisted snapshot.
    Restart {
        clean: bool,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..64, 1u64..24, any::<u64>(), any::<bool>())
            .prop_map(|(block, blocks, seed, fua)| Step::Write { block, blocks, seed, fua }),
        1 => (0u64..64, 1u64..24).prop_map(|(block, blocks)| Step::Trim { block, blocks }),
        2 => (0u64..64, 1u64..24).prop_map(|(block, blocks)| Step::Read { block, blocks }),
        1 => (0u32..6).prop_map(|slot| Step::Fail { slot }),
        1 => (0u32..6).prop_map(|slot| Step::Inject { slot }),
        1 => Just(Step::AddSpare),
        2 => (1u32..6).prop_map(|units| Step::Rebuild { units }),
        1 => Just(Step::Resync),
        1 => any::<bool>().prop_map(|clean| Step::Restart { clean }),
    ]
}

struct Rig {
    sh: Shape,
    opts: Options,
    ctl: Controller,
    rec: Arc<Recorder>,
    model: Vec<u8>,
    /// Every device made so far (members and spares), by path.
    devices: Vec<Arc<FaultMember>>,
    spares_made: u32,
    /// A slot whose member was injected with errors and is not failed yet.
    pending: Option<u32>,
}

fn fault(name: &str, sh: &Shape) -> Arc<FaultMember> {
    let inner = Arc::new(MemMember::new(
        name,
        sh.data_offset_bytes + sh.member_data_bytes,
    ));
    Arc::new(FaultMember::new(inner))
}

impl Rig {
    fn new(level: Level, disks: u32, opts: Options) -> Rig {
        let sh = shape(level, disks, 6);
        let devices: Vec<Arc<FaultMember>> =
            (0..disks).map(|i| fault(&format!("d{i}"), &sh)).collect();
        let rec = Arc::new(Recorder::default());
        let devs = devices
            .iter()
            .map(|d| Some(d.clone() as Arc<dyn Member>))
            .collect();
        let ctl = Controller::new(
            sh.clone(),
            devs,
            vec![],
            None,
            1,
            Box::new(rec.clone()),
            opts.clone(),
        )
        .unwrap();
        ctl.init_intent(None);
        ctl.assume_clean(true);
        let model = vec![0u8; sh.size_bytes() as usize];
        Rig {
            sh,
            opts,
            ctl,
            rec,
            model,
            devices,
            spares_made: 0,
            pending: None,
        }
    }

    fn blocks(&self) -> u64 {
        self.sh.size_bytes() / BLOCK as u64
    }

    /// Whether failing `slot` (on top of the failures so far) leaves the array alive.
    fn survivable(&self, slot: u32) -> bool {
        let mut a = self.ctl.read_state().array.clone();
        a.is_failed(slot) || a.fail(slot).is_ok()
    }

    fn settle_pending(&mut self) {
        if let Some(s) = self.pending {
            if self.ctl.read_state().array.is_failed(s) {
                self.pending = None;
            }
        }
    }

    fn apply(&mut self, step: &Step) -> Result<(), TestCaseError> {
        let nblocks = self.blocks();
        let clip = |block: u64, blocks: u64| {
            let b = block % nblocks;
            (b, blocks.min(nblocks - b))
        };
        match *step {
            Step::Write {
                block,
                blocks,
                seed,
                fua,
            } => {
                let (b, n) = clip(block, blocks);
                let data = pattern(seed, n as usize * BLOCK);
                let r = self.ctl.write(b * BLOCK as u64, &data, fua);
                prop_assert!(r.is_ok(), "write failed: {r:?}");
                self.model[b as usize * BLOCK..(b + n) as usize * BLOCK].copy_from_slice(&data);
            }
            Step::Trim { block, blocks } => {
                let (b, n) = clip(block, blocks);
                let r = self
                    .ctl
                    .write_zeroes(b * BLOCK as u64, n * BLOCK as u64, false);
                prop_assert!(r.is_ok(), "trim failed: {r:?}");
                self.model[b as usize * BLOCK..(b + n) as usize * BLOCK].fill(0);
            }
            Step::Read { block, blocks } => {
                let (b, n) = clip(block, blocks);
                let mut buf = vec![0u8; n as usize * BLOCK];
                let r = self.ctl.read(b * BLOCK as u64, &mut buf);
                prop_assert!(r.is_ok(), "read failed: {r:?}");
                prop_assert!(
                    buf == self.model[b as usize * BLOCK..(b + n) as usize * BLOCK],
                    "read {b}+{n} differs from the model"
                );
            }
            Step::Fail { slot } => {
                let slot = slot % self.sh.disks;
                if self.pending.is_none() && self.survivable(slot) {
                    prop_assert!(self.ctl.fail_member(slot, "model").is_ok());
                }
            }
            Step::Inject { slot } => {
                let slot = slot % self.sh.disks;
                let dev = self.ctl.read_state().devs[slot as usize].clone();
                if self.pending.is_none() && self.survivable(slot) {
                    if let Some(dev) = dev {
                        let f = self
                            .devices
                            .iter()
                            .find(|d| d.path() == dev.path())
                            .unwrap();
                        f.fail_now();
                        self.pending = Some(slot);
                    }
                }
            }
            Step::AddSpare => {
                if self.spares_made < 3 {
                    let d = fault(&format!("s{}", self.spares_made), &self.sh);
                    self.spares_made += 1;
                    self.devices.push(d.clone());
                    prop_assert!(self.ctl.add_spare(d).is_ok());
                }
            }
            Step::Rebuild { units } => {
                if self.ctl.rebuild_step(units).is_none() && !self.ctl.rebuild_active() {
                    self.ctl.maybe_start_rebuild();
                }
            }
            Step::Resync => while self.ctl.resync_step() {},
            Step::Restart { clean } => self.restart(clean),
        }
        self.settle_pending();
        Ok(())
    }

    /// Assemble again from what the superblocks (the recorder) hold, as `assemble` would.
    fn restart(&mut self, clean: bool) {
        if clean {
            self.ctl.intent_clear_idle(true);
            self.ctl.set_clean(true);
            self.ctl.checkpoint();
        }
        let snap = self.rec.last.lock().unwrap().clone();
        let dirty = self.rec.intent.lock().unwrap().clone();
        let (devs, spares, recovering, events, was_clean) = match snap {
            None => (
                self.devices[..self.sh.disks as usize]
                    .iter()
                    .map(|d| Some(d.clone() as Arc<dyn Member>))
                    .collect(),
                vec![],
                None,
                1,
                true,
            ),
            Some(s) => {
                let mut recovering = None;
                let devs = s
                    .slots
                    .iter()
                    .enumerate()
                    .map(|(i, (d, st))| match st {
                        SlotState::InSync => d.clone(),
                        SlotState::Failed => None,
                        SlotState::Recovering { checkpoint } => {
                            recovering = Some((i as u32, *checkpoint));
                            d.clone()
                        }
                    })
                    .collect();
                (devs, s.spares.clone(), recovering, s.events, s.clean)
            }
        };
        let rec = Arc::new(Recorder::default());
        let ctl = Controller::new(
            self.sh.clone(),
            devs,
            spares,
            recovering,
            events,
            Box::new(rec.clone()),
            self.opts.clone(),
        )
        .unwrap();
        ctl.assume_clean(was_clean);
        ctl.init_intent((!was_clean).then_some(dirty).filter(|d| !d.is_empty()));
        *rec.intent.lock().unwrap() = self.rec.intent.lock().unwrap().clone();
        *rec.last.lock().unwrap() = self.rec.last.lock().unwrap().clone();
        self.ctl = ctl;
        self.rec = rec;
    }

    fn check_all(&self) -> Result<(), TestCaseError> {
        let mut buf = vec![0u8; self.model.len()];
        let r = self.ctl.read(0, &mut buf);
        prop_assert!(r.is_ok(), "full read failed: {r:?}");
        prop_assert!(buf == self.model, "device differs from the model");
        Ok(())
    }
}

fn run(level: Level, disks: u32, steps: &[Step]) -> Result<(), TestCaseError> {
    run_with(level, disks, steps, Options::default())
}

/// [`run`] with the disk-oriented rebuild: each rebuild step is one of its actions, so the
/// sequence's writes land between a job's reads (`rebuild_dor.rs`). `merge`: two units a
/// read, else one.
fn run_dor(level: Level, disks: u32, steps: &[Step], merge: bool) -> Result<(), TestCaseError> {
    let opts = Options {
        rebuild_executor: RebuildExecutor::Dor {
            buffers: 3,
            depth: 1,
        },
        rebuild_run_bytes: if merge { 2 } else { 1 } * super::tests::CHUNK,
        ..Options::default()
    };
    run_with(level, disks, steps, opts)
}

fn run_with(level: Level, disks: u32, steps: &[Step], opts: Options) -> Result<(), TestCaseError> {
    let mut rig = Rig::new(level, disks, opts);
    for s in steps {
        rig.apply(s)?;
        rig.check_all()?;
    }
    // Finish: heal nothing, rebuild what can be rebuilt, and the redundancy must be right.
    for _ in 0..10_000 {
        if rig.ctl.rebuild_step(64).is_none() && !rig.ctl.rebuild_active() {
            break;
        }
    }
    while rig.ctl.resync_step() {}
    rig.settle_pending();
    rig.check_all()?;
    if rig.pending.is_none()
        && rig.ctl.read_state().array.failed().is_empty()
        && level != Level::Raid0
    {
        prop_assert_eq!(rig.ctl.check().mismatches, 0);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn raid5_equals_the_model(steps in proptest::collection::vec(step(), 1..40)) {
        run(Level::Raid5, 4, &steps)?;
    }

    #[test]
    fn raid6_equals_the_model(steps in proptest::collection::vec(step(), 1..40)) {
        run(Level::Raid6, 6, &steps)?;
    }

    #[test]
    fn raid1_and_raid10_equal_the_model(steps in proptest::collection::vec(step(), 1..30), ten in any::<bool>()) {
        if ten { run(Level::Raid10, 4, &steps)?; } else { run(Level::Raid1, 3, &steps)?; }
    }

    #[test]
    fn raid5_with_dor_equals_the_model(steps in proptest::collection::vec(step(), 1..40), merge in any::<bool>()) {
        run_dor(Level::Raid5, 4, &steps, merge)?;
    }

    #[test]
    fn raid6_with_dor_equals_the_model(steps in proptest::collection::vec(step(), 1..40), merge in any::<bool>()) {
        run_dor(Level::Raid6, 6, &steps, merge)?;
    }

    #[test]
    fn raid1_and_raid10_with_dor_equal_the_model(steps in proptest::collection::vec(step(), 1..30), ten in any::<bool>()) {
        if ten { run_dor(Level::Raid10, 4, &steps, false)?; } else { run_dor(Level::Raid1, 3, &steps, true)?; }
    }

    #[test]
    fn raid0_equals_the_model(steps in proptest::collection::vec(step(), 1..30)) {
        run(Level::Raid0, 3, &steps)?;
    }
}
