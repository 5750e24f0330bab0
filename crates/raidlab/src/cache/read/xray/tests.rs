//! Worked examples of X-RAY's rules, including the paper's Figure 1.

use super::*;

const S: u64 = 1_000_000_000;

fn img(ino: u32, first: u64, blocks: u32, atime_s: u64) -> InodeImage {
    InodeImage {
        ino,
        atime_ns: atime_s * S,
        mtime_ns: 0,
        first_block: first,
        blocks,
    }
}

/// Blocks 10..=15 in R-list order, read at the given seconds; every block its own file
/// (inode = block number), known from an inode image with access time 0.
fn figure1(times_s: [u64; 6], threshold: u32) -> Xray {
    let mut x = Xray::new(4, 64, threshold, S);
    let images: Vec<InodeImage> = (10..16).map(|b| img(b as u32, b, 1, 0)).collect();
    x.inode_block(&images);
    for (i, t) in times_s.into_iter().enumerate() {
        assert!(!x.read(10 + i as u64, t * S));
    }
    x
}

/// R-list blocks in order, LRU first, with a `|` where CB is.
fn order(x: &mut Xray) -> String {
    let cb = x.cb;
    let mut all = Vec::new();
    x.rlist.walk_down_from(u128::MAX, usize::MAX, |k, b| {
        all.push((k, b));
        true
    });
    all.reverse();
    let mut s = String::new();
    let mut bar = cb == 0;
    if bar {
        s.push('|');
    }
    for (k, b) in all {
        if !bar && k > cb {
            s.push_str(" |");
            bar = true;
        }
        s.push_str(&format!(" {b}"));
    }
    if !bar {
        s.push_str(" |");
    }
    s.trim().to_string()
}

#[test]
fn figure1a_victim_read_in_the_inclusive_region() {
    // CB between 11 and 12: 12..15 presumed in the FS cache. A disk read of 13 at t = 6 says
    // 12 and 13 had been evicted: CB goes to 13's position, 13 to the MRU end.
    let mut x = figure1([0, 1, 2, 3, 4, 5], 1);
    x.cb = x.bkey[11];
    assert_eq!(order(&mut x), "10 11 | 12 13 14 15");
    assert_eq!(x.predicted_size(), 4);
    assert!(!x.read(13, 6 * S));
    assert_eq!(order(&mut x), "10 11 12 | 14 15 13");
    assert_eq!(x.predicted_size(), 3);
    assert_eq!(x.stats.shrinks, 1);
}

#[test]
fn figure1b_access_time_update_of_an_exclusive_file() {
    // CB between 14 and 15. The inode of 13's file shows its access time changed from 3 to
    // 4 with no disk read of 13 since: 13 was in the FS cache. CB moves past 13 and 13 is
    // re-inserted at time 4 (before 14, read at 5).
    let mut x = figure1([0, 1, 2, 3, 5, 6], 1);
    x.inode_block(&[img(13, 13, 1, 3)]);
    x.cb = x.bkey[14];
    assert_eq!(order(&mut x), "10 11 12 13 14 | 15");
    x.inode_block(&[img(13, 13, 1, 4)]);
    assert_eq!(order(&mut x), "10 11 12 | 13 14 15");
    assert_eq!(x.predicted_size(), 3);
    assert_eq!(x.stats.expansions, 1);
    assert_eq!(rlist::time_of(x.bkey[13]), 4 * S);
}

#[test]
fn victim_in_the_exclusive_region_moves_cb_one_block() {
    // CB between 11 and 12 (4 presumed cached). Reading 10 (exclusive) moves CB past 12:
    // the read may have evicted the host's LRU block; the size estimate stays 4.
    let mut x = figure1([0, 1, 2, 3, 4, 5], 1);
    x.cb = x.bkey[11];
    x.read(10, 6 * S);
    assert_eq!(order(&mut x), "11 12 | 13 14 15 10");
    assert_eq!(x.predicted_size(), 4);
    assert_eq!(x.stats.shrinks, 0);
}

