//! Releasing a destage's images (and plans and partial parities): a release entry in a later
//! batch header per record, or, when the log is short of free segments, a void block written
//! over each in place (`LogBackup::release_images` chooses).

use std::io;

use super::super::format;
use super::{LogBackup, State, BLOCK64};

impl LogBackup {
    /// Add a release entry for the data block at `pos` (before the staged batch): a header
    /// entry, no data block.
    fn stage_release(&self, st: &mut State, pos: u64) -> io::Result<()> {
        self.open_batch(st)?;
        assert!(pos < st.head, "a release names an earlier record");
        st.staged.push(format::release_entry(pos));
        self.flush_if_full(st)
    }

    /// Stage a release entry for each of `written` (position, CRC; before the staged batch).
    pub(super) fn stage_releases(&self, st: &mut State, written: &[(u64, u32)]) -> io::Result<()> {
        for &(pos, _) in written {
            self.stage_release(st, pos)?;
            st.stats.release_entries += 1;
        }
        Ok(())
    }

    /// Overwrite each of `written` (position, the record's CRC) with a void block: in its
    /// NVRAM slot while a slot holds its segment, on its leg otherwise (and once the slot's
    /// copy reached the leg). Synced by the next commit (the legs are marked dirty).
    pub(super) fn void_in_place(&self, written: &[(u64, u32)]) -> io::Result<()> {
        let mut leg_writes = Vec::with_capacity(written.len());
        for &(pos, crc) in written {
            let void = &self.voids[usize::from(self.voids[0].1 == crc)].0;
            let to_leg = match &self.nv {
                Some(nv) => match nv.void(pos, void) {
                    Ok(to_leg) => to_leg,
                    Err(e) => {
                        let mut st = self.lock();
                        return Err(self.fail_nv(&mut st, e));
                    }
                },
                None => true,
            };
            if !to_leg {
                continue;
            }
            let (leg, off) = self.geo.locate(pos);
            if let Err(e) = self.geo.legs[leg].0.write_at(void, off) {
                let mut st = self.lock();
                return Err(self.fail(&mut st, leg, e));
            }
            leg_writes.push(leg);
        }
        let mut st = self.lock();
        for &leg in &leg_writes {
            st.dirty[leg / 64] |= 1 << (leg % 64);
        }
        st.stats.bytes_written += BLOCK64 * written.len() as u64;
        st.stats.image_void_leg_writes += leg_writes.len() as u64;
        Ok(())
    }
}
