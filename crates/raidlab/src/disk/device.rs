//! One disk as the engine drives it: the host-side queue, the commands the drive holds (NCQ),
//! the timing model, and the accounting for utilization and queue length.
//!
//! Protocol (sans-IO): the engine calls [`Device::submit`] when an operation arrives, then
//! [`Device::start`] until it returns `None`; for each started operation it schedules a
//! completion event at the returned time and, when that event fires, calls
//! [`Device::complete`] and again [`Device::start`] until `None`.
//!
//! # Where an operation waits
//!
//! An operation is *queued* in the host queue ([`DiskQueue`]), then *held* by the drive, then
//! *in service*. The drive accepts `max(ncq, parallelism)` commands, held and in service
//! together (a drive always accepts as many as it can serve at once), and serves at most
//! `parallelism` at a time.
//!
//! - `ncq = 1`: no reordering in the drive. Whenever a service slot is free, the next
//!   operation is the host queue's pop at the current head position.
//! - `ncq > 1`: whenever the drive has room, it takes operations in the host queue's order.
//!   Whenever a service slot is free it serves, among the commands it holds:
//!   1. the oldest (by arrival) that has waited `aging_ns` or more, if any — the host
//!      queue's aging rule, so a command cannot starve inside the drive either;
//!   2. otherwise the shortest positioning time (SPTF, [`DiskModel::positioning_ns`]) among
//!      the held commands of the highest class present, ties to the earlier-held. Real NCQ
//!      drives know no classes; the host keeps priority by tagging (as SCSI's head-of-queue
//!      tags or NVMe's weighted queues do), and without it a deep NCQ would let a destage
//!      burst overtake foreground reads.
//!
//! # Starvation bound
//!
//! The host queue's bound carries over: if an operation arrives with `n_ahead` operations
//! queued or held (not yet started), then from the moment it has waited `aging_ns`, only
//! operations that arrived before it are started until it is (the drive takes aged ones from
//! the host queue first and serves aged ones first). With `p = parallelism` and service times
//! `<= s_max` it starts by `arrival + aging_ns + ceil((n_ahead + 1) / p) * s_max`, whatever
//! `ncq` is. `device/tests.rs` checks this on random runs.
//!
//! # Cost
//!
//! Per-token state lives in a grow-only `Vec` indexed by token (tokens should be dense: the
//! table grows to the largest token + 1); the held commands in a `Vec` allocated up front. Choosing among held commands is O(ncq) with one model call per held
//! command of the chosen class.

#[cfg(test)]
mod tests;

use super::model::{DiskModel, Service};
use super::queue::{Class, DiskQueue, QueueSpec, Queued};
use super::DiskIo;
use crate::workload::Op;

/// A started operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Started {
    pub token: u32,
    /// When it completes.
    pub done_ns: u64,
    pub service: Service,
}

/// Cumulative counters of one device, up to the time they were taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Operations started.
    pub ops: u64,
    pub read_sectors: u64,
    pub write_sectors: u64,
    /// Time with at least one operation in service.
    pub busy_ns: u64,
    /// Integral over time of the operations present (queued + held + in service), in
    /// operation-nanoseconds; divided by elapsed time it is the mean queue length.
    pub queue_area: u128,
    /// Total cylinders the arm moved.
    pub seek_cylinders: u64,
    /// Largest number of operations present at once.
    pub queue_max: u64,
    /// Operations waiting to start when each operation was chosen to start (itself
    /// included), summed: divided by `ops`, how many the scheduler chose among on average
    /// (1: no choice). Its order can only be as good as its choice.
    pub choices: u64,
    pub buffer_hits: u64,
    /// Operations started, by class (index: `Class as usize`).
    pub class_ops: [u64; Class::COUNT],
    /// Total time from submission to start of service (host queue + drive), by class.
    pub class_wait_ns: [u128; Class::COUNT],
    /// Longest such wait, by class.
    pub class_wait_ns_max: [u64; Class::COUNT],
}

/// Where a token's operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Queued,
    Held,
    InService,
}

#[derive(Debug, Clone, Copy)]
struct TokenOp {
    io: DiskIo,
    state: State,
}

const FREE: TokenOp = TokenOp {
    io: DiskIo {
        op: Op::Read,
        sector: 0,
        sectors: 0,
    },
    state: State::Free,
};

