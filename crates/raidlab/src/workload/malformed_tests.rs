//! Every reader over a corpus of malformed inputs, and over arbitrary bytes: each input must
//! either end cleanly or yield an error that names the input and the line (or record), and
//! never panic. Also: synthetic generators are deterministic per seed.

use proptest::prelude::*;

use super::sniff_tests::SAMPLES;
use super::*;
use crate::error::Error;

/// Every format a reader exists for.
const FORMATS: [Format; 15] = Format::ALL;

/// Drain `bytes` as `format`; on error, check it names the input and a position.
fn check(format: Format, bytes: &[u8]) {
    let label = "bad.trace";
    let result = from_bytes(format, label, bytes, None).and_then(|mut src| {
        let mut n = 0u64;
        while src.next_request()?.is_some() {
            n += 1;
        }
        // A finished source stays finished.
        assert!(src.next_request()?.is_none());
        Ok(n)
    });
    if let Err(e) = result {
        let msg = e.to_string();
        match &e {
            Error::Trace { line, .. } => {
                assert!(*line >= 1, "{format:?}: {msg}");
                let unit = if msg.contains(": record ") {
                    "record"
                } else {
                    "line"
                };
                assert!(
                    msg.starts_with(&format!("{label}: {unit} {line}: ")),
                    "{format:?}: {msg}"
                );
            }
            Error::Format { file, .. } => assert_eq!(file, label, "{format:?}: {msg}"),
            other => panic!("{format:?}: unexpected error kind {other:?}"),
        }
    }
}

/// Malformed inputs of every kind the brief lists.
fn corpus() -> Vec<Vec<u8>> {
    let mut c: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"\n\n\n".to_vec(),
        b"abc,def,ghi\n".to_vec(),
        b"-1,-2,-3,-4,-5,-6,-7\n".to_vec(),
        b"1,2\n".to_vec(),
        b"99999999999999999999999,1,1,r,1\n".to_vec(),
        b"18446744073709551615,h,18446744073709551615,Read,18446744073709551615,18446744073709551615,0\n"
            .to_vec(),
        b"0,36028797018963968,512,r,0\n".to_vec(),
        b"1 2 3 4 5 6 7 8 9 10 11 12\n".to_vec(),
        b"8,0 0 1 0.1 5 Q R 18446744073709551615 + 18446744073709551615 [p]\n".to_vec(),
        b"8,0 0 1 0.1 5 Q W\n".to_vec(),
        b"4294967296,0 0 1 0.1 5 Q W 1 + 1\n".to_vec(),
        b"1.5.5 0 0 1 1\n".to_vec(),
        b"nan 0 0 1 1\n1e9 0 0 1 1\n".to_vec(),
        b"version,time,op,size,lbn\n1,1,2a\n".to_vec(),
        b"Timestamp,Response,IOType,LUN,Offset,Size\n1,0,R,0,0\n".to_vec(),
        vec![0xff, 0xfe, 0x00, 0x80, b'\n', 0xc3, 0x28],
        vec![0u8; 23],
        vec![0xffu8; 25],
        vec![1, 2, 3],
        (0..=255u8).collect(),
    ];
    // Valid samples cut short at every length: truncated records and lines.
    for (_, _, bytes, _) in SAMPLES {
        for cut in 0..bytes.len() {
            c.push(bytes[..cut].to_vec());
        }
        let mut junk = bytes.to_vec();
        junk.extend_from_slice(&[0xde, 0xad, b'\n', 0xbe, 0xef]);
        c.push(junk);
    }
    c
}

#[test]
fn every_reader_survives_the_malformed_corpus() {
    for bytes in corpus() {
        for format in FORMATS {
            check(format, &bytes);
        }
    }
}

