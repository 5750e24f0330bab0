//! The controller's caches: the read cache (`read/`) and the non-volatile write-back cache
//! (`write/`: write groups, destage orders and rates), and the write cache's backups
//! (`backup/`: dual NVRAM, RAPID-Cache) behind `write::Backup`, and the offline bounds
//! (`offline/`: OPT, the cost-aware optimum and the cost-aware Belady heuristic).

pub mod backup;
pub mod offline;
pub mod read;
pub mod write;
