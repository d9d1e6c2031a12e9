//! The wirehair C API, declared exactly as in `wirehair.h` (WIREHAIR_VERSION 2) shipped inside
//! wirehair-wrapper 0.1.3. That crate's own Rust declarations use a `u64` block id where the header
//! has `unsigned` and a `c_void` return for `wirehair_free`; on wasm32 a signature mismatch makes
//! the linker replace the call with a trap, so they are not used. Its static library `wirehair`
//! (compiled by its build.rs) provides the symbols.

// The full list of result codes is kept for reference.
#![allow(dead_code)]

use core::ffi::{c_int, c_uint, c_void};

/// `struct WirehairCodec_t` (opaque); `WirehairCodec` is a pointer to it.
#[repr(C)]
pub struct WirehairCodecT {
    _private: [u8; 0],
}

/// `WirehairCodec`
pub type WirehairCodec = *mut WirehairCodecT;

/// `WirehairResult`: a C enum padded to 32 bits (`WirehairResult_Padding = 0x7fffffff`). Kept as a
/// plain `c_int` so that no value the C side returns can be an invalid Rust enum.
pub type WirehairResult = c_int;

pub const WIREHAIR_VERSION: c_int = 2;

pub const WIREHAIR_SUCCESS: WirehairResult = 0;
pub const WIREHAIR_NEED_MORE: WirehairResult = 1;
pub const WIREHAIR_INVALID_INPUT: WirehairResult = 2;
pub const WIREHAIR_BAD_DENSE_SEED: WirehairResult = 3;
pub const WIREHAIR_BAD_PEEL_SEED: WirehairResult = 4;
pub const WIREHAIR_BAD_INPUT_SMALL_N: WirehairResult = 5;
pub const WIREHAIR_BAD_INPUT_LARGE_N: WirehairResult = 6;
pub const WIREHAIR_EXTRA_INSUFFICIENT: WirehairResult = 7;
pub const WIREHAIR_ERROR: WirehairResult = 8;
pub const WIREHAIR_OOM: WirehairResult = 9;
pub const WIREHAIR_UNSUPPORTED_PLATFORM: WirehairResult = 10;

extern "C" {
    /// `WirehairResult wirehair_init_(int expected_version);`
    pub fn wirehair_init_(expected_version: c_int) -> WirehairResult;

    /// `WirehairCodec wirehair_encoder_create(WirehairCodec reuseOpt, const void *message,
    ///  uint64_t messageBytes, uint32_t blockBytes);` — keeps `message`, does not copy it.
    pub fn wirehair_encoder_create(
        reuse_opt: WirehairCodec,
        message: *const c_void,
        message_bytes: u64,
        block_bytes: u32,
    ) -> WirehairCodec;

    /// `WirehairResult wirehair_encode(WirehairCodec codec, unsigned blockId, void *blockDataOut,
    ///  uint32_t outBytes, uint32_t *dataBytesOut);`
    pub fn wirehair_encode(
        codec: WirehairCodec,
        block_id: c_uint,
        block_data_out: *mut c_void,
        out_bytes: u32,
        data_bytes_out: *mut u32,
    ) -> WirehairResult;

    /// `WirehairCodec wirehair_decoder_create(WirehairCodec reuseOpt, uint64_t messageBytes,
    ///  uint32_t blockBytes);`
    pub fn wirehair_decoder_create(reuse_opt: WirehairCodec, message_bytes: u64, block_bytes: u32) -> WirehairCodec;

    /// `WirehairResult wirehair_decode(WirehairCodec codec, unsigned blockId, const void *blockData,
    ///  uint32_t dataBytes);`
    pub fn wirehair_decode(
        codec: WirehairCodec,
        block_id: c_uint,
        block_data: *const c_void,
        data_bytes: u32,
    ) -> WirehairResult;

    /// `WirehairResult wirehair_recover(WirehairCodec codec, void *messageOut, uint64_t messageBytes);`
    pub fn wirehair_recover(codec: WirehairCodec, message_out: *mut c_void, message_bytes: u64) -> WirehairResult;

    /// `void wirehair_free(WirehairCodec codec);`
    pub fn wirehair_free(codec: WirehairCodec);
}
