//! The member operations of one request, issued in parallel.
//!
//! A plan's reads (or its writes, or a FLUSH's member syncs) go to different members and
//! do not depend on each other, so they are issued together: the caller runs the first one
//! itself and a scoped thread runs each other one; the caller returns when all are done.
//! The thread's priority class (foreground, destage, rebuild, background) travels with each
//! operation, so a disk-timed member queues it in its caller's class whichever thread
//! carries it.
//!
//! **When.** A thread costs tens of microseconds to start; a member that answers in memory
//! time (tmpfs, the page cache) is faster driven one operation after another. So operations
//! fan out only when some member they go to is slow: a disk-timed member, or one whose
//! recent operations took at least [`SLOW_NS_MIN`] on average (a moving average per slot,
//! kept by the controller's member I/O). Under the scheduled tests they always fan out, so
//! the scheduler explores the interleavings of parallel member I/O.
//!
//! **Bounded.** At most [`FANOUT_MAX`] operations run at once per call; more are run in
//! waves of that size.

use crate::member::timed::{set_thread_class, thread_class};
use crate::sync::thread;

/// Operations one call runs at once (a plan touches each member at most a few times).
pub const FANOUT_MAX: usize = 32;

/// A member whose operations take this long on average is driven in parallel (the NBD
/// server's bound for answering in memory time).
pub const SLOW_NS_MIN: u64 = 50_000;

/// Run `f` on every item, in parallel when `parallel` and there is more than one; results
/// in the items' order. `f` runs in the caller's priority class on every thread.
pub fn each<T, R, F>(parallel: bool, items: Vec<T>, f: F) -> Vec<R>
where
    T: Send,
    R: Send,
    F: Fn(T) -> R + Sync,
{
    if !parallel || items.len() < 2 {
        return items.into_iter().map(f).collect();
    }
    let class = thread_class();
    let mut out: Vec<R> = Vec::with_capacity(items.len());
    let mut items = items.into_iter().peekable();
    // Bounded: each wave takes up to FANOUT_MAX items, and the iterator shrinks.
    while items.peek().is_some() {
        let wave: Vec<T> = items.by_ref().take(FANOUT_MAX).collect();
        let f = &f;
        // Each thread leaves its result in its own cell; the scope's end waits for every
        // thread (and carries a thread's panic to the caller). The handles are not joined
        // one by one: shuttle's scoped join can wake the scope's owner before the thread's
        // result is stored.
        let cells: Vec<std::sync::Mutex<Option<R>>> = (1..wave.len())
            .map(|_| std::sync::Mutex::new(None))
            .collect();
        thread::scope(|s| {
            let mut wave = wave.into_iter();
            let first = wave.next().expect("a wave has an item");
            let handles: Vec<_> = wave
                .zip(&cells)
                .map(|(item, cell)| {
                    s.spawn(move || {
                        set_thread_class(class);
                        let r = f(item);
                        *cell.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                    })
                })
                .collect();
            out.push(f(first));
            // Under shuttle, the scope's own wait for its threads can end early (its owner is
            // woken by an unrelated event), so the owner waits here, at scheduling points,
            // until every thread has finished. Bounded: a run has a step bound anyway.
            #[cfg(feature = "shuttle")]
            for turn in 0u64.. {
                if handles.iter().all(|h| h.is_finished()) {
                    break;
                }
                assert!(
                    turn < 10_000_000,
                    "parallel member operations never finished"
                );
                thread::yield_now();
            }
            drop(handles);
        });
        out.extend(cells.into_iter().map(|c| {
            c.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every thread of the scope ran to its end")
        }));
    }
    out
}

