//! Worked examples and property tests of the disk queue.

use super::*;
use proptest::prelude::*;

fn spec(discipline: Discipline, aging_ns: u64) -> QueueSpec {
    QueueSpec {
        discipline,
        aging_ns,
        ncq: 1,
    }
}

fn q(token: u32, position: u64, arrival_ns: u64, class: Class) -> Queued {
    Queued {
        token,
        position,
        arrival_ns,
        class,
    }
}

/// Pop everything at `now_ns`, the head moving to each served position; the tokens served.
fn drain(queue: &mut DiskQueue, mut head: u64, now_ns: u64) -> Vec<u32> {
    let mut out = Vec::new();
    while let Some(x) = queue.pop(head, now_ns) {
        head = x.position;
        out.push(x.token);
    }
    assert!(queue.is_empty());
    out
}

/// Tokens 0..7 at positions 70, 20, 55, 45, 90, 45, 10, all foreground, pushed at t = 0.
fn seven(discipline: Discipline) -> DiskQueue {
    let mut queue = DiskQueue::new(spec(discipline, u64::MAX));
    for (token, pos) in [70, 20, 55, 45, 90, 45, 10].into_iter().enumerate() {
        queue.push(q(token as u32, pos, 0, Class::Foreground));
    }
    assert_eq!(queue.len(), 7);
    queue
}

#[test]
fn fcfs_serves_in_arrival_order() {
    assert_eq!(
        drain(&mut seven(Discipline::Fcfs), 50, 0),
        [0, 1, 2, 3, 4, 5, 6]
    );
}

#[test]
fn sstf_worked_example() {
    // head 50: 55 (token 2), 45 (3) and 45 (5) are all 5 away -> the earliest arrival, 2;
    // head 55: 45 is 10 away (token 3 before 5); head 45: 45 again (5);
    // head 45: 70 and 20 are both 25 away -> token 0 (arrived before 1);
    // head 70: 90 (4); head 90: 20 (1); then 10 (6).
    assert_eq!(
        drain(&mut seven(Discipline::Sstf), 50, 0),
        [2, 3, 5, 0, 4, 1, 6]
    );
    // From the bottom the nearest is always the next position up.
    assert_eq!(
        drain(&mut seven(Discipline::Sstf), 0, 0),
        [6, 1, 3, 5, 2, 0, 4]
    );
}

#[test]
fn clook_worked_example() {
    // head 50: ascending from 50 -> 55 (2), 70 (0), 90 (4); nothing at or above 90 is left,
    // wrap to the lowest: 10 (6), 20 (1), 45 (3, before 5 at the same position), 45 (5).
    assert_eq!(
        drain(&mut seven(Discipline::Clook), 50, 0),
        [2, 0, 4, 6, 1, 3, 5]
    );
    // An operation at the head's own position is served first (">= head").
    assert_eq!(
        drain(&mut seven(Discipline::Clook), 45, 0),
        [3, 5, 2, 0, 4, 6, 1]
    );
    // Above every position: wrap at once.
    assert_eq!(
        drain(&mut seven(Discipline::Clook), 99, 0),
        [6, 1, 3, 5, 2, 0, 4]
    );
}

#[test]
fn higher_classes_first() {
    for d in [Discipline::Fcfs, Discipline::Sstf, Discipline::Clook] {
        let mut queue = DiskQueue::new(spec(d, 100));
        queue.push(q(0, 5, 0, Class::Background));
        queue.push(q(1, 5, 1, Class::Rebuild));
        queue.push(q(2, 5, 2, Class::Destage));
        queue.push(q(3, 9, 3, Class::Foreground));
        queue.push(q(4, 1, 4, Class::Foreground));
        assert_eq!(queue.class_len(Class::Foreground), 2);
        assert_eq!(queue.oldest_arrival_ns(), Some(0));
        // At t = 5 nothing has aged: class order; inside foreground the discipline decides
        // (head 1: SSTF and C-LOOK take position 1 first).
        let fg = if d == Discipline::Fcfs {
            [3, 4]
        } else {
            [4, 3]
        };
        let got = drain(&mut queue, 1, 5);
        assert_eq!(got[..2], fg, "{d:?}");
        assert_eq!(got[2..], [2, 1, 0], "{d:?}");
    }
}

#[test]
fn aging_serves_the_oldest_aged_operation_first() {
    let mut queue = DiskQueue::new(spec(Discipline::Sstf, 100));
    queue.push(q(0, 10, 0, Class::Rebuild));
    queue.push(q(1, 10, 5, Class::Background));
    queue.push(q(2, 10, 7, Class::Destage));
    queue.push(q(3, 10, 8, Class::Foreground));
    // t = 99: nothing aged, foreground first.
    assert_eq!(queue.pop(10, 99).map(|x| x.token), Some(3));
    queue.push(q(4, 10, 99, Class::Foreground));
    // t = 105: token 0 has waited 105 and token 1 exactly 100 (aged: >=); the oldest first,
    // both ahead of the younger foreground token 4 and destage token 2 (98, not aged).
    assert_eq!(queue.pop(10, 105).map(|x| x.token), Some(0));
    assert_eq!(queue.pop(10, 105).map(|x| x.token), Some(1));
    assert_eq!(queue.pop(10, 105).map(|x| x.token), Some(4));
    assert_eq!(queue.pop(10, 105).map(|x| x.token), Some(2));
    assert_eq!(queue.pop(10, 105), None);
}

