//! The per-disk (host-side) queue: FCFS, SSTF or C-LOOK within priority classes
//! (foreground > destage > rebuild > background), with bounded aging so the lower classes
//! never starve.
//!
//! PLACEHOLDER: FCFS over all classes. The full scheduler replaces this file; its public API
//! (the items below) is the contract the device and the engine use.

use std::collections::VecDeque;

/// Priority class of a disk operation; lower value = served first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// User requests (reads and write-through writes).
    Foreground = 0,
    /// Write-cache destages.
    Destage = 1,
    /// Rebuild reads and writes.
    Rebuild = 2,
    /// Anything that may wait (placement reads, scrubbing).
    Background = 3,
}

impl Class {
    pub const COUNT: usize = 4;
    pub const ALL: [Class; 4] = [
        Class::Foreground,
        Class::Destage,
        Class::Rebuild,
        Class::Background,
    ];
}

/// Order of service within a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Discipline {
    /// First come, first served.
    Fcfs,
    /// Shortest seek (position distance) first; ties to the earlier arrival.
    Sstf,
    /// Circular LOOK: ascending positions from the head, then wrap to the lowest.
    Clook,
}

impl Discipline {
    pub const NAMES: &'static [&'static str] = &["fcfs", "sstf", "clook"];

    pub fn from_name(name: &str) -> Option<Discipline> {
        match name {
            "fcfs" => Some(Discipline::Fcfs),
            "sstf" => Some(Discipline::Sstf),
            "clook" | "c-look" => Some(Discipline::Clook),
            _ => None,
        }
    }
}

/// Scheduling parameters of one disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSpec {
    pub discipline: Discipline,
    /// A queued operation of a lower class that has waited this long is served before any
    /// younger operation of a higher class (the bound on starvation).
    pub aging_ns: u64,
    /// Commands the device holds at once (NCQ / TCQ depth), >= 1. With more than one, the
    /// drive picks the shortest positioning time among the commands it holds.
    pub ncq: u32,
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec {
            discipline: Discipline::Fcfs,
            aging_ns: 500_000_000,
            ncq: 1,
        }
    }
}

/// One queued operation as the queue sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// The caller's handle for the operation.
    pub token: u32,
    /// Scheduling position (cylinder), from `DiskModel::position_of`.
    pub position: u64,
    pub arrival_ns: u64,
    pub class: Class,
}

/// The host-side queue of one disk.
#[derive(Debug, Clone)]
pub struct DiskQueue {
    spec: QueueSpec,
    items: VecDeque<Queued>,
}

impl DiskQueue {
    pub fn new(spec: QueueSpec) -> DiskQueue {
        DiskQueue {
            spec,
            items: VecDeque::new(),
        }
    }

    pub fn spec(&self) -> &QueueSpec {
        &self.spec
    }

    /// Queue `q`. Arrivals must come in non-decreasing `arrival_ns`.
    pub fn push(&mut self, q: Queued) {
        self.items.push_back(q);
    }

    /// Remove and return the operation to serve next, the head being at `head` at `now_ns`.
    pub fn pop(&mut self, _head: u64, _now_ns: u64) -> Option<Queued> {
        self.items.pop_front()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}
