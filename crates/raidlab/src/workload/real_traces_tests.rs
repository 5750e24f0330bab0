//! Tests against the real traces next to the project (`../shared/traces`, described in its
//! README). Skipped with a note when the directory is absent, so the suite runs anywhere.

use std::path::PathBuf;

use super::*;

pub(crate) fn traces() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/traces"
    ));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("note: {} absent; real-trace tests skipped", dir.display());
        None
    }
}

/// Count a file's requests with `format`, returning the first request and the stats.
fn run(rel: &str, format: Format) -> Option<(Request, TraceStats)> {
    let path = traces()?.join(rel);
    let mut src = open_trace_file(&path, format, None).unwrap_or_else(|e| panic!("{e}"));
    let mut first = None;
    let mut b = stats::StatsBuilder::new(src.addressing(), 4096);
    while let Some(r) = src.next_request().unwrap_or_else(|e| panic!("{e}")) {
        first.get_or_insert(r);
        b.add(&r);
    }
    Some((first?, b.finish()))
}

/// Every listed file sniffs as its format and holds exactly the README's record count.
#[test]
fn record_counts_match_the_readme() {
    let cases: [(&str, Format, u64); 11] = [
        (
            "cloudphysics/cloudPhysicsIO.csv",
            Format::CloudPhysicsCsv,
            113_872,
        ),
        (
            "cloudphysics/cloudPhysicsIO.oracleGeneral.bin",
            Format::OracleGeneral,
            113_872,
        ),
        ("websearch/wsrch-small.mqsim.txt", Format::MqSim, 24_783),
        ("hp/hplajw-1week.msr.csv", Format::Msr, 44_519),
        ("disksim/ascii.trace", Format::DiskSim, 100_000),
        ("msr/hm0-sample.msr.csv", Format::Msr, 1_000),
        ("systor/systor17-sample.csv.gz", Format::Systor, 999),
        ("systor/systor17-sample2.csv.gz", Format::Systor, 999),
        ("tencent/cbs-sample.csv.bz2", Format::TencentCbs, 50_000),
        ("tpcc/tpcc-small.mqsim.txt", Format::MqSim, 6_999),
        ("keys/arc-oltp.u32be.gz", Format::KeysU32Be, 914_145),
    ];
    let Some(dir) = traces() else { return };
    for (rel, format, count) in cases {
        assert_eq!(sniff_path(&dir.join(rel)).unwrap(), format, "{rel}");
        let (_, s) = run(rel, Format::Auto).unwrap();
        assert_eq!(s.requests, count, "{rel}");
    }
}

#[test]
fn first_records_and_shares() {
    if traces().is_none() {
        return;
    }
    // `1,5633898,2a,512,42932745`
    let (r, s) = run("cloudphysics/cloudPhysicsIO.csv", Format::CloudPhysicsCsv).unwrap();
    assert_eq!(
        r,
        Request {
            time_ns: 0,
            op: Op::Write,
            offset: 42_932_745 * 512,
            len: 512
        }
    );
    assert_eq!((s.reads, s.writes), (46_974, 66_898));
    assert_eq!(s.span_ns, 7_200 * 1_000_000_000);
    // The same trace as objects: id 0x028f1a09 is lbn 42932745, size 512.
    let (r, _) = run(
        "cloudphysics/cloudPhysicsIO.oracleGeneral.bin",
        Format::OracleGeneral,
    )
    .unwrap();
    assert_eq!(
        r,
        Request {
            time_ns: 0,
            op: Op::Read,
            offset: 42_932_745,
            len: 512
        }
    );
    // WebSearch sample: 4 writes out of 24,783 (99.98% reads).
    let (r, s) = run("websearch/wsrch-small.mqsim.txt", Format::MqSim).unwrap();
    assert_eq!(
        r,
        Request {
            time_ns: 0,
            op: Op::Read,
            offset: 657_728 * 512,
            len: 8192
        }
    );
    assert_eq!(s.writes, 4);
    // DiskSim: flags bit 0 = read, 79,634 of them.
    let (_, s) = run("disksim/ascii.trace", Format::DiskSim).unwrap();
    assert_eq!(s.reads, 79_634);
    // hplajw: 70% writes.
    let (r, s) = run("hp/hplajw-1week.msr.csv", Format::Msr).unwrap();
    assert_eq!((r.time_ns, r.op, r.len), (0, Op::Read, 4096));
    assert!((0.69..0.71).contains(&(s.writes as f64 / s.requests as f64)));
}

#[test]
fn one_device_selected() {
    let Some(dir) = traces() else { return };
    let path = dir.join("hp/hplajw-1week.msr.csv");
    let count = |dev| {
        let mut src = open_trace_file(&path, Format::Msr, Some(dev)).unwrap();
        let mut n = 0u64;
        while src.next_request().unwrap().is_some() {
            n += 1;
        }
        n
    };
    assert_eq!(count(0) + count(1), 44_519);
    assert_eq!(count(7), 0);
}

#[test]
fn open_applies_filter_and_limit() {
    let Some(dir) = traces() else { return };
    let spec = |ops, limit| WorkloadSpec {
        source: SourceSpec::Trace {
            path: dir.join("cloudphysics/cloudPhysicsIO.csv"),
            format: Format::Auto,
        },
        ops,
        limit,
        block_size: 4096,
        device: None,
        split: true,
    };
    let mut src = open(&spec(OpsFilter::Reads, None)).unwrap();
    let s = TraceStats::compute(src.as_mut(), 4096).unwrap();
    assert_eq!((s.requests, s.writes), (46_974, 0));
    let mut src = open(&spec(OpsFilter::Reads, Some(10))).unwrap();
    let s = TraceStats::compute(src.as_mut(), 4096).unwrap();
    assert_eq!(s.requests, 10);
}

/// 5.3 M records through xz: about 2.5 s in a debug build.
#[test]
fn w106_record_count() {
    let Some(dir) = traces() else { return };
    let path = dir.join("keys/cloudphysics-w106.txt.xz");
    assert_eq!(sniff_path(&path).unwrap(), Format::KeysU32Le);
    let (_, s) = run("keys/cloudphysics-w106.txt.xz", Format::Auto).unwrap();
    assert_eq!(s.requests, 5_292_456);
}
