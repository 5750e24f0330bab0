//! Bit-for-bit guard of the timed engine: cut-down versions of the timed benchmark and of
//! the experiments' set-ups (write cache and destage, ramp, rebuild with DOR and PRO, RAPID's
//! logical cache disk, NCQ with SPTF and read-ahead, SSTF) run here and the digest of their
//! whole metrics JSON (time series included, wall time and the policy's metadata bytes
//! zeroed) must not move. Speed work on
//! the engine, the disk models or the queues must leave every one of them unchanged: an
//! optimisation that changes the last bit of one time changes the digest.
//!
//! A digest may only be re-recorded for a change that is meant to change results (a model
//! fix, a new metric), with the reason in the commit message. On a mismatch the test prints
//! the run's JSON so the two versions can be diffed.

use super::tests::timed;

/// FNV-1a over the bytes of `s`.
fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The digest of the metrics of the one experiment of `text`.
fn digest(text: &str) -> (u64, String) {
    let mut m = timed(text);
    m.count.wall_ns = 0;
    // The policy's memory accounting, not a result: the index layout may change it.
    m.count.metadata_bytes = 0;
    let json = serde_json::to_string(&m.to_json()).expect("metrics serialize");
    (fnv1a(&json), json)
}

/// The timed benchmark's set-up (`benches/bench_timed.py`): WebSearch over 60 GB, LRU,
/// RAID-5 of 6 `nearline7200` disks (C-LOOK), disk 0 failed; `driver` is added to `[run]`.
fn bench(requests: u64, driver: &str) -> String {
    format!(
        "[workload.synthetic]\nkind = \"websearch\"\nrequests = {requests}\nspace_gib = 60.0\n\
         mean_interarrival_ms = 3.7\nseed = 42\n[cache]\npolicy = \"lru\"\n\
         capacity_blocks = {cap}\n[array]\nlevel = \"raid5\"\ndisks = 6\nstripe_unit = 65536\n\
         failed = [0]\n[run]\nmode = \"timed\"\n{driver}\n[disk]\npreset = \"nearline7200\"\n\
         queue = \"clook\"\n",
        cap = requests * 21 / 160,
    )
}

const STOW_CLOSED: &str = r#"
[workload]
ops = "all"
synthetic = { kind = "spc1", backend = "full", space_gib = 273.2, iops = 1500.0, requests = 8000 }
[write_cache]
capacity_pages = 2048
max_destages = 20
high = 90
low = 80
order = "stow"
[array]
level = "raid5"
disks = 5
stripe_unit = 65536
[run]
mode = "timed"
seed = 1
driver = "closed"
outstanding = 16
interval_s = 1
[disk]
preset = "ibm40k1052"
queue = "clook"
"#;

const WOW_RAMP: &str = r#"
[workload]
ops = "all"
synthetic = { kind = "spc1", backend = "partial", space_gib = 273.2, requests = 1000000000 }
[write_cache]
capacity_pages = 1024
max_destages = 20
high = 70
low = 40
order = "wow"
[array]
level = "raid10"
disks = 4
stripe_unit = 65536
[run]
mode = "timed"
seed = 3
driver = "ramp"
level_s = 2
warmup_s = 1
interval_s = 1
levels_iops = [400.0, 1600.0, 3200.0]
[disk]
preset = "ibm40k1052"
queue = "clook"
"#;

const VDF_REBUILD: &str = r#"
[workload]
ops = "reads"
block_size = 4096
[cache]
policy = "vdf-lru"
capacity_blocks = 2048
[array]
level = "raid5"
layout = "left-symmetric"
stripe_unit = 65536
disks = 5
failed = [0]
[run]
mode = "timed"
seed = 1
driver = "open"
interval_s = 1
duration_s = 40
warmup_s = 2
[controller]
hit_us = 100
[disk]
preset = "wd10eals"
queue = "clook"
[rebuild]
spares = 1
order = "sequential"
executor = "dor"
rate = "full"
extent_gib = 0.05
[[events]]
at_s = 2
rebuild = 0
[workload.synthetic]
kind = "websearch"
requests = 10000
mean_interarrival_ms = 2.8
space_gib = 0.18
"#;

