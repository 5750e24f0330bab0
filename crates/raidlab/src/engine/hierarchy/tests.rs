//! Two-level runs end to end, from config text, on small file systems.

use crate::config::from_toml;
use crate::engine::run;
use serde_json::Value;

/// Uniform reads over 128 files of 8 blocks (1,024 data blocks + 4 inode blocks), FS cache
/// of 300 blocks.
fn config(policy: &str, array_blocks: u64, extra: &str) -> String {
    format!(
        r#"
[workload.files]
kind = "random"
files = 128
file_blocks = 8
reads = 1500
seed = 5
[host]
fs_cache_blocks = 300
[cache]
policy = "{policy}"
capacity_blocks = {array_blocks}
{extra}
"#
    )
}

fn metrics(text: &str) -> Value {
    let exps = from_toml(text, "test.toml", None).expect("valid config");
    let mut v = run(&exps[0]).expect("runs").to_json();
    v.as_object_mut().unwrap().remove("wall_s");
    v
}

#[test]
fn same_config_same_results_and_basic_accounting() {
    let a = metrics(&config("xray", 200, ""));
    let b = metrics(&config("xray", 200, ""));
    assert_eq!(a, b);
    assert_eq!(a["mode"], "hierarchy");
    assert_eq!(a["file_reads"], 1500);
    assert_eq!(a["app_block_reads"], 1500 * 8);
    // Every application block read is an FS hit or reaches the array (inode blocks too).
    let reads = a["app_block_reads"].as_u64().unwrap();
    let fs_hits = a["fs_hits"].as_u64().unwrap();
    let inode_reads = a["inode_block_reads"].as_u64().unwrap();
    assert!(a["lookups"].as_u64().unwrap() <= reads - fs_hits + inode_reads);
    assert!(a["xray_samples"].as_u64().unwrap() > 10);
    assert!(a["series"]["predicted_blocks"].as_array().unwrap().len() > 10);
}

#[test]
fn inclusive_lru_below_a_larger_lru_never_hits() {
    // The array's LRU holds the blocks read most recently, all of which the larger FS cache
    // above still holds: no array read can hit (the paper's case against inclusion).
    let m = metrics(&config("lru", 200, ""));
    assert_eq!(m["hits"], 0);
    // Latency: every FS miss costs the 10 ms disk time, every hit 20 us.
    let reads = m["app_block_reads"].as_f64().unwrap();
    let hits = m["fs_hits"].as_f64().unwrap();
    let want_us = (hits * 20.0 + (reads - hits) * 10_000.0) / reads;
    assert!((m["read_latency_us_mean"].as_f64().unwrap() - want_us).abs() < 1e-6);
}

#[test]
fn exclusive_caches_approach_the_uniform_bound() {
    // Uniform access over 1,024 blocks with 300 in the FS cache: a perfectly exclusive array
    // cache of 200 blocks serves 200 / (1024 - 300) = 0.276 of the array's data reads.
    let bound = 200.0 / 724.0;
    for policy in ["demote", "xray"] {
        let m = metrics(&config(policy, 200, ""));
        let hit = m["hit_ratio"].as_f64().unwrap();
        assert!(hit > 0.8 * bound && hit < 1.05 * bound, "{policy}: {hit}");
    }
    let mq = metrics(&config("mq", 200, ""))["hit_ratio"]
        .as_f64()
        .unwrap();
    assert!(mq < 0.6 * bound, "mq {mq}");
}

#[test]
fn xray_tracks_the_fs_cache_size_and_follows_a_resize() {
    // The FS cache grows from 300 to 450 blocks after 4,000 block reads (of 12,000).
    let m = metrics(&config("xray", 100, "").replace(
        "fs_cache_blocks = 300",
        "fs_cache_blocks = 300\nresize = [[4000, 450]]",
    ));
    let err = m["xray_size_error"].as_f64().unwrap();
    assert!(err < 0.25, "size error {err}");
    let s = &m["series"];
    let size: Vec<u64> = serde_json::from_value(s["fs_cache_blocks"].clone()).unwrap();
    let pred: Vec<u64> = serde_json::from_value(s["predicted_blocks"].clone()).unwrap();
    assert_eq!(size.first(), Some(&300));
    assert_eq!(size.last(), Some(&450));
    // After the resize the prediction moves up with the cache.
    let tail = &pred[pred.len() * 3 / 4..];
    let mean = tail.iter().sum::<u64>() as f64 / tail.len() as f64;
    assert!(mean > 380.0 && mean < 560.0, "predicted {mean}");
}

#[test]
fn idle_placement_needs_idle_time() {
    // Back to back reads leave no 10 ms gap: idle-time placement fetches nothing and X-RAY
    // cannot hit; 50 ms of think time between reads gives it room.
    let busy = metrics(&config("xray", 200, "[cache.xray]\nplacement = \"idle\""));
    assert_eq!(busy["placement_reads"], 0);
    assert_eq!(busy["hits"], 0);
    let idle = metrics(
        &config("xray", 200, "[cache.xray]\nplacement = \"idle\"")
            .replace("seed = 5", "seed = 5\nthink_ms = 50"),
    );
    assert!(idle["placement_reads"].as_u64().unwrap() > 1000);
    assert!(idle["hit_ratio"].as_f64().unwrap() > 0.15);
}

#[test]
fn bad_inputs_are_config_errors() {
    let err = |text: String| match from_toml(&text, "t.toml", None)
        .and_then(|e| run(&e[0]).map(|_| ()))
    {
        Ok(()) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    };
    let e = err(config("lru", 10, "").replace("file_blocks = 8", "file_blocks = 0"));
    assert!(e.contains("workload.files.file_blocks"), "{e}");
    let e = err(config("lru", 10, "").replace("fs_cache_blocks = 300", "fs_cache_blocks = 5000"));
    assert!(
        e.contains("host.fs_cache_blocks") && e.contains("address space"),
        "{e}"
    );
    let e = err(config("lru", 10, "").replace(
        "fs_cache_blocks = 300",
        "fs_cache_blocks = 300\natime_granularity_s = 0",
    ));
    assert!(e.contains("host.atime_granularity_s"), "{e}");
    let e = err(config("lru", 10, "").replace("[host]\nfs_cache_blocks = 300\n", ""));
    assert!(e.contains("[host]"), "{e}");
    let e = err(
        "[workload.synthetic]\nkind = \"zipf\"\n[cache]\npolicy = \"xray\"\ncapacity_blocks = 8\n"
            .into(),
    );
    assert!(e.contains("cache.policy") && e.contains("[host]"), "{e}");
    let e = err(config("lru", 10, "[cache.xray]\nthreshold = 3"));
    assert!(e.contains("cache.xray"), "{e}");
    let e =
        err(config("lru", 10, "").replace("kind = \"random\"", "kind = \"random\"\nalpha = 1.0"));
    assert!(e.contains("workload.files.alpha"), "{e}");
}
