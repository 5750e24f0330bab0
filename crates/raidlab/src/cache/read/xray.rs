//! X-RAY (Bairavasundaram, Sivathanu, Arpaci-Dusseau and Arpaci-Dusseau, 2004): an exclusive
//! array cache that infers the contents of the file-system cache above it from the traffic it
//! sees, without any change to the host or the interface.
//!
//! **Tracking** (paper section 4.1). The *R-list* orders every data block the host ever read by
//! its inferred access time; the *CB pointer* splits it into the *inclusive* region (CB to the
//! MRU end: presumed in the FS cache; its length is the predicted FS cache size) and the
//! *exclusive* region (presumed evicted). Here CB is a position in the R-list's key order:
//! blocks with a key above `cb` are inclusive.
//! - A disk read of a data block moves it to the MRU end. If it was already in the R-list it
//!   is a *victim* (the host had evicted it): in the inclusive region the cache size was
//!   overestimated and CB moves to the block's position; in the exclusive region CB moves one
//!   block towards MRU (its read may have evicted the host's LRU block).
//! - An inode-block write whose inode shows a new access time `T` says the file was accessed at
//!   `T`. Its blocks not read from disk since `T` were served by the host's cache: if the one
//!   with the earliest access time is in the exclusive region the size was underestimated and
//!   CB moves past it; then those blocks are re-inserted at time `T`.
//!
//! **Partial files** (section 4.2): while any block of the file is in the inclusive region, the
//! file's exclusive blocks are disregarded on an access-time update: they are no evidence for
//! CB and keep their place (re-inserting them at `T` as if read would make later reads of
//! these untouched, soon evicted blocks look like victims of an overestimate; our reading of
//! "disregarded", which keeps the size error near 9% with a fifth of the reads partial,
//! against 26% when they are moved). **Evidence**: a CB update
//! of either rule takes effect only once `threshold` accesses to blocks of *distinct files*
//! suggest it; it then moves to the least aggressive of the suggested positions (robust to
//! `threshold - 1` outliers). The paper does not give the threshold or the position used
//! (*unsure*); both are documented parameters (`threshold`, default 2).
//!
//! **Exclusive cache** (section 4.4): of capacity N, it should hold the N blocks just past CB in
//! the exclusive region. Every `refresh` it recomputes that window; blocks that entered it are
//! to be fetched (nearest CB first), replacing cached blocks that left it, most recently
//! accessed first (those are likely in the FS cache). Fetching takes a *placement read* from
//! disk; the driver decides when one may be issued (idle time, extra internal bandwidth, or
//! unlimited) and calls [`Xray::next_fetch`] / [`Xray::place`]. A host read that hits the
//! cache is served from it; the block then sits in the inclusive region and is among the first
//! replaced at the next refresh.
//!
//! The semantic knowledge (which blocks are inodes, an inode's block extent and access time)
//! comes from the inode images of inode-block I/O ([`InodeImage`]), as a semantically-smart
//! array would parse them.

mod rlist;

use rlist::{key, Key, RList};

use crate::host::InodeImage;

/// File id of a block whose inode has not been seen yet.
const NO_FILE: u32 = u32::MAX;

/// Where the bandwidth for placement reads comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Placement {
    /// As much as needed, at once (the paper's default assumption).
    Unlimited,
    /// One read at a time in the disk's idle time only, plus `extra_reads_per_s` of internal
    /// bandwidth (0: idle time alone, the paper's Fig 11 setting).
    Idle { extra_reads_per_s: f64 },
}

#[derive(Debug, Clone, Copy, Default)]
struct FileInfo {
    first: u64,
    len: u32,
    atime_ns: u64,
    known: bool,
}

/// Counters of the tracker, for reports and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XrayStats {
    /// Disk reads of blocks already in the R-list.
    pub victim_reads: u64,
    /// Access-time updates observed.
    pub atime_updates: u64,
    /// CB moves towards MRU (shrinks) and towards LRU (expansions) applied.
    pub shrinks: u64,
    pub expansions: u64,
    pub refreshes: u64,
    pub placements: u64,
}

/// The X-RAY tracker and exclusive cache over blocks `0..space`.
#[derive(Debug, Clone)]
pub struct Xray {
    capacity: u64,
    threshold: usize,
    refresh_ns: u64,
    next_refresh_ns: u64,
    rlist: RList,
    seq: u64,
    cb: Key,
    /// Per block: R-list key (0: not in it), file, whether cached.
    bkey: Vec<Key>,
    bfile: Vec<u32>,
    cached: Vec<bool>,
    /// Per block: stamp of the last refresh whose window held it.
    window: Vec<u32>,
    stamp: u32,
    /// Cached blocks, unordered, with each block's index in it.
    cached_list: Vec<u64>,
    cached_pos: Vec<u32>,
    files: Vec<FileInfo>,
    shrink_votes: Vec<(u32, Key)>,
    grow_votes: Vec<(u32, Key)>,
    /// Planned by the last refresh: blocks to fetch (nearest CB first) and cached blocks to
    /// replace (most recent first), each consumed from its cursor.
    fetch: Vec<u64>,
    fetch_at: usize,
    replace: Vec<u64>,
    replace_at: usize,
    pub stats: XrayStats,
}

