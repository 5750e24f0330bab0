//! The NBD protocol and server front. (Skeleton: filled in by the NBD work.)
