//! Worked examples of the offline bounds through counting mode, computed by hand.

use super::*;
use crate::cache::read::{build, PolicySpec};
use crate::config;

/// 4-disk left-symmetric RAID-5, one-block stripe units, disk 0 failed: lba 0 (disk 0) costs
/// 3 reads, lbas 1 and 2 (disks 1, 2) cost 1. Two-block cache, reads of 0 1 2 1 0:
///
/// | policy      | t2 (2 misses) evicts      | t3 (1) | t4 (0) | missed blocks     |
/// | ----------- | ------------------------- | ------ | ------ | ----------------- |
/// | lru         | 0                         | hit    | miss   | 3 + 1 + 1 + 3 = 8 |
/// | opt         | 0 (next use 4, farthest)  | hit    | miss   | 8                 |
/// | opt-cost    | 1 (flow keeps 0's (0, 4)) | miss   | hit    | 3 + 1 + 1 + 1 = 6 |
/// | belady-cost | 1 (2 / 3 < 1 / 1)         | miss   | hit    | 6                 |
///
/// Every run: 5 lookups, 1 hit; RGR = missed blocks / 5.
#[test]
fn offline_bounds_on_a_degraded_raid5() {
    let dir = std::env::temp_dir().join(format!("raidlab-offline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.mqsim.txt");
    let lines: Vec<String> = [0u64, 1, 2, 1, 0]
        .iter()
        .enumerate()
        .map(|(i, b)| format!("{} 0 {} 8 1", i * 1000, b * 8))
        .collect();
    std::fs::write(&path, lines.join("\n")).unwrap();
    for (policy, missed) in [("lru", 8), ("opt", 8), ("opt-cost", 6), ("belady-cost", 6)] {
        let text = format!(
            "[workload]\ntrace = {:?}\nformat = \"mqsim\"\n\
             [cache]\npolicy = \"{policy}\"\ncapacity_blocks = 2\n\
             [array]\nlevel = \"raid5\"\ndisks = 4\nstripe_unit = 4096\nfailed = [0]\n",
            path.display().to_string()
        );
        let exp = config::from_toml(&text, "t.toml", None).unwrap().remove(0);
        let m = run(&exp).unwrap().counts().clone();
        assert_eq!((m.hits, m.misses), (1, 4), "{policy}");
        assert_eq!(m.miss_disk_blocks, missed, "{policy}");
    }
}

#[test]
fn offline_bounds_are_counting_mode_only() {
    for name in PolicySpec::OFFLINE_NAMES {
        let spec = PolicySpec::from_name(name).expect("listed");
        let err = build(&spec, 8)
            .err()
            .expect("an offline bound is not buildable");
        assert!(err.to_string().contains("counting mode only"), "{err}");
    }
}

#[test]
fn opt_cost_is_block_mode_only() {
    let dir = std::env::temp_dir().join(format!("raidlab-offline-obj-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.mqsim.txt");
    std::fs::write(&path, "0 0 0 8 1\n").unwrap();
    let text = format!(
        "[workload]\ntrace = {:?}\nformat = \"mqsim\"\n\
         [cache]\npolicy = \"opt-cost\"\nunit = \"object\"\ncapacity_bytes = 8192\n",
        path.display().to_string()
    );
    let exp = config::from_toml(&text, "t.toml", None).unwrap().remove(0);
    let Err(err) = run(&exp) else {
        panic!("object mode refused");
    };
    assert!(err.to_string().contains("block mode only"), "{err}");
}
