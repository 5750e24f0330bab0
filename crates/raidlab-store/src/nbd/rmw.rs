//! Sub-block requests over a backend with a larger block: [`SubBlock`] turns reads, writes,
//! trims and zeroings of any byte range into requests aligned to the backend's block
//! (read-modify-write for a partly covered block at either end), so a client that sends
//! 512-byte or 1 KiB requests (a loop device over nbdfuse, `mkfs.ext4` with its defaults)
//! works instead of getting EINVAL for every request.
//!
//! Concurrency: every write-like request (write, trim, write-zeroes) holds the stripe locks
//! of the backend blocks it touches for its whole duration: exclusive for a block it
//! reads-modifies-writes, shared for the blocks it writes whole. Without that, two sub-block
//! writes to one block would both read the old block and the second write-back would undo
//! the first; and an aligned write racing a read-modify-write of its block could be undone
//! by the stale copy written back, an outcome that is neither order of the two writes.
//! Whole-block writes share their locks, so aligned traffic runs as in parallel as before.
//! Reads take no lock: a read racing a write sees each block either before or after it, as
//! without this layer.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{Backend, BlockSize, Errno};

/// Stripe locks: block index modulo this. A power of two well above the number of workers,
/// so unrelated blocks rarely share a lock; a request spanning this many blocks takes all.
const STRIPES: usize = 64;

/// A backend that accepts any byte range and reads-modifies-writes the partial blocks of
/// the backend below it.
pub struct SubBlock {
    inner: Arc<dyn Backend>,
    /// The backend's own minimum block (a power of two).
    block: u64,
    /// The advertised minimum (a power of two, at most `block`).
    minimum: u32,
    locks: Vec<RwLock<()>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    None,
    Shared,
    Exclusive,
}

/// A stripe lock held for the length of a request (only dropped, never read).
#[allow(dead_code)]
enum Held<'a> {
    Shared(RwLockReadGuard<'a, ()>),
    Exclusive(RwLockWriteGuard<'a, ()>),
}

/// One aligned piece of a request: a whole run of blocks, or part of one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Piece {
    /// Blocks `[offset, offset + len)` in full; `at` is the position in the request.
    Whole { offset: u64, len: u64, at: usize },
    /// Bytes `[from, to)` of the block at `block`; `at` is the position in the request.
    Part {
        block: u64,
        from: usize,
        to: usize,
        at: usize,
    },
}

/// Split `[offset, offset + len)` into at most three pieces: a partial head block, a run of
/// whole blocks, a partial tail block.
fn pieces(offset: u64, len: u64, block: u64) -> impl Iterator<Item = Piece> {
    let end = offset + len;
    let mut out = [None; 3];
    let mut pos = offset;
    let head_block = offset - offset % block;
    if !offset.is_multiple_of(block) || end < head_block + block {
        let to = end.min(head_block + block);
        out[0] = Some(Piece::Part {
            block: head_block,
            from: (pos - head_block) as usize,
            to: (to - head_block) as usize,
            at: 0,
        });
        pos = to;
    }
    let mid_end = end - end % block;
    if mid_end > pos {
        out[1] = Some(Piece::Whole {
            offset: pos,
            len: mid_end - pos,
            at: (pos - offset) as usize,
        });
        pos = mid_end;
    }
    if pos < end {
        out[2] = Some(Piece::Part {
            block: pos,
            from: 0,
            to: (end - pos) as usize,
            at: (pos - offset) as usize,
        });
    }
    out.into_iter().flatten()
}

impl SubBlock {
    /// Wrap `inner`, advertising `minimum` (a power of two, at most the backend's minimum).
    /// The export's size must be a whole number of the backend's blocks, so the last
    /// partial block can be read whole.
    pub fn new(inner: Arc<dyn Backend>, minimum: u32) -> Result<SubBlock, String> {
        let b = inner.block_size();
        if !minimum.is_power_of_two() || minimum > b.minimum {
            return Err(format!(
                "sub-block minimum {minimum} must be a power of two at most the backend's block {}",
                b.minimum
            ));
        }
        if !inner.size_bytes().is_multiple_of(u64::from(b.minimum)) {
            return Err(format!(
                "export size {} is not a multiple of its block {}",
                inner.size_bytes(),
                b.minimum
            ));
        }
        Ok(SubBlock {
            block: u64::from(b.minimum),
            minimum,
            locks: (0..STRIPES).map(|_| RwLock::new(())).collect(),
            inner,
        })
    }

