//! The C ABI of `mutp-wirehair.wasm` (all exports prefixed `mutp_wh_`; byte counts and ids are
//! u32, results i32, negative = [`Error`] code). No call traps on bad input: handles are looked up
//! in a table (stale, freed, zero or forged handles give `-1`), and under wasm32 every pointer
//! range is checked against the current memory size.
//!
//! | export | returns |
//! |---|---|
//! | `mutp_wh_abi_version() -> u32` | [`ABI_VERSION`] |
//! | `mutp_wh_init() -> i32` | 0, or `-12` (optional: the constructors initialise on demand) |
//! | `mutp_wh_alloc(n) -> ptr` | `n` bytes, 16-aligned; 0 if `n == 0` or out of memory |
//! | `mutp_wh_free_bytes(ptr, n)` | frees `mutp_wh_alloc(n)` (same `n`!); null is ignored |
//! | `mutp_wh_encoder_create(msg, msg_bytes, block_bytes) -> handle` | 0 on error, see `mutp_wh_last_error`; keeps `msg` (below) |
//! | `mutp_wh_encode(enc, block_id, out, out_bytes) -> i32` | bytes written (block length), or < 0 |
//! | `mutp_wh_decoder_create(msg_bytes, block_bytes) -> handle` | 0 on error, see `mutp_wh_last_error` |
//! | `mutp_wh_decode(dec, block_id, data, data_bytes) -> i32` | 0 need more, 1 complete (recover now), 2 duplicate id (ignored), < 0 error |
//! | `mutp_wh_recover(dec, out, out_bytes) -> i32` | msg_bytes written to `out`, or < 0 |
//! | `mutp_wh_codec_free(handle) -> i32` | 0, or `-1` for an unknown / already freed handle |
//! | `mutp_wh_last_error() -> i32` | code of the last failed `*_create` (0 if none failed yet) |
//! | `mutp_wh_allocated_bytes() -> u32` | heap bytes in use ([`crate::allocated_bytes`]) |
//! | `mutp_wh_live_codecs() -> u32` | codecs created and not yet freed |
//!
//! `mutp_wh_encoder_create` does not copy the message: wirehair keeps the pointer, so the buffer
//! (typically from `mutp_wh_alloc`) must stay allocated and unchanged until `mutp_wh_codec_free`
//! of that encoder; free it after the encoder. Every other pointer is only used during the call.
//! Handles are `generation << 16 | (slot + 1)` with a 15-bit generation, so they are positive i32
//! and a freed handle stays invalid until its slot was reused 32767 times; the TypeScript layer
//! owns lifetimes and never uses a handle after freeing it, the table is a safety net.

use crate::{alloc_bytes, free_bytes, DecodeStatus, Decoder, Encoder, Error, Params};

use std::cell::{Cell, RefCell};

/// Bumped on any incompatible change of the exports; the loader checks it.
pub const ABI_VERSION: u32 = 1;

enum Codec {
    Encoder(Encoder),
    Decoder(Decoder),
}

struct Slot {
    generation: u32,
    codec: Option<Codec>,
}

struct Table {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: u32,
}

const MAX_SLOTS: usize = 0xFFFF;
const MAX_GENERATION: u32 = 0x7FFF;

impl Table {
    fn insert(&mut self, codec: Codec) -> Result<u32, Error> {
        let index = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                if self.slots.len() >= MAX_SLOTS {
                    return Err(Error::TooManyCodecs);
                }
                self.slots.try_reserve(1).map_err(|_| Error::OutOfMemory)?;
                // Reserve room in `free` too, so that removing never has to allocate.
                self.free
                    .try_reserve(self.slots.len() + 1)
                    .map_err(|_| Error::OutOfMemory)?;
                self.slots.push(Slot {
                    generation: 1,
                    codec: None,
                });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.codec = Some(codec);
        self.live += 1;
        Ok((slot.generation << 16) | (index as u32 + 1))
    }

    fn slot(&mut self, handle: u32) -> Option<&mut Slot> {
        let index = (handle & 0xFFFF) as usize;
        if index == 0 {
            return None;
        }
        let slot = self.slots.get_mut(index - 1)?;
        (slot.generation == handle >> 16 && slot.codec.is_some()).then_some(slot)
    }

    fn get(&mut self, handle: u32) -> Option<&mut Codec> {
        self.slot(handle)?.codec.as_mut()
    }

    fn remove(&mut self, handle: u32) -> Option<Codec> {
        let slot = self.slot(handle)?;
        let codec = slot.codec.take();
        slot.generation = if slot.generation >= MAX_GENERATION {
            1
        } else {
            slot.generation + 1
        };
        self.free.push((handle & 0xFFFF) - 1);
        self.live -= 1;
        codec
    }
}

thread_local! {
    // Single-threaded under wasm; natively each thread has its own table.
    static TABLE: RefCell<Table> = const { RefCell::new(Table { slots: Vec::new(), free: Vec::new(), live: 0 }) };
    static LAST_ERROR: Cell<i32> = const { Cell::new(0) };
}

fn with_codec<R>(handle: u32, f: impl FnOnce(&mut Codec) -> Result<R, Error>) -> Result<R, Error> {
    TABLE.with(|t| match t.borrow_mut().get(handle) {
        Some(codec) => f(codec),
        None => Err(Error::BadHandle),
    })
}

fn register(created: Result<Codec, Error>) -> u32 {
    match created.and_then(|c| TABLE.with(|t| t.borrow_mut().insert(c))) {
        Ok(handle) => handle,
        Err(e) => {
            LAST_ERROR.with(|l| l.set(e.code()));
            0
        }
    }
}

