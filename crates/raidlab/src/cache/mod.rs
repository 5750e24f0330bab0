//! The controller's caches: the read cache (`read/`) and the non-volatile write-back cache
//! (`write/`: write groups, destage orders and rates). The write cache's backup (RAPID-Cache)
//! will plug into `write::Backup`.

pub mod read;
pub mod write;