const PRO_REBUILD: &str = r#"
[workload]
block_size = 4096
[workload.synthetic]
kind = "websearch"
requests = 10000
mean_interarrival_ms = 3.74
cluster_kib = 16384
space_gib = 0.2
[cache]
policy = "lru"
capacity_blocks = 1
[array]
level = "raid5"
stripe_unit = 65536
disks = 3
[run]
mode = "timed"
seed = 1
driver = "open"
interval_s = 1
[disk]
preset = "st3146807lc"
queue = "clook"
[rebuild]
spares = 1
executor = "dor"
order = "pro"
extent_gib = 0.1
[[events]]
at_s = 1
fail = 0
[[events]]
at_s = 1
rebuild = 0
"#;

const RAPID_LOGICAL: &str = r#"
[workload]
ops = "all"
block_size = 8192
[workload.synthetic]
kind = "bursty"
requests = 8000
space_gib = 16.0
seed = 7
[cache]
policy = "lru"
capacity_blocks = 1024
[write_cache]
capacity_pages = 512
order = "lrw"
rate = "rapid"
max_destages = 8
[array]
level = "raid5"
layout = "left-symmetric"
disks = 16
stripe_unit = 32768
[run]
mode = "timed"
seed = 1
outstanding_max = 1000000
interval_s = 1
[controller]
hit_us = 200
[disk]
preset = "hp97560_rapid"
queue = "fcfs"
[backup]
kind = "rapid"
cache_disk = "logical"
"#;

const NCQ_SPTF: &str = r#"
[workload.synthetic]
kind = "websearch"
requests = 8000
space_gib = 8.0
mean_interarrival_ms = 1.0
seed = 5
[cache]
policy = "arc"
capacity_blocks = 2000
[array]
level = "raid6"
disks = 6
stripe_unit = 32768
[run]
mode = "timed"
driver = "closed"
outstanding = 48
interval_s = 1
[disk]
preset = "atlas10k"
queue = "sstf"
ncq = 8
read_ahead_kib = 128
"#;

const SSTF_READ_AHEAD: &str = r#"
[workload.synthetic]
kind = "zipf"
requests = 8000
keys = 2000000
seed = 9
[cache]
policy = "lru"
capacity_blocks = 4000
[array]
level = "raid5"
disks = 4
stripe_unit = 65536
failed = [2]
[run]
mode = "timed"
iops = 250.0
warmup_s = 2
interval_s = 1
[disk]
preset = "nearline7200"
queue = "sstf"
read_ahead_kib = 256
overhead_ms = 0.3
"#;

#[test]
fn timed_results_are_unchanged() {
    let cases: [(&str, String, u64); 9] = [
        ("bench open", bench(20_000, ""), 0x0d22_c4ab_07b2_a035),
        (
            "bench closed 64",
            bench(20_000, "driver = \"closed\"\noutstanding = 64"),
            0x56e4_9a41_af36_c0e8,
        ),
        ("stow closed", STOW_CLOSED.into(), 0xd26c_40ac_385f_af57),
        ("wow ramp", WOW_RAMP.into(), 0x8c9c_62dd_5bde_7791),
        ("vdf rebuild", VDF_REBUILD.into(), 0xcb8d_0710_4d2d_c20f),
        ("pro rebuild", PRO_REBUILD.into(), 0xb815_857f_e476_e610),
        ("rapid logical", RAPID_LOGICAL.into(), 0xf8ce_201a_f441_50a6),
        ("ncq sptf", NCQ_SPTF.into(), 0x6e37_42de_3d26_3f79),
        (
            "sstf read-ahead",
            SSTF_READ_AHEAD.into(),
            0x1aa7_6e36_8206_08c5,
        ),
    ];
    let mut wrong = Vec::new();
    for (name, text, want) in &cases {
        let (got, json) = digest(text);
        eprintln!("{name}: {got:#018x}");
        if got != *want {
            wrong.push(format!(
                "{name}: digest {got:#018x}, expected {want:#018x}\n{json}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}