/// One disk.
#[derive(Debug)]
pub struct Device {
    model: Box<dyn DiskModel>,
    queue: DiskQueue,
    /// The operation of each token, indexed by token (the queue only knows tokens).
    ops: Vec<TokenOp>,
    /// Commands the drive holds and has not started, in the order it took them.
    held: Vec<Queued>,
    /// An operation submitted with nothing queued and a service slot free, on a drive without
    /// NCQ: the host queue would hand it straight back at the next `start`, so it waits here
    /// instead (its scheduling position is computed only if it has to join the queue). When
    /// set, the queue is empty; a second submission first moves it into the queue.
    direct: Option<Queued>,
    /// `ncq <= 1`: operations start in the host queue's order (and may use `direct`).
    no_ncq: bool,
    /// Commands the drive accepts, held and in service: `max(ncq, parallelism)`.
    drive_len_max: u32,
    /// `model.parallelism()`, a constant of the model, read once.
    parallelism: u32,
    in_service: u32,
    present: u64,
    stats: DeviceStats,
    /// Time the stats were last advanced to.
    last_ns: u64,
}

impl Device {
    pub fn new(model: Box<dyn DiskModel>, spec: QueueSpec) -> Device {
        debug_assert!(spec.ncq >= 1, "ncq must be at least 1");
        let parallelism = model.parallelism();
        debug_assert!(parallelism >= 1);
        let drive_len_max = spec.ncq.max(parallelism);
        Device {
            model,
            queue: DiskQueue::new(spec),
            ops: Vec::new(),
            held: Vec::with_capacity(if spec.ncq > 1 {
                drive_len_max as usize
            } else {
                0
            }),
            direct: None,
            no_ncq: spec.ncq <= 1,
            drive_len_max,
            parallelism,
            in_service: 0,
            present: 0,
            stats: DeviceStats::default(),
            last_ns: 0,
        }
    }

    pub fn model(&self) -> &dyn DiskModel {
        self.model.as_ref()
    }

    pub fn spec(&self) -> &QueueSpec {
        self.queue.spec()
    }

    fn advance(&mut self, now_ns: u64) {
        debug_assert!(now_ns >= self.last_ns, "time went back");
        let dt = now_ns - self.last_ns;
        if self.in_service > 0 {
            self.stats.busy_ns += dt;
        }
        self.stats.queue_area += u128::from(dt) * u128::from(self.present);
        self.last_ns = now_ns;
    }

    /// Queue `io` of `class`; `token` identifies it in [`Started`] and [`Device::complete`]
    /// and must not be in use on this device.
    // Inlined: `io` (three words) then stays in registers instead of a stack copy reloaded
    // at once (a plain `#[inline]` was not taken).
    #[inline(always)]
    pub fn submit(&mut self, now_ns: u64, io: DiskIo, class: Class, token: u32) {
        self.advance(now_ns);
        debug_assert!(io.sectors > 0);
        debug_assert!(io.sector + u64::from(io.sectors) <= self.model.capacity_sectors());
        let slot = token as usize;
        if self.ops.len() <= slot {
            self.ops.resize(slot + 1, FREE);
        }
        debug_assert_eq!(self.ops[slot].state, State::Free, "token {token} in use");
        self.ops[slot] = TokenOp {
            io,
            state: State::Queued,
        };
        // Built where it is stored: one copy built on the stack and then moved was reloaded
        // at once in a width it was not stored in (a stall, seen in `perf`).
        let q = || Queued {
            token,
            position: 0,
            arrival_ns: now_ns,
            class,
        };
        if self.no_ncq
            && self.direct.is_none()
            && self.queue.is_empty()
            && self.in_service < self.parallelism
        {
            // The queue's pop would return it whatever the discipline: it is alone.
            self.direct = Some(q());
        } else {
            if let Some(d) = self.direct.take() {
                // It arrived first and nothing was queued since: it keeps its place.
                self.enqueue(d);
            }
            self.enqueue(q());
        }
        self.present += 1;
        self.stats.queue_max = self.stats.queue_max.max(self.present);
    }

    /// Put `q` in the host queue at its operation's scheduling position.
    fn enqueue(&mut self, mut q: Queued) {
        q.position = self.model.position_of(self.ops[q.token as usize].io.sector);
        self.queue.push(q);
    }

    /// Start the next operation if the drive has a free service slot and something to serve.
    pub fn start(&mut self, now_ns: u64) -> Option<Started> {
        // Choosing changes no counter, so the stats advance only when an operation starts.
        let q = if self.no_ncq {
            if self.in_service >= self.parallelism {
                return None;
            }
            match self.direct.take() {
                Some(q) => {
                    debug_assert!(self.queue.is_empty());
                    (q, 1)
                }
                None => {
                    let waiting = self.queue.len() as u64;
                    (self.queue.pop(self.model.head_position(), now_ns)?, waiting)
                }
            }
        } else {
            self.fill(now_ns);
            if self.in_service >= self.parallelism {
                return None;
            }
            let waiting = self.held.len() as u64;
            let i = self.pick_held(now_ns)?;
            // Keeps the held order (the SPTF tie rule); ncq is small.
            (self.held.remove(i), waiting)
        };
        let (q, waiting) = q;
        self.stats.choices += waiting;
        Some(self.serve(q, now_ns))
    }