/// An exponentially weighted mean (weight 1/8) of a slot's member operation times, in
/// nanoseconds, kept without a lock (a lost update between racing operations only delays
/// the mean a little). Each time counts at most twice the slow bound: on a loaded machine a
/// memory-speed operation is now and then preempted for a millisecond, and one such outlier
/// must not make a fast member look slow (it moves the mean by 12.5 µs at most), while a
/// member that is slow every time still settles above the bound.
pub fn observe(mean_ns: &std::sync::atomic::AtomicU64, took_ns: u64) {
    use std::sync::atomic::Ordering::Relaxed;
    let took_ns = took_ns.min(2 * SLOW_NS_MIN);
    let old = mean_ns.load(Relaxed);
    let new = if old == 0 {
        took_ns
    } else {
        old - old / 8 + took_ns / 8
    };
    mean_ns.store(new, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use raidlab::disk::Class;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Arc, Barrier};

    #[test]
    fn sequential_keeps_order_and_runs_on_the_caller() {
        let me = std::thread::current().id();
        let out = each(false, vec![1, 2, 3], |x| {
            assert_eq!(std::thread::current().id(), me);
            x * 10
        });
        assert_eq!(out, vec![10, 20, 30]);
    }

    #[test]
    fn parallel_runs_every_item_at_once_in_the_callers_class() {
        // Four items that each wait for all four: only a parallel run can finish.
        let barrier = Arc::new(Barrier::new(4));
        set_thread_class(Class::Rebuild);
        let out = each(true, vec![0u32, 1, 2, 3], |x| {
            barrier.wait();
            (x, thread_class())
        });
        set_thread_class(Class::Foreground);
        assert_eq!(
            out,
            (0..4).map(|x| (x, Class::Rebuild)).collect::<Vec<_>>(),
            "results in order, every one in the caller's class"
        );
    }

    #[test]
    fn more_items_than_the_bound_run_in_waves() {
        let now = Arc::new(AtomicU32::new(0));
        let max = Arc::new(AtomicU32::new(0));
        let n = FANOUT_MAX * 2 + 3;
        let out = each(true, (0..n).collect::<Vec<_>>(), |x| {
            let k = now.fetch_add(1, Ordering::SeqCst) + 1;
            max.fetch_max(k, Ordering::SeqCst);
            std::thread::yield_now();
            now.fetch_sub(1, Ordering::SeqCst);
            x
        });
        assert_eq!(out, (0..n).collect::<Vec<_>>());
        assert!(max.load(Ordering::SeqCst) as usize <= FANOUT_MAX);
    }

    /// A member that takes 20 ms per operation and counts, with the other gates, how many
    /// operations are in flight at once (the most in `peak`).
    #[derive(Debug)]
    struct Gate {
        inner: crate::member::MemMember,
        now: Arc<AtomicU32>,
        peak: Arc<AtomicU32>,
    }

    impl Gate {
        fn op<R>(&self, f: impl FnOnce() -> R) -> R {
            let k = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(k, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            let r = f();
            self.now.fetch_sub(1, Ordering::SeqCst);
            r
        }
    }

    impl crate::member::Member for Gate {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            self.op(|| self.inner.read_at(buf, offset))
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
            self.op(|| self.inner.write_at(buf, offset))
        }
        fn sync(&self) -> std::io::Result<()> {
            self.op(|| self.inner.sync())
        }
        crate::member::forward_identity!(inner);
    }

    /// A slow RAID-5: a small write's two reads and two writes, a degraded read's four
    /// reads and a FLUSH's five syncs each reach the members together, and the bytes are
    /// right.
    #[test]
    fn a_slow_arrays_member_operations_run_together() {
        use crate::ctrl::tests::{pattern, shape};
        use crate::ctrl::{Controller, NoMeta, Options};
        use crate::member::{MemMember, Member};
        let sh = shape(raidlab::array::Level::Raid5, 5, 8);
        let now = Arc::new(AtomicU32::new(0));
        let peak = Arc::new(AtomicU32::new(0));
        let gates: Vec<Arc<Gate>> = (0..5)
            .map(|i| {
                Arc::new(Gate {
                    inner: MemMember::new(
                        &format!("g{i}"),
                        sh.data_offset_bytes + sh.member_data_bytes,
                    ),
                    now: Arc::clone(&now),
                    peak: Arc::clone(&peak),
                })
            })
            .collect();
        let devs = gates
            .iter()
            .map(|g| Some(g.clone() as Arc<dyn Member>))
            .collect();
        let c = Controller::new(
            sh,
            devs,
            Vec::new(),
            None,
            1,
            Box::new(NoMeta),
            Options::default(),
        )
        .unwrap();
        // The first operations (and the first syncs, timed apart) teach the controller that
        // the members are slow.
        let a = pattern(1, 4096);
        c.write(0, &a, false).unwrap();
        c.flush().unwrap();
        let b = pattern(2, 4096);
        let run = |what: &str, f: &mut dyn FnMut()| {
            peak.store(0, Ordering::SeqCst);
            f();
            assert!(
                peak.load(Ordering::SeqCst) >= 2,
                "{what}: the member operations ran one after another"
            );
        };
        run("small write", &mut || c.write(4096, &b, false).unwrap());
        run("flush", &mut || c.flush().unwrap());
        c.fail_member(1, "test").unwrap();
        // Block 4 of row 0 (64 KiB chunks of 16 KiB: lba 4 is on slot 1) is reconstructed.
        let mut got = vec![0u8; 4096];
        run("degraded read", &mut || {
            c.read(4 * 4096, &mut got).unwrap();
        });
        let mut back = vec![0u8; 8192];
        c.read(0, &mut back).unwrap();
        assert_eq!(&back[..4096], &a[..]);
        assert_eq!(&back[4096..], &b[..]);
        assert_eq!(got, vec![0u8; 4096], "block 4 was never written");
    }

    #[test]
    fn spans_of_a_workspace_are_disjoint_and_in_order() {
        let mut ws = crate::ctrl::column::Workspace::default();
        ws.reset(3, 0, 4);
        let spans = [(2, 1, 2), (0, 0, 1), (1, 3, 1)];
        for (k, s) in ws.old_spans_mut(&spans).into_iter().enumerate() {
            assert_eq!(s.len(), spans[k].2 * BLOCK_BYTES);
            s.fill(k as u8 + 1);
        }
        assert_eq!(ws.old_ref(2, 1, 2), &[1u8; 2 * BLOCK_BYTES][..]);
        assert_eq!(ws.old_ref(0, 0, 1), &[2u8; BLOCK_BYTES][..]);
        assert_eq!(ws.old_ref(1, 3, 1), &[3u8; BLOCK_BYTES][..]);
        assert_eq!(ws.old_ref(0, 1, 1), &[0u8; BLOCK_BYTES][..], "untouched");
    }

    const BLOCK_BYTES: usize = crate::ctrl::column::BLOCK;

    #[test]
    fn the_mean_follows_the_times() {
        let m = std::sync::atomic::AtomicU64::new(0);
        observe(&m, 8000);
        assert_eq!(m.load(Ordering::Relaxed), 8000);
        observe(&m, 16000);
        assert_eq!(m.load(Ordering::Relaxed), 8000 - 1000 + 2000);
        for _ in 0..100 {
            observe(&m, 800);
        }
        assert!(m.load(Ordering::Relaxed) < 1000);
    }

    #[test]
    fn one_preempted_operation_does_not_make_a_fast_member_slow() {
        let m = std::sync::atomic::AtomicU64::new(0);
        for _ in 0..20 {
            observe(&m, 4_000);
        }
        // A 5 ms outlier (a preemption) among 4 µs operations.
        observe(&m, 5_000_000);
        assert!(m.load(Ordering::Relaxed) < SLOW_NS_MIN);
        // A member slow every time (a disk-timed one, an fdatasync) settles above the bound.
        for _ in 0..20 {
            observe(&m, 6_000_000);
        }
        assert!(m.load(Ordering::Relaxed) >= SLOW_NS_MIN);
    }
}
