//! The array below the host in a two-level run: one second-level cache (any block policy,
//! DEMOTE or X-RAY) in front of one device with fixed latencies, plus the bandwidth model of
//! X-RAY's placement reads.
//!
//! Idle time: the disk is busy for `disk_ns` per foreground disk read and per write-back; in
//! `Placement::Idle` X-RAY may issue placement reads, one at a time, only into idle gaps long
//! enough to hold a whole read. A gap is known when the next request reaches the array, and
//! the placements fill it then; since nothing changes in between, this is what a controller
//! issuing reads as soon as the disk goes idle would have done, minus the interference of a
//! placement read still running when a request arrives (the idealisation of freeblock-style
//! scheduling). Extra internal bandwidth adds `extra_reads_per_s` placement reads per second
//! regardless of idleness.

use crate::cache::read::demote::Demote;
use crate::cache::read::xray::{Placement, Xray};
use crate::cache::read::{Access, ReadPolicy, UniformCost};
use crate::host::{BlockDevice, Latencies, Payload};

/// The array's cache.
pub enum Level2 {
    Plain(Box<dyn ReadPolicy>),
    Demote(Demote),
    Xray(Box<Xray>, Placement),
}

/// Counters of the array side (reset when warm-up ends).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArrayCounters {
    pub reads: u64,
    pub hits: u64,
    pub disk_reads: u64,
    pub disk_writes: u64,
    pub evictions: u64,
    pub placement_reads: u64,
    pub demote_transfers: u64,
}

pub struct ArraySide {
    pub level: Level2,
    lat: Latencies,
    /// The disk is busy until then.
    busy_until_ns: u64,
    credit_at_ns: u64,
    credits: f64,
    /// Logical clock of block policies (requests seen).
    seq: u64,
    evicted: Vec<u64>,
    pub c: ArrayCounters,
}

impl ArraySide {
    pub fn new(level: Level2, lat: Latencies) -> ArraySide {
        ArraySide {
            level,
            lat,
            busy_until_ns: 0,
            credit_at_ns: 0,
            credits: 0.0,
            seq: 0,
            evicted: Vec::with_capacity(16),
            c: ArrayCounters::default(),
        }
    }

    /// X-RAY's work due by `now_ns`: placements into the idle gap before it (or from extra
    /// bandwidth, or all of them when unlimited), then a refresh if one is due.
    fn catch_up(&mut self, now_ns: u64) {
        let Level2::Xray(x, placement) = &mut self.level else {
            return;
        };
        match *placement {
            Placement::Unlimited => {
                if x.maybe_refresh(now_ns) {
                    while let Some(b) = x.next_fetch() {
                        x.place(b);
                        self.c.placement_reads += 1;
                    }
                }
            }
            Placement::Idle { extra_reads_per_s } => {
                let disk = self.lat.disk_ns;
                while self.busy_until_ns + disk <= now_ns {
                    let Some(b) = x.next_fetch() else {
                        break;
                    };
                    x.place(b);
                    self.c.placement_reads += 1;
                    self.busy_until_ns += disk;
                }
                if extra_reads_per_s > 0.0 {
                    let dt = now_ns.saturating_sub(self.credit_at_ns) as f64 / 1e9;
                    self.credits += dt * extra_reads_per_s;
                    while self.credits >= 1.0 {
                        let Some(b) = x.next_fetch() else {
                            // Bandwidth unused now is not banked.
                            self.credits = self.credits.min(1.0);
                            break;
                        };
                        x.place(b);
                        self.c.placement_reads += 1;
                        self.credits -= 1.0;
                    }
                }
                self.credit_at_ns = now_ns;
                x.maybe_refresh(now_ns);
            }
        }
    }

    fn disk_busy(&mut self, now_ns: u64) {
        self.busy_until_ns = self.busy_until_ns.max(now_ns) + self.lat.disk_ns;
    }
}

impl BlockDevice for ArraySide {
    fn read(&mut self, block: u64, now_ns: u64, payload: Payload<'_>) -> u64 {
        self.catch_up(now_ns);
        self.c.reads += 1;
        let hit = match &mut self.level {
            Level2::Xray(x, _) => match payload {
                Payload::Inodes(images) => {
                    x.inode_block(images);
                    false
                }
                Payload::Data => x.read(block, now_ns),
            },
            Level2::Plain(p) => lookup(p.as_mut(), block, &mut self.seq, &mut self.evicted),
            // Exclusive: a read miss goes to the host and is not kept (keeping it, even at
            // the LRU end, would cost a demoted block whenever the cache is full).
            Level2::Demote(d) => {
                self.seq += 1;
                d.get(&Access {
                    key: block,
                    size: 1,
                    now: self.seq,
                    cost: &UniformCost,
                })
            }
        };
        self.c.evictions += self.evicted.len() as u64;
        self.evicted.clear();
        if hit {
            self.c.hits += 1;
            self.lat.array_hit_ns
        } else {
            self.c.disk_reads += 1;
            self.disk_busy(now_ns);
            self.lat.disk_ns
        }
    }

    fn write(&mut self, _block: u64, now_ns: u64, payload: Payload<'_>) {
        // Writes pass through to the disk; they do not change a block policy's contents.
        self.catch_up(now_ns);
        self.c.disk_writes += 1;
        self.disk_busy(now_ns);
        if let (Level2::Xray(x, _), Payload::Inodes(images)) = (&mut self.level, payload) {
            x.inode_block(images);
        }
    }

    fn demote(&mut self, block: u64, now_ns: u64) {
        self.catch_up(now_ns);
        if let Level2::Demote(d) = &mut self.level {
            self.c.demote_transfers += u64::from(d.demote(block, &mut self.evicted));
            self.c.evictions += self.evicted.len() as u64;
            self.evicted.clear();
        }
    }
}

/// One read through a block policy's get-then-insert protocol.
fn lookup(p: &mut dyn ReadPolicy, block: u64, seq: &mut u64, evicted: &mut Vec<u64>) -> bool {
    let acc = Access {
        key: block,
        size: 1,
        now: *seq,
        cost: &UniformCost,
    };
    *seq += 1;
    if p.get(&acc) {
        return true;
    }
    p.insert(&acc, evicted);
    false
}
