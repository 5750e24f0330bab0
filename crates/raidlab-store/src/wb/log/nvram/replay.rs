//! Recovery of the NVRAM segment buffers before the log opens: every staged slot is written
//! onto its leg, oldest assignment first, the legs synced, then the slots freed (the
//! durability argument is in the parent module's docs).

use std::sync::Arc;

use super::super::geometry::Leg;
use super::super::slot::{SlotError, SlotHeader, SlotState, SLOT_HEADER_BLOCK};
use super::{free_header, nvram_bytes, slot_offset};
use crate::member::Member;

/// What recovery did with the NVRAM.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NvramReplay {
    /// Staged slots written onto their legs.
    pub replayed: u64,
    /// Slots whose header did not decode (torn or never written): ignored.
    pub ignored: u64,
}

/// Recovery, before the log opens: write every staged slot of the NVRAM `dev` (`slots`
/// slots of `seg`-byte segments) onto its leg, oldest assignment first, sync the legs,
/// then mark the slots free and sync the NVRAM. See the module docs.
pub fn replay(
    dev: &Arc<dyn Member>,
    legs: &[Leg],
    seg: u64,
    uuid: [u8; 16],
    slots: u32,
) -> Result<NvramReplay, raidlab::Error> {
    let path = dev.path().to_string();
    let bad = |msg: String| raidlab::Error::Store {
        path: path.clone(),
        msg,
    };
    let need = nvram_bytes(slots, seg);
    if dev.len_bytes() < need {
        return Err(bad(format!(
            "{} bytes, but the log's NVRAM of {slots} slots needs {need}",
            dev.len_bytes()
        )));
    }
    let slot_off = |i: u32| slot_offset(u64::from(i), seg);
    let mut out = NvramReplay::default();
    let mut staged = Vec::new();
    let mut block = vec![0u8; SLOT_HEADER_BLOCK as usize];
    for i in 0..slots {
        dev.read_at(&mut block, slot_off(i))
            .map_err(|e| bad(format!("reading NVRAM slot {i}: {e}")))?;
        let h = match SlotHeader::decode(&block) {
            Ok(h) => h,
            Err(SlotError::Blank) => continue,
            Err(e) => {
                crate::warn!(
                    "{path}: NVRAM slot {i} ignored ({e}): it holds no acknowledged write"
                );
                out.ignored += 1;
                continue;
            }
        };
        if h.state == SlotState::Free {
            continue;
        }
        let whose = |m: String| bad(format!("NVRAM slot {i}: {m}"));
        if h.uuid != uuid {
            return Err(whose("staged for another array".into()));
        }
        let Some((_, base, bytes)) = legs.get(h.leg as usize) else {
            return Err(whose(format!(
                "names leg {} of a log with {}",
                h.leg,
                legs.len()
            )));
        };
        if h.len > seg || h.leg_offset < *base || h.leg_offset + h.len > base + bytes {
            return Err(whose(format!(
                "a segment of {} bytes at {} is outside its leg's log area ({bytes} bytes at {base})",
                h.len, h.leg_offset
            )));
        }
        staged.push((h.generation, i, h));
    }
    staged.sort_by_key(|&(g, i, _)| (g, i));
    let mut image = vec![0u8; seg as usize];
    let mut touched = vec![false; legs.len()];
    for &(_, i, h) in &staged {
        let img = &mut image[..h.len as usize];
        dev.read_at(img, slot_off(i) + SLOT_HEADER_BLOCK)
            .map_err(|e| bad(format!("reading NVRAM slot {i}: {e}")))?;
        let leg = &legs[h.leg as usize].0;
        leg.write_at(img, h.leg_offset)
            .map_err(|e| raidlab::Error::Store {
                path: leg.path().to_string(),
                msg: format!("replaying NVRAM slot {i} onto the log: {e}"),
            })?;
        touched[h.leg as usize] = true;
        out.replayed += 1;
    }
    for (leg, _) in legs.iter().map(|l| &l.0).zip(&touched).filter(|(_, t)| **t) {
        leg.sync().map_err(|e| raidlab::Error::Store {
            path: leg.path().to_string(),
            msg: format!("syncing the log after the NVRAM replay: {e}"),
        })?;
    }
    let free = free_header(uuid);
    for &(_, i, _) in &staged {
        dev.write_at(&free, slot_off(i))
            .map_err(|e| bad(format!("freeing NVRAM slot {i}: {e}")))?;
    }
    dev.sync()
        .map_err(|e| bad(format!("syncing the NVRAM: {e}")))?;
    Ok(out)
}
