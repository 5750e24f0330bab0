//! Sequential order: the lowest unit not yet handed out, from unit 0 up (Linux md; the
//! order of the original DOR).

use crate::rebuild::map::UnitMap;

#[derive(Debug, Clone)]
pub struct Sequential {
    pub(super) issued: UnitMap,
    /// Every unit below it has been handed out.
    cursor: u64,
}

impl Sequential {
    pub fn new(units: u64) -> Sequential {
        Sequential {
            issued: UnitMap::new(units),
            cursor: 0,
        }
    }

    pub fn next_unit(&mut self) -> Option<u64> {
        let u = self.issued.next_clear(self.cursor)?;
        self.issued.set(u);
        self.cursor = u + 1;
        Some(u)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Order;
    use super::*;

    #[test]
    fn ascending_and_skips_taken_units() {
        let mut o = Order::Sequential(Sequential::new(6));
        assert!(o.take(1));
        assert!(o.take(4));
        assert!(!o.take(4));
        assert!(!o.take(6));
        o.user_read(3); // ignored
        let got: Vec<u64> = std::iter::from_fn(|| o.next_unit()).collect();
        assert_eq!(got, vec![0, 2, 3, 5]);
        assert!(o.issued().is_full());
    }
}
