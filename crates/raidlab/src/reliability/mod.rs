//! Closed-form reliability models.

pub mod rebuild;

pub use rebuild::mttdl_hours;
