//! PLACEHOLDER: seek curves (table, three-point, two-piece).

#[derive(Debug, Clone, PartialEq)]
pub enum SeekSpec {}
