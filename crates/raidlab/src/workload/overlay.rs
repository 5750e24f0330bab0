//! Overlaying several request streams into one, merged by arrival time: the way the
//! RAPID-Cache and Varma-Jacobson papers raise a trace's load (several days of one disk's
//! trace replayed at once). Every part keeps its own times (each starts at 0) and addresses;
//! equal times are broken by part order, so the merge is deterministic.

use super::{Addressing, Request, RequestSource};
use crate::error::{Error, Result};

/// Most parts one overlay merges (the merge scans every part's head per request).
pub const PARTS_MAX: usize = 64;

/// The merged stream.
pub struct Overlay<'a> {
    parts: Vec<Box<dyn RequestSource + 'a>>,
    /// The next request of each part; `None` once a part is exhausted.
    heads: Vec<Option<Request>>,
    addressing: Addressing,
    /// Set after an error: the stream is finished.
    failed: bool,
    primed: bool,
}

impl<'a> Overlay<'a> {
    /// Merge `parts` (1 to [`PARTS_MAX`]); all must address data the same way.
    pub fn new(parts: Vec<Box<dyn RequestSource + 'a>>) -> Result<Overlay<'a>> {
        if parts.is_empty() || parts.len() > PARTS_MAX {
            return Err(Error::config(
                "workload.overlay",
                format!("expected 1 to {PARTS_MAX} parts, got {}", parts.len()),
            ));
        }
        let addressing = parts[0].addressing();
        if let Some(i) = parts.iter().position(|p| p.addressing() != addressing) {
            return Err(Error::config(
                format!("workload.overlay[{i}]"),
                format!(
                    "addresses data as {:?} but part 0 ({}) as {addressing:?}; overlay parts \
                     must share one address space",
                    parts[i].addressing(),
                    parts[0].label()
                ),
            ));
        }
        Ok(Overlay {
            heads: vec![None; parts.len()],
            parts,
            addressing,
            failed: false,
            primed: false,
        })
    }

    fn step(&mut self) -> Result<Option<Request>> {
        if !self.primed {
            self.primed = true;
            for (head, part) in self.heads.iter_mut().zip(&mut self.parts) {
                *head = part.next_request()?;
            }
        }
        // The earliest head; ties go to the lower part index.
        let mut best: Option<(u64, usize)> = None;
        for (i, head) in self.heads.iter().enumerate() {
            if let Some(r) = head {
                if best.is_none_or(|(t, _)| r.time_ns < t) {
                    best = Some((r.time_ns, i));
                }
            }
        }
        let Some((_, i)) = best else {
            return Ok(None);
        };
        let next = self.parts[i].next_request()?;
        Ok(std::mem::replace(&mut self.heads[i], next))
    }
}

impl RequestSource for Overlay<'_> {
    fn next_request(&mut self) -> Result<Option<Request>> {
        if self.failed {
            return Ok(None);
        }
        let out = self.step();
        self.failed = out.is_err();
        out
    }

    fn addressing(&self) -> Addressing {
        self.addressing
    }

    fn label(&self) -> &str {
        "overlay"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Op;

    /// A fixed list of requests, optionally failing after them.
    struct List {
        reqs: std::vec::IntoIter<Request>,
        fail: bool,
        addressing: Addressing,
    }

    fn list(times: &[u64], offset: u64, fail: bool) -> Box<dyn RequestSource> {
        let reqs: Vec<Request> = times
            .iter()
            .map(|&t| Request {
                time_ns: t,
                op: Op::Read,
                offset,
                len: 512,
            })
            .collect();
        Box::new(List {
            reqs: reqs.into_iter(),
            fail,
            addressing: Addressing::Bytes,
        })
    }

    impl RequestSource for List {
        fn next_request(&mut self) -> Result<Option<Request>> {
            match self.reqs.next() {
                Some(r) => Ok(Some(r)),
                None if self.fail => Err(Error::trace_line("l", 9, "bad")),
                None => Ok(None),
            }
        }
        fn addressing(&self) -> Addressing {
            self.addressing
        }
        fn label(&self) -> &str {
            "list"
        }
    }

    fn drain(o: &mut Overlay<'_>) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        while let Some(r) = o.next_request().unwrap() {
            out.push((r.time_ns, r.offset));
        }
        out
    }

    #[test]
    fn merges_by_time_ties_by_part_order() {
        let mut o = Overlay::new(vec![
            list(&[0, 5, 5, 20], 0, false),
            list(&[0, 3, 5], 1, false),
            list(&[], 2, false),
        ])
        .unwrap();
        assert_eq!(
            drain(&mut o),
            [(0, 0), (0, 1), (3, 1), (5, 0), (5, 0), (5, 1), (20, 0)]
        );
        assert_eq!(o.next_request().unwrap(), None);
    }

    #[test]
    fn an_error_ends_the_stream_and_bad_parts_are_rejected() {
        // Part 0 fails after its one record; reading ahead to replace that record surfaces the
        // error on the first call.
        let mut o = Overlay::new(vec![list(&[1], 0, true), list(&[2, 3], 1, false)]).unwrap();
        assert!(o.next_request().is_err());
        assert_eq!(o.next_request().unwrap(), None);
        assert!(Overlay::new(Vec::new()).is_err());
        let keys = Box::new(List {
            reqs: Vec::new().into_iter(),
            fail: false,
            addressing: Addressing::Keys,
        });
        let e = Overlay::new(vec![list(&[1], 0, false), keys])
            .err()
            .unwrap();
        assert!(matches!(e, Error::Config { key, .. } if key == "workload.overlay[1]"));
    }
}
