//! The request stream drawn a few requests ahead of the engine, so that the read cache can
//! start loading the index buckets and entries of a request's blocks before its lookup
//! (`ReadPolicy::prefetch`): the lookups then find them in the CPU cache instead of each
//! waiting on its own memory load.
//!
//! Only the drawing moves earlier: the engine still takes the requests one by one, in order,
//! when it would have drawn them, so arrival times and results are exactly those without the
//! look-ahead. A source's error is kept in its place and handed out when the engine reaches
//! it. A source whose stream depends on when it is drawn (`set_load`, the ramp) is read
//! without look-ahead.

use crate::cache::read::ReadPolicy;
use crate::error::{Error, Result};
use crate::workload::{Op, Request, RequestSource};

/// Requests drawn ahead: the buckets of the newest are prefetched, the entries of the one
/// `ENTRY_AHEAD` from the front (by then its buckets have arrived). A power of two.
pub(super) const AHEAD: usize = 8;
const ENTRY_AHEAD: usize = 3;
/// Blocks of one request prefetched at most (a long request's first ones; the rest are
/// looked up as usual).
const PREFETCH_BLOCKS_MAX: u64 = 16;

/// A request drawn ahead, with its blocks.
#[derive(Clone, Copy)]
struct Drawn {
    req: Request,
    first: u64,
    count: u64,
}

const EMPTY: Drawn = Drawn {
    req: Request {
        time_ns: 0,
        op: Op::Read,
        offset: 0,
        len: 0,
    },
    first: 0,
    count: 0,
};

/// What the source said after the buffered requests.
enum End {
    /// Nothing yet: more may come.
    Open,
    /// The stream ended.
    Done,
    /// The source failed (handed out once, then the stream has ended).
    Failed(Error),
}

pub(super) struct Ahead {
    src: Box<dyn RequestSource>,
    /// Ring of the requests drawn and not yet taken: `len` of them from `head`.
    ring: [Drawn; AHEAD],
    head: usize,
    len: usize,
    end: End,
    /// Whether to draw ahead at all (otherwise `ring` stays empty).
    on: bool,
}

impl Ahead {
    /// `src`, drawn ahead when `on`.
    pub(super) fn new(src: Box<dyn RequestSource>, on: bool) -> Ahead {
        Ahead {
            src,
            ring: [EMPTY; AHEAD],
            head: 0,
            len: 0,
            end: End::Open,
            on,
        }
    }

    /// The next request, `Ok(None)` at the end, as the source's `next_request` would give
    /// it. `span` gives a request's blocks `(first, count)`; `policy` prefetches them.
    // Inlined (a plain `#[inline]` was not taken): the request is then not returned through
    // memory and reloaded at once.
    #[inline(always)]
    pub(super) fn next_request(
        &mut self,
        policy: &dyn ReadPolicy,
        span: impl Fn(&Request) -> (u64, u64),
    ) -> Result<Option<Request>> {
        if !self.on {
            return self.src.next_request();
        }
        // Top up to `AHEAD` drawn (the first call draws them all). Bounded by `AHEAD`.
        while self.len < AHEAD && matches!(self.end, End::Open) {
            match self.src.next_request() {
                Ok(Some(req)) => {
                    let (first, count) = span(&req);
                    let count = count.min(PREFETCH_BLOCKS_MAX);
                    policy.prefetch(first, count);
                    self.ring[(self.head + self.len) % AHEAD] = Drawn { req, first, count };
                    self.len += 1;
                }
                Ok(None) => self.end = End::Done,
                Err(e) => self.end = End::Failed(e),
            }
        }
        if self.len > ENTRY_AHEAD {
            let d = &self.ring[(self.head + ENTRY_AHEAD) % AHEAD];
            policy.prefetch_entries(d.first, d.count);
        }
        if self.len == 0 {
            return match std::mem::replace(&mut self.end, End::Done) {
                End::Failed(e) => Err(e),
                End::Open | End::Done => Ok(None),
            };
        }
        let req = self.ring[self.head].req;
        self.head = (self.head + 1) % AHEAD;
        self.len -= 1;
        Ok(Some(req))
    }

    /// Tell the source of a new load. Only without look-ahead (nothing drawn early).
    pub(super) fn set_load(&mut self, iops: f64) -> Result<()> {
        assert!(self.len == 0, "set_load with requests drawn ahead");
        self.src.set_load(iops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::read::lru::Lru;
    use crate::workload::Addressing;

    /// `n` requests, then an error (when `fail`) or the end.
    struct Counted {
        next: u64,
        n: u64,
        fail: bool,
    }

    impl RequestSource for Counted {
        fn next_request(&mut self) -> Result<Option<Request>> {
            if self.next == self.n {
                self.next += 1;
                return if self.fail {
                    Err(Error::config("test", "broken record"))
                } else {
                    Ok(None)
                };
            }
            assert!(self.next < self.n, "read after the end");
            self.next += 1;
            Ok(Some(Request {
                time_ns: self.next * 10,
                op: Op::Read,
                offset: self.next * 4096,
                len: 8192,
            }))
        }
        fn addressing(&self) -> Addressing {
            Addressing::Bytes
        }
        fn label(&self) -> &str {
            "counted"
        }
    }

    fn drain(on: bool, n: u64, fail: bool) -> (Vec<Request>, bool) {
        let src = Box::new(Counted { next: 0, n, fail });
        let mut a = Ahead::new(src, on);
        let lru = Lru::new(16, 16);
        let mut got = Vec::new();
        // Bounded: the source ends after `n` requests.
        for _ in 0..n + 2 {
            match a.next_request(&lru, |r| (r.offset / 4096, 2)) {
                Ok(Some(r)) => got.push(r),
                Ok(None) => return (got, false),
                Err(_) => return (got, true),
            }
        }
        panic!("the stream did not end");
    }

    #[test]
    fn the_same_stream_and_the_error_in_its_place() {
        for n in [0, 1, 3, AHEAD as u64, 20] {
            for fail in [false, true] {
                assert_eq!(drain(true, n, fail), drain(false, n, fail), "{n} {fail}");
                assert_eq!(drain(true, n, fail).0.len() as u64, n);
                assert_eq!(drain(true, n, fail).1, fail);
            }
        }
    }
}
