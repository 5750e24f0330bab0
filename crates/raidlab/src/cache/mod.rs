//! The controller's caches. Only the read cache exists so far; the write-back cache and its
//! backup (STOW, WOW, RAPID-Cache) will live beside it in `write/` and `backup/`.

pub mod read;
