//! The read cache of real data, driven by the simulator's `ReadPolicy` objects.
//!
//! The policy decides what is resident, exactly as in counting mode: every block of a read is
//! looked up with `get`, a miss is `insert`ed at once (so the policy's get/insert protocol
//! holds with many threads), and a write `remove`s the blocks it covers (counting mode's
//! `invalidate`). The policy sees the live array as its miss-cost oracle, so VDF favours
//! blocks of a failed member while the array is degraded, and stops when it is rebuilt.
//!
//! Data lives in a fixed arena of `capacity` 4 KiB frames, one per resident key. A frame
//! filled by a miss is valid only once its read completes; a write that removes the key
//! meanwhile bumps the frame's generation, so the late fill is dropped rather than cached
//! stale. A reader that hits a frame still being filled reads the array itself.

use crate::sync::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use raidlab::cache::read::{self, Access, PolicySpec, ReadPolicy};

use super::column::BLOCK;
use super::{Controller, IoFail};

struct Frame {
    key: u64,
    gen: u64,
    valid: bool,
}

struct Inner {
    policy: Box<dyn ReadPolicy + Send>,
    /// Resident key -> frame.
    frames_of: HashMap<u64, u32>,
    frames: Vec<Frame>,
    free: Vec<u32>,
    data: Vec<u8>,
    now: u64,
    gen: u64,
    evicted: Vec<u64>,
}

pub struct ReadCache {
    inner: Mutex<Inner>,
    capacity_blocks: u64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub evictions: AtomicU64,
    pub policy_name: &'static str,
}

/// The largest cache the store accepts (frames are allocated up front).
pub const CAPACITY_BLOCKS_MAX: u64 = 1 << 22; // 16 GiB of 4 KiB frames

impl ReadCache {
    pub fn new(spec: &PolicySpec, capacity_blocks: u64) -> raidlab::Result<ReadCache> {
        if capacity_blocks == 0 || capacity_blocks > CAPACITY_BLOCKS_MAX {
            return Err(raidlab::Error::config(
                "cache-mib",
                format!(
                    "expected 1 to {} blocks of cache, got {capacity_blocks}",
                    CAPACITY_BLOCKS_MAX
                ),
            ));
        }
        let policy = read::build(spec, capacity_blocks)?;
        let name = policy.name();
        let n = capacity_blocks as usize;
        Ok(ReadCache {
            inner: Mutex::new(Inner {
                policy,
                frames_of: HashMap::with_capacity(n),
                frames: (0..n)
                    .map(|_| Frame {
                        key: u64::MAX,
                        gen: 0,
                        valid: false,
                    })
                    .collect(),
                free: (0..n as u32).rev().collect(),
                data: vec![0; n * BLOCK],
                now: 0,
                gen: 0,
                evicted: Vec::with_capacity(64),
            }),
            capacity_blocks,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            policy_name: name,
        })
    }

    pub fn capacity_blocks(&self) -> u64 {
        self.capacity_blocks
    }

    pub fn resident_blocks(&self) -> u64 {
        self.lock().policy.len() as u64
    }

    fn lock(&self) -> crate::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Read blocks `first..` into `buf`: hits from frames, misses from the array.
    pub fn read(&self, ctl: &Controller, first: u64, buf: &mut [u8]) -> Result<(), IoFail> {
        let count = buf.len() / BLOCK;
        // Per block: Some((frame, gen)) to fill after the array read, None when served or
        // when the block is read without caching.
        let mut pending: Vec<(usize, Option<(u32, u64)>)> = Vec::new();
        {
            let st = ctl.read_state();
            let mut g = self.lock();
            let inner = &mut *g;
            for i in 0..count {
                let key = first + i as u64;
                let acc = Access {
                    key,
                    size: 1,
                    now: inner.now,
                    cost: &st.array,
                };
                inner.now += 1;
                if inner.policy.get(&acc) {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    let f = inner.frames_of[&key];
                    if inner.frames[f as usize].valid {
                        let a = f as usize * BLOCK;
                        buf[i * BLOCK..(i + 1) * BLOCK].copy_from_slice(&inner.data[a..a + BLOCK]);
                    } else {
                        pending.push((i, None));
                    }
                    continue;
                }
                self.misses.fetch_add(1, Ordering::Relaxed);
                inner.evicted.clear();
                let mut evicted = std::mem::take(&mut inner.evicted);
                let cached = inner.policy.insert(&acc, &mut evicted);
                self.evictions
                    .fetch_add(evicted.len() as u64, Ordering::Relaxed);
                for &k in &evicted {
                    if let Some(f) = inner.frames_of.remove(&k) {
                        inner.frames[f as usize].valid = false;
                        inner.frames[f as usize].key = u64::MAX;
                        inner.free.push(f);
                    }
                }
                inner.evicted = evicted;
                if !cached {
                    pending.push((i, None));
                    continue;
                }
                let f = inner
                    .free
                    .pop()
                    .expect("policy capacity equals the frame count");
                inner.gen += 1;
                let gen = inner.gen;
                inner.frames[f as usize] = Frame {
                    key,
                    gen,
                    valid: false,
                };
                inner.frames_of.insert(key, f);
                pending.push((i, Some((f, gen))));
            }
        }
        // Array reads for the blocks not served, in runs of consecutive blocks.
        let mut j = 0;
        while j < pending.len() {
            let mut k = j + 1;
            while k < pending.len() && pending[k].0 == pending[k - 1].0 + 1 {
                k += 1;
            }
            let (a, b) = (pending[j].0, pending[k - 1].0 + 1);
            ctl.read_blocks(first + a as u64, &mut buf[a * BLOCK..b * BLOCK])?;
            j = k;
        }
        let mut g = self.lock();
        let inner = &mut *g;
        for &(i, fill) in &pending {
            let Some((f, gen)) = fill else { continue };
            let fr = &mut inner.frames[f as usize];
            if fr.gen == gen && fr.key == first + i as u64 {
                fr.valid = true;
                let a = f as usize * BLOCK;
                inner.data[a..a + BLOCK].copy_from_slice(&buf[i * BLOCK..(i + 1) * BLOCK]);
            }
        }
        Ok(())
    }

    /// A write covered blocks `first..first + count`: drop them (called after the write
    /// reached the members, with its rows still locked).
    pub fn invalidate(&self, first: u64, count: u64) {
        let mut g = self.lock();
        let inner = &mut *g;
        for key in first..first + count {
            if inner.policy.remove(key) {
                if let Some(f) = inner.frames_of.remove(&key) {
                    inner.gen += 1;
                    let fr = &mut inner.frames[f as usize];
                    fr.gen = inner.gen;
                    fr.valid = false;
                    fr.key = u64::MAX;
                    inner.free.push(f);
                }
            }
        }
    }
}