#[test]
fn access_time_of_blocks_read_since_needs_no_inference() {
    // 13's file read from disk at 3 s; its inode then shows atime 3: the array saw the read,
    // nothing moves.
    let mut x = figure1([0, 1, 2, 3, 5, 6], 1);
    x.cb = x.bkey[14];
    let before = order(&mut x);
    x.inode_block(&[img(13, 13, 1, 3)]);
    assert_eq!(order(&mut x), before);
    assert_eq!(x.stats.expansions, 0);
}

#[test]
fn partial_file_heuristic_disregards_exclusive_blocks() {
    // One file of blocks 10..16. CB between 12 and 13: 13..15 inclusive, 10..12 exclusive.
    // An access-time update for the file must not move CB (a block of it is inclusive); its
    // exclusive blocks are disregarded (they stay), its inclusive ones take the new time.
    let mut x = Xray::new(4, 64, 1, S);
    x.inode_block(&[img(0, 10, 6, 0)]);
    for b in 10..16 {
        x.read(b, b * S);
    }
    x.cb = x.bkey[12];
    x.inode_block(&[img(0, 10, 6, 20)]);
    assert_eq!(x.stats.expansions, 0);
    assert_eq!(x.stats.atime_updates, 1);
    assert_eq!(order(&mut x), "10 11 12 | 13 14 15");
    assert!((10..13u64).all(|b| rlist::time_of(x.bkey[b as usize]) == b * S));
    assert!((13..16).all(|b| rlist::time_of(x.bkey[b]) == 20 * S));
}

#[test]
fn threshold_needs_distinct_files_and_takes_the_least_aggressive_move() {
    // Threshold 2, every block its own file. CB at 0: all six inclusive.
    // Victim reads of 12 (file 12) and again 12 (same file) are one vote; 11 (file 11) is the
    // second: CB moves to the lower of the two positions, 11's.
    let mut x = figure1([0, 1, 2, 3, 4, 5], 2);
    assert_eq!(x.predicted_size(), 6);
    x.read(12, 6 * S);
    x.read(12, 7 * S);
    assert_eq!(x.stats.shrinks, 0);
    assert_eq!(x.predicted_size(), 6);
    let k11 = x.bkey[11];
    x.read(11, 8 * S);
    assert_eq!(x.stats.shrinks, 1);
    assert_eq!(x.cb, k11);
    assert_eq!(order(&mut x), "10 | 13 14 15 12 11");
}

#[test]
fn exclusive_cache_holds_the_window_past_cb() {
    // Capacity 2. CB between 13 and 14: the window is {13, 12}, fetched nearest CB first.
    let mut x = Xray::new(2, 64, 1, S);
    let images: Vec<InodeImage> = (10..16).map(|b| img(b as u32, b, 1, 0)).collect();
    x.inode_block(&images);
    for b in 10..16 {
        x.read(b, b * S);
    }
    x.cb = x.bkey[13];
    assert!(x.maybe_refresh(20 * S));
    assert!(
        !x.maybe_refresh(20 * S + 1),
        "next refresh is a period later"
    );
    assert_eq!(x.next_fetch(), Some(13));
    x.place(13);
    assert_eq!(x.next_fetch(), Some(12));
    x.place(12);
    assert_eq!(x.next_fetch(), None);
    // The host reads 12: a hit; it becomes MRU (inclusive) and CB steps... 12 was exclusive,
    // so CB moves one block towards MRU (past 14): window {14, 13} at the next refresh, and
    // 12, now the most recent cached block outside it, is the one replaced.
    assert!(x.read(12, 21 * S));
    x.refresh();
    assert_eq!(x.next_fetch(), Some(14));
    x.place(14);
    assert!(x.contains(13) && x.contains(14) && !x.contains(12));
    assert_eq!(x.len(), 2);
    assert_eq!(x.stats.placements, 3);
}
