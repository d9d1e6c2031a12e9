//! The wirehair fountain code (Christopher A. Taylor, BSD-3-Clause; C++ bundled by the crates.io
//! crate `wirehair-wrapper`) behind safe Rust types and a small C ABI (module [`abi`], prefix
//! `mutp_wh_`) for the standalone WebAssembly module `wasm/dist/mutp-wirehair.wasm`.
//!
//! Wirehair splits a message of `messageBytes` into N = ceil(messageBytes / blockBytes) blocks
//! (2 ≤ N ≤ 64000). Block ids `0..N` are the message itself (systematic; the last one is
//! `messageBytes - (N-1)·blockBytes` bytes long), ids ≥ N are repair blocks of `blockBytes` each.
//! Any N distinct blocks recover the message with high probability, N+1 or N+2 almost surely.
//!
//! Things the raw C API leaves to the caller, handled here:
//! * the encoder keeps a pointer to the message: [`Encoder::new`] owns a copy that outlives the
//!   codec ([`Encoder::new_borrowed`] leaves that to the caller, as the C ABI does);
//! * N must fit wirehair's limits and `blockBytes·N` must fit memory: checked by [`Params::new`]
//!   (wirehair truncates N to 16 bits internally, so N > 65535 would otherwise corrupt memory);
//! * duplicate block ids are not allowed by `wirehair_decode`: [`Decoder`] drops them;
//! * decode after success and recover before success are misuse: rejected with an [`Error`];
//! * wirehair's encoder compares only the low 16 bits of a block id with N-1 when it decides that a
//!   block is the short last block, so when the last block is short, repair ids
//!   `id ≥ 65536 && id % 65536 == N-1` come out truncated and the decoder cannot use them: such
//!   ids are rejected ([`Params::is_usable_id`]).

#![deny(unsafe_op_in_unsafe_fn)]

// Links wirehair-wrapper's static library `wirehair` (see ffi.rs); none of its Rust items are used.
extern crate wirehair_wrapper;

pub mod abi;
pub mod ffi;

mod buffer;
mod decoder;
mod encoder;
mod heap;

pub use buffer::{alloc_bytes, free_bytes};
pub use decoder::{DecodeStatus, Decoder};
pub use encoder::Encoder;
pub use heap::allocated_bytes;

use std::fmt;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;

/// Smallest block count wirehair accepts (`CAT_WIREHAIR_MIN_N`).
pub const MIN_BLOCKS: u32 = 2;
/// Largest block count wirehair accepts (`CAT_WIREHAIR_MAX_N`).
pub const MAX_BLOCKS: u32 = 64_000;
/// Largest block size accepted here (our limit, not wirehair's: it bounds the codec's memory).
pub const MAX_BLOCK_BYTES: u32 = 1 << 20;
/// Largest message accepted here (our limit: a decoder needs about 2.2× the message in memory, and
/// wasm32 memory is 2 GiB; also keeps every byte count representable as a positive i32).
pub const MAX_MESSAGE_BYTES: u32 = 1 << 28;
/// Alignment of the buffers handed to wirehair and of [`abi::mutp_wh_alloc`].
pub const BUFFER_ALIGN: usize = 16;

/// Errors; the discriminant is the negative code the C ABI returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Error {
    /// Unknown, stale (freed) or zero handle, or a null / out-of-memory-range pointer.
    BadHandle = -1,
    /// Message or block size is 0 or above [`MAX_MESSAGE_BYTES`] / [`MAX_BLOCK_BYTES`].
    InvalidParams = -2,
    /// N = ceil(messageBytes / blockBytes) < [`MIN_BLOCKS`].
    TooFewBlocks = -3,
    /// N > [`MAX_BLOCKS`].
    TooManyBlocks = -4,
    /// Block id that wirehair cannot encode or decode correctly (see [`Params::is_usable_id`]).
    BadBlockId = -5,
    /// Block data of the wrong length, or an output buffer that is too small.
    BadLength = -6,
    /// Encoder operation on a decoder handle or the other way round.
    WrongKind = -7,
    /// Decode after the decoder already reported success.
    AlreadyComplete = -8,
    /// Recover before decode reported success.
    NotComplete = -9,
    /// The decoder gave up (wirehair ran out of extra rows, `Wirehair_ExtraInsufficient`); it
    /// accepts nothing more. Never seen with honest blocks; free it and start over.
    DecoderFailed = -10,
    /// An allocation failed (ours or wirehair's).
    OutOfMemory = -11,
    /// `wirehair_init_` failed.
    InitFailed = -12,
    /// Wirehair returned something the checks here should have made impossible.
    Internal = -13,
    /// Too many live codecs in the ABI's handle table (65535).
    TooManyCodecs = -14,
}

