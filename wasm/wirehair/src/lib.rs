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

use core::ffi::c_void;
use std::alloc::{self, Layout};
use std::collections::BTreeSet;
use std::fmt;
use std::ptr::NonNull;
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
struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

impl AlignedBuf {
    fn copy_of(data: &[u8]) -> Result<AlignedBuf, Error> {
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

/// Bytes currently allocated on the heap, as the allocator reports them (`uordblks`: in-use
/// chunks including their headers). Rust's allocator and wirehair's `calloc`/`new` both end in the
/// same malloc (dlmalloc under emscripten, glibc natively), so this sees both; a counting Rust
/// global allocator would miss the C++ side. Meant for leak checks: compare before and after.
/// Natively it covers the whole process (all threads); 0 on platforms without `mallinfo`.
pub fn allocated_bytes() -> usize {
    heap::allocated_bytes()
}

#[cfg(target_os = "emscripten")]
mod heap {
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
mod heap {
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
mod heap {
    pub fn allocated_bytes() -> usize {
        0
    }
}
