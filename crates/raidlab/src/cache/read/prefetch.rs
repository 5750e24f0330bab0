//! A software prefetch: ask the CPU to start loading a cache line without waiting for it.
//!
//! Why not a plain load: a load that misses the CPU
//! caches must complete before the instructions after it retire, so a run of them still
//! stalls the core; a prefetch is a hint that retires at once. On other architectures it does
//! nothing.

/// Start loading the cache line holding `*r` into the CPU caches. Changes nothing and never
/// waits; `r` must be a valid reference (it always is).
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = (r as *const T).cast::<i8>();
        // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has (it is part of the
        // architecture's baseline). It is a hint: it reads no memory the program can observe,
        // writes none and cannot fault; `p` points into a live reference anyway.
        #[allow(unsafe_code)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
