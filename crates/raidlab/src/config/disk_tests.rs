//! Tests of the `[disk]` table: presets, overrides, files, and every error's key.

use serde_json::{json, Value};

use super::*;

fn parse(v: Value) -> Result<(DiskSpec, QueueSpec)> {
    disk_spec(Some(Table::new("disk", &v).unwrap()), None)
}

fn key_of(v: Value) -> String {
    match parse(v).unwrap_err() {
        Error::Config { key, .. } => key,
        other => panic!("expected a config error, got {other}"),
    }
}

fn mech(v: Value) -> MechanicalSpec {
    match parse(v).unwrap().0 {
        DiskSpec::Mechanical(m) => m,
        other => panic!("{other:?}"),
    }
}

fn data_dir() -> Option<&'static Path> {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/disks"
    ));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: {} is absent", dir.display());
        None
    }
}

#[test]
fn defaults() {
    let (spec, queue) = disk_spec(None, None).unwrap();
    assert_eq!(Some(spec), presets::get("nearline7200"));
    assert_eq!(queue, QueueSpec::default());
    // An empty table or model alone start from the same preset (or sata_ssd for "ssd").
    assert_eq!(
        Some(parse(json!({})).unwrap().0),
        presets::get("nearline7200")
    );
    assert_eq!(
        Some(parse(json!({"model": "mechanical"})).unwrap().0),
        presets::get("nearline7200")
    );
    assert_eq!(
        Some(parse(json!({"model": "ssd"})).unwrap().0),
        presets::get("sata_ssd")
    );
}

#[test]
fn preset_with_overrides_and_queue() {
    let (spec, queue) = parse(json!({
        "preset": "cheetah9lp", "read_ahead_kib": 256, "overhead_ms": 0.3, "bus_mb_s": 160,
        "head_switch_ms": 0.05, "write_settle_ms": 0.5, "rpm": 10000,
        "queue": "clook", "ncq": 32, "aging_ms": 100
    }))
    .unwrap();
    let DiskSpec::Mechanical(m) = spec else {
        panic!()
    };
    assert_eq!(m.read_ahead_sectors, 512);
    assert_eq!(m.command_overhead_ns, 300_000);
    assert_eq!(m.bus_mb_s, 160);
    assert_eq!(
        (m.head_switch_ns, m.write_settle_ns, m.rpm),
        (50_000, 500_000, 10000)
    );
    assert_eq!(m.zones.len(), 11);
    assert_eq!(
        queue,
        QueueSpec {
            discipline: Discipline::Clook,
            aging_ns: 100_000_000,
            ncq: 32
        }
    );
}

#[test]
fn constant_and_ssd() {
    let (spec, _) =
        parse(json!({"model": "constant", "service_ms": 5, "write_ms": 8, "capacity_gib": 1}))
            .unwrap();
    let DiskSpec::Constant(c) = spec else {
        panic!()
    };
    assert_eq!(
        (c.read_ns, c.write_ns, c.capacity_sectors),
        (5_000_000, 8_000_000, 1 << 21)
    );
    let (spec, _) = parse(json!({
        "preset": "sata_ssd", "channels": 4, "dies_per_channel": 2, "page_kib": 4,
        "read_us": 25, "program_us": 200, "transfer_us": 10, "capacity_gib": 2, "bus_mb_s": 0
    }))
    .unwrap();
    let DiskSpec::Ssd(s) = spec else { panic!() };
    assert_eq!(
        s,
        SsdSpec {
            channels: 4,
            dies_per_channel: 2,
            page_bytes: 4096,
            read_ns: 25_000,
            program_ns: 200_000,
            transfer_ns_per_page: 10_000,
            capacity_sectors: 2 << 21,
            bus_mb_s: 0,
        }
    );
}

#[test]
fn inline_zones_and_seek_curves() {
    let m = mech(json!({
        "preset": "hp97560", "cylinders": 100, "surfaces": 2,
        "zones": [[0, 49, 100], [51, 99, 80]],
        "seek_table_ms": [[1, 1.0], [10, 2.5], [99, 8]]
    }));
    assert_eq!(m.capacity_sectors(), 50 * 2 * 100 + 49 * 2 * 80);
    assert_eq!(
        m.seek,
        SeekSpec::Table(vec![(1, 1_000_000), (10, 2_500_000), (99, 8_000_000)])
    );
    // One three-point key adjusts a three-point preset.
    let m = mech(json!({"preset": "nearline7200", "seek_avg_ms": 9}));
    assert_eq!(
        m.seek,
        SeekSpec::ThreePoint {
            min_ns: 800_000,
            avg_ns: 9_000_000,
            max_ns: 16_000_000
        }
    );
    let m = mech(json!({"preset": "cheetah9lp", "seek_two_piece_ms": [3.24, 0.4, 8, 0.008, 383]}));
    assert_eq!(m.seek, presets::hp97560_seek());
}

