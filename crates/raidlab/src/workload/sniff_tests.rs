//! Sniffing every format from inline samples, and reading every format through every
//! compression container from a temporary file.

use std::path::PathBuf;

use super::decompress::tests::{compress, ALL};
use super::decompress::Compression;
use super::*;

/// One small sample per format, with its request count.
pub(crate) const SAMPLES: [(Format, &str, &[u8], u64); 11] = [
    (Format::Spc, "fin.spc", b"0,303567,3584,w,0.000000\n1,55590,3072,r,0.000000\n0,10,512,R,0.5\n", 3),
    (Format::Msr, "hm.csv", b"128166385295514663,hm,0,Write,9056014336,2048,2833\n128166385295514878,hm,1,Read,512,512,2617\n", 2),
    (Format::OracleGeneral, "x.bin", &[
        1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255,
        2, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0,
    ], 2),
    (Format::CloudPhysicsCsv, "cp.csv", b"version,time,op,size,lbn\n1,5633898,2a,512,42932745\n1,5633899,28,4096,8\n", 2),
    (Format::MqSim, "w.txt", b"11413000 0 657728 16 1\n11565000 1 31244784 64 1\n", 2),
    (Format::DiskSim, "trace", b"13.191135\t30\t0\t5\t1\n17.829285\t20\t576560\t6\t1\n", 2),
    (Format::Systor, "s.csv", b"Timestamp,Response,IOType,LUN,Offset,Size\n1456095145.133076000,0.000806000,R,0,899056122368,131072\n", 1),
    (Format::TencentCbs, "cbs.csv", b"1538323200,4247200,128,1,1058\n1538323199,13896880,128,0,1063\n", 2),
    (Format::KeysU32Be, "keys.bin", &[0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 1, 3], 3),
    (Format::KeysU32Le, "keys.bin", &[1, 0, 0, 0, 2, 0, 0, 0, 3, 1, 0, 0], 3),
    (Format::Blkparse, "blk.txt", b"  8,0    3        1     0.000000000   697  Q  WS 3417048 + 8 [jbd2]\n  8,0    3        2     0.000002831   697  G  WS 3417048 + 8 [jbd2]\nCPU0 (8,0):\n", 1),
];

fn count(mut src: Box<dyn RequestSource + '_>) -> u64 {
    let mut n = 0;
    while src.next_request().unwrap().is_some() {
        n += 1;
    }
    n
}

#[test]
fn every_format_sniffs_and_reads() {
    for (format, name, bytes, n) in SAMPLES {
        assert_eq!(sniff::sniff(name, bytes, true).unwrap(), format, "{name}");
        assert_eq!(
            count(from_bytes(Format::Auto, name, bytes, None).unwrap()),
            n,
            "{format:?}"
        );
        assert_eq!(
            count(from_bytes(format, name, bytes, None).unwrap()),
            n,
            "{format:?}"
        );
    }
}

#[test]
fn names_decide_where_content_cannot() {
    // A DiskSim trace with whole-millisecond times reads as MQSim unless its name says so.
    let ambiguous = b"13 0 0 5 1\n17 0 8 6 0\n";
    assert_eq!(
        sniff::sniff("a.txt", ambiguous, true).unwrap(),
        Format::MqSim
    );
    assert_eq!(
        sniff::sniff("a.disksim", ambiguous, true).unwrap(),
        Format::DiskSim
    );
    assert_eq!(
        sniff::sniff("w.mqsim.txt", ambiguous, true).unwrap(),
        Format::MqSim
    );
    assert_eq!(
        sniff::sniff("t.oracleGeneral.bin", b"x", true).unwrap(),
        Format::OracleGeneral
    );
    assert_eq!(
        sniff::sniff("a.u32le", &[0, 0, 0, 1], true).unwrap(),
        Format::KeysU32Le
    );
    // A partial last line of a head is not held against a format.
    assert_eq!(
        sniff::sniff("a", b"0,1,512,r,0.5\n0,2,51", false).unwrap(),
        Format::Spc
    );
}

