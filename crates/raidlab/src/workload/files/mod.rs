//! File-level workloads for the host model (`crate::host`): streams of file operations, each
//! a read or write of a whole file or of its first blocks.
//!
//! - `random` and `zipf` (the X-RAY paper's benchmarks, after Wong and Wilkes): a warm-up
//!   reading every file once, sequentially in file order, then `reads` operations on files
//!   chosen uniformly or by Zipf(`alpha`) popularity (ranks scattered over the files by a
//!   seeded permutation). A `partial_fraction` of them read only a prefix of a uniformly drawn
//!   `1..len-1` blocks; a `write_fraction` overwrite the file (whole or, with the same partial
//!   rule, a prefix) instead of reading it. Operations follow one another back to back, with
//!   `think` time between them (the replay is closed loop: one host thread).
//! - `weblog`: a common-log-format HTTP log (`weblog.rs`), each request a read of the first
//!   `bytes` of its path's file at the logged time.

pub mod weblog;

use std::path::PathBuf;

use rand_chacha::ChaCha8Rng;

use crate::error::{Error, Result};
use crate::workload::synth::{below, rng, unit_f64, Scatter, ZipfSampler};

/// What to do with a malformed line of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMalformed {
    /// Skip it and count it (reported as `weblog_malformed_lines`).
    Skip,
    /// Stop with an error naming the file and line.
    Fail,
}

/// Which file-level workload.
#[derive(Debug, Clone, PartialEq)]
pub enum FilesKind {
    Random,
    Zipf {
        alpha: f64,
    },
    WebLog {
        path: PathBuf,
        on_malformed: OnMalformed,
        /// Log times are multiplied by this (0.5 halves the idle time between requests).
        time_scale: f64,
    },
}

/// The `[workload.files]` table, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct FilesSpec {
    pub kind: FilesKind,
    /// Files of the synthetic benchmarks.
    pub files: u64,
    /// Blocks per file of the synthetic benchmarks (>= 1).
    pub file_blocks: u32,
    /// Operations after warm-up (synthetic benchmarks; a log has as many as it has requests).
    pub reads: u64,
    pub partial_fraction: f64,
    pub write_fraction: f64,
    pub think_ns: u64,
    /// Read every file once, in order, before measuring.
    pub warmup: bool,
    pub seed: u64,
}

/// One file operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileOp {
    /// Earliest start (a log's time); `None`: right after the previous operation + think.
    pub arrival_ns: Option<u64>,
    pub file: u32,
    pub write: bool,
    /// Blocks from the start of the file (its size for a whole-file operation).
    pub blocks: u32,
    /// Part of the warm-up (not measured).
    pub warmup: bool,
}

impl FileOp {
    /// A warm-up read of the whole of `file`, `blocks` long.
    pub fn warmup_read(file: u32, blocks: u32) -> FileOp {
        FileOp {
            arrival_ns: None,
            file,
            write: false,
            blocks,
            warmup: true,
        }
    }
}

/// A stream of file operations over a fixed set of files.
pub trait FileSource {
    /// Size in blocks of every file (>= 1 each), indexed by file number.
    fn file_blocks(&self) -> &[u32];
    /// The next operation, `Ok(None)` at the end.
    fn next_op(&mut self) -> Result<Option<FileOp>>;
    /// Think time between closed-loop operations.
    fn think_ns(&self) -> u64 {
        0
    }
    /// Malformed log lines skipped, requests without data skipped, and the first malformed
    /// line number (logs only).
    fn skipped(&self) -> (u64, u64, Option<u64>) {
        (0, 0, None)
    }
}

/// Open the workload `spec` describes; `block_size` converts a log's byte counts.
pub fn open(spec: &FilesSpec, block_size: u32) -> Result<Box<dyn FileSource>> {
    match &spec.kind {
        FilesKind::WebLog {
            path,
            on_malformed,
            time_scale,
        } => Ok(Box::new(weblog::WebLog::open(
            path,
            *on_malformed,
            *time_scale,
            block_size,
            spec.warmup,
        )?)),
        FilesKind::Random | FilesKind::Zipf { .. } => Ok(Box::new(Synthetic::new(spec)?)),
    }
}

/// The `random` and `zipf` benchmarks.
pub struct Synthetic {
    sizes: Vec<u32>,
    zipf: Option<(ZipfSampler, Scatter)>,
    rng: ChaCha8Rng,
    partial: f64,
    write: f64,
    think_ns: u64,
    warmup_left: u64,
    next_warm: u32,
    left: u64,
}

