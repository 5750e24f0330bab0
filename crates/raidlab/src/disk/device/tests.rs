//! Hand-worked timelines and random runs of the device.

use super::*;
use crate::disk::model::ConstantSpec;
use crate::disk::queue::Discipline;
use proptest::prelude::*;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Sectors per cylinder of [`Arm`].
const SPC: u64 = 100;

/// A test disk with an arm: positioning takes 1 µs per cylinder of distance, then a fixed
/// transfer; `parallelism` is a parameter so the SSD-like path can be driven too.
#[derive(Debug, Clone)]
struct Arm {
    cylinders: u64,
    head: u64,
    parallelism: u32,
    transfer_ns: u64,
}

impl Arm {
    fn boxed(cylinders: u64, parallelism: u32) -> Box<dyn DiskModel> {
        Box::new(Arm {
            cylinders,
            head: 0,
            parallelism,
            transfer_ns: 1_000,
        })
    }
}

impl DiskModel for Arm {
    fn capacity_sectors(&self) -> u64 {
        self.cylinders * SPC
    }
    fn parallelism(&self) -> u32 {
        self.parallelism
    }
    fn position_of(&self, sector: u64) -> u64 {
        sector / SPC
    }
    fn head_position(&self) -> u64 {
        self.head
    }
    fn positioning_ns(&self, io: &DiskIo, _now_ns: u64) -> u64 {
        self.position_of(io.sector).abs_diff(self.head) * 1_000
    }
    fn service(&mut self, io: &DiskIo, now_ns: u64) -> Service {
        let seek_ns = self.positioning_ns(io, now_ns);
        let seek_cylinders = seek_ns / 1_000;
        self.head = self.position_of(io.sector);
        Service {
            total_ns: seek_ns + self.transfer_ns,
            seek_ns,
            transfer_ns: self.transfer_ns,
            seek_cylinders,
            ..Service::default()
        }
    }
}

fn queue_spec(discipline: Discipline, ncq: u32, aging_ns: u64) -> QueueSpec {
    QueueSpec {
        discipline,
        aging_ns,
        ncq,
    }
}

fn read_at(cylinder: u64) -> DiskIo {
    DiskIo {
        op: Op::Read,
        sector: cylinder * SPC,
        sectors: 8,
    }
}

/// Start operations until the device says no; the tokens started.
fn start_all(dev: &mut Device, now_ns: u64, out: &mut Vec<Started>) -> usize {
    let mut n = 0;
    while let Some(s) = dev.start(now_ns) {
        out.push(s);
        n += 1;
    }
    n
}

#[test]
fn constant_model_timeline() {
    let model = ConstantSpec {
        read_ns: 10,
        write_ns: 20,
        capacity_sectors: 1000,
    };
    let mut dev = Device::new(
        Box::new(model.build().unwrap()),
        queue_spec(Discipline::Fcfs, 1, 1_000),
    );
    let read = DiskIo {
        op: Op::Read,
        sector: 0,
        sectors: 8,
    };
    let write = DiskIo {
        op: Op::Write,
        ..read
    };
    let mut s = Vec::new();
    // t=0  A (read, foreground) arrives and starts: 0..10.
    // t=2  B (write, destage) waits.   t=4  C (read, foreground) waits.
    // t=10 A done; C outranks B: 10..20.   t=20 C done; B: 20..40.   t=40 B done.
    // Present: 1 on [0,2), 2 on [2,4), 3 on [4,10), 2 on [10,20), 1 on [20,40), 0 after.
    dev.submit(0, read, Class::Foreground, 0);
    assert_eq!(start_all(&mut dev, 0, &mut s), 1);
    dev.submit(2, write, Class::Destage, 1);
    assert_eq!(start_all(&mut dev, 2, &mut s), 0);
    dev.submit(4, read, Class::Foreground, 2);
    assert_eq!(start_all(&mut dev, 4, &mut s), 0);
    assert_eq!((dev.present(), dev.waiting()), (3, 2));
    dev.complete(10, 0);
    assert_eq!(start_all(&mut dev, 10, &mut s), 1);
    dev.complete(20, 2);
    assert_eq!(start_all(&mut dev, 20, &mut s), 1);
    // Mid-run: busy 30 of 30; area 2 + 4 + 18 + 20 + 10 = 54.
    let mid = dev.stats(30);
    assert_eq!((mid.busy_ns, mid.queue_area), (30, 54));
    dev.complete(40, 1);
    assert_eq!(start_all(&mut dev, 40, &mut s), 0);
    let got: Vec<(u32, u64)> = s.iter().map(|x| (x.token, x.done_ns)).collect();
    assert_eq!(got, [(0, 10), (2, 20), (1, 40)]);
    let st = dev.stats(50);
    // Utilization 40 / 50; mean present 64 / 50.
    assert_eq!(st.busy_ns, 40);
    assert_eq!(st.queue_area, 2 + 4 + 18 + 20 + 20);
    assert_eq!((st.ops, st.read_sectors, st.write_sectors), (3, 16, 8));
    assert_eq!(st.queue_max, 3);
    // Choices: A started alone (1), C was chosen from B and C (2), B alone (1).
    assert_eq!(st.choices, 1 + 2 + 1);
    assert_eq!(st.class_ops, [2, 1, 0, 0]);
    // Waits: A 0, C 10 - 4, B 20 - 2.
    assert_eq!(st.class_wait_ns, [6, 18, 0, 0]);
    assert_eq!(st.class_wait_ns_max, [6, 18, 0, 0]);
    assert_eq!(dev.present(), 0);
}