#[test]
fn files_from_the_data_directory() {
    let Some(dir) = data_dir() else { return };
    let v = json!({
        "preset": "hp97560", "cylinders": 2982, "surfaces": 7, "rpm": 5400,
        "zones_file": "hp_c3323a.zones.csv", "seek_file": "hp_c3323a.seek",
        "head_switch_ms": 0.65, "write_settle_ms": 0.07
    });
    let (spec, _) = disk_spec(Some(Table::new("disk", &v).unwrap()), Some(dir)).unwrap();
    let DiskSpec::Mechanical(m) = spec else {
        panic!()
    };
    let DiskSpec::Mechanical(p) = presets::get("hp_c3323a").unwrap() else {
        panic!()
    };
    assert_eq!(m.zones, p.zones);
    assert_eq!(m.seek, p.seek);
    // The same zones on the HP 97560's 1962 cylinders: zone 4 (1626..=1966) does not fit,
    // and the error names the file key.
    let v = json!({"preset": "hp97560", "zones_file": "hp_c3323a.zones.csv"});
    let e = disk_spec(Some(Table::new("disk", &v).unwrap()), Some(dir)).unwrap_err();
    let Error::Config { key, msg } = e else {
        panic!("{e}")
    };
    assert_eq!(key, "disk.zones_file");
    assert!(
        msg.contains("zones[4]") && msg.contains("hp_c3323a.zones.csv"),
        "{msg}"
    );
}

#[test]
fn file_errors() {
    let dir = std::env::temp_dir().join(format!("raidlab-disk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.seek"),
        "Seek distances measured: 2\n1, 1.0\n1, 2.0\n",
    )
    .unwrap();
    let v = json!({"seek_file": "bad.seek"});
    let e = disk_spec(Some(Table::new("disk", &v).unwrap()), Some(&dir)).unwrap_err();
    assert!(matches!(e, Error::Trace { line: 3, .. }), "{e}");
    let v = json!({"zones_file": "missing.csv"});
    let e = disk_spec(Some(Table::new("disk", &v).unwrap()), Some(&dir)).unwrap_err();
    assert_eq!(e.kind(), "io");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_error_names_its_key() {
    let cases: Vec<(Value, &str)> = vec![
        (json!({"preset": "floppy"}), "disk.preset"),
        (json!({"model": "tape"}), "disk.model"),
        (
            json!({"model": "ssd", "preset": "cheetah9lp"}),
            "disk.model",
        ),
        (
            json!({"preset": "cheetah9lp", "channels": 8}),
            "disk.channels",
        ),
        (json!({"model": "constant", "rpm": 7200}), "disk.rpm"),
        (
            json!({"preset": "sata_ssd", "service_ms": 1}),
            "disk.service_ms",
        ),
        (
            json!({"model": "constant", "service_ms": 0}),
            "disk.service_ms",
        ),
        (
            json!({"model": "constant", "capacity_gib": 0}),
            "disk.capacity_gib",
        ),
        (json!({"rpm": 0}), "disk.rpm"),
        (json!({"cylinders": 0}), "disk.cylinders"),
        (json!({"head_switch_ms": 0}), "disk.head_switch_ms"),
        (json!({"bus_mb_s": 0}), "disk.bus_mb_s"),
        (json!({"zones": []}), "disk.zones"),
        (
            json!({"zones": [[0, 10, 100], [10, 20, 90]]}),
            "disk.zones[1]",
        ),
        (
            json!({"zones": [[20, 30, 100], [0, 10, 90]]}),
            "disk.zones[1]",
        ),
        (
            json!({"zones": [[0, 10, 100], [12, 400000, 90]]}),
            "disk.zones[1]",
        ),
        (json!({"zones": [[0, 10, 0]]}), "disk.zones[0]"),
        (json!({"zones": [[0, 10, 1.5]]}), "disk.zones[0][2]"),
        (json!({"zones": [[0, 10]]}), "disk.zones[0]"),
        (
            json!({"zones": [[0, 10, 5]], "zones_file": "z.csv"}),
            "disk.zones_file",
        ),
        (
            json!({"seek_table_ms": [[1, 1], [1, 2]]}),
            "disk.seek_table_ms[1]",
        ),
        (json!({"seek_table_ms": [[1, 0]]}), "disk.seek_table_ms[0]"),
        (
            json!({"seek_table_ms": [[1.5, 1]]}),
            "disk.seek_table_ms[0][0]",
        ),
        (
            json!({"seek_min_ms": 5, "seek_avg_ms": 4}),
            "disk.seek_avg_ms",
        ),
        (json!({"seek_max_ms": 5}), "disk.seek_max_ms"),
        (
            json!({"preset": "cheetah9lp", "seek_avg_ms": 5}),
            "disk.seek_min_ms",
        ),
        (
            json!({"seek_table_ms": [[1, 1]], "seek_avg_ms": 5}),
            "disk.seek_avg_ms",
        ),
        (
            json!({"seek_two_piece_ms": [1, 2]}),
            "disk.seek_two_piece_ms",
        ),
        (json!({"model": "ssd", "read_us": 0}), "disk.read_us"),
        (json!({"model": "ssd", "page_kib": 0}), "disk.page_kib"),
        (json!({"model": "ssd", "channels": 0}), "disk.channels"),
        (json!({"queue": "elevator"}), "disk.queue"),
        (json!({"ncq": 0}), "disk.ncq"),
        (json!({"aging_ms": -1}), "disk.aging_ms"),
        (json!({"typo": 1}), "disk.typo"),
    ];
    for (v, key) in cases {
        assert_eq!(key_of(v.clone()), key, "{v}");
    }
    let e = parse(json!({"preset": "floppy"})).unwrap_err().to_string();
    assert!(
        e.contains("\"cheetah9lp\"") && e.contains("\"sata_ssd\""),
        "{e}"
    );
}
