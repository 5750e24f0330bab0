//! Rebuild order: which unit of the failed disk to rebuild next (sans-IO).
//!
//! An order hands out every unit `0..units` exactly once. It is told of user reads that
//! reach the failed disk (PRO's Access Monitor) and of units rebuilt outside it
//! (piggybacking), and answers the next unit when the executor wants a job. It reads no
//! clock and performs no I/O.

mod pro;
mod sequential;

pub use pro::{Pro, ProSpec};
pub use sequential::Sequential;

use super::map::UnitMap;

/// The rebuild order as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderSpec {
    /// From unit 0 up (Linux md, DOR).
    Sequential,
    /// Popularity-based (PRO, Tian et al., FAST 2007).
    Pro(ProSpec),
}

impl OrderSpec {
    pub const NAMES: &'static [&'static str] = &["sequential", "pro"];

    pub fn build(&self, units: u64) -> Order {
        match *self {
            OrderSpec::Sequential => Order::Sequential(Sequential::new(units)),
            OrderSpec::Pro(spec) => Order::Pro(Pro::new(units, spec)),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            OrderSpec::Sequential => "sequential",
            OrderSpec::Pro(_) => "pro",
        }
    }
}

/// A running order (an enum rather than a trait object: two variants, called per unit).
#[derive(Debug, Clone)]
pub enum Order {
    Sequential(Sequential),
    Pro(Pro),
}

impl Order {
    /// The next unit to rebuild; each unit is handed out once, `None` when all have been.
    pub fn next_unit(&mut self) -> Option<u64> {
        match self {
            Order::Sequential(o) => o.next_unit(),
            Order::Pro(o) => o.next_unit(),
        }
    }

    /// A user read reached `unit` of the failed disk.
    pub fn user_read(&mut self, unit: u64) {
        if let Order::Pro(o) = self {
            o.user_read(unit);
        }
    }

    /// Claim `unit` outside the order (a piggybacked rebuild); `false` if it was handed out
    /// already (or is out of range).
    pub fn take(&mut self, unit: u64) -> bool {
        let issued = match self {
            Order::Sequential(o) => &mut o.issued,
            Order::Pro(o) => &mut o.issued,
        };
        unit < issued.len() && issued.set(unit)
    }

    /// Units handed out (or taken) so far.
    pub fn issued(&self) -> &UnitMap {
        match self {
            Order::Sequential(o) => &o.issued,
            Order::Pro(o) => &o.issued,
        }
    }
}
