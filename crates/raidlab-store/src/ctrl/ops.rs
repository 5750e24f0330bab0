//! Operator hooks of the controller (`ctl fail` without `--force`, faulty devices found at
//! assembly, `ctl re-add`): small additions that read or change the state under its lock.

use std::sync::Arc;

use super::{Controller, IoFail};
use crate::member::{DevId, Member};

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

    /// `ctl re-add`: a faulty device (named by path, compared by identity, or by the slot it
    /// was taken out of) becomes a spare again, and a rebuild onto it starts if a slot is
    /// failed. The rebuild is a full one (no bitmap-based partial re-add). Returns its path.
    pub fn re_add(&self, target: &str) -> Result<String, IoFail> {
        let path = {
            let mut st = self.write_state();
            if let Some(d) = &st.dead {
                return Err(IoFail::Failed(d.clone()));
            }
            let by_slot = target.parse::<u32>().ok();
            let by_id = DevId::of_path(std::path::Path::new(target)).ok();
            let Some(i) = (0..st.faulty.len()).find(|&i| {
                st.faulty[i].path() == target
                    || Some(st.faulty[i].identity()) == by_id
                    || Some(st.faulty_slots[i]) == by_slot
            }) else {
                return Err(IoFail::Invalid(format!(
                    "{target} is not a faulty device of this array (`ctl status` lists them)"
                )));
            };
            let need = self.shape.data_offset_bytes + self.shape.member_data_bytes;
            if st.faulty[i].len_bytes() < need {
                return Err(IoFail::Invalid(format!(
                    "{}: {} bytes is too small for a member of this array (needs {need})",
                    st.faulty[i].path(),
                    st.faulty[i].len_bytes()
                )));
            }
            st.faulty_slots.remove(i);
            let dev = st.faulty.remove(i);
            let path = dev.path().to_string();
            st.spares.push(dev);
            self.persist(&mut st);
            path
        };
        if self.opts.auto_rebuild {
            self.maybe_start_rebuild();
        }
        Ok(path)
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

    #[test]
    fn re_add_turns_a_faulty_device_into_a_spare_and_rebuilds() {
        let sh = shape(Level::Raid1, 2, 4);
        let m = mem_members(&sh, "r", 2);
        let (c, _) = controller(&sh, &m, Default::default());
        c.fail_member(1, "test").unwrap();
        assert_eq!(c.faulty_devices().len(), 1);
        assert!(c.re_add("nothing").is_err());
        let p = c.re_add("1").unwrap();
        assert_eq!(
            c.status()["members"][1]["path"],
            p.as_str(),
            "rebuilt onto it"
        );
        assert!(c.faulty_devices().is_empty());
        assert_eq!(c.state_word(), "rebuilding");
    }
}
