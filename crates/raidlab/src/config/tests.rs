//! Worked examples of config parsing and of every kind of config error.

use super::*;
use crate::array::Layout;
use crate::workload::{OpsFilter, SourceSpec, SynthSpec};

pub(super) fn parse(text: &str) -> Result<Vec<Experiment>> {
    from_toml(text, "exp.toml", None)
}

pub(super) const BASE: &str = r#"
[workload.synthetic]
kind = "zipf"
keys = 1000
requests = 5000
[cache]
policy = "vdf-lru"
capacity_blocks = 100
[array]
level = "raid5"
disks = 6
failed = [2]
"#;

#[test]
fn base_config_parses_with_defaults() {
    let exps = parse(BASE).unwrap();
    assert_eq!(exps.len(), 1);
    let e = &exps[0];
    assert_eq!(e.name, "run0");
    assert_eq!(e.workload.block_size, 4096);
    assert_eq!(e.workload.ops, OpsFilter::Reads);
    assert_eq!(
        e.workload.source,
        SourceSpec::Synthetic(SynthSpec::Zipf {
            keys: 1000,
            alpha: 0.9,
            requests: 5000,
            seed: 1
        })
    );
    assert_eq!(e.cache.policy, PolicySpec::VdfLru);
    assert_eq!(e.cache.capacity, Capacity::Units(100));
    let a = e.array.as_ref().unwrap();
    assert_eq!((a.disks, a.stripe_unit_bytes), (6, 65536));
    assert_eq!(a.layout, Layout::LeftSymmetric);
    assert_eq!(a.failed, vec![2]);
}

#[test]
fn runs_and_sweep_expand_in_order() {
    let text = format!(
        "{BASE}\n[[runs]]\ncache.policy = \"lru\"\n[[runs]]\ncache.policy = \"lfu\"\n\
         [sweep]\n\"array.disks\" = [5, 7]\n"
    );
    let exps = parse(&text).unwrap();
    let names: Vec<_> = exps.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "cache.policy=lru array.disks=5",
            "cache.policy=lru array.disks=7",
            "cache.policy=lfu array.disks=5",
            "cache.policy=lfu array.disks=7"
        ]
    );
    assert_eq!(exps[3].array.as_ref().unwrap().disks, 7);
    assert_eq!(exps[3].cache.policy, PolicySpec::Lfu);
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn s3fifo_and_slru_tunables() {
    let with = |policy: &str, extra: &str| {
        format!(
            "{}\n{extra}",
            BASE.replace("\"vdf-lru\"", &format!("\"{policy}\""))
        )
    };
    let exps = parse(&with(
        "s3fifo",
        "[cache.s3fifo]\nsmall = 0.2\nmove_threshold = 1",
    ))
    .unwrap();
    assert_eq!(
        exps[0].cache.policy,
        PolicySpec::S3Fifo {
            small: 0.2,
            ghost: 0.9,
            move_threshold: 1
        }
    );
    let exps = parse(&with("slru", "[cache.slru]\nsegments = 2")).unwrap();
    assert_eq!(exps[0].cache.policy, PolicySpec::Slru { segments: 2 });
    for name in ["sieve", "lirs", "greedydual", "vdf-clock", "vdf-sieve"] {
        let exps = parse(&with(name, "")).unwrap();
        assert_eq!(
            Some(exps[0].cache.policy.clone()),
            PolicySpec::from_name(name)
        );
    }
    let e = err(&with("slru", "[cache.slru]\nsegments = 17"));
    assert!(e.contains("cache.slru.segments"), "{e}");
    let e = err(&with("lru", "[cache.s3fifo]\nsmall = 0.2"));
    assert!(e.contains("cache.s3fifo"), "{e}");
}

