//! Worked examples of the write-intent bitmap's writes: in which class the members see
//! them, and who waits for them.

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use raidlab::array::Level;
use raidlab::disk::Class;

use super::tests::{mem_members, shape};
use super::*;
use crate::member::timed::{set_thread_class, thread_class};
use crate::member::Member;

/// A sink that records the class each bitmap write ran in and the bits it wrote, and holds
/// a write while its gate is shut.
#[derive(Default)]
struct Gated {
    writes: Mutex<Vec<(Class, Vec<bool>)>>,
    shut: Mutex<bool>,
    cv: Condvar,
}

impl Gated {
    fn set(&self, shut: bool) {
        *self.shut.lock().unwrap() = shut;
        self.cv.notify_all();
    }
}

impl MetaSink for Arc<Gated> {
    fn persist(&self, _snap: &Snapshot) -> Result<(), MetaError> {
        Ok(())
    }
    fn write_intent(&self, dirty: &[bool], _cleared: Option<u64>) -> Result<(), MetaError> {
        self.writes
            .lock()
            .unwrap()
            .push((thread_class(), dirty.to_vec()));
        let mut shut = self.shut.lock().unwrap();
        // Bounded: a test opens the gate within seconds; past that the write goes on.
        for _ in 0..100 {
            if !*shut {
                break;
            }
            shut = self
                .cv
                .wait_timeout(shut, Duration::from_millis(100))
                .unwrap()
                .0;
        }
        Ok(())
    }
}

/// A RAID-5 of 3 with one row per bitmap region.
fn gated_array() -> (Arc<Controller>, Arc<Gated>) {
    let sh = shape(Level::Raid5, 3, 8);
    let devs = mem_members(&sh, "m", 3)
        .into_iter()
        .map(|m| Some(m as Arc<dyn Member>))
        .collect();
    let sink = Arc::new(Gated::default());
    let c = Controller::new(
        sh,
        devs,
        Vec::new(),
        None,
        1,
        Box::new(sink.clone()),
        Options::default(),
    )
    .unwrap();
    c.init_intent_regions(1, None);
    (Arc::new(c), sink)
}

/// A set write gates every write into its regions, so it goes in the members' first class
/// whoever makes it (here the destager's class), and the caller's class is kept.
#[test]
fn a_bitmap_write_goes_in_the_first_class_whoever_writes() {
    let (c, sink) = gated_array();
    set_thread_class(Class::Destage);
    c.intent_begin(2, 2).unwrap();
    assert_eq!(thread_class(), Class::Destage);
    set_thread_class(Class::Foreground);
    let writes = sink.writes.lock().unwrap().clone();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].0, Class::Foreground);
    assert_eq!(writes[0].1[..4], [false, false, true, false]);
    c.intent_end(2, 2);
    // The clear (the background thread's, in the rebuild class) goes first class too.
    set_thread_class(Class::Rebuild);
    assert_eq!(c.intent_clear_idle(true), 1);
    set_thread_class(Class::Foreground);
    let writes = sink.writes.lock().unwrap().clone();
    assert_eq!(writes.len(), 2);
    assert_eq!(writes[1].0, Class::Foreground);
    assert!(writes[1].1.iter().all(|&b| !b));
}

/// While a bitmap write sets region 1's bit, a write into region 0 (set and durable) goes
/// on, and a second write into region 1 waits for that bitmap write, then needs none of
/// its own.
#[test]
fn only_writes_into_a_region_being_set_wait_for_its_bitmap_write() {
    let (c, sink) = gated_array();
    c.intent_begin(0, 0).unwrap();
    sink.set(true);
    let (tx, rx) = mpsc::channel();
    let setter = {
        let (c, tx) = (c.clone(), tx.clone());
        std::thread::spawn(move || {
            c.intent_begin(1, 1).unwrap();
            tx.send("setter").unwrap();
        })
    };
    // Bounded: the setter reaches the gate within seconds.
    for _ in 0..500 {
        if sink.writes.lock().unwrap().len() == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        sink.writes.lock().unwrap().len(),
        2,
        "the set write is in flight"
    );
    let other = {
        let (c, tx) = (c.clone(), tx.clone());
        std::thread::spawn(move || {
            c.intent_begin(0, 0).unwrap();
            tx.send("region 0").unwrap();
        })
    };
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok("region 0"));
    let waiter = {
        let c = c.clone();
        std::thread::spawn(move || {
            c.intent_begin(1, 1).unwrap();
            tx.send("waiter").unwrap();
        })
    };
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(200)),
        Err(mpsc::RecvTimeoutError::Timeout),
        "a write into region 1 went on before its bit was durable"
    );
    sink.set(false);
    let mut done = [
        rx.recv_timeout(Duration::from_secs(5)).unwrap(),
        rx.recv_timeout(Duration::from_secs(5)).unwrap(),
    ];
    done.sort();
    assert_eq!(done, ["setter", "waiter"]);
    for t in [setter, other, waiter] {
        t.join().unwrap();
    }
    // Two bitmap writes in all: region 0's, then region 1's.
    assert_eq!(sink.writes.lock().unwrap().len(), 2);
    assert_eq!(c.resync_lock().set_writes, 2);
}
