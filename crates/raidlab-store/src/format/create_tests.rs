//! Tests of `create` (`format/create.rs`).

use super::*;
use crate::format::testutil::TempDir;

pub(crate) fn spec(dir: &Path, level: Level, disks: u32) -> CreateSpec {
    CreateSpec {
        dir: dir.to_path_buf(),
        name: "t".into(),
        level,
        layout: Layout::LeftSymmetric,
        disks,
        chunk_bytes: 4096,
        member_data_bytes: 16 * 4096 + 100,
        spares: 0,
        members: None,
        force: false,
        // One row per region, as the tests of resync and re-add expect.
        bitmap_region_bytes: Some(4096),
    }
}

#[test]
fn sparse_files_and_rounding() {
    let t = TempDir::new("create");
    let d = t.path().join("a");
    let c = create(&CreateSpec {
        spares: 1,
        ..spec(&d, Level::Raid6, 4)
    })
    .unwrap();
    assert_eq!(c.shape.member_data_bytes, 16 * 4096);
    assert_eq!(c.members.len(), 4);
    assert_eq!(c.spares, vec![d.join("spare0")]);
    assert!(!c.initial_resync);
    for p in c.members.iter().chain(&c.spares) {
        assert_eq!(std::fs::metadata(p).unwrap().len(), (1 << 20) + 16 * 4096);
    }
    let e = create(&spec(&d, Level::Raid6, 4)).unwrap_err().to_string();
    assert!(
        e.contains("members.json: the directory already holds an array"),
        "{e}"
    );
    create(&CreateSpec {
        force: true,
        ..spec(&d, Level::Raid5, 3)
    })
    .unwrap();
}

#[test]
fn bitmap_regions_default_to_mds_and_assembly_reads_them_back() {
    use crate::ctrl::sync::rows_per_region_of;
    // md's 64 MiB of each member: 1,024 rows of 64 KiB chunks, raised to fit the
    // bitmap's bits, capped at the array.
    assert_eq!(rows_per_region_of(16384, 65536, 64 << 20), 1024);
    assert_eq!(rows_per_region_of(1 << 26, 4096, 4096), 2048);
    assert_eq!(rows_per_region_of(16, 4096, 64 << 20), 16);
    let t = TempDir::new("create-bitmap");
    let cases = [(None, 16, 1), (Some(8192), 2, 8), (Some(4096), 1, 16)];
    for (i, (region, rpr, regions)) in cases.into_iter().enumerate() {
        let d = t.path().join(format!("a{i}"));
        create(&CreateSpec {
            bitmap_region_bytes: region,
            ..spec(&d, Level::Raid5, 3)
        })
        .unwrap();
        let a = crate::format::assemble(&d).unwrap();
        assert_eq!(a.rows_per_region, rpr, "{region:?}");
        assert_eq!(a.kept_regions.len(), regions, "{region:?}");
    }
    for bad in [0, 6000] {
        let e = create(&CreateSpec {
            bitmap_region_bytes: Some(bad),
            ..spec(&t.path().join("bad"), Level::Raid5, 3)
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("bitmap-chunk") && e.contains("whole number of chunks"),
            "{e}"
        );
        assert!(!t.path().join("bad").exists(), "nothing written");
    }
}

#[test]
fn bad_arguments_write_nothing() {
    let t = TempDir::new("create-bad");
    let d = t.path().join("a");
    let cases: Vec<(CreateSpec, &str)> = vec![
        (
            spec(&d, Level::Raid5, 2),
            "config key `disks`: raid5 needs at least 3",
        ),
        (
            spec(&d, Level::Raid10, 5),
            "config key `disks`: raid10 needs an even",
        ),
        (
            CreateSpec {
                chunk_bytes: 6000,
                ..spec(&d, Level::Raid0, 2)
            },
            "`chunk`",
        ),
        (
            CreateSpec {
                chunk_bytes: 2048,
                ..spec(&d, Level::Raid0, 2)
            },
            "`chunk`",
        ),
        (
            CreateSpec {
                member_data_bytes: 4095,
                ..spec(&d, Level::Raid1, 2)
            },
            "`size`",
        ),
        (
            CreateSpec {
                name: String::new(),
                ..spec(&d, Level::Raid1, 2)
            },
            "`name`",
        ),
        (
            CreateSpec {
                name: "n".repeat(33),
                ..spec(&d, Level::Raid1, 2)
            },
            "`name`",
        ),
        (spec(&d, Level::Raid0, 300), "at most 256"),
        (
            CreateSpec {
                members: Some(vec![d.join("x")]),
                ..spec(&d, Level::Raid1, 2)
            },
            "config key `members`: 1 paths given, expected 2",
        ),
        (
            CreateSpec {
                members: Some(vec![t.path().join("nope"), t.path().join("nope2")]),
                ..spec(&d, Level::Raid1, 2)
            },
            "nope: does not exist",
        ),
    ];
    for (s, want) in cases {
        let e = create(&s).unwrap_err().to_string();
        assert!(e.contains(want), "{e} should contain {want}");
        assert!(!d.exists(), "nothing is written on a bad argument");
    }
}

#[test]
fn explicit_members_start_dirty_and_are_checked() {
    let t = TempDir::new("create-explicit");
    let d = t.path().join("a");
    let need = (1 << 20) + 16 * 4096;
    let devs: Vec<PathBuf> = (0..3).map(|i| t.path().join(format!("dev{i}"))).collect();
    for p in &devs {
        std::fs::write(p, vec![0x5a; need]).unwrap();
    }
    std::fs::File::options()
        .write(true)
        .open(&devs[2])
        .unwrap()
        .set_len(need as u64 - 1)
        .unwrap();
    let s = CreateSpec {
        members: Some(devs.clone()),
        ..spec(&d, Level::Raid5, 3)
    };
    let e = create(&s).unwrap_err().to_string();
    assert!(e.contains("dev2: ") && e.contains("too small"), "{e}");
    std::fs::write(&devs[2], vec![0x5a; need]).unwrap();
    let c = create(&s).unwrap();
    assert!(c.initial_resync);
    let bytes = std::fs::read(&devs[0]).unwrap();
    assert!(
        bytes[..4096].iter().all(|&b| b == 0),
        "metadata area zeroed"
    );
    assert!(bytes[1 << 20..].iter().all(|&b| b == 0x5a), "data kept");
    let a = crate::format::assemble(&d).unwrap();
    assert_eq!(
        a.dirty_regions,
        Some(vec![true; 16]),
        "parity resynced at first start"
    );
    let text = std::fs::read_to_string(d.join("members.json")).unwrap();
    assert!(
        text.contains(&*devs[0].to_string_lossy()),
        "absolute outside DIR: {text}"
    );
    // Reusing them for another array needs force.
    let d2 = t.path().join("b");
    let e = create(&CreateSpec {
        dir: d2.clone(),
        ..s.clone()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("dev0: already a member of array \"t\""), "{e}");
    create(&CreateSpec {
        dir: d2,
        force: true,
        ..s
    })
    .unwrap();
}
