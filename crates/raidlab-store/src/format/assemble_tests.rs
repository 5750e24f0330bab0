//! Tests of `create` + `assemble` on real files, and of the sink's records.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use raidlab::array::Level;

use super::*;
use crate::ctrl::{Controller, MetaSink, NoMeta, Options, SlotState, Snapshot};
use crate::format::create::tests::spec;
use crate::format::create::{create, CreateSpec, Created};
use crate::format::sink::SuperblockSink;
use crate::format::testutil::TempDir;

/// Every file's bytes and mtime, to show that assembling writes nothing.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>, std::time::SystemTime)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let m = std::fs::metadata(&p).unwrap();
            (p.clone(), std::fs::read(&p).unwrap(), m.modified().unwrap())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Assemble expecting an error; checks the directory is untouched and returns the message.
fn assemble_err(dir: &Path) -> String {
    let before = files(dir);
    let e = assemble(dir).unwrap_err();
    assert!(files(dir) == before, "assemble wrote something");
    e.to_string()
}

fn make(t: &TempDir, sub: &str, level: Level, disks: u32, spares: u32) -> Created {
    create(&CreateSpec {
        spares,
        ..spec(&t.path().join(sub), level, disks)
    })
    .unwrap()
}

#[test]
fn create_then_assemble_every_level() {
    let t = TempDir::new("asm-levels");
    for (level, disks) in [
        (Level::Raid0, 2),
        (Level::Raid1, 3),
        (Level::Raid10, 4),
        (Level::Raid5, 3),
        (Level::Raid6, 5),
    ] {
        let c = make(&t, level.name(), level, disks, 1);
        let before = files(&c.dir);
        let a = assemble(&c.dir).unwrap();
        assert!(files(&c.dir) == before, "assemble wrote something");
        assert_eq!((a.uuid, &a.shape, a.name.as_str()), (c.uuid, &c.shape, "t"));
        assert_eq!((a.events, a.clean, a.recovering), (1, true, None));
        assert_eq!(a.dirty_regions, None);
        assert!(a.warnings.is_empty(), "{:?}", a.warnings);
        for (s, d) in a.devs.iter().enumerate() {
            assert_eq!(d.as_ref().unwrap().path(), c.members[s].to_string_lossy());
        }
        assert_eq!(a.spares.len(), 1);
        assert_eq!(a.spares[0].path(), c.spares[0].to_string_lossy());
    }
}

#[test]
fn member_of_another_array() {
    let t = TempDir::new("asm-foreign");
    let a = make(&t, "a", Level::Raid5, 3, 0);
    let b = make(&t, "b", Level::Raid5, 3, 0);
    std::fs::copy(&b.members[1], &a.members[1]).unwrap();
    let e = assemble_err(&a.dir);
    let want = format!("{}: belongs to another array", a.members[1].display());
    assert!(e.starts_with(&want), "{e}");
    assert!(e.contains(&uuid_string(&a.uuid)), "{e}");
}

#[test]
fn stale_member() {
    // Two events behind is stale; one behind is what a crash in the middle of a superblock
    // update leaves, and is used (mdadm's event margin).
    for (updates, stale) in [(2u64, true), (1, false)] {
        let t = TempDir::new("asm-stale");
        let c = make(&t, "a", Level::Raid5, 3, 0);
        let old = std::fs::read(&c.members[2]).unwrap();
        let a = assemble(&c.dir).unwrap();
        let sink = SuperblockSink::from_assembled(&a);
        let slots: Vec<_> = a
            .devs
            .iter()
            .map(|d| (d.clone(), SlotState::InSync))
            .collect();
        for events in 2..2 + updates {
            let snap = Snapshot {
                events,
                clean: true,
                slots: slots.clone(),
                spares: vec![],
                faulty: vec![],
                failed: false,
            };
            sink.persist(&snap).unwrap();
        }
        drop((a, sink, slots));
        std::fs::write(&c.members[2], old).unwrap();
        if stale {
            let e = assemble_err(&c.dir);
            let want = format!("{}: stale member of slot 2", c.members[2].display());
            assert!(e.starts_with(&want), "{e}");
            assert!(e.contains("event 1") && e.contains("event 3"), "{e}");
            assert!(e.contains("--force"), "{e}");
            let f = assemble_with(&c.dir, true).unwrap();
            assert!(f.devs.iter().all(|d| d.is_some()) && f.forced.len() == 1);
            assert!(f.dirty_regions.as_ref().unwrap().iter().all(|&d| d));
        } else {
            let a = assemble(&c.dir).unwrap();
            assert!(a.devs.iter().all(|d| d.is_some()));
            assert!(
                a.warnings
                    .iter()
                    .any(|w| w.contains("missed the last superblock update")),
                "{:?}",
                a.warnings
            );
        }
    }
}

