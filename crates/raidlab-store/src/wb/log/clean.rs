//! RAPID's cleaner: free the tail's segments by copying their live records forward.

use std::io;

use super::super::backup::LiveData;
use super::super::format::{RecKind, RecMeta, BLOCK};
use super::{LogBackup, State, GC_MIN_FREE};

impl LogBackup {
    /// RAPID's cleaner: while fewer than `GC_MIN_FREE` segments are free, copy the tail
    /// segment's live records forward from the primary cache (never reading the log), as
    /// records of the page's newest sequence number, and free the segment.
    pub(super) fn gc(&self, st: &mut State, live: &dyn LiveData) -> io::Result<()> {
        for _ in 0..self.geo.segments {
            self.advance_tail(st);
            if self.free_segments(st) >= GC_MIN_FREE || st.tail + self.geo.seg > st.head {
                // Room enough, or only the head's own segment is left.
                return Ok(());
            }
            let s = self.geo.seg_index(st.tail);
            for i in 0..st.table.seg_len(s) {
                let Some(h) = st.table.live_at(s, i) else {
                    continue;
                };
                let e = st.table.entry(h).meta;
                if e.kind != RecKind::Data {
                    // An image's (or a plan's, or a partial parity's) bytes are not in the cache: it pins its segment until its
                    // destage releases it. Stop cleaning; the put fails only if no segment
                    // is left for it.
                    return Ok(());
                }
                // The cache's newest version: never older than the record, so the copy
                // never brings back an older version after a newer one.
                let Some((seq, data)) = live.newest(e.lba) else {
                    // A superseded version whose newer one is already destaged (the
                    // destager releases a page's records before the cache lets it go, so
                    // only such a record outlives its page): the writer that superseded it
                    // is between its commit and its release. Dropped here, as the writer
                    // would; a crash replays it, if the scan still finds it, before the
                    // newer version, which stays in the scan range at least as long.
                    st.table.release(h);
                    st.stats.gc_records += 1;
                    continue;
                };
                if seq < e.seq || data.len() != BLOCK {
                    return Err(io::Error::other(format!(
                        "log cleaner: live record of page {} (seq {}) is newer than the cache's (seq {seq})",
                        e.lba, e.seq
                    )));
                }
                let meta = RecMeta {
                    lba: e.lba,
                    seq,
                    kind: RecKind::Data,
                };
                self.stage(st, Some(h), meta, data)?;
                st.stats.gc_records += 1;
            }
            assert!(
                st.table.seg_live(s) == 0,
                "segment {s} still live after cleaning"
            );
            st.stats.gc_segments += 1;
        }
        Ok(())
    }
}
