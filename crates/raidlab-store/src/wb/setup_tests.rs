//! Tests of `setup.rs`: the write-back options, the `wb.json` record and its bad input.

use super::*;
use proptest::prelude::*;

fn opts(args: (&str, &str, &str, &str, Option<&str>, &str)) -> Result<WbOptions> {
    let (destage, thresholds, backup, log_mode, log_size, segment) = args;
    WbOptions::parse(
        8, destage, thresholds, backup, None, log_mode, log_size, segment,
    )
}

#[test]
fn options_parse_with_defaults_and_name_each_bad_value() {
    let o = opts(("stow", "80/20", "log", "physical", None, "128KiB")).unwrap();
    assert_eq!(o.spec.capacity_pages, 2048);
    assert_eq!((o.spec.high_pct, o.spec.low_pct), (80.0, 20.0));
    assert_eq!(o.backup, BackupKind::Log { logical: false });
    assert_eq!(o.log_bytes, 32 << 20, "4x the cache");
    assert_eq!(o.segment_bytes, 128 << 10);
    assert_eq!(o.mirror_slots(16), 2 * 2048 + 64 * 16 + 64);
    assert_eq!(o.mirror_slots(32), 2 * 2048 + 97 * 16 + 64);
    assert_eq!(o.mirror_slots(1 << 18), 2 * 2048 + 4096 * 16 + 64);
    for (args, key) in [
        (
            ("fifo", "80/20", "mirror", "physical", None, "128KiB"),
            "--destage",
        ),
        (
            ("stow", "20/80", "mirror", "physical", None, "128KiB"),
            "--thresholds",
        ),
        (
            ("stow", "80", "mirror", "physical", None, "128KiB"),
            "--thresholds",
        ),
        (
            ("stow", "80/x", "mirror", "physical", None, "128KiB"),
            "--thresholds",
        ),
        (
            ("stow", "80/20", "disk", "physical", None, "128KiB"),
            "--backup",
        ),
        (
            ("stow", "80/20", "log", "both", None, "128KiB"),
            "--log-mode",
        ),
        (
            ("stow", "80/20", "log", "physical", Some("lots"), "128KiB"),
            "--log-size",
        ),
        (
            ("stow", "80/20", "log", "physical", None, "4KiB"),
            "--segment",
        ),
    ] {
        let e = opts(args).unwrap_err().to_string();
        assert!(e.contains(key), "{e}");
    }
    let e = WbOptions::parse(0, "stow", "80/20", "none", None, "physical", None, "128KiB")
        .unwrap_err()
        .to_string();
    assert!(e.contains("--write-cache-mib"), "{e}");
    let ok =
        WbOptions::parse(8, "stow", "80/20", "none", None, "physical", None, "128KiB").unwrap();
    assert_eq!(ok.spec.max_destages, 16, "the default");
    assert_eq!(
        ok.clone().with_max_destages(20).unwrap().spec.max_destages,
        20
    );
    for n in [0, MAX_DESTAGES_MAX + 1] {
        let e = ok.clone().with_max_destages(n).unwrap_err().to_string();
        assert!(
            e.contains("--max-destages") && e.contains(&n.to_string()),
            "{e}"
        );
    }
}

#[test]
fn nvram_options_need_the_log_and_name_each_bad_value() {
    let log = opts(("stow", "80/20", "log", "logical", None, "128KiB")).unwrap();
    assert_eq!(log.nvram, None);
    let nv = std::env::current_dir().unwrap().join("nv");
    let o = log.clone().with_nvram(Some("nv"), None).unwrap();
    assert_eq!(o.nvram, Some((nv.clone(), NVRAM_SLOTS_DEFAULT)));
    let o = log.clone().with_nvram(Some("nv"), Some(8)).unwrap();
    assert_eq!(o.nvram, Some((nv, 8)));
    assert_eq!(log.clone().with_nvram(None, None).unwrap(), log);
    let mirror = opts(("stow", "80/20", "mirror", "physical", None, "128KiB")).unwrap();
    for (o, path, slots, key, why) in [
        (&mirror, Some("nv"), None, "--log-nvram", "--backup log"),
        (&log, Some(""), None, "--log-nvram", "a file path"),
        (&log, Some("nv"), Some(0), "--log-nvram-slots", "got 0"),
        (
            &log,
            Some("nv"),
            Some(NVRAM_SLOTS_MAX + 1),
            "--log-nvram-slots",
            "1 to",
        ),
        (
            &log,
            None,
            Some(4),
            "--log-nvram-slots",
            "without --log-nvram",
        ),
    ] {
        let e = o.clone().with_nvram(path, slots).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(why), "{e}");
    }
}

#[test]
fn records_round_trip_and_bad_ones_name_the_file() {
    let r = Record {
        kind: "log-logical".into(),
        legs: vec![
            ("d0".into(), 1 << 20, 4 << 20),
            ("d1".into(), 1 << 20, 4 << 20),
        ],
        segment_bytes: 131072,
        nvram: Some(("nv".into(), 4)),
    };
    assert_eq!(
        Record::parse(&r.to_json().to_string(), "wb.json").unwrap(),
        r
    );
    for bad in [
        "",
        "{}",
        r#"{"kind": "tape", "legs": [{"path": "x", "base": 0, "bytes": 1}]}"#,
        r#"{"kind": "mirror", "legs": []}"#,
        r#"{"kind": "mirror", "legs": [{"path": "x"}]}"#,
        r#"{"kind": "mirror", "legs": [{"path": "x", "base": 0, "bytes": 1}], "nvram": {"path": "n", "slots": 4}}"#,
        r#"{"kind": "log", "legs": [{"path": "x", "base": 0, "bytes": 1}], "segment_bytes": 65536, "nvram": {"path": "n", "slots": 0}}"#,
        r#"{"kind": "log", "legs": [{"path": "x", "base": 0, "bytes": 1}], "segment_bytes": 65536, "nvram": {"slots": 4}}"#,
    ] {
        let e = parse_record(bad, "DIR/wb.json").unwrap_err().to_string();
        assert!(e.contains("DIR/wb.json"), "{e}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn random_bytes_never_panic_the_readers(data in proptest::collection::vec(any::<u8>(), 0..4200), epoch in any::<u64>()) {
        let _ = super::super::format::Super::decode(&data);
        let _ = super::super::format::decode_slot_header(&data, epoch);
        let _ = super::super::format::decode_batch(&data, epoch, 8192);
        let _ = parse_record(&String::from_utf8_lossy(&data), "wb.json");
    }
}