#[test]
fn bad_values_name_their_key() {
    let e = err(&BASE.replace("\"vdf-lru\"", "\"lru2\""));
    assert!(
        e.starts_with("config key `cache.policy`: expected one of"),
        "{e}"
    );
    let e = err(&BASE.replace("disks = 6", "disks = \"six\""));
    assert_eq!(
        e,
        "config key `array.disks`: expected an integer, got string \"six\""
    );
    // A typo is an unknown key with a did-you-mean, not a "missing capacity" error.
    let e = err(&BASE.replace("capacity_blocks = 100", "capacity_blok = 100"));
    assert_eq!(
        e,
        "config key `cache.capacity_blok`: unknown key; did you mean \"capacity_blocks\"?"
    );
    let e = err(&BASE.replace("disks = 6", "disks = 6\nlayuot = \"left-symmetric\""));
    assert!(
        e.starts_with("config key `array.layuot`: unknown key; did you mean \"layout\"?"),
        "{e}"
    );
    let e = err(&format!("{BASE}\n[extra]\n"));
    assert!(e.starts_with("config key `extra`: unknown key"), "{e}");
    let e = err(&format!("{BASE}\n[[runs]]\ncache.policy = 3\n"));
    assert_eq!(
        e,
        "config key `runs[0].cache.policy`: expected a string, got number 3"
    );
    let e = err(&BASE.replace("[workload.synthetic]", "[workload.synthetic]\nalpha = -1"));
    assert!(
        e.starts_with("config key `workload.synthetic.alpha`"),
        "{e}"
    );
}

#[test]
fn impossible_arrays_are_config_errors() {
    let e = err(&BASE.replace("disks = 6", "disks = 2"));
    assert!(e.starts_with("config key `array."), "{e}");
    let e = err(&BASE.replace("failed = [2]", "failed = [9]"));
    assert!(e.starts_with("config key `array.failed"), "{e}");
    let e = err(&BASE.replace("failed = [2]", "failed = [1, 2]"));
    assert!(e.starts_with("config key `array.failed"), "{e}");
}

