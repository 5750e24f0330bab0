//! LRW: destage the least recently written group. A write to a group (new or present) makes
//! it the most recently written; the victim is the group whose last write is oldest. Temporal
//! locality only: the destage order ignores where groups lie on the disks.

use super::{DestageOrder, OrderCtx, PageWrite};
use crate::cache::read::list::{Link, List, Nodes};

struct Links(Vec<Link>);

impl Nodes for Links {
    #[inline]
    fn link(&self, id: u32) -> Link {
        self.0[id as usize]
    }
    #[inline]
    fn link_mut(&mut self, id: u32) -> &mut Link {
        &mut self.0[id as usize]
    }
}

pub struct Lrw {
    links: Links,
    /// Front: most recently written.
    list: List,
    len: usize,
}

impl Lrw {
    pub fn new(ctx: &OrderCtx) -> Lrw {
        Lrw {
            links: Links(vec![Link::DETACHED; ctx.slots as usize]),
            list: List::new(),
            len: 0,
        }
    }
}

impl DestageOrder for Lrw {
    fn on_write(&mut self, w: &PageWrite) {
        if w.new_group {
            self.list.push_front(&mut self.links, w.slot);
            self.len += 1;
        } else {
            self.list.move_to_front(&mut self.links, w.slot);
        }
    }

    fn next_victim(&mut self) -> Option<u32> {
        let s = self.list.pop_back(&mut self.links)?;
        self.len -= 1;
        Some(s)
    }

    fn reinsert(&mut self, slot: u32, _group: u64, _pages: u32) {
        self.list.push_front(&mut self.links, slot);
        self.len += 1;
    }

    fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ctx, drain, w};
    use super::*;

    #[test]
    fn least_recently_written_first() {
        let mut o = Lrw::new(&ctx());
        // Groups 7, 3, 9 enter; 7 is written again: recency order (oldest first) 3, 9, 7.
        o.on_write(&w(7, true, false));
        o.on_write(&w(3, true, false));
        o.on_write(&w(9, true, false));
        o.on_write(&w(7, false, true));
        assert_eq!(o.next_victim(), Some(3));
        // 3 comes back after its destage: now the newest.
        o.reinsert(3, 3, 1);
        assert_eq!(drain(&mut o), vec![9, 7, 3]);
        assert!(o.is_empty());
    }
}