impl Xray {
    /// A cache of `capacity` blocks over `space` logical blocks; CB updates need `threshold`
    /// (>= 1) distinct files' evidence; the window is recomputed every `refresh_ns`.
    pub fn new(capacity: u64, space: u64, threshold: u32, refresh_ns: u64) -> Xray {
        let n = space as usize;
        Xray {
            capacity,
            threshold: threshold.max(1) as usize,
            refresh_ns: refresh_ns.max(1),
            next_refresh_ns: 0,
            rlist: RList::new(),
            seq: 1,
            cb: 0,
            bkey: vec![0; n],
            bfile: vec![NO_FILE; n],
            cached: vec![false; n],
            window: vec![0; n],
            stamp: 0,
            cached_list: Vec::with_capacity(capacity.min(space) as usize),
            cached_pos: vec![u32::MAX; n],
            files: Vec::new(),
            shrink_votes: Vec::with_capacity(threshold as usize),
            grow_votes: Vec::with_capacity(threshold as usize),
            fetch: Vec::new(),
            fetch_at: 0,
            replace: Vec::new(),
            replace_at: 0,
            stats: XrayStats::default(),
        }
    }

    fn next_key(&mut self, time_ns: u64) -> Key {
        self.seq += 1;
        key(time_ns, self.seq)
    }

    /// The predicted FS cache size: blocks in the inclusive region.
    pub fn predicted_size(&self) -> u64 {
        (self.rlist.len() - self.rlist.rank_le(self.cb)) as u64
    }

    /// Whether X-RAY presumes `block` to be in the FS cache.
    #[inline]
    pub fn presumes_cached(&self, block: u64) -> bool {
        self.bkey[block as usize] > self.cb
    }

    /// Whether the exclusive cache holds `block`.
    #[inline]
    pub fn contains(&self, block: u64) -> bool {
        self.cached[block as usize]
    }

    /// Blocks in the exclusive cache.
    pub fn len(&self) -> u64 {
        self.cached_list.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.cached_list.is_empty()
    }

    /// A disk read of data block `block` reached the array at `now_ns`: update the tracker;
    /// answer whether the exclusive cache holds the block.
    pub fn read(&mut self, block: u64, now_ns: u64) -> bool {
        let b = block as usize;
        let k = self.bkey[b];
        if k != 0 {
            self.stats.victim_reads += 1;
            if k > self.cb {
                // Overestimated: everything up to this block was evicted.
                let file = self.bfile[b];
                if let Some(target) = vote(&mut self.shrink_votes, file, k, self.threshold, true) {
                    if target > self.cb {
                        self.cb = target;
                        self.stats.shrinks += 1;
                    }
                }
            } else {
                if let Some(next) = self.rlist.succ(self.cb) {
                    // Its read may have pushed the host's LRU block out.
                    self.cb = next;
                }
            }
            self.rlist.remove(k);
        }
        let nk = self.next_key(now_ns);
        self.rlist.insert(nk, block);
        self.bkey[b] = nk;
        self.cached[b]
    }

    /// An inode block was read or written at `now_ns` carrying `images`: learn the files'
    /// extents, and infer accesses from access times newer than the last seen.
    pub fn inode_block(&mut self, images: &[InodeImage]) {
        for img in images {
            let ino = img.ino as usize;
            if ino >= self.files.len() {
                self.files.resize(ino + 1, FileInfo::default());
            }
            let f = self.files[ino];
            if !f.known {
                let end = (img.first_block + u64::from(img.blocks)).min(self.bfile.len() as u64);
                for b in img.first_block.min(end)..end {
                    self.bfile[b as usize] = img.ino;
                }
                self.files[ino] = FileInfo {
                    first: img.first_block,
                    len: (end - img.first_block.min(end)) as u32,
                    atime_ns: img.atime_ns,
                    known: true,
                };
                continue;
            }
            if img.atime_ns > f.atime_ns {
                self.files[ino].atime_ns = img.atime_ns;
                self.stats.atime_updates += 1;
                self.file_accessed(img.ino, img.atime_ns);
            }
        }
    }