#[test]
fn syntax_errors_give_the_line() {
    let e = parse("[cache]\npolicy = \"lru\"\ncapacity_blocks = = 3\n").unwrap_err();
    match e {
        Error::Syntax { line, ref file, .. } => {
            assert_eq!((line, file.as_str()), (3, "exp.toml"));
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn object_mode_rules() {
    let text = r#"
[workload]
trace = "x.bin"
format = "oracle"
[cache]
policy = "lru"
unit = "object"
capacity_bytes = 1048576
"#;
    let exps = parse(text).unwrap();
    assert_eq!(exps[0].cache.unit, Unit::Object);
    let e = err(&text.replace("capacity_bytes", "capacity_blocks"));
    assert!(e.starts_with("config key `cache.capacity_bytes`"), "{e}");
    let e = err(&format!("{text}\n[array]\ndisks = 5\n"));
    assert!(e.starts_with("config key `array`"), "{e}");
    let e = err(&text.replace("\"oracle\"", "\"nope\""));
    assert!(
        e.starts_with("config key `workload.format`: expected one of"),
        "{e}"
    );
}

/// A corpus of malformed configs: every one is a config error (never a panic, never Ok).
#[test]
fn malformed_corpus_is_rejected() {
    let corpus: &[&str] = &[
        "",
        "[workload]",
        "[cache]\npolicy = \"lru\"\ncapacity_blocks = 1",
        "workload = 3\n[cache]\npolicy = \"lru\"",
        "[workload]\ntrace = 7\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 0",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1e3",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_fraction = 2.0",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_fraction = nan",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = [\"lru\"]\ncapacity_blocks = 1",
        "[workload]\ntrace = \"x\"\nblock_size = 0\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1",
        "[workload]\ntrace = \"x\"\nlimit = -5\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1",
        "[workload.synthetic]\nkind = \"pareto\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1",
        "[workload.synthetic]\nkind = \"zipf\"\nkeys = 0\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1",
        "[workload.synthetic]\nkind = \"zipf\"\nalpha = inf\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"mq\"\ncapacity_blocks = 1\n[cache.twoq]\nkin = 0.5",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[array]\nlevel = \"raid7\"\ndisks = 4",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[array]\ndisks = 0",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[array]\ndisks = 4\nfailed = [-1]",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[array]\ndisks = 4\nstripe_unit = 1000",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[array]\nlevel = \"raid6\"\ndisks = 5\nfailed = [0, 1, 2]",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[array]\nlevel = \"raid0\"\ndisks = 4\nfailed = [0]",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[array]\nlevel = \"raid10\"\ndisks = 5",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\nruns = 4",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[sweep]\n\"cache.policy\" = []",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[sweep]\n\"..\" = [1]",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[run]\nmode = \"timed\"\ndriver = \"closed\"\niops = 5",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[disk]\nread_ms = 1",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[run]\nmode = \"timed\"\n[[events]]\nat_s = 1\nfail = 0",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[array]\ndisks = 4\n[run]\nmode = \"timed\"\n[[events]]\nat_s = 2\nfail = 0\n[[events]]\nat_s = 1\nfail = 1",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[array]\ndisks = 4\n[run]\nmode = \"timed\"\n[[events]]\nat_s = 2\nfail = 4",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[array]\ndisks = 4\n[run]\nmode = \"timed\"\n[[events]]\nat_s = -2\nfail = 1",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[run]\nmode = \"timed\"\ndriver = \"ramp\"",
        "[workload]\ntrace = \"x\"\n[cache]\npolicy = \"lru\"\ncapacity_blocks = 1\n[[runs]]\ncache = 5",
        "[[[",
        "a = \"unterminated",
        "[workload]\n[workload]",
    ];
    for (i, text) in corpus.iter().enumerate() {
        match parse(text) {
            Err(e) => assert_eq!(e.kind(), "config", "corpus[{i}]: {e}"),
            Ok(exps) => panic!("corpus[{i}] was accepted: {exps:?}"),
        }
    }
}

proptest::proptest! {
    /// Arbitrary text never panics the parser.
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = parse(&text);
    }

    /// Arbitrary values at a known key are accepted or rejected with that key's path.
    #[test]
    fn arbitrary_values_name_their_key(v in "[-0-9a-z\\[\\]\".,]{1,12}") {
        let text = BASE.replace("disks = 6", &format!("disks = {v}"));
        if let Err(Error::Config { key, .. }) = parse(&text) {
            proptest::prop_assert!(key.starts_with("array"), "{}", key);
        }
    }
}

#[test]
fn sizes_take_units() {
    use super::tree::parse_size;
    assert_eq!(parse_size("128MiB"), Ok(128.0 * 1048576.0));
    assert_eq!(parse_size("1 GiB"), Ok(1073741824.0));
    assert_eq!(parse_size("4k"), Ok(4096.0));
    assert_eq!(parse_size("1.5GB"), Ok(1.5e9));
    assert_eq!(parse_size("4096"), Ok(4096.0));
    assert!(parse_size("lots").is_err() && parse_size("12 parsecs").is_err());
    let exps = parse(
        &BASE
            .replace("capacity_blocks = 100", "capacity = \"1MiB\"")
            .replace("disks = 6", "disks = 6\nstripe_unit = \"32KiB\""),
    )
    .unwrap();
    assert_eq!(exps[0].cache.capacity, Capacity::Units(256));
    assert_eq!(exps[0].array.as_ref().unwrap().stripe_unit_bytes, 32768);
    let e = err(&BASE.replace("capacity_blocks = 100", "capacity_blocks = \"1KiB\""));
    assert!(e.starts_with("config key `cache.capacity_blocks`"), "{e}");
}

#[test]
fn overrides_apply_last_and_null_removes() {
    let tree = toml_value(BASE, "t.toml").unwrap();
    let over = serde_json::json!({"cache": {"capacity_blocks": null, "capacity": "2MiB"}});
    let exps = from_value_with(&tree, None, Some(&over)).unwrap();
    assert_eq!(exps[0].cache.capacity, Capacity::Units(512));
    // The resolved config has the defaults that were used.
    let r = &exps[0].resolved;
    assert_eq!(r["workload"]["block_size"], 4096);
    assert_eq!(r["run"]["mode"], "count");
    assert_eq!(r["array"]["stripe_unit"], 65536);
    assert!(exps[0].tree["cache"].get("capacity_blocks").is_none());
    assert_eq!(exps[0].name, "cache.capacity=2MiB");
    // In [[runs]] too, a null removes the key and is not part of the name.
    let runs = format!("{BASE}\n[[runs]]\ncache.capacity = \"1MiB\"\n");
    let mut tree = toml_value(&runs, "t.toml").unwrap();
    tree["runs"][0]["cache"]["capacity_blocks"] = serde_json::Value::Null;
    let exps = from_value(&tree, None).unwrap();
    assert_eq!(exps[0].cache.capacity, Capacity::Units(256));
    assert_eq!(exps[0].name, "cache.capacity=1MiB");
}