#[test]
fn unknown_content_is_a_format_error_listing_what_was_tried() {
    let e = sniff::sniff("notes.txt", b"hello world\nthis is not a trace\n", true).unwrap_err();
    assert_eq!(e.kind(), "format");
    let msg = e.to_string();
    assert!(
        msg.starts_with("notes.txt: this is a text file, but not a text trace"),
        "{msg}"
    );
    for name in [
        "cloudphysics",
        "systor",
        "blkparse",
        "msr",
        "spc",
        "tencent",
        "mqsim",
        "disksim",
    ] {
        assert!(msg.contains(name), "{msg}");
    }
    let e = sniff::sniff("junk", &[7, 7, 7, 7, 9, 9, 9, 9], true).unwrap_err();
    assert!(e.to_string().contains("tried oracleGeneral"), "{e}");
    // UTF-8 text is text, not "an unrecognised binary trace".
    let e = sniff::sniff("notes.md", "caf\u{e9} \u{2014} notes\n".as_bytes(), true).unwrap_err();
    assert!(e.to_string().contains("this is a text file"), "{e}");
    // Random bytes are not taken for a u32 key stream.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..8192)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    let e = sniff::sniff("noise.bin", &noise, true).unwrap_err();
    assert_eq!(e.kind(), "format", "{e}");
    let e = sniff::sniff("empty", b"", true).unwrap_err();
    assert_eq!(
        e.to_string(),
        "empty: the trace is empty: no format to recognise"
    );
}

/// A temporary file holding `bytes`, removed on drop.
pub(crate) struct TempFile(pub PathBuf);

impl TempFile {
    pub(crate) fn new(name: &str, bytes: &[u8]) -> TempFile {
        let dir = std::env::temp_dir().join(format!("raidlab-workload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn every_format_through_every_container() {
    for (format, name, bytes, n) in SAMPLES {
        for kind in ALL {
            let ext = match kind {
                Compression::None => "",
                Compression::Gzip => ".gz",
                Compression::Zstd => ".zst",
                Compression::Bzip2 => ".bz2",
                Compression::Xz => ".xz",
            };
            let file_name = format!("{}-{name}{ext}", format.name());
            let file = TempFile::new(&file_name, &compress(bytes, kind));
            assert_eq!(sniff_path(&file.0).unwrap(), format, "{file_name}");
            let src = open_trace_file(&file.0, Format::Auto, None).unwrap();
            assert_eq!(count(src), n, "{file_name}");
        }
    }
}

#[test]
fn a_gz_name_on_plain_bytes_is_an_error_not_garbage() {
    let file = TempFile::new("plain.csv.gz", b"0,1,512,r,0\n");
    let e = open_trace_file(&file.0, Format::Spc, None)
        .and_then(|mut s| s.next_request())
        .unwrap_err();
    assert!(e.to_string().contains("plain.csv.gz"), "{e}");
}

#[test]
fn formats_by_name() {
    for &name in Format::NAMES {
        let f = Format::from_name(name).unwrap();
        assert_eq!(f.name(), name);
    }
    assert_eq!(
        Format::from_name("ORACLEGENERAL"),
        Some(Format::OracleGeneral)
    );
    assert_eq!(Format::from_name("keys_u32be"), Some(Format::KeysU32Be));
    assert_eq!(Format::from_name("parquet"), None);
}

#[test]
fn device_filter_on_a_deviceless_format_is_a_config_error() {
    let (_, name, bytes, _) = SAMPLES[2];
    let e = from_bytes(Format::OracleGeneral, name, bytes, Some(1))
        .err()
        .unwrap();
    assert_eq!(e.kind(), "config");
    let e = from_bytes(Format::CloudPhysicsCsv, "cp.csv", SAMPLES[3].2, Some(0))
        .err()
        .unwrap();
    assert_eq!(e.kind(), "config");
}
