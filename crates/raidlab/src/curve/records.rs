//! A dedicated walk over oracleGeneral files for curves: the keys come from the reader's
//! batch decoder ([`OracleReader::next_keys`], as counting mode's fast path reads them), with
//! no [`Request`] built and no virtual call per record. With sampling the sink's first step
//! is the spatial hash and a compare, so an unsampled record costs a decode, a hash and a
//! compare.
//!
//! It walks exactly the stream the generic walk (`stream.rs`) sees through
//! [`workload::open`]: oracleGeneral has only reads and one block per request (keyed
//! addressing), so every record is one lookup of its key; `limit` stops after that many
//! records, and the `ops` filter keeps them all. The decoder checks each record and returns
//! the reader's own errors.
//!
//! [`Request`]: crate::workload::Request
//! [`OracleReader::next_keys`]: crate::workload::oracle::OracleReader::next_keys

use std::path::Path;

use super::stream::{Sink, Walked};
use crate::config::Experiment;
use crate::engine::count::PROGRESS_EVERY;
use crate::error::{Error, Result};
use crate::workload::{self, oracle, Format, SourceSpec, WorkloadSpec};

/// Keys decoded per batch.
const BATCH_KEYS: usize = 256;

/// The oracleGeneral trace this walk can read for `spec`, or `None` (another format, a
/// generator, an overlay, or a device selection, which the generic reader refuses). A file
/// whose format cannot be sniffed is left to the generic reader, which reports it.
pub(crate) fn oracle_path(spec: &WorkloadSpec) -> Option<&Path> {
    let SourceSpec::Trace { path, format } = &spec.source else {
        return None;
    };
    if spec.device.is_some() {
        return None;
    }
    let format = match format {
        Format::Auto => workload::sniff_path(path).ok()?,
        f => *f,
    };
    (format == Format::OracleGeneral).then_some(path.as_path())
}

