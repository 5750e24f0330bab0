//! Closed-form reliability and cost models (no simulation).

pub mod compare;
pub mod cost;
pub mod mttdl;
pub mod rebuild;

pub use compare::{compare, Inputs, Row};
pub use cost::CostModel;
pub use mttdl::{Architecture, FailureRates};
pub use rebuild::mttdl_hours;
