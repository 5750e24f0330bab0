//! The block stream a curve sees: exactly the lookups and invalidations counting mode makes
//! (`engine/count.rs`), in the same order, with the same warm-up, so a curve's point and a
//! counting run at that size count the same accesses.

use super::records;
use crate::config::{Experiment, Writes};
use crate::engine::count::PROGRESS_EVERY;
use crate::error::{Error, Result};
use crate::workload::Op;

/// What a curve method is told of the stream.
pub(crate) trait Sink {
    /// A cache lookup of block `key`; `measured` is false during the warm-up.
    fn lookup(&mut self, key: u64, measured: bool) -> Result<()>;
    /// A write dropping block `key` from the cache (`writes = "invalidate"`).
    fn invalidate(&mut self, key: u64);
    /// The next lookups will be of `keys`: read what they read first, so that those memory
    /// loads overlap one another instead of each lookup waiting on its own. Changes nothing.
    fn touch(&self, _keys: &[u64]) {}
}

/// What the walk counted (after the warm-up, as counting mode reports it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Walked {
    pub requests: u64,
    pub lookups: u64,
}

/// Replay `exp`'s workload into `sink`. `progress(requests since the last call)` is called
/// every [`PROGRESS_EVERY`] requests; returning false cancels. An oracleGeneral file takes
/// the dedicated record walk (`records.rs`), everything else the reader's requests.
pub(crate) fn walk<S: Sink>(
    exp: &Experiment,
    sink: &mut S,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<Walked> {
    match records::oracle_path(&exp.workload) {
        Some(path) => records::walk(exp, path, sink, progress),
        None => walk_requests(exp, sink, progress),
    }
}

/// [`walk`] through the workload's reader or generator, request by request (drawn on a
/// thread of its own when a core is spare: the same stream).
pub(crate) fn walk_requests<S: Sink>(
    exp: &Experiment,
    sink: &mut S,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<Walked> {
    let own_thread = crate::engine::spare_cores(1);
    let mut src = crate::engine::open_workload(&exp.workload, own_thread, None)?;
    let addressing = src.addressing();
    let invalidate = exp.cache.writes == Writes::Invalidate;
    let write_lookups = exp.cache.writes == Writes::Access;
    let warmup = exp.run.warmup_requests;
    let mut seen: u64 = 0;
    let mut w = Walked::default();
    while let Some(req) = src.next_request()? {
        seen += 1;
        if seen & (PROGRESS_EVERY - 1) == 0 && !progress(PROGRESS_EVERY) {
            return Err(Error::Cancelled);
        }
        // Counting mode measures from request `warmup + 1` on.
        let measured = seen > warmup;
        w.requests += u64::from(measured);
        let (first, count) = exp.workload.span(&req, addressing);
        if req.op != Op::Read && !write_lookups {
            if invalidate {
                for lba in first..first + count {
                    sink.invalidate(lba);
                }
            }
            continue;
        }
        if measured {
            w.lookups += count;
        }
        for lba in first..first + count {
            sink.lookup(lba, measured)?;
        }
    }
    progress(seen & (PROGRESS_EVERY - 1));
    Ok(w)
}