fn code(r: Result<usize, Error>) -> i32 {
    match r {
        Ok(n) => n as i32, // every length is ≤ MAX_MESSAGE_BYTES < 2^31
        Err(e) => e.code(),
    }
}

/// Whether `[p, p + n)` is a non-null range inside the module's memory (wasm32; natively only
/// the null check is possible).
fn range_ok(p: *const u8, n: u32) -> bool {
    if p.is_null() {
        return false;
    }
    #[cfg(target_arch = "wasm32")]
    {
        let memory_bytes = core::arch::wasm32::memory_size(0) as u64 * 65536;
        (p as usize as u64) + n as u64 <= memory_bytes
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = n;
        true
    }
}

#[no_mangle]
pub extern "C" fn mutp_wh_abi_version() -> u32 {
    ABI_VERSION
}

#[no_mangle]
pub extern "C" fn mutp_wh_init() -> i32 {
    match crate::init() {
        Ok(()) => 0,
        Err(e) => e.code(),
    }
}

#[no_mangle]
pub extern "C" fn mutp_wh_alloc(n: u32) -> *mut u8 {
    alloc_bytes(n as usize)
}

/// # Safety
/// `p` must come from `mutp_wh_alloc(n)` with the same `n`, and not be freed already.
#[no_mangle]
pub unsafe extern "C" fn mutp_wh_free_bytes(p: *mut u8, n: u32) {
    // SAFETY: guaranteed by the caller.
    unsafe { free_bytes(p, n as usize) }
}

/// # Safety
/// `msg` must point to `msg_bytes` readable bytes (checked against memory bounds under wasm32)
/// that stay allocated and unchanged until the encoder is freed: wirehair keeps the pointer.
#[no_mangle]
pub unsafe extern "C" fn mutp_wh_encoder_create(msg: *const u8, msg_bytes: u32, block_bytes: u32) -> u32 {
    register((|| {
        Params::new(msg_bytes as usize, block_bytes as usize)?;
        if !range_ok(msg, msg_bytes) {
            return Err(Error::BadHandle);
        }
        // SAFETY: range checked above; lifetime guaranteed by the caller.
        unsafe { Encoder::new_borrowed(msg, msg_bytes as usize, block_bytes as usize) }.map(Codec::Encoder)
    })())
}

/// # Safety
/// `out` must point to `out_bytes` writable bytes (checked against memory bounds under wasm32).
#[no_mangle]
pub unsafe extern "C" fn mutp_wh_encode(enc: u32, block_id: u32, out: *mut u8, out_bytes: u32) -> i32 {
    code(with_codec(enc, |c| match c {
        Codec::Encoder(e) => {
            if !range_ok(out, out_bytes) {
                return Err(Error::BadHandle);
            }
            // SAFETY: range checked above.
            let out = unsafe { std::slice::from_raw_parts_mut(out, out_bytes as usize) };
            e.encode(block_id, out)
        }
        Codec::Decoder(_) => Err(Error::WrongKind),
    }))
}

#[no_mangle]
pub extern "C" fn mutp_wh_decoder_create(msg_bytes: u32, block_bytes: u32) -> u32 {
    register(Decoder::new(msg_bytes as usize, block_bytes as usize).map(Codec::Decoder))
}

/// # Safety
/// `data` must point to `data_bytes` readable bytes (checked against memory bounds under wasm32).
#[no_mangle]
pub unsafe extern "C" fn mutp_wh_decode(dec: u32, block_id: u32, data: *const u8, data_bytes: u32) -> i32 {
    match with_codec(dec, |c| match c {
        Codec::Decoder(d) => {
            if !range_ok(data, data_bytes) {
                return Err(Error::BadHandle);
            }
            // SAFETY: range checked above.
            let data = unsafe { std::slice::from_raw_parts(data, data_bytes as usize) };
            d.decode(block_id, data)
        }
        Codec::Encoder(_) => Err(Error::WrongKind),
    }) {
        Ok(status) => status as i32,
        Err(e) => e.code(),
    }
}

/// # Safety
/// `out` must point to `out_bytes` writable bytes (checked against memory bounds under wasm32).
#[no_mangle]
pub unsafe extern "C" fn mutp_wh_recover(dec: u32, out: *mut u8, out_bytes: u32) -> i32 {
    code(with_codec(dec, |c| match c {
        Codec::Decoder(d) => {
            if !range_ok(out, out_bytes) {
                return Err(Error::BadHandle);
            }
            // SAFETY: range checked above.
            let out = unsafe { std::slice::from_raw_parts_mut(out, out_bytes as usize) };
            d.recover(out)
        }
        Codec::Encoder(_) => Err(Error::WrongKind),
    }))
}

#[no_mangle]
pub extern "C" fn mutp_wh_codec_free(handle: u32) -> i32 {
    // Taken out of the table first, dropped (wirehair_free) after the borrow ends.
    match TABLE.with(|t| t.borrow_mut().remove(handle)) {
        Some(codec) => {
            drop(codec);
            0
        }
        None => Error::BadHandle.code(),
    }
}

#[no_mangle]
pub extern "C" fn mutp_wh_last_error() -> i32 {
    LAST_ERROR.with(|l| l.get())
}

#[no_mangle]
pub extern "C" fn mutp_wh_allocated_bytes() -> u32 {
    crate::allocated_bytes().min(u32::MAX as usize) as u32
}

#[no_mangle]
pub extern "C" fn mutp_wh_live_codecs() -> u32 {
    TABLE.with(|t| t.borrow().live)
}

// Keeps DecodeStatus' discriminants in sync with the table above.
const _: () = assert!(DecodeStatus::NeedMore as i32 == 0);
const _: () = assert!(DecodeStatus::Complete as i32 == 1);
const _: () = assert!(DecodeStatus::Duplicate as i32 == 2);
