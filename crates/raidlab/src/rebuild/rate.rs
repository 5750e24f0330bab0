//! Rebuild rate control (sans-IO): `full` takes whatever bandwidth users leave (the rebuild
//! class is served after user I/O), `md` paces the rebuild like Linux md's
//! `speed_limit_min` / `speed_limit_max`.
//!
//! # The md rule
//!
//! The rebuild's speed is the bytes of the failed disk it has started per second, measured
//! over a window of one to two seconds (two marks, rolled every second; md keeps marks three
//! seconds apart). Before starting a new unit: below `min` it always goes; at or above `max`
//! it waits; in between it goes only while the array is idle (md's `is_mddev_idle`: no user
//! I/O since the last check). A wait lasts exactly until the measured speed has fallen to
//! the limit that applies, so no polling interval is needed. Both limits are per member disk,
//! as md's are: every survivor reads, and the replacement writes, one unit per unit rebuilt.

/// How fast the rebuild may go.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateSpec {
    /// No pacing: the rebuild absorbs all bandwidth users leave.
    Full,
    /// Linux md's pacing, in bytes per second per disk.
    Md { min_bytes_s: f64, max_bytes_s: f64 },
}

/// The answer to "may the rebuild start another unit now?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Go,
    /// Ask again at this time.
    WaitUntil(u64),
}

/// Length of one measuring step.
pub const MARK_NS: u64 = 1_000_000_000;

#[derive(Debug, Clone)]
pub struct Throttle {
    spec: RateSpec,
    /// (time, bytes started) of the older and the newer mark.
    old: (u64, u64),
    new: (u64, u64),
}

impl Throttle {
    pub fn new(spec: RateSpec, now_ns: u64) -> Throttle {
        Throttle {
            spec,
            old: (now_ns, 0),
            new: (now_ns, 0),
        }
    }

    /// May a unit start at `now_ns`, with `bytes` started so far and the array `busy` with
    /// user I/O?
    pub fn gate(&mut self, now_ns: u64, bytes: u64, busy: bool) -> Gate {
        let RateSpec::Md {
            min_bytes_s,
            max_bytes_s,
        } = self.spec
        else {
            return Gate::Go;
        };
        if now_ns >= self.new.0 + MARK_NS {
            self.old = self.new;
            self.new = (now_ns, bytes);
        }
        let (t0, b0) = self.old;
        let done = bytes - b0;
        let limit = if busy { min_bytes_s } else { max_bytes_s };
        // The time at which `done` bytes since `t0` make exactly `limit` bytes/s.
        let due = t0 + (done as f64 / limit * 1e9).ceil() as u64;
        if due <= now_ns {
            Gate::Go
        } else {
            Gate::WaitUntil(due)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1048576.0;

    #[test]
    fn full_always_goes() {
        let mut t = Throttle::new(RateSpec::Full, 0);
        assert_eq!(t.gate(0, u64::MAX / 2, true), Gate::Go);
    }

    #[test]
    fn md_paces_at_min_when_busy_and_max_when_idle() {
        // min 1 MiB/s, max 4 MiB/s; units of 64 KiB.
        let spec = RateSpec::Md {
            min_bytes_s: MIB,
            max_bytes_s: 4.0 * MIB,
        };
        let mut t = Throttle::new(spec, 0);
        assert_eq!(t.gate(0, 0, true), Gate::Go);
        // 64 KiB started at t = 0: busy, the next may start at 1/16 s.
        assert_eq!(t.gate(0, 65536, true), Gate::WaitUntil(62_500_000));
        assert_eq!(t.gate(62_500_000, 65536, true), Gate::Go);
        // Idle: four times sooner.
        assert_eq!(t.gate(0, 65536, false), Gate::WaitUntil(15_625_000));
        // Over many units the pace holds: 1 MiB started by 1 s is exactly on schedule. The
        // newer mark moves to 1 s; speed is still measured from the older one (t = 0).
        assert_eq!(t.gate(1_000_000_000, MIB as u64, true), Gate::Go);
        assert_eq!(
            t.gate(1_000_000_000, MIB as u64 + 65536, true),
            Gate::WaitUntil(1_062_500_000)
        );
    }
}