#[test]
fn aging_bounds_sstf_inside_one_class() {
    // A far request and a stream next to the head: SSTF alone would never serve token 0.
    let mut queue = DiskQueue::new(spec(Discipline::Sstf, 100));
    queue.push(q(0, 1000, 0, Class::Foreground));
    let mut served_far_at = None;
    for t in 1..200u64 {
        queue.push(q(t as u32, 1, t, Class::Foreground));
        if queue.pop(0, t).unwrap().token == 0 {
            served_far_at = Some(t);
            break;
        }
    }
    assert_eq!(served_far_at, Some(100));
}

#[test]
fn slots_are_reused() {
    let mut queue = DiskQueue::new(spec(Discipline::Clook, 100));
    for round in 0..100u64 {
        for i in 0..8 {
            queue.push(q(i, (i as u64 * 37) % 11, round, Class::Destage));
        }
        assert_eq!(drain(&mut queue, 0, round).len(), 8);
    }
    assert_eq!(queue.entries.len(), 8);
}

/// The rules written as a linear scan over `(operation, push order)`.
fn reference_pick(items: &[(Queued, u64)], spec: &QueueSpec, head: u64, now_ns: u64) -> usize {
    let oldest = (0..items.len()).min_by_key(|&i| items[i].1).unwrap();
    if now_ns - items[oldest].0.arrival_ns >= spec.aging_ns {
        return oldest;
    }
    let class = items.iter().map(|(x, _)| x.class).min().unwrap();
    let of_class = (0..items.len()).filter(|&i| items[i].0.class == class);
    let key = |i: usize| (items[i].0.position, items[i].1);
    match spec.discipline {
        Discipline::Fcfs => of_class.min_by_key(|&i| items[i].1).unwrap(),
        Discipline::Sstf => of_class
            .min_by_key(|&i| (items[i].0.position.abs_diff(head), items[i].1))
            .unwrap(),
        Discipline::Clook => {
            let all: Vec<usize> = of_class.collect();
            let up = all.iter().copied().filter(|&i| items[i].0.position >= head);
            up.min_by_key(|&i| key(i))
                .or_else(|| all.iter().copied().min_by_key(|&i| key(i)))
                .unwrap()
        }
    }
}

fn discipline() -> impl Strategy<Value = Discipline> {
    prop_oneof![
        Just(Discipline::Fcfs),
        Just(Discipline::Sstf),
        Just(Discipline::Clook)
    ]
}

fn class() -> impl Strategy<Value = Class> {
    (0usize..Class::COUNT).prop_map(|i| Class::ALL[i])
}

/// One step of a random run: push (class, position, time step) or pop (head, time step).
#[derive(Debug, Clone)]
enum Step {
    Push(Class, u64, u64),
    Pop(u64, u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (class(), 0u64..30, 0u64..20).prop_map(|(c, p, dt)| Step::Push(c, p, dt)),
        2 => (0u64..30, 0u64..20).prop_map(|(h, dt)| Step::Pop(h, dt)),
    ]
}

/// A single server that pops whenever it is idle; arrivals `(gap, class, position)` and
/// service times (cycled). Returns, per operation in push order, `(arrival, start,
/// operations queued at its arrival)`, and the class each was pushed in.
fn serve(
    spec: QueueSpec,
    arrivals: &[(u64, Class, u64)],
    service_ns: &[u64],
) -> Vec<(u64, u64, usize, Class)> {
    let mut queue = DiskQueue::new(spec);
    let mut out: Vec<(u64, u64, usize, Class)> = Vec::new();
    let (mut now, mut free_at, mut next, mut served, mut t_arrival) = (0u64, 0u64, 0, 0, 0u64);
    let mut head = 0;
    let times: Vec<u64> = arrivals
        .iter()
        .map(|&(gap, _, _)| {
            t_arrival += gap;
            t_arrival
        })
        .collect();
    // Each pass pushes or pops at least one operation or moves the clock to the next event.
    for _ in 0..4 * arrivals.len() + 4 {
        while next < arrivals.len() && times[next] <= now {
            let (_, class, position) = arrivals[next];
            out.push((times[next], u64::MAX, queue.len(), class));
            queue.push(q(next as u32, position, times[next], class));
            next += 1;
        }
        if free_at <= now {
            if let Some(x) = queue.pop(head, now) {
                head = x.position;
                out[x.token as usize].1 = now;
                free_at = now + service_ns[served % service_ns.len()];
                served += 1;
                continue;
            }
            if next == arrivals.len() {
                break;
            }
            now = times[next];
        } else {
            now = free_at.min(times.get(next).copied().unwrap_or(u64::MAX));
        }
    }
    assert!(queue.is_empty() && served == arrivals.len());
    out
}

