//! A unified read/write primary cache in timed mode (`write_cache.unified`): the engine side
//! of `cache/write/unified.rs`. Three hooks: before a page enters the write cache
//! ([`room_for_write`], in `destage.rs`), before a read miss is cached (`user.rs`), and around a
//! completed destage (its pages stay cached clean).

use super::Sim;
use crate::cache::read::{MissCost, ReadPolicy, UniformCost};
use crate::cache::write::unified::Unified;
use crate::cache::write::WriteCache;
use crate::config::Experiment;

/// The unified bound of `exp`, if its write cache is unified.
pub(super) fn build(exp: &Experiment) -> Option<Unified> {
    let w = exp.write_cache.as_ref().filter(|w| w.unified)?;
    Some(Unified::new(w.capacity_pages, w.group_pages))
}

/// Before page `lba` enters `cache`: in a unified cache, evict clean pages if it needs room.
/// `false` when it cannot enter (then `cache.write` would refuse it too). Always `true`
/// without a unified cache.
#[inline]
pub(super) fn room_for_write(
    unified: &mut Option<Unified>,
    policy: &mut dyn ReadPolicy,
    cache: &WriteCache,
    evicted: &mut Vec<u64>,
    lba: u64,
) -> bool {
    let Some(u) = unified.as_mut() else {
        return true;
    };
    evicted.clear();
    u.room_for_write(policy, cache, lba, evicted)
}

/// Before a read miss is cached: whether a unified cache has (or made, evicting clean pages
/// into `evicted`) room for it. Always `true` without one.
#[inline]
pub(super) fn room_for_read(
    unified: &Option<Unified>,
    policy: &mut dyn ReadPolicy,
    cache: Option<&WriteCache>,
    evicted: &mut Vec<u64>,
) -> bool {
    match (unified, cache) {
        (Some(u), Some(c)) => u.room_for_read(policy, c, evicted),
        _ => true,
    }
}

impl Sim<'_> {
    /// Before the destage of group `slot` is finished: note its pages.
    pub(super) fn unified_destaging(&mut self, slot: u32) {
        if let (Some(u), Some(wb)) = (self.unified.as_mut(), self.wb.as_ref()) {
            u.destaging(&wb.cache, slot, wb.cache.group_first(slot));
        }
    }

    /// After the destage is finished: its pages stay cached as clean pages.
    pub(super) fn unified_destaged(&mut self) {
        let (Some(u), Some(wb)) = (self.unified.as_mut(), self.wb.as_ref()) else {
            return;
        };
        let cost: &dyn MissCost = match &self.array {
            Some(a) => a,
            None => &UniformCost,
        };
        self.evicted.clear();
        u.keep_destaged(
            self.policy.as_mut(),
            &wb.cache,
            &mut self.tick,
            cost,
            &mut self.evicted,
        );
        self.m.count.evictions += self.evicted.len() as u64;
    }

    /// The unified cache's counters, once the write cache's metrics are stored; clean pages
    /// evicted for dirty ones count as read-cache evictions too.
    pub(super) fn unified_metrics(&mut self) {
        let (Some(u), Some(wc)) = (self.unified.as_ref(), self.m.write_cache.as_mut()) else {
            return;
        };
        self.m.count.evictions += u.stats.evicted_for_writes;
        wc.unified = Some(u.stats.clone());
    }
}
