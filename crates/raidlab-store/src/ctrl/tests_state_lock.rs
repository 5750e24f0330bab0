//! What may and may not wait for the controller's state lock: a row write holds it shared
//! through its member I/O, and Rust's lock makes every new reader wait behind a waiting
//! writer, so a routine write lock stalls every request for as long as the slowest row
//! write in flight.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use raidlab::array::Level;

use super::tests::{controller, mem_members, shape};
use super::*;
use crate::member::Member;

/// How long a test waits for something that should happen at once.
const PATIENCE: Duration = Duration::from_secs(5);

#[test]
fn asking_for_a_rebuild_with_nothing_to_do_takes_no_write_lock() {
    let sh = shape(Level::Raid5, 3, 4);
    let (c, _) = controller(&sh, &mem_members(&sh, "d", 3), Options::default());
    let c = Arc::new(c);
    // A row write in flight holds the state shared.
    let held = c.read_state();
    let (tx, rx) = channel();
    let asker = {
        let c = Arc::clone(&c);
        std::thread::spawn(move || tx.send(c.maybe_start_rebuild()).unwrap())
    };
    let answer = rx.recv_timeout(PATIENCE);
    drop(held);
    asker.join().unwrap();
    assert_eq!(
        answer,
        Ok(false),
        "the main loop's ask waited for the row write in flight"
    );
}

/// A sink whose superblock updates wait until the test opens its gate.
#[derive(Default)]
struct Gate {
    entered: AtomicU32,
    /// The event numbers of the updates, in the order they came.
    seen: Mutex<Vec<u64>>,
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
}

impl MetaSink for Arc<Gate> {
    fn persist(&self, snap: &Snapshot) -> Result<(), MetaError> {
        self.seen.lock().unwrap().push(snap.events);
        self.entered.fetch_add(1, Ordering::SeqCst);
        let g = self.open.lock().unwrap();
        let (g, waited) = self.cv.wait_timeout_while(g, PATIENCE, |o| !*o).unwrap();
        assert!(*g && !waited.timed_out(), "the gate was never opened");
        Ok(())
    }
}

/// A RAID-5 of three in-memory members whose superblock updates go through `gate`.
fn gated(gate: &Arc<Gate>) -> Controller {
    let sh = shape(Level::Raid5, 3, 4);
    let devs = mem_members(&sh, "d", 3)
        .iter()
        .map(|m| Some(m.clone() as Arc<dyn Member>))
        .collect();
    Controller::new(
        sh,
        devs,
        Vec::new(),
        None,
        1,
        Box::new(Arc::clone(gate)),
        Options::default(),
    )
    .unwrap()
}

/// Wait (a bounded time) until `n` updates have reached the gate.
fn wait_entered(gate: &Gate, n: u32) {
    for _ in 0..PATIENCE.as_millis() {
        if gate.entered.load(Ordering::SeqCst) >= n {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(gate.entered.load(Ordering::SeqCst), n);
}

#[test]
fn marking_the_array_dirty_holds_up_only_the_writers() {
    let gate = Arc::new(Gate::default());
    let c = gated(&gate);
    c.assume_clean(true);
    let (done_tx, done_rx) = channel();
    std::thread::scope(|s| {
        let first = {
            let (c, done_tx) = (&c, done_tx.clone());
            s.spawn(move || {
                c.set_clean(false);
                done_tx.send(1).unwrap();
            })
        };
        wait_entered(&gate, 1);
        // The superblocks are being written: reads and the state go on meanwhile (with the
        // state locked, this read waits for the gate, which never opens: the writer fails).
        let mut buf = vec![0u8; 4096];
        c.read(0, &mut buf).unwrap();
        assert!(!c.is_clean());
        // A second writer finds the array marked and waits for the same update.
        let second = {
            let c = &c;
            s.spawn(move || {
                c.set_clean(false);
                done_tx.send(2).unwrap();
            })
        };
        assert!(
            done_rx.recv_timeout(Duration::from_millis(50)).is_err(),
            "a writer went on before the dirty mark was durable"
        );
        gate.open();
        first.join().unwrap();
        second.join().unwrap();
    });
    assert_eq!(
        gate.entered.load(Ordering::SeqCst),
        1,
        "one update marks it"
    );
}

/// The rebuild's checkpoint (every second) only records progress: requests go on while it
/// is written, and a state change after it is written after it.
#[test]
fn a_progress_update_holds_up_no_request_and_keeps_its_place() {
    let gate = Arc::new(Gate::default());
    let c = gated(&gate);
    let (done_tx, done_rx) = channel();
    std::thread::scope(|s| {
        let progress = s.spawn(|| c.persist_progress());
        wait_entered(&gate, 1);
        let data = vec![7u8; 4096];
        c.write(0, &data, false).unwrap();
        let mut buf = vec![0u8; 4096];
        c.read(0, &mut buf).unwrap();
        assert_eq!(buf, data);
        let change = s.spawn(|| {
            c.fail_member(2, "test").unwrap();
            done_tx.send(()).unwrap();
        });
        assert!(
            done_rx.recv_timeout(Duration::from_millis(50)).is_err(),
            "a state change was written while an earlier update was being written"
        );
        gate.open();
        progress.join().unwrap();
        change.join().unwrap();
    });
    assert_eq!(
        *gate.seen.lock().unwrap(),
        vec![2, 3],
        "updates in event order"
    );
}

/// A rebuild run marks its rows rebuilt while row writes in flight hold the state shared
/// (the rows' own locks keep their writers out): marking them under the write lock made
/// every request wait behind the slowest row write, once per run.
#[test]
fn a_rebuild_run_marks_its_rows_beside_a_row_write_in_flight() {
    let (c, _, _, data) = super::rebuild_tests::degraded(16);
    assert!(c.maybe_start_rebuild() || c.rebuild_active());
    let c = Arc::new(c);
    let held = c.read_state();
    let (tx, rx) = channel();
    let runner = {
        let c = Arc::clone(&c);
        std::thread::spawn(move || tx.send(c.rebuild_step(16)).unwrap())
    };
    let stepped = rx.recv_timeout(PATIENCE);
    let marked = held.array.rebuilding(2).map(|m| m.count());
    drop(held);
    runner.join().unwrap();
    assert_eq!(
        stepped,
        Ok(Some(Duration::ZERO)),
        "the run waited for the row write in flight"
    );
    assert_eq!(marked, Some(16), "the run's rows are marked");
    super::tests::rebuild_to_end(&c);
    assert_eq!(super::tests::read_all(&c), data);
}
