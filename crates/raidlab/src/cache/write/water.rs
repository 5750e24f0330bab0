//! RAPID-Cache's destage rate (section 2.4): destaging starts when the controller is idle or
//! when dirty pages exceed a high water mark (70% of the cache), and a destage begun at the
//! high mark goes on until the dirty pages fall below a low water mark (30%); a destage begun
//! in an idle period goes on while the controller stays idle. Either way up to `max`
//! destages ("one or several destaging threads") are in flight.
//!
//! Unlike the other rates this one has state: the hysteresis between the two marks and
//! whether the controller is idle (told by the engine: no user request in the controller).
//! Paired with the `lrw` order (least recently written group first) it is RAPID's "dirty LRU
//! block" destage, at write-group granularity.

/// Hysteresis state of the water-mark rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Water {
    /// Pages: start at or above `high`, stop below `low`.
    pub low: u64,
    pub high: u64,
    /// Whether idle periods destage too.
    pub idle_destage: bool,
    /// A high-mark destage is running (until occupancy drops below `low`).
    on: bool,
    /// The controller has no user request in flight.
    idle: bool,
}

impl Water {
    pub fn new(low: u64, high: u64, idle_destage: bool) -> Water {
        debug_assert!(low < high);
        Water {
            low,
            high,
            idle_destage,
            on: false,
            idle: false,
        }
    }

    /// Occupancy changed to `occupied` pages.
    #[inline]
    pub fn update(&mut self, occupied: u64) {
        if occupied >= self.high {
            self.on = true;
        } else if occupied < self.low {
            self.on = false;
        }
    }

    /// The engine says whether the controller is idle.
    #[inline]
    pub fn set_idle(&mut self, idle: bool) {
        self.idle = idle;
    }

    /// Destages allowed in flight at `occupied` pages, at most `max`.
    #[inline]
    pub fn allowed(&self, occupied: u64, max: u32) -> u32 {
        if occupied > 0 && (self.on || (self.idle_destage && self.idle)) {
            max
        } else {
            0
        }
    }

    /// Whether a high-mark destage is running.
    pub fn is_on(&self) -> bool {
        self.on
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hysteresis_between_the_marks() {
        // 100 pages, 70/30, 4 in flight at most, no idle destage.
        let mut w = Water::new(30, 70, false);
        let mut seen = Vec::new();
        for occ in [10, 50, 69, 70, 50, 30, 29, 50] {
            w.update(occ);
            seen.push(w.allowed(occ, 4));
        }
        // Off until 70; on from 70 down to 30 inclusive; off below 30, and still off at 50.
        assert_eq!(seen, vec![0, 0, 0, 4, 4, 4, 0, 0]);
    }

    #[test]
    fn idle_periods_destage_while_idle() {
        let mut w = Water::new(30, 70, true);
        w.update(5);
        assert_eq!(w.allowed(5, 2), 0);
        w.set_idle(true);
        assert_eq!(w.allowed(5, 2), 2);
        // Nothing dirty: nothing to do even when idle.
        assert_eq!(w.allowed(0, 2), 0);
        w.set_idle(false);
        assert_eq!(w.allowed(5, 2), 0);
    }
}