#[test]
fn background_waits_within_the_bound_under_foreground_overload() {
    // Foreground arrives every 6 ns and takes 10 ns: it alone overloads the server.
    let s_max = 10;
    let aging = 100;
    let mut arrivals = vec![(0, Class::Foreground, 3), (0, Class::Background, 7)];
    arrivals.extend((0..200).map(|i| (6, Class::Foreground, i % 13)));
    let run = serve(spec(Discipline::Sstf, aging), &arrivals, &[s_max]);
    let (arrival, start, n_ahead, class) = run[1];
    assert_eq!((class, n_ahead), (Class::Background, 1));
    // Served at the first pop after it ages (t = 100): pops fall at 0, 10, 20, ...
    assert_eq!(start - arrival, 100);
    assert!(start - arrival <= aging + (n_ahead as u64 + 1) * s_max);
}

proptest! {
    /// Each pop is the operation the rules (as a linear scan) choose; so every pushed
    /// operation is popped exactly once, and the arena never outgrows the peak length.
    #[test]
    fn pops_follow_the_rules(
        d in discipline(),
        aging in prop_oneof![Just(0u64), 1u64..200, Just(u64::MAX)],
        steps in proptest::collection::vec(step(), 1..300),
    ) {
        let spec = spec(d, aging);
        let mut queue = DiskQueue::new(spec);
        let mut model: Vec<(Queued, u64)> = Vec::new();
        let (mut now, mut seq, mut popped, mut peak) = (0u64, 0u64, Vec::new(), 0);
        for s in steps.iter().chain(std::iter::repeat_n(&Step::Pop(0, 0), 300)) {
            match *s {
                Step::Push(class, position, dt) => {
                    now += dt;
                    let x = q(seq as u32, position, now, class);
                    queue.push(x);
                    model.push((x, seq));
                    seq += 1;
                }
                Step::Pop(head, dt) => {
                    now += dt;
                    let got = queue.pop(head, now);
                    if model.is_empty() {
                        prop_assert_eq!(got, None);
                    } else {
                        let want = model.remove(reference_pick(&model, &spec, head, now)).0;
                        prop_assert_eq!(got, Some(want));
                        popped.push(want.token);
                    }
                }
            }
            peak = peak.max(model.len());
            prop_assert_eq!(queue.len(), model.len());
        }
        prop_assert!(queue.is_empty());
        popped.sort_unstable();
        prop_assert_eq!(popped, (0..seq as u32).collect::<Vec<_>>());
        prop_assert_eq!(queue.entries.len(), peak);
    }

    /// Under FCFS the operations of one class leave in arrival order, whatever the aging.
    #[test]
    fn fcfs_keeps_arrival_order_within_a_class(
        aging in prop_oneof![Just(0u64), 1u64..200, Just(u64::MAX)],
        steps in proptest::collection::vec(step(), 1..300),
    ) {
        let mut queue = DiskQueue::new(spec(Discipline::Fcfs, aging));
        let mut last = [None::<u32>; Class::COUNT];
        let (mut now, mut seq) = (0u64, 0u32);
        for s in steps.iter().chain(std::iter::repeat_n(&Step::Pop(0, 0), 300)) {
            match *s {
                Step::Push(class, position, dt) => {
                    now += dt;
                    queue.push(q(seq, position, now, class));
                    seq += 1;
                }
                Step::Pop(head, dt) => {
                    now += dt;
                    if let Some(x) = queue.pop(head, now) {
                        let c = x.class as usize;
                        prop_assert!(last[c].is_none_or(|t| t < x.token));
                        last[c] = Some(x.token);
                    }
                }
            }
        }
    }

    /// The documented bound: an operation that arrives with `n_ahead` queued starts within
    /// `aging_ns + (n_ahead + 1) * s_max`, whatever keeps arriving in higher classes.
    #[test]
    fn no_operation_waits_beyond_the_bound(
        d in discipline(),
        aging in 0u64..500,
        arrivals in proptest::collection::vec((0u64..12, class(), 0u64..50), 1..300),
        service_ns in proptest::collection::vec(1u64..30, 1..8),
    ) {
        let s_max = *service_ns.iter().max().unwrap();
        for (arrival, start, n_ahead, class) in serve(spec(d, aging), &arrivals, &service_ns) {
            let wait = start - arrival;
            prop_assert!(
                wait <= aging + (n_ahead as u64 + 1) * s_max,
                "{class:?} waited {wait} with {n_ahead} ahead (aging {aging}, s_max {s_max})"
            );
        }
    }
}
