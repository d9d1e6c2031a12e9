//! The wirehair encoder: the message (a copy, or borrowed) and the codec that writes its blocks.

use crate::buffer::AlignedBuf;
use crate::{ffi, init, Error, Params};
use core::ffi::c_void;
use std::ptr::NonNull;

/// Wirehair encoder.
pub struct Encoder {
    codec: NonNull<ffi::WirehairCodecT>,
    params: Params,
    // Wirehair reads the message through the pointer it kept: an owned copy (None when the caller
    // keeps the message alive, see `new_borrowed`) must outlive `codec`, which Drop frees before
    // the fields are dropped.
    _message: Option<AlignedBuf>,
}

// SAFETY: the codec is plain heap memory without thread affinity; `&Encoder` only reads it but
// is not declared Sync to stay conservative.
unsafe impl Send for Encoder {}

impl Encoder {
    /// Copies `message` and runs wirehair's encoder set-up (solves for the recovery blocks).
    pub fn new(message: &[u8], block_bytes: usize) -> Result<Encoder, Error> {
        Params::new(message.len(), block_bytes)?;
        let copy = AlignedBuf::copy_of(message)?;
        // SAFETY: `copy` is moved into the encoder, so it lives as long as the codec.
        let mut encoder = unsafe { Self::new_borrowed(copy.ptr.as_ptr(), copy.len, block_bytes)? };
        encoder._message = Some(copy);
        Ok(encoder)
    }

    /// Like [`Encoder::new`] without the copy: wirehair keeps the pointer.
    ///
    /// # Safety
    /// `message` must point to `message_bytes` readable bytes that stay valid and unchanged until
    /// the encoder is dropped.
    pub unsafe fn new_borrowed(message: *const u8, message_bytes: usize, block_bytes: usize) -> Result<Encoder, Error> {
        let params = Params::new(message_bytes, block_bytes)?;
        if message.is_null() {
            return Err(Error::BadHandle);
        }
        init()?;
        // SAFETY: guaranteed by the caller; parameters validated.
        let codec = unsafe {
            ffi::wirehair_encoder_create(
                std::ptr::null_mut(),
                message as *const c_void,
                params.message_bytes as u64,
                params.block_bytes,
            )
        };
        // With valid parameters the only failure left is an allocation.
        let codec = NonNull::new(codec).ok_or(Error::OutOfMemory)?;
        Ok(Encoder {
            codec,
            params,
            _message: None,
        })
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The wirehair codec (for tests that call [`ffi`] directly); owned by `self`.
    #[doc(hidden)]
    pub fn as_raw(&self) -> ffi::WirehairCodec {
        self.codec.as_ptr()
    }

    /// Writes block `id` to the front of `out` and returns its length ([`Params::block_len`]).
    pub fn encode(&self, id: u32, out: &mut [u8]) -> Result<usize, Error> {
        let len = self.params.block_len(id).ok_or(Error::BadBlockId)?;
        if out.len() < len as usize {
            return Err(Error::BadLength);
        }
        let mut written = 0u32;
        // SAFETY: live codec; `out` has at least `len` writable bytes and wirehair writes at
        // most `outBytes`.
        let r = unsafe {
            ffi::wirehair_encode(
                self.codec.as_ptr(),
                id,
                out.as_mut_ptr() as *mut c_void,
                len,
                &mut written,
            )
        };
        if r != ffi::WIREHAIR_SUCCESS || written != len {
            return Err(Error::Internal);
        }
        Ok(len as usize)
    }

    /// Block `id` as a new vector.
    pub fn encode_vec(&self, id: u32) -> Result<Vec<u8>, Error> {
        let mut out = vec![0u8; self.params.block_len(id).ok_or(Error::BadBlockId)? as usize];
        self.encode(id, &mut out)?;
        Ok(out)
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        // SAFETY: codec from wirehair_encoder_create, freed once.
        unsafe { ffi::wirehair_free(self.codec.as_ptr()) }
    }
}
