//! The host: a file-system model above the array, for file-level workloads (X-RAY, DEMOTE).
//!
//! Files are an inode plus 4 KiB data blocks laid out by a simple allocator on the array's
//! logical space: an inode table (`inodes_per_block` inodes a block) at the start, then each
//! file's data contiguously. The FS buffer cache (`fscache.rs`: LRU, CLOCK or 2Q, resizable)
//! serves block reads; misses go to the array. Reads update the in-memory inode's access time
//! (at `atime_granularity` resolution) and mark it dirty; writes dirty the data blocks and the
//! modification time. Dirty inode blocks are written every `inode_write_interval`, dirty data
//! every `data_write_interval` (both periodic, as ext2's flush daemons). The array sees only
//! block reads and writes; inode-block I/O carries the images of the inodes in the block (its
//! semantic payload: access time, block extent), which a semantically-smart array parses.
//!
//! Like every policy, the host reads no clock: it keeps simulated time itself, advancing it by
//! the latency of each block access (20 us FS hit by default, or what the array answers), so
//! the flush timers fire at the right moments of a closed-loop replay.

pub mod fscache;

#[cfg(test)]
mod tests;

pub use fscache::{FsCache, FsPolicy, Victim};

use crate::error::{Error, Result};

/// Per-level access times of the hierarchy (the X-RAY paper's defaults: 20 us, 200 us, 10 ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latencies {
    pub fs_hit_ns: u64,
    pub array_hit_ns: u64,
    pub disk_ns: u64,
}

/// Change the FS cache size once `after_block_reads` application block reads have been done
/// after warm-up (memory pressure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resize {
    pub after_block_reads: u64,
    pub blocks: u64,
}

/// The `[host]` table, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSpec {
    pub fs_cache_blocks: u64,
    pub fs_policy: FsPolicy,
    pub inode_write_interval_ns: u64,
    pub data_write_interval_ns: u64,
    pub atime_granularity_ns: u64,
    pub inodes_per_block: u32,
    /// Logical blocks of the array the file system lays itself out on; `None`: just enough.
    pub space_blocks: Option<u64>,
    pub latency: Latencies,
    pub resize: Vec<Resize>,
    /// Period of the tracking-accuracy samples and the time series.
    pub sample_interval_ns: u64,
}

/// The semantic payload of one inode in an inode block: what the array can read from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InodeImage {
    pub ino: u32,
    /// Access time, at the file system's granularity (nanoseconds since the start).
    pub atime_ns: u64,
    pub mtime_ns: u64,
    /// The file's data blocks: `first_block .. first_block + blocks`.
    pub first_block: u64,
    pub blocks: u32,
}

/// What a block holds, as far as the array can tell by parsing it.
#[derive(Debug, Clone, Copy)]
pub enum Payload<'a> {
    Data,
    /// An inode block and the inodes it holds.
    Inodes(&'a [InodeImage]),
}

