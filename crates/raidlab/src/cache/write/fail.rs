//! The write cache's side of cache failures (`cache/backup/failure.rs`): losing the dirty
//! pages no copy survives, going offline while the backup rebuilds the primary, and lending
//! space to a failed backup NVRAM.
//!
//! The cache's bitmaps stand for the contents it holds once recovered: after a primary
//! failure the pages whose backup copy survives stay (the backup restores them), the others
//! are lost and leave the cache. In-flight pages stay in flight: their destage was issued
//! before the failure and completes with its data.

use super::WriteCache;

impl WriteCache {
    /// Recovering: while offline the cache accepts no page ([`WriteCache::write`] answers
    /// `None`, so writes wait as when it is full) and starts no destage.
    pub fn set_offline(&mut self, offline: bool) {
        self.offline = offline;
    }

    pub fn is_offline(&self) -> bool {
        self.offline
    }

    /// Calls `f` with every live group's slot and key (one pass over the arena; a freed slot
    /// keeps an old key that now maps elsewhere or nowhere).
    fn for_each_group(&mut self, mut f: impl FnMut(&mut WriteCache, u32, u64)) {
        let n = self.groups.nodes().len() as u32;
        for slot in 0..n {
            let key = self.groups.get(slot).key;
            if self.groups.find(key) == Some(slot) {
                f(self, slot, key);
            }
        }
    }

    /// Dirty pages, ascending within each group (tests and recovery checks).
    pub fn dirty_pages(&mut self, out: &mut Vec<u64>) {
        out.clear();
        self.for_each_group(|c, slot, key| {
            let base = slot as usize * 2 * c.words;
            for i in 0..c.group_pages {
                if c.bits[base + (i / 64) as usize] >> (i % 64) & 1 != 0 {
                    out.push(key * c.group_pages + i);
                }
            }
        });
    }

    /// The primary cache failed: drop every dirty page whose backup copy does not survive
    /// ([`super::Backup::survives_primary`]), telling the backup to forget it. Returns the
    /// pages lost. When some are lost every waiting group leaves the destage order and the
    /// survivors go back in the order they left it.
    pub fn discard_lost(&mut self) -> u64 {
        let mut lost = 0;
        self.for_each_group(|c, slot, key| {
            let base = slot as usize * 2 * c.words;
            for i in 0..c.group_pages {
                let dirty = c.bits[base + (i / 64) as usize] >> (i % 64) & 1 != 0;
                lost += u64::from(dirty && !c.backup.survives_primary(key * c.group_pages + i));
            }
        });
        if lost == 0 {
            return 0;
        }
        let waiting = self.order.len();
        let mut queued = Vec::with_capacity(waiting);
        for _ in 0..waiting {
            match self.order.next_victim() {
                Some(s) => queued.push(s),
                None => break,
            }
        }
        self.for_each_group(|c, slot, key| {
            let base = slot as usize * 2 * c.words;
            for i in 0..c.group_pages {
                let (w, bit) = (base + (i / 64) as usize, 1u64 << (i % 64));
                let lba = key * c.group_pages + i;
                if c.bits[w] & bit != 0 && !c.backup.survives_primary(lba) {
                    c.bits[w] &= !bit;
                    c.groups.get_mut(slot).dirty -= 1;
                    c.occupied -= 1;
                    c.backup.forget(lba);
                }
            }
        });
        for slot in queued {
            let g = *self.groups.get(slot);
            debug_assert!(g.in_order && g.flight == 0);
            if g.dirty > 0 {
                self.order.reinsert(slot, g.key, g.dirty);
            } else {
                self.groups.remove(slot);
            }
        }
        if let Some(w) = self.water.as_mut() {
            w.update(self.occupied);
        }
        lost
    }

    /// Lend `pages` of the cache to the backup (RAPID's NVRAM failed): the capacity shrinks,
    /// never below one write group. Pages beyond it stay until destaged; new pages wait.
    pub fn lend(&mut self, pages: u64) {
        self.capacity = self.capacity.saturating_sub(pages).max(self.group_pages);
    }
}