    /// Lock the stripes of every block in `[offset, offset + len)`, in stripe order (the
    /// one global order, so two requests cannot deadlock): exclusively for the partial
    /// blocks at either end (read-modify-written), shared for whole blocks. Whole-block
    /// writes thus run in parallel with each other (a large write spans every stripe) and
    /// only exclude a read-modify-write of a block they cover.
    fn lock_range(&self, offset: u64, len: u64) -> Vec<Held<'_>> {
        let mut mode = [Mode::None; STRIPES];
        let stripe = |block: u64| ((block / self.block) % STRIPES as u64) as usize;
        for p in pieces(offset, len, self.block) {
            match p {
                Piece::Part { block, .. } => mode[stripe(block)] = Mode::Exclusive,
                Piece::Whole { offset, len, .. } => {
                    let blocks = len / self.block;
                    for i in 0..blocks.min(STRIPES as u64) {
                        let m = &mut mode[stripe(offset + i * self.block)];
                        if *m == Mode::None {
                            *m = Mode::Shared;
                        }
                    }
                }
            }
        }
        let mut held = Vec::with_capacity(mode.iter().filter(|&&m| m != Mode::None).count());
        for (lock, m) in self.locks.iter().zip(mode) {
            match m {
                Mode::None => {}
                Mode::Shared => {
                    held.push(Held::Shared(lock.read().unwrap_or_else(|e| e.into_inner())))
                }
                Mode::Exclusive => held.push(Held::Exclusive(
                    lock.write().unwrap_or_else(|e| e.into_inner()),
                )),
            }
        }
        held
    }

    /// Read the block at `block`, let `patch` change it, write it back (the caller holds
    /// the block's stripe lock).
    fn modify(&self, block: u64, fua: bool, patch: impl FnOnce(&mut [u8])) -> Result<(), Errno> {
        let mut buf = vec![0u8; self.block as usize];
        self.inner.read(block, &mut buf)?;
        patch(&mut buf);
        self.inner.write(block, &buf, fua)
    }

    /// Zero `[offset, offset + len)`: partial blocks by read-modify-write, whole blocks with
    /// `whole` (the backend's trim or write-zeroes).
    fn zero_range(
        &self,
        offset: u64,
        len: u64,
        fua: bool,
        whole: impl Fn(u64, u64) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        let _held = self.lock_range(offset, len);
        for p in pieces(offset, len, self.block) {
            match p {
                Piece::Whole { offset, len, .. } => whole(offset, len)?,
                Piece::Part {
                    block, from, to, ..
                } => self.modify(block, fua, |b| b[from..to].fill(0))?,
            }
        }
        Ok(())
    }
}

impl Backend for SubBlock {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> String {
        self.inner.description()
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn block_size(&self) -> BlockSize {
        let b = self.inner.block_size();
        // Preferred stays the backend's (at least its block): requests of that size and
        // alignment never need a read-modify-write.
        BlockSize {
            minimum: self.minimum,
            preferred: b.preferred.max(b.minimum),
            maximum: b.maximum,
        }
    }
    fn read_only(&self) -> bool {
        self.inner.read_only()
    }
    fn multi_conn(&self) -> bool {
        self.inner.multi_conn()
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
        let mut tmp = Vec::new();
        for p in pieces(offset, buf.len() as u64, self.block) {
            match p {
                Piece::Whole { offset, len, at } => {
                    self.inner.read(offset, &mut buf[at..at + len as usize])?
                }
                Piece::Part {
                    block,
                    from,
                    to,
                    at,
                } => {
                    tmp.resize(self.block as usize, 0);
                    self.inner.read(block, &mut tmp)?;
                    buf[at..at + (to - from)].copy_from_slice(&tmp[from..to]);
                }
            }
        }
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), Errno> {
        let _held = self.lock_range(offset, data.len() as u64);
        for p in pieces(offset, data.len() as u64, self.block) {
            match p {
                Piece::Whole { offset, len, at } => {
                    self.inner
                        .write(offset, &data[at..at + len as usize], fua)?
                }
                Piece::Part {
                    block,
                    from,
                    to,
                    at,
                } => self.modify(block, fua, |b| {
                    b[from..to].copy_from_slice(&data[at..at + (to - from)])
                })?,
            }
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), Errno> {
        self.inner.flush()
    }

    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
        // The partial blocks are zeroed rather than left alone: the store's trim reads back
        // as zeros, and that stays true for every byte a client trimmed.
        self.zero_range(offset, len, fua, |o, l| self.inner.trim(o, l, fua))
    }

    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
        self.zero_range(offset, len, fua, |o, l| self.inner.write_zeroes(o, l, fua))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::RwLock;