/// The array below the host. Called at simulated time `now_ns` (non-decreasing).
pub trait BlockDevice {
    /// A block read the FS cache missed; answers its latency.
    fn read(&mut self, block: u64, now_ns: u64, payload: Payload<'_>) -> u64;
    /// A block written back by the host (asynchronous: no latency is charged to the host).
    fn write(&mut self, block: u64, now_ns: u64, payload: Payload<'_>);
    /// DEMOTE: the host evicted clean `block` and hands it to the array.
    fn demote(&mut self, block: u64, now_ns: u64);
}

/// Largest file system the model lays out (64 GiB of 4 KiB blocks): per-block state is kept
/// in dense arrays on the host and in X-RAY, so the space bounds their memory.
pub const SPACE_BLOCKS_MAX: u64 = 1 << 24;

/// Where the file system put its inodes and files.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    pub inodes_per_block: u32,
    /// Blocks of the inode table, at the start of the space.
    pub inode_blocks: u64,
    /// Per file (= inode number): first data block and length in blocks.
    pub files: Vec<(u64, u32)>,
    pub space_blocks: u64,
}

impl Layout {
    /// Lay files of the given sizes (blocks, each >= 1) out after the inode table.
    pub fn new(sizes: &[u32], inodes_per_block: u32, space: Option<u64>) -> Result<Layout> {
        if inodes_per_block == 0 {
            return Err(Error::config("host.inodes_per_block", "must be > 0"));
        }
        let inode_blocks = (sizes.len() as u64).div_ceil(u64::from(inodes_per_block));
        let mut next = inode_blocks;
        let mut files = Vec::with_capacity(sizes.len());
        for (i, &s) in sizes.iter().enumerate() {
            if s == 0 {
                return Err(Error::config(
                    "workload.files",
                    format!("file {i} has zero blocks; every file needs at least one"),
                ));
            }
            files.push((next, s));
            next += u64::from(s);
        }
        if next > SPACE_BLOCKS_MAX {
            return Err(Error::config(
                "workload.files",
                format!(
                    "the files need {next} blocks; the model lays out at most {SPACE_BLOCKS_MAX}"
                ),
            ));
        }
        let space_blocks = match space {
            None => next,
            Some(n) if n >= next => n,
            Some(n) => {
                return Err(Error::config(
                    "host.space_blocks",
                    format!("{n} blocks cannot hold the inode table and files ({next} blocks)"),
                ))
            }
        };
        Ok(Layout {
            inodes_per_block,
            inode_blocks,
            files,
            space_blocks,
        })
    }

    #[inline]
    pub fn inode_block(&self, ino: u32) -> u64 {
        u64::from(ino / self.inodes_per_block)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Inode {
    atime_ns: u64,
    mtime_ns: u64,
    /// On-disk access time (what an inode-block read shows).
    disk_atime_ns: u64,
    disk_mtime_ns: u64,
    in_inode_cache: bool,
}

/// Host-side counters (the engine resets them when warm-up ends).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostStats {
    pub file_reads: u64,
    pub file_writes: u64,
    /// Application block reads (data blocks).
    pub block_reads: u64,
    pub block_writes: u64,
    pub fs_hits: u64,
    /// Time spent in data block reads (the read latency numerator).
    pub read_ns: u64,
    /// Inode blocks read for opens that missed the inode cache.
    pub inode_block_reads: u64,
    pub inode_block_writes: u64,
    pub data_block_writes: u64,
    pub demotes: u64,
}

/// The file-system model.
pub struct Host {
    layout: Layout,
    lat: Latencies,
    atime_granularity_ns: u64,
    inode_interval_ns: u64,
    data_interval_ns: u64,
    cache: FsCache,
    inodes: Vec<Inode>,
    inode_block_dirty: Vec<bool>,
    dirty_inode_blocks: Vec<u64>,
    demote: bool,
    now_ns: u64,
    next_inode_flush_ns: u64,
    next_data_flush_ns: u64,
    victims: Vec<Victim>,
    images: Vec<InodeImage>,
    scratch: Vec<u64>,
    pub stats: HostStats,
}

impl Host {
    /// A host with an empty cache at time 0. `demote`: hand clean victims to the array.
    pub fn new(spec: &HostSpec, layout: Layout, demote: bool) -> Result<Host> {
        if spec.fs_cache_blocks > layout.space_blocks {
            return Err(Error::config(
                "host.fs_cache_blocks",
                format!(
                    "{} blocks is larger than the address space ({} blocks)",
                    spec.fs_cache_blocks, layout.space_blocks
                ),
            ));
        }
        if spec.atime_granularity_ns == 0 {
            return Err(Error::config("host.atime_granularity_s", "must be > 0"));
        }
        let cache = FsCache::new(spec.fs_policy, spec.fs_cache_blocks, layout.space_blocks)?;
        let n = layout.files.len();
        Ok(Host {
            lat: spec.latency,
            atime_granularity_ns: spec.atime_granularity_ns,
            inode_interval_ns: spec.inode_write_interval_ns.max(1),
            data_interval_ns: spec.data_write_interval_ns.max(1),
            next_inode_flush_ns: spec.inode_write_interval_ns.max(1),
            next_data_flush_ns: spec.data_write_interval_ns.max(1),
            cache,
            inodes: vec![Inode::default(); n],
            inode_block_dirty: vec![false; layout.inode_blocks as usize],
            dirty_inode_blocks: Vec::new(),
            demote,
            now_ns: 0,
            victims: Vec::with_capacity(16),
            images: Vec::with_capacity(layout.inodes_per_block as usize),
            scratch: Vec::new(),
            stats: HostStats::default(),
            layout,
        })
    }

    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn cache(&self) -> &FsCache {
        &self.cache
    }

