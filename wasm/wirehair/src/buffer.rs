//! Aligned heap buffers: the ones handed to wirehair and the C ABI's `mutp_wh_alloc`.

use crate::{Error, BUFFER_ALIGN};
use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// Allocates `n > 0` bytes aligned to [`BUFFER_ALIGN`]; null on failure. Free with [`free_bytes`].
pub fn alloc_bytes(n: usize) -> *mut u8 {
    match Layout::from_size_align(n, BUFFER_ALIGN) {
        // SAFETY: the layout has a non-zero size.
        Ok(layout) if n > 0 => unsafe { alloc::alloc(layout) },
        _ => std::ptr::null_mut(),
    }
}

/// Frees what [`alloc_bytes`] returned.
///
/// # Safety
/// `p` must come from `alloc_bytes(n)` with the same `n` and not be freed yet (null is ignored).
pub unsafe fn free_bytes(p: *mut u8, n: usize) {
    if p.is_null() || n == 0 {
        return;
    }
    if let Ok(layout) = Layout::from_size_align(n, BUFFER_ALIGN) {
        // SAFETY: guaranteed by the caller.
        unsafe { alloc::dealloc(p, layout) }
    }
}

/// An owned, aligned heap buffer (allocation failure is an error, not an abort).
pub(crate) struct AlignedBuf {
    pub(crate) ptr: NonNull<u8>,
    pub(crate) len: usize,
}

impl AlignedBuf {
    pub(crate) fn copy_of(data: &[u8]) -> Result<AlignedBuf, Error> {
        let ptr = NonNull::new(alloc_bytes(data.len())).ok_or(Error::OutOfMemory)?;
        // SAFETY: fresh allocation of data.len() bytes, not overlapping `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr.as_ptr(), data.len()) };
        Ok(AlignedBuf { ptr, len: data.len() })
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by alloc_bytes(self.len).
        unsafe { free_bytes(self.ptr.as_ptr(), self.len) }
    }
}
