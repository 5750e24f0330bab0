//! A workload drawn on its own thread: the source (a generator, or a trace being read,
//! decompressed and parsed) runs on a producer thread and hands the engine its requests in
//! batches through a bounded channel, so drawing the next requests overlaps simulating the
//! last ones when a core is spare.
//!
//! The engine sees exactly the stream [`super::open`] gives, request for request, and each
//! error in its place: only where the work is done changes, never what is drawn, so results
//! are bit for bit those of the same run without the thread. The source is opened on the
//! producer thread (sources need not be `Send`); only requests and errors cross.
//!
//! Bounds: at most [`BATCHES_IN_FLIGHT`] full batches wait in the channel and one more is
//! being filled, so the producer runs at most about `(BATCHES_IN_FLIGHT + 1) * BATCH`
//! requests ahead of the engine, and the batch buffers are recycled (no allocation per
//! batch once the first few exist). Dropping the source stops the producer at its next
//! batch and joins it; a producer blocked in a read (a pipe that never yields) holds the
//! drop until that read returns, as the same read would have held the engine without the
//! thread.
//!
//! Not for a source whose stream depends on when it is drawn (`set_load`, the ramp
//! driver): that one must stay on the engine's thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use super::{Addressing, Request, RequestSource, WorkloadSpec};
use crate::error::{Error, Result};

/// Requests per batch: large enough that the channel's cost per request is negligible,
/// small enough that the first batch arrives at once.
const BATCH: usize = 1024;
/// Full batches the channel holds before the producer waits.
const BATCHES_IN_FLIGHT: usize = 4;

/// What the producer sends.
enum Msg {
    /// The opened source's description, first and once.
    Opened {
        addressing: Addressing,
        label: String,
        device_bases: Option<Vec<(u64, u64)>>,
    },
    /// Requests, in order, never empty.
    Batch(Vec<Request>),
    /// The stream ended (`None`) or failed (the error, after every request before it).
    End(Option<Error>),
}

/// A [`RequestSource`] whose requests come from a producer thread.
pub struct Threaded {
    rx: Option<Receiver<Msg>>,
    /// Emptied batches, returned for reuse (a full queue drops them).
    recycle: SyncSender<Vec<Request>>,
    stop: Arc<AtomicBool>,
    producer: Option<JoinHandle<()>>,
    batch: Vec<Request>,
    /// Next request of `batch`.
    at: usize,
    /// Whether the stream has ended (after its end or error was handed out).
    done: bool,
    addressing: Addressing,
    label: String,
    device_bases: Option<Vec<(u64, u64)>>,
}

/// Open `spec` on a producer thread, telling it its `load` (`RequestSource::set_load`)
/// before anything is drawn when one is given. Errors opening it (a missing file, a bad
/// header) or setting the load are returned here, as [`super::open`] and `set_load` return
/// them.
pub fn open(spec: &WorkloadSpec, load: Option<f64>) -> Result<Box<dyn RequestSource>> {
    let (tx, rx) = sync_channel(BATCHES_IN_FLIGHT);
    // Every batch in existence is in one of the two channels, being filled or being read.
    let (recycle, reuse) = sync_channel(BATCHES_IN_FLIGHT + 2);
    let stop = Arc::new(AtomicBool::new(false));
    let spec = spec.clone();
    let flag = Arc::clone(&stop);
    let producer = std::thread::Builder::new()
        .name("raidlab-workload".into())
        .spawn(move || produce(&spec, load, &tx, &reuse, &flag))
        .map_err(|e| Error::io("workload thread", &e))?;
    let mut src = Threaded {
        rx: Some(rx),
        recycle,
        stop,
        producer: Some(producer),
        batch: Vec::new(),
        at: 0,
        done: false,
        addressing: Addressing::Bytes,
        label: String::new(),
        device_bases: None,
    };
    match src.receive() {
        Msg::Opened {
            addressing,
            label,
            device_bases,
        } => {
            src.addressing = addressing;
            src.label = label;
            src.device_bases = device_bases;
            Ok(Box::new(src))
        }
        Msg::End(Some(e)) => Err(e),
        Msg::Batch(_) | Msg::End(None) => unreachable!("the producer describes its source first"),
    }
}