/// Submit A at cylinder 100 at t=0 (it starts at once, the head moving to 100), then B, C, D
/// at cylinders 10, 95, 300 at t=1 in the given classes, and run to the end; the order served.
fn ncq_order(ncq: u32, classes: [Class; 3]) -> Vec<u32> {
    let mut dev = Device::new(
        Arm::boxed(1000, 1),
        queue_spec(Discipline::Fcfs, ncq, u64::MAX),
    );
    let mut s = Vec::new();
    dev.submit(0, read_at(100), Class::Foreground, 0);
    start_all(&mut dev, 0, &mut s);
    for (i, cyl) in [10, 95, 300].into_iter().enumerate() {
        dev.submit(1, read_at(cyl), classes[i], i as u32 + 1);
        assert_eq!(start_all(&mut dev, 1, &mut s), 0);
    }
    let mut i = 0;
    while i < s.len() {
        let Started { token, done_ns, .. } = s[i];
        dev.complete(done_ns, token);
        start_all(&mut dev, done_ns, &mut s);
        i += 1;
    }
    s.iter().map(|x| x.token).collect()
}

#[test]
fn ncq_serves_the_shortest_positioning_time() {
    let dg = Class::Destage;
    // ncq 1: the host's FCFS order.
    assert_eq!(ncq_order(1, [dg; 3]), [0, 1, 2, 3]);
    // ncq 4: from 100, C (95) is 5 µs away, B (10) 90, D (300) 200 -> C; from 95: B (85)
    // before D (205).
    assert_eq!(ncq_order(4, [dg; 3]), [0, 2, 1, 3]);
    // ncq 2 holds one command beside A's: B first, then C joins when A leaves and wins.
    assert_eq!(ncq_order(2, [dg; 3]), [0, 2, 1, 3]);
    // A foreground command outranks closer destages; then SPTF from 300: C (95) then B.
    assert_eq!(ncq_order(4, [dg, dg, Class::Foreground]), [0, 3, 2, 1]);
}

/// Closed loop: `depth` operations outstanding at random cylinders until `total` have been
/// served; tokens are reused as operations complete. Returns the stats at the end and a
/// checksum of the `(token, done_ns)` sequence started.
fn closed_loop(spec: QueueSpec, depth: u32, total: u64, seed: u64) -> (DeviceStats, u64) {
    let cylinders = 10_000;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut dev = Device::new(Arm::boxed(cylinders, 1), spec);
    let mut events = BinaryHeap::new();
    let mut started = Vec::new();
    let (mut submitted, mut served, mut checksum) = (0, 0, 0u64);
    for token in 0..depth {
        let io = read_at(rng.next_u64() % cylinders);
        dev.submit(0, io, Class::Foreground, token);
        submitted += 1;
    }
    let mut now = 0;
    loop {
        started.clear();
        served += start_all(&mut dev, now, &mut started) as u64;
        for s in &started {
            events.push(Reverse((s.done_ns, s.token)));
            checksum = (checksum ^ u64::from(s.token) ^ s.done_ns).wrapping_mul(0x100_0000_01B3);
        }
        let Some(Reverse((t, token))) = events.pop() else {
            break;
        };
        now = t;
        dev.complete(now, token);
        if submitted < total {
            let io = read_at(rng.next_u64() % cylinders);
            dev.submit(now, io, Class::Foreground, token);
            submitted += 1;
        }
    }
    assert_eq!(served, total);
    (dev.stats(now), checksum)
}

#[test]
fn sstf_and_clook_cut_the_seek_distance() {
    let (depth, total, seed) = (64, 20_000, 7);
    let mean = |d, ncq| {
        let st = closed_loop(queue_spec(d, ncq, u64::MAX), depth, total, seed).0;
        st.seek_cylinders as f64 / st.ops as f64
    };
    let fcfs = mean(Discipline::Fcfs, 1);
    let sstf = mean(Discipline::Sstf, 1);
    let clook = mean(Discipline::Clook, 1);
    let sptf = mean(Discipline::Fcfs, 32);
    println!(
        "mean seek (cylinders of 10000, {depth} outstanding): fcfs {fcfs:.0}, sstf {sstf:.0}, \
         clook {clook:.0}, fcfs + ncq 32 {sptf:.0}"
    );
    // FCFS seeks a third of the disk on average; the others only a fraction of that.
    assert!((3_000.0..3_700.0).contains(&fcfs), "{fcfs}");
    // Measured (seed 7): fcfs 3348, sstf 110, clook 156, ncq 32 220.
    assert!(sstf * 20.0 < fcfs, "sstf {sstf} vs fcfs {fcfs}");
    assert!(clook * 15.0 < fcfs, "clook {clook} vs fcfs {fcfs}");
    assert!(sstf < clook, "sstf {sstf} vs clook {clook}");
    assert!(sptf * 10.0 < fcfs, "ncq {sptf} vs fcfs {fcfs}");
}