#[test]
fn each_malformed_line_kind_names_file_and_line() {
    let cases: [(Format, &[u8], &str); 11] = [
        (Format::Spc, b"0,1,512,r,0\n0,1,512,r\n", "bad.trace: line 2: expected at least 5 fields, found 4"),
        (Format::Msr, b"1,h,0,Read,0,-512,0\n", "bad.trace: line 1: Size: expected a non-negative integer, found `-512`"),
        (Format::MqSim, b"\n\n1 0 0 99999999999999999999 1\n", "bad.trace: line 3: size: expected a non-negative integer, found `99999999999999999999`"),
        (Format::DiskSim, b"1 0 0 1 1\n2 0 0 1\n", "bad.trace: line 2: expected 5 fields, found 4"),
        (Format::Systor, b"Timestamp,Response,IOType,LUN,Offset,Size\n1,0,R,0,x,1\n", "bad.trace: line 2: Offset: expected a non-negative integer, found `x`"),
        (Format::TencentCbs, b"1,0,8,0,\xff\xfe\n", "bad.trace: line 1: volume: expected a non-negative integer, found `\u{fffd}\u{fffd}`"),
        (Format::OracleGeneral, &[0u8; 30], "bad.trace: record 2: truncated record: expected 24 bytes, found 6"),
        (Format::KeysU32Le, &[0u8; 9], "bad.trace: record 3: truncated key: expected 4 bytes, found 1"),
        (Format::Csv(crate::workload::csvtrace::CsvSpec::DEFAULT), b"1,2,3\n1,2\n", "bad.trace: line 2: expected at least 3 columns, found 2"),
        (Format::Vscsi, &[0u8; 79], "bad.trace: record 1: not a vscsi trace: 79 bytes, fewer than the 80 of the two records its version test reads"),
        (Format::Vscsi, b"1,0,8,0,0\n1,0,8,0,0\n1,0,8,0,0\n1,0,8,0,0\n1,0,8,0,0\n1,0,8,0,0\n1,0,8,0,0\n1,0,8,0,0\n", "bad.trace: record 1: not a vscsi trace: the first two records are neither version 1 nor version 2 (the high byte of `ver`); set `format` to this file's format"),
    ];
    for (format, bytes, want) in cases {
        let mut src = match from_bytes(format, "bad.trace", bytes, None) {
            Ok(src) => src,
            Err(e) => {
                assert_eq!(e.to_string(), want);
                continue;
            }
        };
        let e = loop {
            match src.next_request() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("{format:?}: no error"),
                Err(e) => break e,
            }
        };
        assert_eq!(e.to_string(), want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn no_reader_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        for format in FORMATS {
            check(format, &bytes);
        }
    }

    #[test]
    fn no_reader_panics_on_line_shaped_noise(
        lines in proptest::collection::vec("[0-9a-fA-FxRWQD,.+ \\-]{0,40}", 0..12)
    ) {
        let text = lines.join("\n");
        for format in FORMATS {
            check(format, text.as_bytes());
        }
    }

    #[test]
    fn generators_are_deterministic_per_seed(seed in any::<u64>(), keys in 1u64..1_000_000, alpha in 0.0f64..3.0) {
        let specs = [
            SynthSpec::Zipf { keys, alpha, requests: 200, seed },
            SynthSpec::Uniform { keys, requests: 200, seed },
            SynthSpec::WebSearch { space_bytes: keys.max(10) << 15, requests: 200, mean_interarrival_ns: 3_700_000, seed, cluster_bytes: 32768 },
        ];
        for spec in specs {
            let spec = WorkloadSpec { source: SourceSpec::Synthetic(spec), ops: OpsFilter::All, limit: None, block_size: 4096, device: None, split: true };
            let drain = || {
                let mut src = open(&spec).unwrap();
                let mut v = Vec::new();
                while let Some(r) = src.next_request().unwrap() {
                    v.push(r);
                }
                v
            };
            let a = drain();
            prop_assert_eq!(a.len(), 200);
            prop_assert_eq!(a, drain());
        }
    }
}

/// Pinned outputs: a change in any of these is a change in every synthetic result.
#[test]
fn generator_outputs_are_pinned() {
    let first = |spec: SynthSpec| {
        let spec = WorkloadSpec {
            source: SourceSpec::Synthetic(spec),
            ops: OpsFilter::All,
            limit: Some(3),
            block_size: 4096,
            device: None,
            split: true,
        };
        let mut src = open(&spec).unwrap();
        let mut v = Vec::new();
        while let Some(r) = src.next_request().unwrap() {
            v.push((r.time_ns, r.offset, r.len));
        }
        v
    };
    let z = first(SynthSpec::Zipf {
        keys: 1000,
        alpha: 0.9,
        requests: 10,
        seed: 1,
    });
    let u = first(SynthSpec::Uniform {
        keys: 1000,
        requests: 10,
        seed: 1,
    });
    let w = first(SynthSpec::WebSearch {
        space_bytes: 1 << 30,
        requests: 10,
        mean_interarrival_ns: 3_700_000,
        seed: 1,
        cluster_bytes: 32768,
    });
    assert_eq!(z, [(0, 94, 0), (0, 481, 0), (0, 919, 0)]);
    assert_eq!(u, [(0, 876, 0), (0, 682, 0), (0, 336, 0)]);
    assert_eq!(
        w,
        [
            (0, 1_043_496_960, 16_384),
            (1_057_475, 884_277_248, 32_768),
            (2_415_588, 563_404_800, 8_192)
        ]
    );
}