/// The producer: open `spec` (at `load`), describe it, then send its requests in batches
/// until the stream ends, fails, or the consumer is gone or asks to stop.
fn produce(
    spec: &WorkloadSpec,
    load: Option<f64>,
    tx: &SyncSender<Msg>,
    reuse: &Receiver<Vec<Request>>,
    stop: &AtomicBool,
) {
    let opened = super::open(spec).and_then(|mut s| {
        if let Some(iops) = load {
            s.set_load(iops)?;
        }
        Ok(s)
    });
    let mut src = match opened {
        Ok(s) => s,
        Err(e) => {
            let _ = tx.send(Msg::End(Some(e)));
            return;
        }
    };
    let opened = Msg::Opened {
        addressing: src.addressing(),
        label: src.label().to_string(),
        device_bases: src.device_bases().map(<[_]>::to_vec),
    };
    if tx.send(opened).is_err() {
        return;
    }
    // Bounded by the stream: each pass draws up to `BATCH` requests or ends the loop.
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let mut batch = match reuse.try_recv() {
            Ok(b) => b,
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => Vec::with_capacity(BATCH),
        };
        debug_assert!(batch.is_empty());
        let mut end = None;
        while batch.len() < BATCH {
            match src.next_request() {
                Ok(Some(r)) => batch.push(r),
                Ok(None) => {
                    end = Some(None);
                    break;
                }
                Err(e) => {
                    end = Some(Some(e));
                    break;
                }
            }
        }
        if !batch.is_empty() && tx.send(Msg::Batch(batch)).is_err() {
            return;
        }
        if let Some(e) = end {
            let _ = tx.send(Msg::End(e));
            return;
        }
    }
}

impl Threaded {
    /// The next message. A producer that vanished without ending its stream panicked:
    /// its panic is raised here, on the engine's thread, as it would have been there.
    fn receive(&mut self) -> Msg {
        let rx = self.rx.as_ref().expect("receiver kept until drop");
        match rx.recv() {
            Ok(m) => m,
            Err(mpsc::RecvError) => {
                let handle = self.producer.take().expect("the producer is joined once");
                match handle.join() {
                    Err(panic) => std::panic::resume_unwind(panic),
                    Ok(()) => unreachable!("the producer ends its stream before it returns"),
                }
            }
        }
    }
}

impl RequestSource for Threaded {
    #[inline]
    fn next_request(&mut self) -> Result<Option<Request>> {
        if let Some(&r) = self.batch.get(self.at) {
            self.at += 1;
            return Ok(Some(r));
        }
        if self.done {
            return Ok(None);
        }
        match self.receive() {
            Msg::Batch(next) => {
                let mut spent = std::mem::replace(&mut self.batch, next);
                spent.clear();
                // Dropped instead when the producer has ended or the queue is full.
                let _ = self.recycle.try_send(spent);
                self.at = 1;
                Ok(Some(self.batch[0]))
            }
            Msg::End(e) => {
                self.done = true;
                e.map_or(Ok(None), Err)
            }
            Msg::Opened { .. } => unreachable!("the source is described once, first"),
        }
    }

    fn addressing(&self) -> Addressing {
        self.addressing
    }

    fn label(&self) -> &str {
        &self.label
    }

    fn device_bases(&self) -> Option<&[(u64, u64)]> {
        self.device_bases.as_deref()
    }

    fn set_load(&mut self, _iops: f64) -> Result<()> {
        // The stream is drawn ahead of the engine, so a load change cannot reach it in time.
        unreachable!("set_load on a workload drawn on its own thread")
    }
}

