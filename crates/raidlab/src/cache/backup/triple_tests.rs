//! Worked examples of the triple RAPID-Cache (two RAPID backups behind one primary). The
//! property test of every backup kind, triple included, is in `tests.rs`.

use super::tests::{io, spec};
use super::{SegState, Triple};
use crate::cache::write::Backup;

#[test]
fn every_page_has_one_copy_in_each_backup_until_destaged() {
    // 8 segments per backup; 2 LRU pages and 1 buffer of 2 slots each.
    let mut t = Triple::new(&spec(1, 8, 1), 64);
    t.on_write(5, false);
    t.on_write(6, false);
    assert_eq!((t.copies(5), t.copies(6), t.copies(7)), (2, 2, 0));
    assert_eq!(t.backup(0).location(5), Some(None));
    assert_eq!(t.backup(1).location(5), Some(None));
    // A rewrite supersedes the old copy in both.
    t.on_invalidate(5);
    t.on_write(5, true);
    assert_eq!(t.copies(5), 2);
    // Destaging page 5 drops both copies; 6 keeps its two.
    t.on_destage(5, &[0b1], &[0]);
    assert_eq!((t.copies(5), t.copies(6)), (0, 2));
    let st = t.stats();
    // Counters add up over both backups: 3 page writes and 1 NVRAM hit each.
    assert_eq!((st.page_writes, st.nvram_hits, st.destaged), (6, 2, 2));
    assert_eq!(st.held_max, 2);
    assert_eq!(t.check(), Ok(()));
}

#[test]
fn a_write_waits_until_both_backups_have_a_buffer_and_transfers_are_routed() {
    let mut t = Triple::new(&spec(1, 8, 1), 64);
    // Pages 1-4: in each backup, 1 and 2 fill the LRU, 3 and 4 evict them into segment 0,
    // whose buffer is then written. Backup 0's write is segment 0, backup 1's is segment
    // 0 + 8 (the second backup's segment space).
    for lba in 1..=4 {
        assert!(t.can_accept(lba));
        t.on_write(lba, false);
    }
    let first = t.next_io().unwrap();
    let second = t.next_io().unwrap();
    assert_eq!((first, second), (io(0, 2, 0), io(8, 2, 0)));
    assert_eq!(t.next_io(), None);
    // Both LRUs full, both buffers being written: a new page waits.
    assert!(!t.can_accept(9));
    // Backup 0's write completes; backup 1 still has no buffer, so the page still waits.
    t.io_done(first);
    assert_eq!(t.backup(0).segments().state(0), SegState::OnDisk);
    assert_eq!(t.backup(1).segments().state(0), SegState::Writing);
    assert!(t.backup(0).can_accept(9) && !t.backup(1).can_accept(9));
    assert!(!t.can_accept(9));
    t.io_done(second);
    assert_eq!(t.backup(1).segments().state(0), SegState::OnDisk);
    assert!(t.can_accept(9));
    t.on_write(9, false);
    assert_eq!(t.copies(9), 2);
    assert_eq!(t.stats().log_writes, 2);
    assert_eq!(t.check(), Ok(()));
}
