//! Heap bytes in use, as the platform's malloc reports them (leak checks).

/// Bytes currently allocated on the heap, as the allocator reports them (`uordblks`: in-use
/// chunks including their headers). Rust's allocator and wirehair's `calloc`/`new` both end in the
/// same malloc (dlmalloc under emscripten, glibc natively), so this sees both; a counting Rust
/// global allocator would miss the C++ side. Meant for leak checks: compare before and after.
/// Natively it covers the whole process (all threads); 0 on platforms without `mallinfo`.
pub fn allocated_bytes() -> usize {
    platform::allocated_bytes()
}

#[cfg(target_os = "emscripten")]
mod platform {
    use core::ffi::c_int;

    /// emscripten's `struct mallinfo` (system/include/compat/malloc.h: ten `int`s).
    #[repr(C)]
    struct Mallinfo {
        arena: c_int,
        ordblks: c_int,
        smblks: c_int,
        hblks: c_int,
        hblkhd: c_int,
        usmblks: c_int,
        fsmblks: c_int,
        uordblks: c_int,
        fordblks: c_int,
        keepcost: c_int,
    }

    extern "C" {
        fn mallinfo() -> Mallinfo;
    }

    pub fn allocated_bytes() -> usize {
        // SAFETY: plain C call (walks dlmalloc's chunks; O(heap chunks)).
        unsafe { mallinfo().uordblks as u32 as usize }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod platform {
    /// glibc's `struct mallinfo2` (ten `size_t`s).
    #[repr(C)]
    struct Mallinfo2 {
        arena: usize,
        ordblks: usize,
        smblks: usize,
        hblks: usize,
        hblkhd: usize,
        usmblks: usize,
        fsmblks: usize,
        uordblks: usize,
        fordblks: usize,
        keepcost: usize,
    }

    extern "C" {
        fn mallinfo2() -> Mallinfo2;
    }

    pub fn allocated_bytes() -> usize {
        // SAFETY: plain C call. uordblks excludes mmapped chunks (large blocks), hblkhd has them.
        let m = unsafe { mallinfo2() };
        m.uordblks + m.hblkhd
    }
}

#[cfg(not(any(target_os = "emscripten", all(target_os = "linux", target_env = "gnu"))))]
mod platform {
    pub fn allocated_bytes() -> usize {
        0
    }
}