    /// Data blocks resident in the FS cache (what X-RAY tries to track).
    pub fn cached_data_blocks(&self) -> u64 {
        let inode_resident = (0..self.layout.inode_blocks)
            .filter(|&b| self.cache.contains(b))
            .count() as u64;
        self.cache.len() - inode_resident
    }

    /// Let time pass to `t` (idle host), firing the flush timers due on the way.
    pub fn advance_to(&mut self, t: u64, dev: &mut dyn BlockDevice) {
        self.fire_timers(t, dev);
        self.now_ns = self.now_ns.max(t);
    }

    /// Read the first `blocks` blocks of `file` (all of them when `blocks` is its size or
    /// more); returns the time it took.
    pub fn read_file(&mut self, file: u32, blocks: u32, dev: &mut dyn BlockDevice) -> u64 {
        let start = self.now_ns;
        self.open(file, dev);
        let (first, len) = self.layout.files[file as usize];
        for b in first..first + u64::from(blocks.min(len)) {
            let t0 = self.now_ns;
            self.access(b, dev);
            self.stats.block_reads += 1;
            self.stats.read_ns += self.now_ns - t0;
        }
        let atime = self.now_ns / self.atime_granularity_ns * self.atime_granularity_ns;
        let ino = &mut self.inodes[file as usize];
        if ino.atime_ns != atime {
            ino.atime_ns = atime;
            self.dirty_inode(file);
        }
        self.stats.file_reads += 1;
        self.now_ns - start
    }

    /// Overwrite the first `blocks` blocks of `file` (whole blocks: no read needed); returns
    /// the time it took.
    pub fn write_file(&mut self, file: u32, blocks: u32, dev: &mut dyn BlockDevice) -> u64 {
        let start = self.now_ns;
        self.open(file, dev);
        let (first, len) = self.layout.files[file as usize];
        for b in first..first + u64::from(blocks.min(len)) {
            self.fire_timers(self.now_ns, dev);
            if self.cache.lookup(b) {
                self.cache.mark_dirty(b);
            } else {
                self.cache.insert(b, true, &mut self.victims);
                self.handle_victims(dev);
            }
            self.now_ns += self.lat.fs_hit_ns;
            self.stats.block_writes += 1;
        }
        let mtime = self.now_ns / self.atime_granularity_ns * self.atime_granularity_ns;
        if self.inodes[file as usize].mtime_ns != mtime {
            self.inodes[file as usize].mtime_ns = mtime;
            self.dirty_inode(file);
        }
        self.stats.file_writes += 1;
        self.now_ns - start
    }

    /// Memory pressure: the FS cache now holds `blocks` blocks.
    pub fn resize(&mut self, blocks: u64, dev: &mut dyn BlockDevice) {
        self.cache.set_capacity(blocks, &mut self.victims);
        self.handle_victims(dev);
    }

    /// Bring `file`'s inode into the inode cache, reading its inode block if needed.
    fn open(&mut self, file: u32, dev: &mut dyn BlockDevice) {
        if self.inodes[file as usize].in_inode_cache {
            return;
        }
        let blk = self.layout.inode_block(file);
        self.access(blk, dev);
        self.stats.inode_block_reads += 1;
        self.inodes[file as usize].in_inode_cache = true;
    }

