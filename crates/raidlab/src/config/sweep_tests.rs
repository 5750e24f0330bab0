//! Worked examples of grids: products, zip groups, and errors that name the sweep entry.

use crate::config::tests::{parse, BASE};
use crate::error::Error;

fn names(text: &str) -> Vec<String> {
    parse(text).unwrap().into_iter().map(|e| e.name).collect()
}

fn config_key(text: &str) -> (String, String) {
    match parse(text) {
        Err(Error::Config { key, msg }) => (key, msg),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn zip_groups_vary_together_inside_the_product() {
    let text = format!(
        "{BASE}[sweep]\n\"array.disks\" = [5, 7]\n\
         [[sweep.zip]]\n\"cache.policy\" = [\"lru\", \"lfu\", \"arc\"]\n\
         \"cache.capacity_blocks\" = [10, 20, 30]\n"
    );
    let exps = parse(&text).unwrap();
    assert_eq!(exps.len(), 6);
    assert_eq!(
        exps[4].name,
        "array.disks=7 cache.policy=lfu cache.capacity_blocks=20"
    );
    let got: Vec<(u32, u64)> = exps
        .iter()
        .map(|e| {
            let cap = match e.cache.capacity {
                crate::config::Capacity::Units(u) => u,
                other => panic!("{other:?}"),
            };
            (e.array.as_ref().unwrap().disks, cap)
        })
        .collect();
    assert_eq!(got, [(5, 10), (5, 20), (5, 30), (7, 10), (7, 20), (7, 30)]);
}

#[test]
fn two_zip_groups_are_two_axes() {
    let text = format!(
        "{BASE}[[sweep.zip]]\n\"array.disks\" = [5, 7]\n\"array.failed\" = [[0], [1]]\n\
         [[sweep.zip]]\n\"cache.policy\" = [\"lru\", \"lfu\"]\n"
    );
    assert_eq!(
        names(&text),
        [
            "array.disks=5 array.failed=[0] cache.policy=lru",
            "array.disks=5 array.failed=[0] cache.policy=lfu",
            "array.disks=7 array.failed=[1] cache.policy=lru",
            "array.disks=7 array.failed=[1] cache.policy=lfu",
        ]
    );
}

#[test]
fn bad_grids_name_their_sweep_entry() {
    let cases: [(&str, &str, &str); 8] = [
        ("[sweep]\n", "sweep", "empty grid"),
        (
            "[sweep]\n\"cache.policy\" = []\n",
            "sweep.cache.policy",
            "non-empty list",
        ),
        (
            "[sweep]\n\"cache.polcy\" = [\"lru\"]\n",
            "sweep.cache.polcy",
            "`cache.polcy`: unknown key",
        ),
        (
            "[sweep]\n\"foo.bar\" = [1]\n",
            "sweep.foo.bar",
            "`foo`: unknown key",
        ),
        (
            "[sweep]\n\"cache.policy\" = [\"lru\", \"nope\"]\n",
            "sweep.cache.policy",
            "`cache.policy`: expected one of",
        ),
        ("[sweep]\nzip = []\n", "sweep.zip", "empty"),
        (
            "[[sweep.zip]]\n\"cache.policy\" = [\"lru\", \"lfu\"]\n\"array.disks\" = [5]\n",
            "sweep.zip[0].array.disks",
            "same length",
        ),
        (
            "[[sweep.zip]]\n\"array.failed\" = [[0], [9]]\n",
            "sweep.zip[0].array.failed",
            "`array.failed",
        ),
    ];
    for (grid, key, msg) in cases {
        let (k, m) = config_key(&format!("{BASE}{grid}"));
        assert_eq!(k, key, "{grid}: {m}");
        assert!(m.contains(msg), "{grid}: {m}");
    }
}

#[test]
fn errors_outside_the_grid_keep_their_key() {
    let text = format!("{BASE}[sweep]\n\"cache.policy\" = [\"lru\"]\n")
        .replace("capacity_blocks = 100", "capacity_blocks = -1");
    let (key, _) = config_key(&text);
    assert_eq!(key, "cache.capacity_blocks");
}

proptest::proptest! {
    /// The grid has the product of the axes' lengths as runs, each with its own name, and a
    /// zip group counts once however many lists it holds.
    #[test]
    fn grid_size_is_the_product_of_its_axes(disks in 1usize..4, caps in 1usize..4, zip in 1usize..4) {
        let list = |n: usize, f: &dyn Fn(usize) -> String| {
            (0..n).map(f).collect::<Vec<_>>().join(", ")
        };
        let text = format!(
            "{BASE}[sweep]\n\"array.disks\" = [{}]\n\"cache.capacity_blocks\" = [{}]\n\
             [[sweep.zip]]\n\"workload.synthetic.seed\" = [{}]\n\"cache.policy\" = [{}]\n",
            list(disks, &|i| (5 + i).to_string()),
            list(caps, &|i| (10 + i).to_string()),
            list(zip, &|i| i.to_string()),
            list(zip, &|i| format!("\"{}\"", ["lru", "lfu", "arc"][i])),
        );
        let names = names(&text);
        proptest::prop_assert_eq!(names.len(), disks * caps * zip);
        let unique: std::collections::BTreeSet<_> = names.iter().collect();
        proptest::prop_assert_eq!(unique.len(), names.len());
    }
}