#[test]
fn too_small_member() {
    let t = TempDir::new("asm-small");
    let c = make(&t, "a", Level::Raid1, 2, 0);
    let need = (1 << 20) + c.shape.member_data_bytes;
    let f = std::fs::File::options()
        .write(true)
        .open(&c.members[1])
        .unwrap();
    f.set_len(need - 1).unwrap();
    let e = assemble_err(&c.dir);
    assert!(
        e.starts_with(&format!("{}: ", c.members[1].display())),
        "{e}"
    );
    assert!(
        e.contains("too small") && e.contains(&need.to_string()),
        "{e}"
    );
    f.set_len(100).unwrap();
    let e = assemble_err(&c.dir);
    assert!(e.contains("too small to hold a superblock"), "{e}");
}

#[test]
fn corrupt_superblock() {
    // One flipped byte in one member's superblock: left out as faulty, degraded start.
    let t = TempDir::new("asm-corrupt");
    let c = make(&t, "a", Level::Raid6, 4, 0);
    let flip = |p: &Path| {
        let mut bytes = std::fs::read(p).unwrap();
        bytes[4096 + 300] ^= 0x40;
        std::fs::write(p, bytes).unwrap();
    };
    flip(&c.members[0]);
    let before = files(&c.dir);
    let a = assemble(&c.dir).unwrap();
    assert!(files(&c.dir) == before, "assemble wrote something");
    assert!(a.devs[0].is_none() && a.devs[1..].iter().all(|d| d.is_some()));
    let want = format!(
        "{}: superblock checksum mismatch (corrupt)",
        c.members[0].display()
    );
    assert!(
        a.warnings
            .iter()
            .any(|w| w.starts_with(&want) && w.contains("faulty")),
        "{:?}",
        a.warnings
    );
    assert_eq!(a.faulty.len(), 1);
    assert_eq!(a.faulty[0].1, 0, "the manifest's slot order names its slot");
    // Served, it is listed faulty; re-added, it is rebuilt as a spare.
    let ctl = crate::serve::controller_from(&a, Options::default()).unwrap();
    assert_eq!(ctl.status()["faulty"][0]["slot"], 0);
    assert_eq!(ctl.state_word(), "degraded");
    ctl.re_add(&c.members[0].to_string_lossy()).unwrap();
    while ctl.rebuild_step(64).is_some() {}
    assert_eq!(ctl.state_word(), "clean");
    drop(ctl);
    let b = assemble(&c.dir).unwrap();
    assert!(b.devs.iter().all(|d| d.is_some()) && b.faulty.is_empty());
    // More corrupt superblocks than raid6 survives: refused, naming them.
    for m in &c.members[..3] {
        flip(m);
    }
    let e = assemble_err(&c.dir);
    assert!(
        e.contains("cannot assemble") && e.contains("raid6 survives 2"),
        "{e}"
    );
}