/// Walk the oracleGeneral file at `path` (`exp`'s workload) into `sink`, as
/// [`super::stream::walk`] would: the same lookups in the same order, the same warm-up and
/// `limit`, the same progress calls and the same errors.
pub(crate) fn walk<S: Sink>(
    exp: &Experiment,
    path: &Path,
    sink: &mut S,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<Walked> {
    let mut reader = oracle::open_batched(path)?;
    let warmup = exp.run.warmup_requests;
    let limit = exp.workload.limit.unwrap_or(u64::MAX);
    let (mut keys, mut sizes) = ([0u64; BATCH_KEYS], [0u32; BATCH_KEYS]);
    let mut seen: u64 = 0;
    // Each pass reads at least one record or ends the loop.
    while seen < limit {
        let want = usize::try_from(limit - seen).map_or(BATCH_KEYS, |l| l.min(BATCH_KEYS));
        let n = reader.next_keys(&mut keys[..want], &mut sizes[..want])?;
        if n == 0 {
            break;
        }
        sink.touch(&keys[..n]);
        for &key in &keys[..n] {
            seen += 1;
            if seen & (PROGRESS_EVERY - 1) == 0 && !progress(PROGRESS_EVERY) {
                return Err(Error::Cancelled);
            }
            // Counting mode measures from request `warmup + 1` on.
            sink.lookup(key, seen > warmup)?;
        }
    }
    progress(seen & (PROGRESS_EVERY - 1));
    let measured = seen.saturating_sub(warmup);
    // Every record is a read of one block: one lookup per measured request.
    Ok(Walked {
        requests: measured,
        lookups: measured,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::minisim::MiniSims;
    use super::super::shards::StackCurve;
    use super::super::stream::walk_requests;
    use super::*;
    use crate::cache::read::{PolicySpec, UniformCost};
    use crate::config;
    use crate::workload::oracle::RECORD_BYTES;

    /// A file of oracleGeneral records for `keys` (`next` of record `bad`, 1-based, made
    /// implausible when given), in a fresh directory; `cut` bytes are dropped from the end.
    fn oracle_file(name: &str, keys: &[u64], bad: Option<usize>, cut: usize) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("raidlab-records-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.oracleGeneral.bin"));
        let mut bytes = Vec::with_capacity(keys.len() * RECORD_BYTES);
        for (i, &k) in keys.iter().enumerate() {
            let next: i64 = if bad == Some(i + 1) { 1 << 60 } else { -1 };
            bytes.extend_from_slice(&(i as u32 / 100).to_le_bytes());
            bytes.extend_from_slice(&k.to_le_bytes());
            bytes.extend_from_slice(&4096u32.to_le_bytes());
            bytes.extend_from_slice(&next.to_le_bytes());
        }
        bytes.truncate(bytes.len() - cut);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Skewed keys: the square of a uniform draw over `n` keys, so low keys repeat often.
    fn skewed(count: usize, n: u64) -> Vec<u64> {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        (0..count)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                (u * u * n as f64) as u64 * 7 + 3
            })
            .collect()
    }

    fn exp(path: &Path, extra: &str) -> Experiment {
        let text = format!(
            "[workload]\ntrace = {:?}\n{extra}[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n\
             [array]\nlevel = \"raid5\"\ndisks = 5\nfailed = [2]\n",
            path.display().to_string()
        );
        config::from_toml(&text, "t.toml", None).unwrap().remove(0)
    }

    /// Both walks of `e` into fresh sinks from `make`: what each counted, the sink's
    /// summary, and the progress calls.
    fn both<S: Sink>(
        e: &Experiment,
        make: impl Fn() -> S,
        summary: impl Fn(&S) -> String,
    ) -> [(Result<Walked>, String, Vec<u64>); 2] {
        let path = oracle_path(&e.workload).expect("an oracleGeneral file");
        let mut out = Vec::new();
        for fast in [true, false] {
            let mut sink = make();
            let mut calls = Vec::new();
            let mut progress = |n| {
                calls.push(n);
                true
            };
            let w = if fast {
                walk(e, path, &mut sink, &mut progress)
            } else {
                walk_requests(e, &mut sink, &mut progress)
            };
            out.push((w, summary(&sink), calls));
        }
        let [a, b]: [_; 2] = out.try_into().ok().unwrap();
        [a, b]
    }

    fn assert_same<S: Sink>(e: &Experiment, make: impl Fn() -> S, summary: impl Fn(&S) -> String) {
        let [(wa, sa, pa), (wb, sb, pb)] = both(e, make, summary);
        assert_eq!(wa.unwrap(), wb.unwrap());
        assert_eq!(sa, sb);
        assert_eq!(pa, pb);
    }

    #[test]
    fn the_record_walk_equals_the_reader_walk() {
        let path = oracle_file("same", &skewed(60_000, 4000), None, 0);
        let sizes = [1, 10, 100, 1000, 4000];
        for extra in [
            "format = \"oracle\"\n",
            "",
            "limit = 20000\n[run]\nwarmup_requests = 5000\n",
            "limit = 100000\nops = \"all\"\n",
        ] {
            let (workload, run) = extra.split_once("[run]").unwrap_or((extra, ""));
            let e = exp(&path, &format!("{workload}[run]\nseed = 3\n{run}"));
            let cost = crate::array::Array::new(e.array.as_ref().unwrap()).unwrap();
            for (rate, max) in [(None, None), (Some(0.1), None), (None, Some(300))] {
                assert_same(
                    &e,
                    || StackCurve::new(&sizes, &cost, 3, rate, max),
                    |c| format!("{:?} {} {}", c.hist.misses(), c.sampled, c.rate()),
                );
            }
            for rate in [None, Some(0.1)] {
                assert_same(
                    &e,
                    || MiniSims::new(&PolicySpec::Fifo, &sizes, &cost, 3, rate).unwrap(),
                    |m| format!("{:?} {:?} {}", m.misses, m.miss_cost, m.sampled),
                );
            }
        }
    }

    #[test]
    fn progress_calls_and_cancelling_match_the_reader() {
        // Past one progress period, so both walks call it mid-stream.
        let n = PROGRESS_EVERY as usize + 12_345;
        let path = oracle_file("progress", &skewed(n, 100_000), None, 0);
        let e = exp(&path, "");
        let cost = UniformCost;
        let make = || StackCurve::new(&[10, 1000], &cost, 1, Some(0.01), None);
        assert_same(&e, make, |c| format!("{:?}", c.hist.misses()));
        let p = oracle_path(&e.workload).unwrap();
        let err = walk(&e, p, &mut make(), &mut |_| false).unwrap_err();
        assert!(matches!(err, Error::Cancelled), "{err}");
    }

    #[test]
    fn bad_and_cut_records_give_the_readers_errors() {
        let keys = skewed(5000, 100);
        let cost = UniformCost;
        let make = || StackCurve::new(&[10, 100], &cost, 1, None, None);
        for (name, bad, cut, limit, fails) in [
            ("bad", Some(4321), 0, "", true),
            ("cut", None, 7, "", true),
            ("bad-past-limit", Some(4321), 0, "limit = 4320\n", false),
            ("cut-past-limit", None, 7, "limit = 4999\n", false),
        ] {
            let path = oracle_file(name, &keys, bad, cut);
            let e = exp(&path, &format!("format = \"oracle\"\n{limit}"));
            let [(wa, _, _), (wb, _, _)] = both(&e, make, |_| String::new());
            match (wa, wb) {
                (Err(a), Err(b)) if fails => assert_eq!(a.to_string(), b.to_string(), "{name}"),
                (Ok(a), Ok(b)) if !fails => assert_eq!(a, b, "{name}"),
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    #[test]
    fn only_oracle_files_take_the_record_walk() {
        let path = oracle_file("which", &[1, 2, 3], None, 0);
        assert!(oracle_path(&exp(&path, "").workload).is_some());
        let keys = path.with_file_name("keys.u32le");
        std::fs::write(&keys, [1u8, 0, 0, 0]).unwrap();
        assert!(oracle_path(&exp(&keys, "").workload).is_none());
        let synth = config::from_toml(
            "[workload.synthetic]\nkind = \"zipf\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n",
            "t.toml",
            None,
        )
        .unwrap()
        .remove(0);
        assert!(oracle_path(&synth.workload).is_none());
    }
}
