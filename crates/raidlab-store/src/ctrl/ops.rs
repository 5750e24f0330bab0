//! Operator hooks of the controller (`ctl fail` without `--force`, faulty devices found at
//! assembly): small additions that read or change the state under its lock. `ctl re-add`
//! is `readd.rs`.

use std::sync::Arc;

use super::Controller;
use crate::member::Member;

impl Controller {
    /// Why failing `slot` now would fail the array (the level cannot survive it), or `None`
    /// when the array survives (or the slot is already failed, or being rebuilt: failing a
    /// replacement only stops its rebuild).
    pub fn fail_would_kill(&self, slot: u32) -> Option<String> {
        let st = self.read_state();
        if st.dead.is_some() || slot >= self.shape.disks {
            return None;
        }
        if st.array.is_failed(slot) || st.array.rebuilding(slot).is_some() {
            return None;
        }
        let mut lost: Vec<u32> = (0..self.shape.disks)
            .filter(|&s| st.array.is_failed(s))
            .collect();
        lost.push(slot);
        crate::format::assemble::survives(self.shape.level, self.shape.disks, &lost).err()
    }

    /// Record devices assembly left out as faulty (their slot recorded failed, their
    /// superblock saying faulty, or their superblock unreadable), so `ctl status` lists them
    /// and `ctl remove` / `ctl re-add` can name them. `slot` is the slot each was taken out
    /// of, `u32::MAX` when unknown. Nothing is written until the next superblock update.
    pub fn adopt_faulty(&self, devs: &[(Arc<dyn Member>, u32)]) {
        let mut st = self.write_state();
        for (d, slot) in devs {
            if st.role_of(d.identity()).is_none() {
                st.faulty.push(Arc::clone(d));
                st.faulty_slots.push(*slot);
            }
        }
    }

    /// The faulty devices and the slots they were taken out of.
    pub fn faulty_devices(&self) -> Vec<(Arc<dyn Member>, u32)> {
        let st = self.read_state();
        st.faulty
            .iter()
            .cloned()
            .zip(st.faulty_slots.iter().copied())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{controller, mem_members, shape};
    use raidlab::array::Level;

    #[test]
    fn fail_would_kill_follows_the_level() {
        let sh = shape(Level::Raid5, 4, 4);
        let m = mem_members(&sh, "d", 4);
        let (c, _) = controller(&sh, &m, Default::default());
        assert_eq!(c.fail_would_kill(1), None);
        c.fail_member(1, "test").unwrap();
        assert_eq!(c.fail_would_kill(1), None, "already failed");
        let why = c.fail_would_kill(2).expect("a second raid5 failure kills");
        assert!(why.contains("raid5 survives 1"), "{why}");
        assert_eq!(c.state_word(), "degraded", "asking changes nothing");
        let sh = shape(Level::Raid6, 5, 4);
        let m = mem_members(&sh, "e", 5);
        let (c, _) = controller(&sh, &m, Default::default());
        c.fail_member(0, "test").unwrap();
        assert_eq!(c.fail_would_kill(3), None);
    }
}