/// A superblock update that records the array failed: refused without force; with force it
/// assembles dirty with every region to resync, and says what it overrode.
#[test]
fn failed_array_needs_force() {
    let t = TempDir::new("asm-failed");
    let c = make(&t, "a", Level::Raid5, 3, 0);
    let a = assemble(&c.dir).unwrap();
    let ctl = crate::serve::controller_from(&a, Options::default()).unwrap();
    ctl.fail_member(0, "test").unwrap();
    assert!(
        ctl.fail_member(1, "test").is_err(),
        "a second raid5 failure kills"
    );
    assert_eq!(ctl.state_word(), "failed");
    drop(ctl);
    let e = assemble_err(&c.dir);
    assert!(
        e.contains("the array failed") && e.contains("--force"),
        "{e}"
    );
    let before = files(&c.dir);
    let f = assemble_with(&c.dir, true).unwrap();
    assert!(
        files(&c.dir) == before,
        "a forced assembly writes nothing by itself"
    );
    assert_eq!(f.forced.len(), 1);
    assert!(!f.clean && f.dirty_regions.as_ref().unwrap().iter().all(|&d| d));
    assert!(
        f.devs[0].is_none() && f.devs[1].is_some(),
        "slot 1 is re-admitted"
    );
    // Started (as `serve --force` does, with a checkpoint), the record is cleared.
    let ctl = crate::serve::controller_from(&f, Options::default()).unwrap();
    ctl.checkpoint();
    drop(ctl);
    let g = assemble(&c.dir).unwrap();
    assert!(g.forced.is_empty() && g.devs[0].is_none());
}

#[test]
fn missing_members_and_survival() {
    let t = TempDir::new("asm-missing");
    let c = make(&t, "a", Level::Raid5, 4, 0);
    std::fs::remove_file(&c.members[1]).unwrap();
    let a = assemble(&c.dir).unwrap();
    assert!(a.devs[1].is_none() && a.devs[0].is_some());
    assert!(
        a.warnings.iter().any(|w| w.contains("disk1")),
        "{:?}",
        a.warnings
    );
    std::fs::remove_file(&c.members[2]).unwrap();
    let e = assemble_err(&c.dir);
    assert!(e.contains("raid5 survives 1 missing member"), "{e}");
    assert!(e.contains("disk1") && e.contains("disk2"), "{e}");

    let r = make(&t, "r10", Level::Raid10, 4, 0);
    std::fs::remove_file(&r.members[0]).unwrap();
    std::fs::remove_file(&r.members[2]).unwrap();
    assemble(&r.dir).unwrap();
    std::fs::remove_file(&r.members[3]).unwrap();
    let e = assemble_err(&r.dir);
    assert!(e.contains("slots 2 and 3 are a pair"), "{e}");

    let z = make(&t, "r0", Level::Raid0, 2, 0);
    std::fs::remove_file(&z.members[1]).unwrap();
    let e = assemble_err(&z.dir);
    assert!(
        e.contains("raid0 has no redundancy") && e.contains("disk1"),
        "{e}"
    );
    let e = assemble_err(t.path());
    assert!(e.contains("members.json: missing"), "{e}");
}

#[test]
fn sink_records_are_what_assembly_sees() {
    let t = TempDir::new("asm-sink");
    let c = make(&t, "a", Level::Raid5, 3, 1);
    let a = assemble(&c.dir).unwrap();
    let sink = SuperblockSink::from_assembled(&a);
    // Slot 1 fails; the spare takes its place and is rebuilt up to row 3.
    let slots = vec![
        (a.devs[0].clone(), SlotState::InSync),
        (
            Some(Arc::clone(&a.spares[0])),
            SlotState::Recovering { checkpoint: 3 },
        ),
        (a.devs[2].clone(), SlotState::InSync),
    ];
    let faulty = vec![a.devs[1].clone().unwrap()];
    let snap = Snapshot {
        events: 7,
        clean: false,
        slots,
        spares: vec![],
        faulty,
        failed: false,
    };
    sink.persist(&snap).unwrap();
    let mut dirty = vec![false; a.shape.rows() as usize];
    dirty[2] = true;
    sink.write_intent(&dirty, Some(1)).unwrap();
    drop((a, sink));

    let b = assemble(&c.dir).unwrap();
    assert_eq!((b.events, b.clean, b.recovering), (7, false, Some((1, 3))));
    assert_eq!(
        b.devs[1].as_ref().unwrap().path(),
        c.spares[0].to_string_lossy()
    );
    assert!(b.spares.is_empty());
    assert_eq!(b.dirty_regions, Some(dirty));
    assert!(b
        .warnings
        .iter()
        .any(|w| w.contains("disk1") && w.contains("faulty")));

    // A torn bitmap on one live member: resync everything.
    let mut bytes = std::fs::read(&c.members[2]).unwrap();
    bytes[8192 + 64 + 1] ^= 1;
    std::fs::write(&c.members[2], bytes).unwrap();
    let b = assemble(&c.dir).unwrap();
    assert_eq!(b.dirty_regions, Some(vec![true; 16]));
    assert!(b
        .warnings
        .iter()
        .any(|w| w.contains("disk2") && w.contains("every region")));
}