    /// A 4 KiB-block memory backend that refuses (EINVAL) anything unaligned, so a test
    /// proves the layer never passes a partial block down; counts reads and writes.
    struct Strict {
        data: RwLock<Vec<u8>>,
        reads: AtomicU64,
        writes: AtomicU64,
        zeroes: AtomicU64,
    }

    impl Strict {
        fn new(size: usize) -> Arc<Strict> {
            Arc::new(Strict {
                data: RwLock::new((0..size).map(|i| (i % 251) as u8).collect()),
                reads: AtomicU64::new(0),
                writes: AtomicU64::new(0),
                zeroes: AtomicU64::new(0),
            })
        }
        fn check(&self, offset: u64, len: u64) -> Result<(), Errno> {
            if !offset.is_multiple_of(4096) || !len.is_multiple_of(4096) || len == 0 {
                return Err(super::super::EINVAL);
            }
            Ok(())
        }
    }

    impl Backend for Strict {
        fn name(&self) -> &str {
            "strict"
        }
        fn description(&self) -> String {
            String::new()
        }
        fn size_bytes(&self) -> u64 {
            self.data.read().unwrap().len() as u64
        }
        fn block_size(&self) -> BlockSize {
            BlockSize {
                minimum: 4096,
                preferred: 65536,
                maximum: 1 << 20,
            }
        }
        fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
            self.check(offset, buf.len() as u64)?;
            self.reads.fetch_add(1, Ordering::SeqCst);
            let d = self.data.read().unwrap();
            buf.copy_from_slice(&d[offset as usize..offset as usize + buf.len()]);
            Ok(())
        }
        fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), Errno> {
            self.check(offset, data.len() as u64)?;
            self.writes.fetch_add(1, Ordering::SeqCst);
            // Widen the read-modify-write window so a missing lock loses updates.
            std::thread::yield_now();
            let mut d = self.data.write().unwrap();
            d[offset as usize..offset as usize + data.len()].copy_from_slice(data);
            Ok(())
        }
        fn flush(&self) -> Result<(), Errno> {
            Ok(())
        }
        fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
            self.write_zeroes(offset, len, fua)
        }
        fn write_zeroes(&self, offset: u64, len: u64, _fua: bool) -> Result<(), Errno> {
            self.check(offset, len)?;
            self.zeroes.fetch_add(1, Ordering::SeqCst);
            let mut d = self.data.write().unwrap();
            d[offset as usize..(offset + len) as usize].fill(0);
            Ok(())
        }
    }

    fn initial(i: usize) -> u8 {
        (i % 251) as u8
    }

    #[test]
    fn pieces_cover_the_range_exactly() {
        let p: Vec<Piece> = pieces(512, 512, 4096).collect();
        assert_eq!(
            p,
            [Piece::Part {
                block: 0,
                from: 512,
                to: 1024,
                at: 0
            }]
        );
        let p: Vec<Piece> = pieces(1024, 10240, 4096).collect();
        assert_eq!(
            p,
            [
                Piece::Part {
                    block: 0,
                    from: 1024,
                    to: 4096,
                    at: 0
                },
                Piece::Whole {
                    offset: 4096,
                    len: 4096,
                    at: 3072
                },
                Piece::Part {
                    block: 8192,
                    from: 0,
                    to: 3072,
                    at: 7168
                },
            ]
        );
        assert_eq!(
            pieces(8192, 8192, 4096).collect::<Vec<_>>(),
            [Piece::Whole {
                offset: 8192,
                len: 8192,
                at: 0
            }]
        );
        // A range ending inside its first block, starting aligned.
        assert_eq!(
            pieces(4096, 1, 4096).collect::<Vec<_>>(),
            [Piece::Part {
                block: 4096,
                from: 0,
                to: 1,
                at: 0
            }]
        );
        // Every split of a small area covers each byte exactly once, in order.
        for offset in (0..12288u64).step_by(511) {
            for len in [1u64, 511, 4096, 4097, 9000] {
                let mut next = 0usize;
                for p in pieces(offset, len, 4096) {
                    let (start, n, at) = match p {
                        Piece::Whole { offset, len, at } => (offset, len as usize, at),
                        Piece::Part {
                            block,
                            from,
                            to,
                            at,
                        } => (block + from as u64, to - from, at),
                    };
                    assert_eq!((at, start), (next, offset + next as u64));
                    next += n;
                }
                assert_eq!(next as u64, len);
            }
        }
    }

    #[test]
    fn sub_block_reads_writes_and_zeroes_give_exact_bytes() {
        let strict = Strict::new(64 << 10);
        let sb = SubBlock::new(strict.clone(), 1).unwrap();
        assert_eq!(
            sb.block_size(),
            BlockSize {
                minimum: 1,
                preferred: 65536,
                maximum: 1 << 20
            }
        );
        let mut model: Vec<u8> = (0..64 << 10).map(initial).collect();

        // A 512-byte write in the middle of a block: one read and one write below.
        sb.write(4096 + 512, &[0xaa; 512], false).unwrap();
        model[4608..5120].fill(0xaa);
        assert_eq!(strict.reads.load(Ordering::SeqCst), 1);
        assert_eq!(strict.writes.load(Ordering::SeqCst), 1);
        // A 1 KiB write straddling two blocks: two read-modify-writes.
        sb.write(8192 - 512, &[0xbb; 1024], true).unwrap();
        model[7680..8704].fill(0xbb);
        // An unaligned write spanning whole blocks: head, middle (one write), tail.
        let big: Vec<u8> = (0..10000).map(|i| (i * 7 % 256) as u8).collect();
        sb.write(20000, &big, false).unwrap();
        model[20000..30000].copy_from_slice(&big);
        // A single byte at the very end of the export.
        sb.write((64 << 10) - 1, &[0xcc], false).unwrap();
        model[(64 << 10) - 1] = 0xcc;
        // Zeroes and trims with partial ends.
        sb.write_zeroes(100, 200, false).unwrap();
        model[100..300].fill(0);
        sb.trim(40000, 9000, false).unwrap();
        model[40000..49000].fill(0);
        // The middle of that trim went down as one aligned zeroing.
        assert_eq!(strict.zeroes.load(Ordering::SeqCst), 1);
        assert_eq!(*strict.data.read().unwrap(), model);

        // Reads of every shape return exactly the model's bytes.
        for (offset, len) in [
            (0usize, 1usize),
            (4607, 514),
            (7000, 2000),
            (19999, 10002),
            ((64 << 10) - 3, 3),
            (0, 64 << 10),
            (4096, 8192),
        ] {
            let mut b = vec![0u8; len];
            sb.read(offset as u64, &mut b).unwrap();
            assert_eq!(b, model[offset..offset + len], "read {offset}+{len}");
        }
        // Exact bytes at the edges of the 512-byte write.
        let mut b = [0u8; 4];
        sb.read(4606, &mut b).unwrap();
        assert_eq!(b, [initial(4606), initial(4607), 0xaa, 0xaa]);
        sb.read(5118, &mut b).unwrap();
        assert_eq!(b, [0xaa, 0xaa, initial(5120), initial(5121)]);
    }

    #[test]
    fn bad_minimums_and_sizes_are_refused() {
        let strict = Strict::new(64 << 10);
        assert!(SubBlock::new(strict.clone(), 3).is_err());
        assert!(SubBlock::new(strict.clone(), 8192).is_err());
        assert_eq!(
            SubBlock::new(strict, 512).unwrap().block_size().minimum,
            512
        );
        let odd = Strict::new(64 << 10 | 512);
        let e = SubBlock::new(odd, 512).err().unwrap();
        assert!(e.contains("not a multiple"), "{e}");
    }

    /// Many threads write disjoint 512-byte sectors of the same few 4 KiB blocks at once
    /// (plus aligned whole-block rewrites of other blocks): no sub-block write is lost.
    #[test]
    fn concurrent_sub_block_writes_to_one_block_lose_nothing() {
        let strict = Strict::new(64 << 10);
        let sb = Arc::new(SubBlock::new(strict.clone(), 512).unwrap());
        let threads = 8;
        let rounds = 200;
        std::thread::scope(|s| {
            for t in 0..threads {
                let sb = Arc::clone(&sb);
                s.spawn(move || {
                    for r in 0..rounds {
                        // Thread t owns sector t of blocks 0 and 1 (the same stripes for
                        // all threads); every round rewrites it with the round's value.
                        let v = [(t * 31 + r) as u8; 512];
                        let block = (r % 2) as u64 * 4096;
                        sb.write(block + t as u64 * 512, &v, false).unwrap();
                        // And a straddling 1 KiB write of sectors 7 and 8 of blocks 2/3
                        // by thread 0 only, racing the others' locks.
                        if t == 0 {
                            sb.write(3 * 4096 - 512, &[r as u8; 1024], false).unwrap();
                        }
                    }
                });
            }
        });
        let d = strict.data.read().unwrap();
        for t in 0..threads {
            // Block 0 holds the last even round's value, block 1 the last odd round's.
            let even = ((t * 31 + rounds - 2) % 256) as u8;
            let odd = ((t * 31 + rounds - 1) % 256) as u8;
            assert!(
                d[t * 512..(t + 1) * 512].iter().all(|&b| b == even),
                "block 0 sector {t}"
            );
            assert!(
                d[4096 + t * 512..4096 + (t + 1) * 512]
                    .iter()
                    .all(|&b| b == odd),
                "block 1 sector {t}"
            );
        }
        let last = (rounds - 1) as u8;
        assert!(d[3 * 4096 - 512..3 * 4096 + 512].iter().all(|&b| b == last));
        // The rest of blocks 2 and 3 kept their initial bytes.
        assert!((2 * 4096..3 * 4096 - 512).all(|i| d[i] == initial(i)));
        assert!((3 * 4096 + 512..4 * 4096).all(|i| d[i] == initial(i)));
    }

    /// An aligned whole-block write racing a sub-block write of the same block: the whole
    /// write is never undone by the other's stale copy (each round checks the outcome is
    /// one of the two orders).
    #[test]
    fn aligned_writes_are_not_undone_by_a_racing_read_modify_write() {
        let strict = Strict::new(64 << 10);
        let sb = SubBlock::new(strict.clone(), 512).unwrap();
        let barrier = std::sync::Barrier::new(2);
        for r in 0..300u32 {
            let whole = [(r % 200) as u8 + 1; 4096];
            let part = [0xff; 512];
            std::thread::scope(|s| {
                s.spawn(|| {
                    barrier.wait();
                    sb.write(5 * 4096, &whole, false).unwrap();
                });
                s.spawn(|| {
                    barrier.wait();
                    sb.write(5 * 4096 + 1024, &part, false).unwrap();
                });
            });
            let d = strict.data.read().unwrap();
            let block = &d[5 * 4096..6 * 4096];
            let v = whole[0];
            assert!(block[..1024].iter().all(|&b| b == v), "round {r}");
            assert!(block[1536..].iter().all(|&b| b == v), "round {r}");
            let s = &block[1024..1536];
            assert!(
                s.iter().all(|&b| b == v) || s.iter().all(|&b| b == 0xff),
                "round {r}"
            );
        }
    }
}