    /// File `ino` was accessed at `t_ns` (from its new access time).
    fn file_accessed(&mut self, ino: u32, t_ns: u64) {
        let f = self.files[ino as usize];
        let observed = key(t_ns, 0);
        let mut any_inclusive = false;
        let mut earliest: Option<Key> = None;
        for b in f.first..f.first + u64::from(f.len) {
            let k = self.bkey[b as usize];
            if k == 0 {
                continue;
            }
            any_inclusive |= k > self.cb;
            // Blocks read from disk at or after T need no inference: the array saw them.
            if k < observed {
                earliest = Some(earliest.map_or(k, |e: Key| e.min(k)));
            }
        }
        let Some(earliest) = earliest else {
            return;
        };
        if !any_inclusive {
            // Underestimated: the block was in the host's cache. CB goes just below it.
            let target = self.rlist.pred(earliest).unwrap_or(0);
            if let Some(t) = vote(&mut self.grow_votes, ino, target, self.threshold, false) {
                if t < self.cb {
                    self.cb = t;
                    self.stats.expansions += 1;
                }
            }
        }
        for b in f.first..f.first + u64::from(f.len) {
            let k = self.bkey[b as usize];
            // With a block of the file inclusive, its exclusive blocks are disregarded: they
            // are neither evidence nor moved (a partial access did not touch them).
            let disregarded = any_inclusive && k <= self.cb;
            if k != 0 && k < observed && !disregarded {
                self.rlist.remove(k);
                let nk = self.next_key(t_ns);
                self.rlist.insert(nk, b);
                self.bkey[b as usize] = nk;
            }
        }
    }

    /// Recompute the exclusive window if a refresh is due at `now_ns`. Returns whether it ran.
    pub fn maybe_refresh(&mut self, now_ns: u64) -> bool {
        if now_ns < self.next_refresh_ns {
            return false;
        }
        self.next_refresh_ns = now_ns + self.refresh_ns;
        self.refresh();
        true
    }

    /// Recompute the window of the N blocks past CB and plan fetches and replacements.
    pub fn refresh(&mut self) {
        self.stats.refreshes += 1;
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.window.fill(0);
            self.stamp = 1;
        }
        let stamp = self.stamp;
        self.fetch.clear();
        self.fetch_at = 0;
        let (window, cached, fetch) = (&mut self.window, &self.cached, &mut self.fetch);
        self.rlist
            .walk_down_from(self.cb, self.capacity as usize, |_, b| {
                window[b as usize] = stamp;
                if !cached[b as usize] {
                    fetch.push(b);
                }
                true
            });
        self.replace.clear();
        self.replace_at = 0;
        self.replace.extend(
            self.cached_list
                .iter()
                .copied()
                .filter(|&b| self.window[b as usize] != stamp),
        );
        let bkey = &self.bkey;
        self.replace
            .sort_unstable_by(|&a, &b| bkey[b as usize].cmp(&bkey[a as usize]));
    }

    /// The next block worth a placement read, if there is room for it (a free slot or a
    /// block to replace). Skips planned blocks the host has read since (no longer exclusive).
    pub fn next_fetch(&mut self) -> Option<u64> {
        while self.fetch_at < self.fetch.len() {
            let b = self.fetch[self.fetch_at];
            if self.cached[b as usize] || self.bkey[b as usize] > self.cb {
                self.fetch_at += 1;
                continue;
            }
            if self.len() < self.capacity {
                return Some(b);
            }
            while self.replace_at < self.replace.len() {
                let r = self.replace[self.replace_at];
                if self.cached[r as usize] {
                    return Some(b);
                }
                self.replace_at += 1;
            }
            return None;
        }
        None
    }

    /// The placement read of `block` (from [`Xray::next_fetch`]) completed: cache it,
    /// replacing the next planned block if full.
    pub fn place(&mut self, block: u64) {
        debug_assert_eq!(self.fetch.get(self.fetch_at), Some(&block));
        self.fetch_at += 1;
        if self.len() >= self.capacity {
            let r = self.replace[self.replace_at];
            self.replace_at += 1;
            self.uncache(r);
        }
        self.cached[block as usize] = true;
        self.cached_pos[block as usize] = self.cached_list.len() as u32;
        self.cached_list.push(block);
        self.stats.placements += 1;
        debug_assert!(self.len() <= self.capacity);
    }

    fn uncache(&mut self, block: u64) {
        let pos = self.cached_pos[block as usize] as usize;
        let last = *self.cached_list.last().expect("a cached block is listed");
        self.cached_list.swap_remove(pos);
        if last != block {
            self.cached_pos[last as usize] = pos as u32;
        }
        self.cached[block as usize] = false;
        self.cached_pos[block as usize] = u32::MAX;
    }

    /// Heap bytes of the tracker and cache metadata.
    pub fn metadata_bytes(&self) -> usize {
        self.rlist.heap_bytes() + self.bkey.capacity() * 16 + self.bfile.capacity() * 4
    }
}

/// Record `file`'s vote for CB position `k` (one vote per file, the latest kept). Once
/// `threshold` distinct files agree, clear the votes and answer the least aggressive position:
/// the lowest for a shrink (`shrink`), the highest for an expansion.
fn vote(
    votes: &mut Vec<(u32, Key)>,
    file: u32,
    k: Key,
    threshold: usize,
    shrink: bool,
) -> Option<Key> {
    match votes.iter_mut().find(|v| v.0 == file && file != NO_FILE) {
        Some(v) => v.1 = k,
        None => votes.push((file, k)),
    }
    if votes.len() < threshold {
        return None;
    }
    let keys = votes.iter().map(|v| v.1);
    let pick = if shrink { keys.min() } else { keys.max() };
    votes.clear();
    pick
}

#[cfg(test)]
mod tests;
