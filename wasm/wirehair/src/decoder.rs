//! The wirehair decoder: takes blocks (duplicates dropped, misuse rejected) until the message
//! can be recovered.

use crate::{ffi, init, Error, Params};
use core::ffi::c_void;
use std::collections::BTreeSet;
use std::ptr::NonNull;

/// What [`Decoder::decode`] made of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum DecodeStatus {
    /// Stored; more blocks are needed.
    NeedMore = 0,
    /// Stored and the message can now be recovered.
    Complete = 1,
    /// A block id that was already given: ignored (wirehair forbids duplicates).
    Duplicate = 2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Receiving,
    Complete,
    Failed,
}

/// Wirehair decoder.
pub struct Decoder {
    codec: NonNull<ffi::WirehairCodecT>,
    params: Params,
    state: State,
    /// Bitmap of the systematic ids (< N) already given.
    seen_systematic: Vec<u64>,
    /// Repair ids (≥ N) already given.
    seen_repair: BTreeSet<u32>,
    received: u32,
}

// SAFETY: see Encoder.
unsafe impl Send for Decoder {}

impl Decoder {
    pub fn new(message_bytes: usize, block_bytes: usize) -> Result<Decoder, Error> {
        let params = Params::new(message_bytes, block_bytes)?;
        init()?;
        let words = (params.block_count as usize).div_ceil(64);
        let mut seen_systematic = Vec::new();
        seen_systematic
            .try_reserve_exact(words)
            .map_err(|_| Error::OutOfMemory)?;
        seen_systematic.resize(words, 0);
        // SAFETY: plain call; parameters validated.
        let codec = unsafe {
            ffi::wirehair_decoder_create(std::ptr::null_mut(), params.message_bytes as u64, params.block_bytes)
        };
        let codec = NonNull::new(codec).ok_or(Error::OutOfMemory)?;
        Ok(Decoder {
            codec,
            params,
            state: State::Receiving,
            seen_systematic,
            seen_repair: BTreeSet::new(),
            received: 0,
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

    /// Distinct blocks accepted so far.
    pub fn received(&self) -> u32 {
        self.received
    }

    pub fn is_complete(&self) -> bool {
        self.state == State::Complete
    }

    pub fn has_failed(&self) -> bool {
        self.state == State::Failed
    }

    fn seen(&self, id: u32) -> bool {
        if id < self.params.block_count {
            self.seen_systematic[(id / 64) as usize] & (1u64 << (id % 64)) != 0
        } else {
            self.seen_repair.contains(&id)
        }
    }

    fn mark_seen(&mut self, id: u32) {
        if id < self.params.block_count {
            self.seen_systematic[(id / 64) as usize] |= 1u64 << (id % 64);
        } else {
            self.seen_repair.insert(id);
        }
        self.received += 1;
    }

    /// Feeds block `id`. `data` must be exactly the block's length; the last block (id N-1) may
    /// also come zero-padded up to `blockBytes` (the padding is ignored).
    pub fn decode(&mut self, id: u32, data: &[u8]) -> Result<DecodeStatus, Error> {
        match self.state {
            State::Complete => return Err(Error::AlreadyComplete),
            State::Failed => return Err(Error::DecoderFailed),
            State::Receiving => {}
        }
        let expected = self.params.block_len(id).ok_or(Error::BadBlockId)? as usize;
        let len_ok = if id == self.params.block_count - 1 {
            data.len() >= expected && data.len() <= self.params.block_bytes as usize
        } else {
            data.len() == expected
        };
        if !len_ok {
            return Err(Error::BadLength);
        }
        if self.seen(id) {
            return Ok(DecodeStatus::Duplicate);
        }
        // SAFETY: live codec; `data` is readable for data.len() bytes, which wirehair checks
        // against the block size before reading.
        let r = unsafe {
            ffi::wirehair_decode(
                self.codec.as_ptr(),
                id,
                data.as_ptr() as *const c_void,
                data.len() as u32,
            )
        };
        match r {
            ffi::WIREHAIR_NEED_MORE => {
                self.mark_seen(id);
                Ok(DecodeStatus::NeedMore)
            }
            ffi::WIREHAIR_SUCCESS => {
                self.mark_seen(id);
                self.state = State::Complete;
                Ok(DecodeStatus::Complete)
            }
            ffi::WIREHAIR_OOM => {
                self.state = State::Failed;
                Err(Error::OutOfMemory)
            }
            ffi::WIREHAIR_EXTRA_INSUFFICIENT => {
                self.state = State::Failed;
                Err(Error::DecoderFailed)
            }
            _ => {
                self.state = State::Failed;
                Err(Error::Internal)
            }
        }
    }

    /// Writes the message to `out[..messageBytes]` (after decode reported
    /// [`DecodeStatus::Complete`]; may be called again). Returns messageBytes.
    pub fn recover(&self, out: &mut [u8]) -> Result<usize, Error> {
        match self.state {
            State::Receiving => return Err(Error::NotComplete),
            State::Failed => return Err(Error::DecoderFailed),
            State::Complete => {}
        }
        let n = self.params.message_bytes as usize;
        if out.len() < n {
            return Err(Error::BadLength);
        }
        // SAFETY: live, complete codec; `out` has messageBytes writable bytes.
        let r = unsafe { ffi::wirehair_recover(self.codec.as_ptr(), out.as_mut_ptr() as *mut c_void, n as u64) };
        if r != ffi::WIREHAIR_SUCCESS {
            return Err(Error::Internal);
        }
        Ok(n)
    }

    pub fn recover_vec(&self) -> Result<Vec<u8>, Error> {
        let mut out = vec![0u8; self.params.message_bytes as usize];
        self.recover(&mut out)?;
        Ok(out)
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        // SAFETY: codec from wirehair_decoder_create, freed once.
        unsafe { ffi::wirehair_free(self.codec.as_ptr()) }
    }
}