impl Drop for Threaded {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping the receiver fails the producer's next send, should it be waiting on one.
        drop(self.rx.take());
        if let Some(handle) = self.producer.take() {
            // A producer's panic after the engine stopped listening changes no result.
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `[workload]` of a TOML config.
    fn spec(workload: &str) -> WorkloadSpec {
        let text = format!("{workload}\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 8\n");
        let mut exps = crate::config::from_toml(&text, "t.toml", None).unwrap();
        exps.remove(0).workload
    }

    /// Every request of `src` (at most `max`), then its end or error, then what it gives
    /// after that.
    fn drain(src: &mut dyn RequestSource, max: usize) -> (Vec<Request>, Option<String>, bool) {
        let mut got = Vec::new();
        // Bounded by `max`.
        for _ in 0..=max {
            match src.next_request() {
                Ok(Some(r)) => got.push(r),
                Ok(None) => return (got, None, src.next_request().unwrap().is_none()),
                Err(e) => {
                    let after = matches!(src.next_request(), Ok(None));
                    return (got, Some(e.to_string()), after);
                }
            }
        }
        panic!("more than {max} requests");
    }

    #[test]
    fn the_same_stream_across_batch_edges() {
        for n in [1, 2, BATCH - 1, BATCH, BATCH + 1, 3 * BATCH + 7] {
            let w = spec(&format!(
                "[workload.synthetic]\nkind = \"zipf\"\nkeys = 500\nalpha = 0.9\nrequests = {n}\nseed = 3"
            ));
            let mut plain = super::super::open(&w).unwrap();
            let mut threaded = open(&w, None).unwrap();
            assert_eq!(threaded.addressing(), plain.addressing());
            assert_eq!(threaded.label(), plain.label());
            let (a, b) = (drain(&mut *plain, n), drain(&mut *threaded, n));
            assert_eq!(a.0.len(), n);
            assert_eq!(a, b, "{n} requests");
        }
    }

    #[test]
    fn an_error_in_its_place_and_the_file_s_description() {
        let dir = std::env::temp_dir().join(format!("raidlab-threaded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // oracleGeneral records (time u32, id u64, size u32, next i64); record 2000's
        // `next_access_vtime` is one no oracleGeneral file holds.
        let mut bytes = Vec::new();
        for i in 0..2500u64 {
            let next: i64 = if i == 1999 { 1 << 60 } else { -1 };
            bytes.extend_from_slice(&((i / 100) as u32).to_le_bytes());
            bytes.extend_from_slice(&(i % 700).to_le_bytes());
            bytes.extend_from_slice(&4096u32.to_le_bytes());
            bytes.extend_from_slice(&next.to_le_bytes());
        }
        let path = dir.join("t.oracleGeneral.bin");
        std::fs::write(&path, bytes).unwrap();
        let w = spec(&format!(
            "[workload]\ntrace = {:?}\nformat = \"oracle\"",
            path.display().to_string()
        ));
        let mut plain = super::super::open(&w).unwrap();
        let mut threaded = open(&w, None).unwrap();
        assert_eq!(threaded.device_bases(), plain.device_bases());
        let (a, b) = (drain(&mut *plain, 3000), drain(&mut *threaded, 3000));
        assert_eq!(a.0.len(), 1999);
        assert!(a.1.as_deref().unwrap().contains("record 2000"), "{:?}", a.1);
        // The same requests and error; after it (which no caller asks for) the threaded
        // stream has ended.
        assert_eq!((&a.0, &a.1), (&b.0, &b.1));
        assert!(b.2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_open_error_is_returned_at_open() {
        let w = spec("[workload]\ntrace = \"no-such-trace.mqsim.txt\"\nformat = \"mqsim\"");
        let plain = super::super::open(&w).err().expect("a missing file");
        let threaded = open(&w, None).err().expect("a missing file");
        assert_eq!(plain.to_string(), threaded.to_string());
    }

    #[test]
    fn dropping_it_early_stops_the_producer() {
        // A stream far longer than anything drawn here: the drop must not wait for its end.
        let w = spec(
            "[workload.synthetic]\nkind = \"zipf\"\nkeys = 500\nalpha = 0.9\nrequests = 1000000000000",
        );
        for take in [0, 1, 5 * BATCH] {
            let mut threaded = open(&w, None).unwrap();
            for _ in 0..take {
                assert!(threaded.next_request().unwrap().is_some());
            }
            drop(threaded);
        }
    }
}