impl Error {
    pub fn code(self) -> i32 {
        self as i32
    }

    pub fn from_code(code: i32) -> Option<Error> {
        use Error::*;
        [
            BadHandle,
            InvalidParams,
            TooFewBlocks,
            TooManyBlocks,
            BadBlockId,
            BadLength,
            WrongKind,
            AlreadyComplete,
            NotComplete,
            DecoderFailed,
            OutOfMemory,
            InitFailed,
            Internal,
            TooManyCodecs,
        ]
        .into_iter()
        .find(|e| e.code() == code)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({})", self, self.code())
    }
}

impl std::error::Error for Error {}

/// Validated code parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    message_bytes: u32,
    block_bytes: u32,
    block_count: u32,
    final_bytes: u32,
}

impl Params {
    pub fn new(message_bytes: usize, block_bytes: usize) -> Result<Params, Error> {
        if message_bytes == 0
            || message_bytes > MAX_MESSAGE_BYTES as usize
            || block_bytes == 0
            || block_bytes > MAX_BLOCK_BYTES as usize
        {
            return Err(Error::InvalidParams);
        }
        let n = message_bytes.div_ceil(block_bytes);
        if n < MIN_BLOCKS as usize {
            return Err(Error::TooFewBlocks);
        }
        if n > MAX_BLOCKS as usize {
            return Err(Error::TooManyBlocks);
        }
        Ok(Params {
            message_bytes: message_bytes as u32,
            block_bytes: block_bytes as u32,
            block_count: n as u32,
            final_bytes: (message_bytes - (n - 1) * block_bytes) as u32,
        })
    }

    pub fn message_bytes(&self) -> u32 {
        self.message_bytes
    }
    pub fn block_bytes(&self) -> u32 {
        self.block_bytes
    }
    /// N, the number of message blocks.
    pub fn block_count(&self) -> u32 {
        self.block_count
    }
    /// Length of block N-1 (the only block that may be short).
    pub fn final_block_bytes(&self) -> u32 {
        self.final_bytes
    }

    /// Whether block `id` round-trips. False only for `id ≥ 65536 && id % 65536 == N-1` when the
    /// last block is short: wirehair's encoder truncates those repair blocks to the last block's
    /// length (it compares `(uint16_t)blockId` with N-1) while its decoder expects full blocks.
    pub fn is_usable_id(&self, id: u32) -> bool {
        !(id >= 0x1_0000 && (id & 0xFFFF) == self.block_count - 1 && self.final_bytes != self.block_bytes)
    }

    /// Length of block `id` as the encoder writes it, or `None` for an unusable id.
    pub fn block_len(&self, id: u32) -> Option<u32> {
        if !self.is_usable_id(id) {
            None
        } else if id == self.block_count - 1 {
            Some(self.final_bytes)
        } else {
            Some(self.block_bytes)
        }
    }
}

static INIT: Once = Once::new();
static INIT_RESULT: AtomicI32 = AtomicI32::new(-1);

/// `wirehair_init_(2)`, once (builds the GF(256) tables). Called by the constructors as needed.
pub fn init() -> Result<(), Error> {
    INIT.call_once(|| {
        // SAFETY: plain C call without pointers.
        let r = unsafe { ffi::wirehair_init_(ffi::WIREHAIR_VERSION) };
        INIT_RESULT.store(r, Ordering::SeqCst);
    });
    if INIT_RESULT.load(Ordering::SeqCst) == ffi::WIREHAIR_SUCCESS {
        Ok(())
    } else {
        Err(Error::InitFailed)
    }
}