#[test]
fn same_calls_same_results() {
    for (d, ncq) in [(Discipline::Sstf, 1), (Discipline::Clook, 8)] {
        let a = closed_loop(queue_spec(d, ncq, 50_000_000), 16, 3_000, 11);
        let b = closed_loop(queue_spec(d, ncq, 50_000_000), 16, 3_000, 11);
        assert_eq!(a, b);
        assert_ne!(
            a.0,
            closed_loop(queue_spec(d, ncq, 50_000_000), 16, 3_000, 12).0
        );
    }
}

/// Open loop: arrivals `(gap, class, cylinder)`; per arrival `(arrival, start, operations
/// waiting at its arrival)`, and the largest service time seen.
fn open_loop(mut dev: Device, arrivals: &[(u64, Class, u64)]) -> (Vec<(u64, u64, usize)>, u64) {
    let mut out: Vec<(u64, u64, usize)> = Vec::new();
    let mut events = BinaryHeap::new();
    let (mut log, mut next, mut s_max) = (Vec::new(), 0, 0);
    let mut t_next = arrivals.first().map_or(0, |a| a.0);
    // Each pass handles one arrival or one completion.
    for _ in 0..2 * arrivals.len() + 1 {
        let done = events.peek().map(|&Reverse((t, _))| t);
        let now;
        if next < arrivals.len() && done.is_none_or(|d| t_next < d) {
            now = t_next;
            let (_, class, cyl) = arrivals[next];
            out.push((now, u64::MAX, dev.waiting()));
            dev.submit(now, read_at(cyl), class, next as u32);
            next += 1;
            t_next += arrivals.get(next).map_or(0, |a| a.0);
        } else if let Some(Reverse((t, token))) = events.pop() {
            now = t;
            dev.complete(now, token);
        } else {
            break;
        }
        let from = log.len();
        start_all(&mut dev, now, &mut log);
        for s in &log[from..] {
            out[s.token as usize].1 = now;
            s_max = s_max.max(s.service.total_ns);
            events.push(Reverse((s.done_ns, s.token)));
        }
    }
    assert_eq!(dev.present(), 0);
    assert!(out.iter().all(|o| o.1 != u64::MAX));
    (out, s_max)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The documented bound, with the drive reordering (ncq > 1) and serving several at once
    /// (parallelism > 1): start <= arrival + aging + ceil((n_ahead + 1) / p) * s_max.
    #[test]
    fn no_operation_waits_beyond_the_bound(
        discipline in prop_oneof![
            Just(Discipline::Fcfs), Just(Discipline::Sstf), Just(Discipline::Clook)
        ],
        ncq in 1u32..6,
        parallelism in prop_oneof![Just(1u32), Just(3u32)],
        aging_ns in 0u64..400_000,
        arrivals in proptest::collection::vec(
            (0u64..40_000, (0usize..Class::COUNT).prop_map(|i| Class::ALL[i]), 0u64..100),
            1..200,
        ),
    ) {
        let dev = Device::new(
            Arm::boxed(100, parallelism),
            queue_spec(discipline, ncq, aging_ns),
        );
        let (run, s_max) = open_loop(dev, &arrivals);
        for (arrival, start, n_ahead) in run {
            let rounds = (n_ahead as u64 + 1).div_ceil(u64::from(parallelism));
            prop_assert!(
                start - arrival <= aging_ns + rounds * s_max,
                "waited {} with {n_ahead} ahead, s_max {s_max}", start - arrival
            );
        }
    }
}

/// Rough speed of submit/start/complete (the engine's hot path), with its own tiny event
/// loop around it; run with `cargo test --release -- --ignored --nocapture device_speed`.
#[test]
#[ignore = "a timing, not a check; run in release"]
fn device_speed() {
    let total = 4_000_000;
    for (d, ncq) in [
        (Discipline::Fcfs, 1),
        (Discipline::Sstf, 1),
        (Discipline::Clook, 1),
        (Discipline::Fcfs, 32),
    ] {
        for depth in [4, 256] {
            let t0 = std::time::Instant::now();
            let (st, _) = closed_loop(queue_spec(d, ncq, u64::MAX), depth, total, 1);
            let secs = t0.elapsed().as_secs_f64();
            assert_eq!(st.ops, total);
            println!(
                "{d:?} ncq {ncq} depth {depth}: {:.1} M ops/s",
                total as f64 / secs / 1e6
            );
        }
    }
}
