//! Member I/O. (Skeleton: filled in by the member work.)
