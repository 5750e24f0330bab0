//! One disk as the engine drives it: the host-side queue, the commands the drive holds (NCQ),
//! the timing model, and the accounting for utilization and queue length.
//!
//! Protocol (sans-IO): the engine calls [`Device::submit`] when an operation arrives, then
//! [`Device::start`] until it returns `None`; for each started operation it schedules a
//! completion event at the returned time and, when that event fires, calls
//! [`Device::complete`] and again [`Device::start`] until `None`.
//!
//! PLACEHOLDER: serial service in queue order (ncq ignored). The full device replaces this.

use super::model::{DiskModel, Service};
use super::queue::{Class, DiskQueue, QueueSpec, Queued};
use super::DiskIo;

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
    pub buffer_hits: u64,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    q: Queued,
    io: DiskIo,
}

/// One disk.
#[derive(Debug)]
pub struct Device {
    model: Box<dyn DiskModel>,
    queue: DiskQueue,
    /// Operations waiting in the queue, by token slot (the queue only knows tokens).
    ios: Vec<Option<DiskIo>>,
    in_service: u32,
    stats: DeviceStats,
    /// Time the stats were last advanced to.
    last_ns: u64,
    present: u64,
    _held: Vec<Held>,
}

impl Device {
    pub fn new(model: Box<dyn DiskModel>, spec: QueueSpec) -> Device {
        Device {
            model,
            queue: DiskQueue::new(spec),
            ios: Vec::new(),
            in_service: 0,
            stats: DeviceStats::default(),
            last_ns: 0,
            present: 0,
            _held: Vec::new(),
        }
    }

    pub fn model(&self) -> &dyn DiskModel {
        self.model.as_ref()
    }

    fn advance(&mut self, now_ns: u64) {
        debug_assert!(now_ns >= self.last_ns);
        let dt = now_ns - self.last_ns;
        if self.in_service > 0 {
            self.stats.busy_ns += dt;
        }
        self.stats.queue_area += u128::from(dt) * u128::from(self.present);
        self.last_ns = now_ns;
    }

    /// Queue `io` of `class`; `token` identifies it in [`Started`] and [`Device::complete`]
    /// and must not be in use on this device.
    pub fn submit(&mut self, now_ns: u64, io: DiskIo, class: Class, token: u32) {
        self.advance(now_ns);
        let slot = token as usize;
        if self.ios.len() <= slot {
            self.ios.resize(slot + 1, None);
        }
        debug_assert!(self.ios[slot].is_none(), "token {token} in use");
        self.ios[slot] = Some(io);
        self.queue.push(Queued {
            token,
            position: self.model.position_of(io.sector),
            arrival_ns: now_ns,
            class,
        });
        self.present += 1;
        self.stats.queue_max = self.stats.queue_max.max(self.present);
    }

    /// Start the next operation if the drive has room.
    pub fn start(&mut self, now_ns: u64) -> Option<Started> {
        self.advance(now_ns);
        if self.in_service >= self.model.parallelism() {
            return None;
        }
        let q = self.queue.pop(self.model.head_position(), now_ns)?;
        let io = self.ios[q.token as usize]
            .take()
            .expect("a queued token has its operation stored");
        let service = self.model.service(&io, now_ns);
        debug_assert!(service.total_ns > 0);
        self.in_service += 1;
        self.stats.ops += 1;
        match io.op {
            crate::workload::Op::Read => self.stats.read_sectors += u64::from(io.sectors),
            crate::workload::Op::Write => self.stats.write_sectors += u64::from(io.sectors),
        }
        self.stats.seek_cylinders += service.seek_cylinders;
        self.stats.buffer_hits += u64::from(service.buffer_hit);
        Some(Started {
            token: q.token,
            done_ns: now_ns + service.total_ns,
            service,
        })
    }

    /// The operation `token` completed at `now_ns`.
    pub fn complete(&mut self, now_ns: u64, _token: u32) {
        self.advance(now_ns);
        debug_assert!(self.in_service > 0 && self.present > 0);
        self.in_service -= 1;
        self.present -= 1;
    }

    /// Operations present (queued, held or in service).
    pub fn present(&self) -> u64 {
        self.present
    }

    /// Counters up to `now_ns`.
    pub fn stats(&mut self, now_ns: u64) -> DeviceStats {
        self.advance(now_ns);
        self.stats
    }
}
