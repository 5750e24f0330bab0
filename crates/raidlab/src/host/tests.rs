//! Worked examples of the file-system model against a device that records what it sees.

use super::*;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// Answers every read in 10 ms and logs every call.
#[derive(Default)]
struct Recorder {
    log: Vec<String>,
}

impl BlockDevice for Recorder {
    fn read(&mut self, block: u64, now_ns: u64, payload: Payload<'_>) -> u64 {
        self.log
            .push(format!("R{block}@{}ms{}", now_ns / MS, describe(payload)));
        10 * MS
    }
    fn write(&mut self, block: u64, now_ns: u64, payload: Payload<'_>) {
        self.log
            .push(format!("W{block}@{}ms{}", now_ns / MS, describe(payload)));
    }
    fn demote(&mut self, block: u64, now_ns: u64) {
        self.log.push(format!("D{block}@{}ms", now_ns / MS));
    }
}

fn describe(p: Payload<'_>) -> String {
    match p {
        Payload::Data => String::new(),
        Payload::Inodes(imgs) => imgs
            .iter()
            .map(|i| format!(" i{}:a{}", i.ino, i.atime_ns / S))
            .collect(),
    }
}

fn spec(cache: u64) -> HostSpec {
    HostSpec {
        fs_cache_blocks: cache,
        fs_policy: FsPolicy::Lru,
        inode_write_interval_ns: 5 * S,
        data_write_interval_ns: 30 * S,
        atime_granularity_ns: S,
        inodes_per_block: 4,
        space_blocks: None,
        latency: Latencies {
            fs_hit_ns: 20_000,
            array_hit_ns: 200_000,
            disk_ns: 10 * MS,
        },
        resize: Vec::new(),
        sample_interval_ns: S,
    }
}

#[test]
fn reads_atime_flush_and_demote() {
    // Two files of two blocks: inode table = block 0, file 0 = blocks 1-2, file 1 = 3-4.
    // FS cache of 3 blocks (LRU), DEMOTE on.
    let layout = Layout::new(&[2, 2], 4, None).unwrap();
    assert_eq!(layout.files, [(1, 2), (3, 2)]);
    let mut h = Host::new(&spec(3), layout, true).unwrap();
    let mut d = Recorder::default();
    // File 0 at t = 0: inode block read (both inodes, atime 0), then its two blocks.
    assert_eq!(h.read_file(0, 2, &mut d), 30 * MS);
    // Idle until 2 s, then file 1: its inode is in the cached inode block (a 20 us hit);
    // blocks 3 and 4 miss and evict the LRU blocks 1 and 2 (the inode block was just used),
    // which are demoted.
    h.advance_to(2 * S, &mut d);
    assert_eq!(h.read_file(1, 2, &mut d), 20 * MS + 20_000);
    // The atime of file 1 changed (0 -> 2 s): its inode block is written at the 5 s flush.
    h.advance_to(6 * S, &mut d);
    assert_eq!(
        d.log,
        [
            "R0@0ms i0:a0 i1:a0",
            "R1@10ms",
            "R2@20ms",
            "R3@2000ms",
            "D1@2010ms",
            "R4@2010ms",
            "D2@2020ms",
            "W0@5000ms i0:a0 i1:a2",
        ]
    );
    assert_eq!(h.stats.block_reads, 4);
    assert_eq!(h.stats.fs_hits, 1);
    assert_eq!(h.stats.demotes, 2);
    assert_eq!(h.cached_data_blocks(), 2);
}

#[test]
fn writes_are_flushed_every_30s_and_partial_reads_read_a_prefix() {
    let layout = Layout::new(&[4], 4, Some(100)).unwrap();
    let mut h = Host::new(&spec(10), layout, false).unwrap();
    let mut d = Recorder::default();
    h.read_file(0, 1, &mut d);
    assert_eq!(h.stats.block_reads, 1);
    h.advance_to(10 * S, &mut d);
    h.write_file(0, 2, &mut d);
    h.advance_to(31 * S, &mut d);
    let writes: Vec<&String> = d.log.iter().filter(|l| l.starts_with('W')).collect();
    // mtime changed at 10 s: inode block at the 15 s flush; the two dirty data blocks at 30 s.
    assert_eq!(writes, ["W0@15000ms i0:a0", "W1@30000ms", "W2@30000ms"]);
    // Shrinking the cache evicts in LRU order: 3 blocks resident (inode, 1, 2) -> 1.
    h.resize(1, &mut d);
    assert_eq!(h.cache().len(), 1);
}

#[test]
fn bad_layouts_and_sizes_are_config_errors() {
    let e = Layout::new(&[2, 0], 4, None).unwrap_err();
    assert!(e.to_string().contains("zero blocks"), "{e}");
    let e = Layout::new(&[8], 4, Some(5)).unwrap_err();
    assert!(e.to_string().contains("host.space_blocks"), "{e}");
    let layout = Layout::new(&[2, 2], 4, None).unwrap();
    let e = Host::new(&spec(6), layout.clone(), false).err().unwrap();
    assert!(
        e.to_string().contains("larger than the address space"),
        "{e}"
    );
    let mut s = spec(2);
    s.atime_granularity_ns = 0;
    let e = Host::new(&s, layout, false).err().unwrap();
    assert!(e.to_string().contains("atime_granularity"), "{e}");
}