impl Synthetic {
    pub fn new(spec: &FilesSpec) -> Result<Synthetic> {
        if spec.file_blocks == 0 {
            return Err(Error::config(
                "workload.files.file_blocks",
                "a file needs at least one block",
            ));
        }
        if spec.files == 0 || spec.files > u64::from(u32::MAX) {
            return Err(Error::config(
                "workload.files.files",
                format!("expected 1..={}", u32::MAX),
            ));
        }
        let zipf = match spec.kind {
            FilesKind::Zipf { alpha } => Some((
                ZipfSampler::new(spec.files, alpha)
                    .map_err(|e| Error::config("workload.files.alpha", e.to_string()))?,
                Scatter::new(spec.files, spec.seed),
            )),
            _ => None,
        };
        Ok(Synthetic {
            sizes: vec![spec.file_blocks; spec.files as usize],
            zipf,
            rng: rng(spec.seed, 0xf11e),
            partial: spec.partial_fraction,
            write: spec.write_fraction,
            think_ns: spec.think_ns,
            warmup_left: if spec.warmup { spec.files } else { 0 },
            next_warm: 0,
            left: spec.reads,
        })
    }
}

impl FileSource for Synthetic {
    fn file_blocks(&self) -> &[u32] {
        &self.sizes
    }

    fn think_ns(&self) -> u64 {
        self.think_ns
    }

    fn next_op(&mut self) -> Result<Option<FileOp>> {
        if self.warmup_left > 0 {
            self.warmup_left -= 1;
            let file = self.next_warm;
            self.next_warm += 1;
            return Ok(Some(FileOp::warmup_read(file, self.sizes[file as usize])));
        }
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let n = self.sizes.len() as u64;
        let file = match &self.zipf {
            Some((z, scatter)) => scatter.apply(z.sample(&mut self.rng) - 1),
            None => below(&mut self.rng, n),
        } as u32;
        let len = self.sizes[file as usize];
        // Always draw both so that changing one fraction does not shift the other's stream.
        let (p, w) = (unit_f64(&mut self.rng), unit_f64(&mut self.rng));
        let blocks = if p < self.partial && len > 1 {
            1 + below(&mut self.rng, u64::from(len - 1)) as u32
        } else {
            len
        };
        Ok(Some(FileOp {
            arrival_ns: None,
            file,
            write: w < self.write,
            blocks,
            warmup: false,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: FilesKind) -> FilesSpec {
        FilesSpec {
            kind,
            files: 8,
            file_blocks: 4,
            reads: 1000,
            partial_fraction: 0.0,
            write_fraction: 0.0,
            think_ns: 0,
            warmup: true,
            seed: 7,
        }
    }

    fn ops(s: &FilesSpec) -> Vec<FileOp> {
        let mut src = open(s, 4096).unwrap();
        std::iter::from_fn(|| src.next_op().unwrap()).collect()
    }

    #[test]
    fn warmup_reads_every_file_in_order_then_whole_file_reads() {
        let v = ops(&spec(FilesKind::Random));
        assert_eq!(v.len(), 1008);
        assert!(v[..8]
            .iter()
            .enumerate()
            .all(|(i, o)| o.warmup && o.file == i as u32 && o.blocks == 4));
        assert!(v[8..]
            .iter()
            .all(|o| !o.warmup && o.blocks == 4 && !o.write));
        let mut count = [0u32; 8];
        v[8..].iter().for_each(|o| count[o.file as usize] += 1);
        assert!(count.iter().all(|&c| (90..160).contains(&c)), "{count:?}");
        assert_eq!(v, ops(&spec(FilesKind::Random)), "deterministic");
    }

    #[test]
    fn zipf_is_skewed_and_partial_reads_read_a_strict_prefix() {
        let mut s = spec(FilesKind::Zipf { alpha: 1.2 });
        s.partial_fraction = 0.5;
        let v = ops(&s);
        let mut count = [0u32; 8];
        v[8..].iter().for_each(|o| count[o.file as usize] += 1);
        count.sort_unstable();
        assert!(count[7] > 3 * count[0].max(1), "{count:?}");
        let partial = v[8..].iter().filter(|o| o.blocks < 4).count();
        assert!((400..600).contains(&partial), "{partial}");
        assert!(v.iter().all(|o| (1..=4).contains(&o.blocks)));
    }

    #[test]
    fn zero_block_files_are_a_config_error() {
        let mut s = spec(FilesKind::Random);
        s.file_blocks = 0;
        let e = open(&s, 4096).err().unwrap();
        assert!(e.to_string().contains("workload.files.file_blocks"), "{e}");
    }
}