#[test]
fn failed_slot_is_left_out_and_older_holder_superseded() {
    let t = TempDir::new("asm-failed");
    let c = make(&t, "a", Level::Raid1, 2, 1);
    let old1 = std::fs::read(&c.members[1]).unwrap();
    let a = assemble(&c.dir).unwrap();
    let sink = SuperblockSink::from_assembled(&a);
    let slots = vec![
        (a.devs[0].clone(), SlotState::InSync),
        (None, SlotState::Failed),
    ];
    let snap = Snapshot {
        events: 3,
        clean: true,
        slots,
        spares: a.spares.clone(),
        faulty: vec![],
        failed: false,
    };
    sink.persist(&snap).unwrap();
    let b = assemble(&c.dir).unwrap();
    assert!(b.devs[1].is_none());
    assert!(
        b.warnings.iter().any(|w| w.contains("recorded failed")),
        "{:?}",
        b.warnings
    );
    // The spare rebuilt into slot 1 and is in sync; the old disk1 still says slot 1.
    let slots = vec![
        (a.devs[0].clone(), SlotState::InSync),
        (Some(Arc::clone(&a.spares[0])), SlotState::InSync),
    ];
    sink.persist(&Snapshot {
        events: 4,
        clean: true,
        slots,
        spares: vec![],
        faulty: vec![],
        failed: false,
    })
    .unwrap();
    std::fs::write(&c.members[1], old1).unwrap();
    let b = assemble(&c.dir).unwrap();
    assert_eq!(
        b.devs[1].as_ref().unwrap().path(),
        c.spares[0].to_string_lossy()
    );
    assert!(
        b.warnings.iter().any(|w| w.contains("older holder")),
        "{:?}",
        b.warnings
    );
}

#[test]
fn controller_round_trip_through_the_sink() {
    let t = TempDir::new("asm-ctrl");
    let c = make(&t, "a", Level::Raid5, 3, 0);
    let a = assemble(&c.dir).unwrap();
    // Built as `serve` builds it: clean as assembled, so the first write marks it dirty.
    let ctl = crate::serve::controller_from(&a, Options::default()).unwrap();
    assert!(ctl.is_clean());
    let data = vec![0xa5u8; 8192];
    ctl.write(5 * 4096, &data, true).unwrap();
    drop(ctl); // a crash: no clean stop
    let b = assemble(&c.dir).unwrap();
    assert!(!b.clean && b.events > a.events);
    let dirty = b.dirty_regions.clone().unwrap();
    assert!(dirty.iter().any(|&d| d), "the written region is dirty");
    let ctl = Controller::new(
        b.shape.clone(),
        b.devs.clone(),
        b.spares.clone(),
        None,
        b.events,
        Box::new(NoMeta),
        Options::default(),
    )
    .unwrap();
    let mut back = vec![0u8; 8192];
    ctl.read(5 * 4096, &mut back).unwrap();
    assert_eq!(back, data);
}
