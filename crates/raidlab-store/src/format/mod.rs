//! On-disk formats. (Skeleton: filled in by the format work.)
