//! `--timing`: which disk model times which member, and how its queue schedules.
//!
//! ```text
//! --timing "ENTRY [ENTRY ...]"
//! ENTRY  = [SLOT=]MODEL[,KEY=VALUE ...]
//! MODEL  = a core preset (wd10eals, cheetah9lp, ibm40k1052, hp97560, sata_ssd, ...)
//!        | constant (10 ms per operation unless read-ms / write-ms say otherwise)
//! KEY    = scheduler (fcfs | sstf | clook), ncq (1..=256), aging-ms (milliseconds),
//!          queue (operations held at once, 1..=4096), read-ms, write-ms (constant only)
//! ```
//!
//! An entry without a slot times every member and spare; `SLOT=` entries override it for
//! that slot's member.

use std::collections::BTreeMap;

use raidlab::disk::model::ConstantSpec;
use raidlab::disk::{ms_to_ns, DiskSpec, QueueSpec};
use raidlab::{Error, Result};

use super::{
    default_queue, discipline_of, model_names, model_of, Member, TimedMember, BOUND_DEFAULT,
    BOUND_MAX,
};
use crate::sync::Arc;

/// The option the specs come from, named in every error.
const OPTION: &str = "--timing";

/// One member's model and scheduling.
#[derive(Debug, Clone, PartialEq)]
pub struct TimingSpec {
    /// The entry as given, without its slot (`wd10eals,scheduler=sstf`).
    pub text: String,
    /// The model's name (`wd10eals`, `constant`).
    pub preset: String,
    pub disk: DiskSpec,
    pub queue: QueueSpec,
    /// Operations held at once (queued and in service); a caller beyond it waits.
    pub bound: u32,
}

impl TimingSpec {
    /// Parse `MODEL[,KEY=VALUE ...]`; errors name `--timing` and list what is accepted.
    pub fn parse(text: &str) -> Result<TimingSpec> {
        let mut parts = text.split(',').map(str::trim);
        let preset = parts.next().unwrap_or_default();
        let mut disk = model_of(preset).ok_or_else(|| {
            Error::config(
                OPTION,
                format!(
                    "unknown disk model {preset:?}; expected one of {}",
                    model_names().join(", ")
                ),
            )
        })?;
        let mut queue = default_queue();
        let mut bound = BOUND_DEFAULT;
        for kv in parts {
            let (key, value) = kv.split_once('=').ok_or_else(|| {
                Error::config(OPTION, format!("{kv:?} in {text:?}: expected KEY=VALUE"))
            })?;
            let bad = |want: &str| {
                Error::config(
                    OPTION,
                    format!("{key}={value:?} in {text:?}: expected {want}"),
                )
            };
            let int = |lo: u64, hi: u64| {
                value
                    .parse::<u64>()
                    .ok()
                    .filter(|v| (lo..=hi).contains(v))
                    .ok_or_else(|| bad(&format!("an integer from {lo} to {hi}")))
            };
            let ms = || {
                value
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0 && *v <= 3.6e6)
                    .ok_or_else(|| bad("milliseconds from 0 to 3600000"))
            };
            match key {
                "scheduler" => {
                    queue.discipline =
                        discipline_of(value).ok_or_else(|| bad("fcfs, sstf or clook"))?
                }
                "ncq" => queue.ncq = int(1, 256)? as u32,
                "aging-ms" => queue.aging_ns = ms_to_ns(ms()?),
                "queue" => bound = int(1, u64::from(BOUND_MAX))? as u32,
                "read-ms" | "write-ms" => {
                    let DiskSpec::Constant(c) = &mut disk else {
                        return Err(bad("no such key: read-ms and write-ms are for constant"));
                    };
                    let ns = ms_to_ns(ms()?).max(1);
                    if key == "read-ms" {
                        c.read_ns = ns;
                    } else {
                        c.write_ns = ns;
                    }
                }
                _ => {
                    return Err(Error::config(
                        OPTION,
                        format!(
                            "unknown key {key:?} in {text:?}; expected scheduler, ncq, aging-ms, queue, read-ms or write-ms"
                        ),
                    ))
                }
            }
        }
        Ok(TimingSpec {
            text: text.trim().to_string(),
            preset: preset.to_string(),
            disk,
            queue,
            bound,
        })
    }

    /// A constant-time model of `read_ns` and `write_ns` per operation (tests).
    pub fn constant(read_ns: u64, write_ns: u64) -> TimingSpec {
        TimingSpec {
            text: format!(
                "constant,read-ms={},write-ms={}",
                read_ns as f64 / 1e6,
                write_ns as f64 / 1e6
            ),
            preset: "constant".into(),
            disk: DiskSpec::Constant(ConstantSpec {
                read_ns,
                write_ns,
                capacity_sectors: 1 << 40,
            }),
            queue: default_queue(),
            bound: BOUND_DEFAULT,
        }
    }

    /// Wrap `dev` in this model; a member larger than the model is an error naming
    /// `--timing`.
    pub fn wrap(&self, dev: Arc<dyn Member>) -> Result<Arc<dyn Member>> {
        let t = TimedMember::new(dev, self).map_err(|m| Error::config(OPTION, m))?;
        Ok(Arc::new(t))
    }
}

/// What `--timing` says for a whole array.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimingOptions {
    /// For every member and spare without an entry of its own.
    pub all: Option<TimingSpec>,
    /// For the member in a slot.
    pub slots: BTreeMap<u32, TimingSpec>,
}

impl TimingOptions {
    /// Parse whitespace-separated `[SLOT=]MODEL[,KEY=VALUE ...]` entries.
    pub fn parse(text: &str) -> Result<TimingOptions> {
        let mut t = TimingOptions::default();
        for entry in text.split_whitespace() {
            let (slot, spec) = match entry.split_once('=') {
                Some((s, rest)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                    let slot = s.parse::<u32>().map_err(|_| {
                        Error::config(OPTION, format!("slot {s:?} in {entry:?} is too large"))
                    })?;
                    (Some(slot), rest)
                }
                _ => (None, entry),
            };
            let spec = TimingSpec::parse(spec)?;
            let dup = match slot {
                None => t.all.replace(spec).is_some(),
                Some(s) => t.slots.insert(s, spec).is_some(),
            };
            if dup {
                return Err(Error::config(
                    OPTION,
                    format!("{entry:?}: a second entry for the same members"),
                ));
            }
        }
        Ok(t)
    }

    pub fn is_empty(&self) -> bool {
        self.all.is_none() && self.slots.is_empty()
    }

    /// The spec of the member in `slot` (`None`: a spare).
    pub fn for_slot(&self, slot: Option<u32>) -> Option<&TimingSpec> {
        slot.and_then(|s| self.slots.get(&s)).or(self.all.as_ref())
    }

    /// A slot entry past the array's last slot is an error naming `--timing`.
    pub fn check_slots(&self, disks: u32) -> Result<()> {
        match self.slots.keys().find(|&&s| s >= disks) {
            Some(s) => Err(Error::config(
                OPTION,
                format!(
                    "slot {s}: the array has slots 0 to {}",
                    disks.saturating_sub(1)
                ),
            )),
            None => Ok(()),
        }
    }
}
