//! Stripe-oriented reconstruction, SOR (Holland, Gibson and Siewiorek): a unit at a time,
//! reading every source of its row in parallel, then writing the replacement; `stripes`
//! such units in parallel (`stripes = 1` is the classic single-stripe SOR). Slower than DOR:
//! a disk idles between its read of one stripe and of the next, and a stripe waits for its
//! slowest source.

use super::{Action, Ctx, Feed};

#[derive(Debug, Clone, Copy)]
struct Slot {
    job: u64,
    unit: u64,
    reads_left: u32,
}

#[derive(Debug, Clone)]
pub struct Sor {
    slots: Vec<Option<Slot>>,
    feed: Feed,
}

impl Sor {
    pub fn new(stripes: u32) -> Sor {
        debug_assert!(stripes >= 1);
        Sor {
            slots: vec![None; stripes as usize],
            feed: Feed::default(),
        }
    }

    pub fn written(&self) -> u64 {
        self.feed.units_written()
    }

    pub fn is_done(&self) -> bool {
        self.feed.is_done()
    }

    fn slot(&mut self, job: u64) -> &mut Slot {
        // `stripes` is small; a linear search beats any index.
        self.slots
            .iter_mut()
            .flatten()
            .find(|s| s.job == job)
            .expect("a completion names a job in flight")
    }

    /// Fill every free slot with a unit, if rate control allows.
    pub fn pump(&mut self, ctx: &mut Ctx<'_>, out: &mut Vec<Action>) {
        self.feed.wake(ctx.now_ns);
        for i in 0..self.slots.len() {
            if self.slots[i].is_some() {
                continue;
            }
            let Some((unit, job)) = self.feed.next(ctx, out) else {
                break;
            };
            let mut reads_left = 0;
            for disk in 0..ctx.survivors.disks() {
                if ctx.survivors.reads(unit, disk) {
                    reads_left += 1;
                    out.push(Action::Read {
                        disk,
                        unit,
                        count: 1,
                        job,
                    });
                }
            }
            debug_assert!(reads_left > 0, "a unit with nothing to read it from");
            self.slots[i] = Some(Slot {
                job,
                unit,
                reads_left,
            });
        }
    }

    /// A read of job `job` completed; the unit's write when it was the last.
    pub fn read_done(&mut self, job: u64, out: &mut Vec<Action>) {
        let s = self.slot(job);
        debug_assert!(s.reads_left > 0);
        s.reads_left -= 1;
        if s.reads_left == 0 {
            let unit = s.unit;
            out.push(Action::Write {
                unit,
                count: 1,
                job,
            });
        }
    }

    /// The write of job `job` completed; returns its unit, now rebuilt.
    pub fn write_done(&mut self, job: u64) -> u64 {
        let i = self
            .slots
            .iter()
            .position(|s| s.is_some_and(|s| s.job == job))
            .expect("a completion names a job in flight");
        let s = self.slots[i].take().expect("found above");
        debug_assert_eq!(s.reads_left, 0);
        self.feed.written(1);
        s.unit
    }
}

#[cfg(test)]
mod tests {
    use super::super::dor::tests::AllBut;
    use super::super::rate::{RateSpec, Throttle};
    use super::super::OrderSpec;
    use super::*;

    #[test]
    fn k_stripes_read_in_parallel_then_write() {
        let mut order = OrderSpec::Sequential.build(3);
        let mut th = Throttle::new(RateSpec::Full, 0);
        let s = AllBut {
            disks: 3,
            failed: 0,
        };
        let mut sor = Sor::new(2);
        let mut out = Vec::new();
        let mut pump = |sor: &mut Sor, out: &mut Vec<Action>| {
            let mut ctx = Ctx {
                now_ns: 0,
                busy: true,
                order: &mut order,
                survivors: &s,
                throttle: &mut th,
                unit_bytes: 4096,
            };
            out.clear();
            sor.pump(&mut ctx, out);
        };
        let r = |disk, unit| Action::Read {
            disk,
            unit,
            count: 1,
            job: unit,
        };
        pump(&mut sor, &mut out);
        assert_eq!(out, vec![r(1, 0), r(2, 0), r(1, 1), r(2, 1)]);
        out.clear();
        sor.read_done(1, &mut out);
        assert!(out.is_empty());
        sor.read_done(1, &mut out);
        assert_eq!(
            out,
            vec![Action::Write {
                unit: 1,
                count: 1,
                job: 1
            }]
        );
        assert_eq!(sor.write_done(1), 1);
        pump(&mut sor, &mut out);
        assert_eq!(out, vec![r(1, 2), r(2, 2)]);
        out.clear();
        for j in [0, 0, 2, 2] {
            sor.read_done(j, &mut out);
        }
        sor.write_done(0);
        sor.write_done(2);
        pump(&mut sor, &mut out);
        assert!(out.is_empty() && sor.is_done() && sor.written() == 3);
    }
}
