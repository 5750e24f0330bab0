//! Mean time to data loss of an array from its members' MTTF and the measured repair window
//! (the classic Markov approximation of Patterson, Gibson and Katz, valid when MTTR << MTTF).
//!
//! An array of `n` disks that survives `f` failures loses data when `f + 1` disks fail within
//! overlapping repair windows:
//!
//! ```text
//! MTTDL = MTTF^(f+1) / (n (n-1) ... (n-f) * MTTR^f)
//! ```
//!
//! - RAID-5 (f = 1): `MTTF^2 / (n (n-1) MTTR)`;
//! - RAID-6 (f = 2): `MTTF^3 / (n (n-1) (n-2) MTTR^2)`;
//! - RAID-1 of `n` copies (f = n-1): `MTTF^n / (n! MTTR^(n-1))`;
//! - RAID-10: only the failed disk's partner matters, `MTTF^2 / (n MTTR)`;
//! - RAID-0 (f = 0): `MTTF / n`.

use crate::array::Level;

/// MTTDL in hours of an array of `disks` members at `level`, each failing at rate
/// `1 / mttf_hours`, repaired in `mttr_hours` (failure to redundancy restored).
pub fn mttdl_hours(level: Level, disks: u32, mttf_hours: f64, mttr_hours: f64) -> f64 {
    let n = f64::from(disks);
    let mttr = mttr_hours.max(f64::MIN_POSITIVE);
    let tolerated = match level {
        Level::Raid0 => 0,
        Level::Raid5 | Level::Raid10 => 1,
        Level::Raid6 => 2,
        Level::Raid1 => disks.saturating_sub(1),
    };
    if level == Level::Raid10 {
        return mttf_hours * mttf_hours / (n * mttr);
    }
    // Accumulate the ratio factor by factor: MTTF / (n - k) / MTTR for each tolerated
    // failure, which stays finite where MTTF^(f+1) alone would overflow.
    let mut v = mttf_hours / n;
    for k in 1..=tolerated {
        v *= mttf_hours / ((n - f64::from(k)) * mttr);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a / b - 1.0).abs() < 1e-12
    }

    #[test]
    fn closed_forms() {
        // RAID-5 of 5 disks, MTTF 1e6 h, MTTR 10 h: 1e12 / (5 * 4 * 10) = 5e9 h.
        assert!(close(mttdl_hours(Level::Raid5, 5, 1e6, 10.0), 5e9));
        // RAID-6 of 6: 1e18 / (6 * 5 * 4 * 100) = 8.333e13 h.
        assert!(close(
            mttdl_hours(Level::Raid6, 6, 1e6, 10.0),
            1e18 / 12_000.0
        ));
        // Two-way mirror: 1e12 / (2 * 10).
        assert!(close(mttdl_hours(Level::Raid1, 2, 1e6, 10.0), 5e10));
        // RAID-10 of 8: 1e12 / (8 * 10).
        assert!(close(mttdl_hours(Level::Raid10, 8, 1e6, 10.0), 1.25e10));
        assert!(close(mttdl_hours(Level::Raid0, 4, 1e6, 10.0), 2.5e5));
        // Halving the repair time doubles single-parity MTTDL.
        let a = mttdl_hours(Level::Raid5, 9, 1.2e6, 4.0);
        let b = mttdl_hours(Level::Raid5, 9, 1.2e6, 2.0);
        assert!(close(b, 2.0 * a));
    }
}