    /// Move operations from the host queue into the drive while it has room.
    fn fill(&mut self, now_ns: u64) {
        while self.held.len() as u32 + self.in_service < self.drive_len_max {
            let Some(q) = self.queue.pop(self.model.head_position(), now_ns) else {
                break;
            };
            let op = &mut self.ops[q.token as usize];
            debug_assert_eq!(op.state, State::Queued);
            op.state = State::Held;
            self.held.push(q);
        }
    }

    /// Index in `held` of the command to serve next (see the module documentation).
    fn pick_held(&self, now_ns: u64) -> Option<usize> {
        let aging_ns = self.queue.spec().aging_ns;
        let mut aged: Option<usize> = None;
        let mut class = Class::Background;
        for (i, h) in self.held.iter().enumerate() {
            if now_ns.saturating_sub(h.arrival_ns) >= aging_ns
                && aged.is_none_or(|a| h.arrival_ns < self.held[a].arrival_ns)
            {
                aged = Some(i);
            }
            class = class.min(h.class);
        }
        if aged.is_some() {
            return aged;
        }
        let mut best: Option<(usize, u64)> = None;
        for (i, h) in self.held.iter().enumerate() {
            if h.class != class {
                continue;
            }
            let ns = self
                .model
                .positioning_ns(&self.ops[h.token as usize].io, now_ns);
            if best.is_none_or(|(_, b)| ns < b) {
                best = Some((i, ns));
            }
        }
        best.map(|(i, _)| i)
    }

    fn serve(&mut self, q: Queued, now_ns: u64) -> Started {
        self.advance(now_ns);
        let op = &mut self.ops[q.token as usize];
        debug_assert!(matches!(op.state, State::Queued | State::Held));
        op.state = State::InService;
        let io = op.io;
        let service = self.model.service(&io, now_ns);
        debug_assert!(service.total_ns > 0, "a model answered a zero service time");
        self.in_service += 1;
        debug_assert!(self.in_service <= self.parallelism);
        let s = &mut self.stats;
        s.ops += 1;
        match io.op {
            Op::Read => s.read_sectors += u64::from(io.sectors),
            Op::Write => s.write_sectors += u64::from(io.sectors),
        }
        s.seek_cylinders += service.seek_cylinders;
        s.buffer_hits += u64::from(service.buffer_hit);
        let c = q.class as usize;
        let wait_ns = now_ns - q.arrival_ns;
        s.class_ops[c] += 1;
        s.class_wait_ns[c] += u128::from(wait_ns);
        s.class_wait_ns_max[c] = s.class_wait_ns_max[c].max(wait_ns);
        Started {
            token: q.token,
            done_ns: now_ns + service.total_ns,
            service,
        }
    }

    /// The operation `token`, started earlier, completed at `now_ns`.
    pub fn complete(&mut self, now_ns: u64, token: u32) {
        self.advance(now_ns);
        let op = &mut self.ops[token as usize];
        debug_assert_eq!(op.state, State::InService, "token {token} not in service");
        op.state = State::Free;
        debug_assert!(self.in_service > 0 && self.present > 0);
        self.in_service -= 1;
        self.present -= 1;
        debug_assert_eq!(
            self.present,
            (self.waiting() as u64) + u64::from(self.in_service)
        );
    }

    /// Whether [`Device::start`] may start an operation now: something waits and, without
    /// NCQ, a service slot is free. (With NCQ, `start` also moves commands into the drive
    /// whenever it is called, so its calls must not be skipped while anything waits.)
    #[inline]
    pub fn may_start(&self) -> bool {
        self.waiting() > 0 && !(self.no_ncq && self.in_service >= self.parallelism)
    }

    /// Operations present (queued, held or in service).
    pub fn present(&self) -> u64 {
        self.present
    }

    /// Operations in service.
    pub fn in_service(&self) -> u32 {
        self.in_service
    }

    /// Operations submitted and not yet started (in the host queue or held by the drive).
    #[inline]
    pub fn waiting(&self) -> usize {
        self.queue.len() + self.held.len() + usize::from(self.direct.is_some())
    }

    /// Counters up to `now_ns`.
    pub fn stats(&mut self, now_ns: u64) -> DeviceStats {
        self.advance(now_ns);
        self.stats
    }
}
