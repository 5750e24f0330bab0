//! Parity arithmetic. (Skeleton: filled in by the parity work.)