    /// One block through the FS cache at the current time; advances the clock.
    fn access(&mut self, block: u64, dev: &mut dyn BlockDevice) {
        self.fire_timers(self.now_ns, dev);
        if self.cache.lookup(block) {
            self.stats.fs_hits += 1;
            self.now_ns += self.lat.fs_hit_ns;
            return;
        }
        let latency = if block < self.layout.inode_blocks {
            self.fill_images(block, true);
            dev.read(block, self.now_ns, Payload::Inodes(&self.images))
        } else {
            dev.read(block, self.now_ns, Payload::Data)
        };
        self.now_ns += latency;
        self.cache.insert(block, false, &mut self.victims);
        self.handle_victims(dev);
    }

    fn handle_victims(&mut self, dev: &mut dyn BlockDevice) {
        for v in self.victims.drain(..) {
            if v.dirty {
                dev.write(v.block, self.now_ns, Payload::Data);
                self.stats.data_block_writes += 1;
            } else if self.demote {
                dev.demote(v.block, self.now_ns);
                self.stats.demotes += 1;
            }
        }
    }

    fn dirty_inode(&mut self, ino: u32) {
        let blk = self.layout.inode_block(ino);
        if !self.inode_block_dirty[blk as usize] {
            self.inode_block_dirty[blk as usize] = true;
            self.dirty_inode_blocks.push(blk);
        }
    }

    /// The images of the inodes in inode block `blk`: on-disk (`disk`) or in-memory state.
    fn fill_images(&mut self, blk: u64, disk: bool) {
        self.images.clear();
        let per = u64::from(self.layout.inodes_per_block);
        let end = ((blk + 1) * per).min(self.inodes.len() as u64);
        for ino in blk * per..end {
            let i = &self.inodes[ino as usize];
            let (first_block, blocks) = self.layout.files[ino as usize];
            self.images.push(InodeImage {
                ino: ino as u32,
                atime_ns: if disk { i.disk_atime_ns } else { i.atime_ns },
                mtime_ns: if disk { i.disk_mtime_ns } else { i.mtime_ns },
                first_block,
                blocks,
            });
        }
    }

    /// Run every flush due at or before `upto`, each at its own time (inode flush first on
    /// a tie).
    fn fire_timers(&mut self, upto: u64, dev: &mut dyn BlockDevice) {
        loop {
            let t = self.next_inode_flush_ns.min(self.next_data_flush_ns);
            if t > upto {
                return;
            }
            if self.next_inode_flush_ns == t {
                self.flush_inodes(t, dev);
                self.next_inode_flush_ns += self.inode_interval_ns;
            } else {
                self.flush_data(t, dev);
                self.next_data_flush_ns += self.data_interval_ns;
            }
        }
    }

    fn flush_inodes(&mut self, t: u64, dev: &mut dyn BlockDevice) {
        let mut blocks = std::mem::take(&mut self.dirty_inode_blocks);
        blocks.sort_unstable();
        for &blk in &blocks {
            self.fill_images(blk, false);
            dev.write(blk, t, Payload::Inodes(&self.images));
            self.stats.inode_block_writes += 1;
            self.inode_block_dirty[blk as usize] = false;
            let per = u64::from(self.layout.inodes_per_block);
            let end = ((blk + 1) * per).min(self.inodes.len() as u64);
            for i in &mut self.inodes[(blk * per) as usize..end as usize] {
                i.disk_atime_ns = i.atime_ns;
                i.disk_mtime_ns = i.mtime_ns;
            }
        }
        blocks.clear();
        self.dirty_inode_blocks = blocks;
    }

    fn flush_data(&mut self, t: u64, dev: &mut dyn BlockDevice) {
        let mut dirty = std::mem::take(&mut self.scratch);
        dirty.clear();
        self.cache.dirty_blocks(&mut dirty);
        for &b in &dirty {
            dev.write(b, t, Payload::Data);
            self.cache.mark_clean(b);
            self.stats.data_block_writes += 1;
        }
        self.scratch = dirty;
    }
}
