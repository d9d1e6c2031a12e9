//! Misuse and edge cases of the safe types and of the C ABI (native build).

mod common;

use common::test_message;
use mutp_wirehair::abi::*;
use mutp_wirehair::{ffi, DecodeStatus, Decoder, Encoder, Error, Params, MAX_BLOCK_BYTES, MAX_MESSAGE_BYTES};

#[test]
fn params_limits() {
    assert_eq!(Params::new(0, 1200), Err(Error::InvalidParams));
    assert_eq!(Params::new(1000, 0), Err(Error::InvalidParams));
    assert_eq!(
        Params::new(1000, MAX_BLOCK_BYTES as usize + 1),
        Err(Error::InvalidParams)
    );
    assert_eq!(
        Params::new(MAX_MESSAGE_BYTES as usize + 1, 1 << 16),
        Err(Error::InvalidParams)
    );
    assert_eq!(Params::new(1200, 1200), Err(Error::TooFewBlocks));
    assert_eq!(Params::new(1, 1), Err(Error::TooFewBlocks));
    assert_eq!(Params::new(2, 1).unwrap().block_count(), 2);
    assert_eq!(Params::new(64_000, 1).unwrap().block_count(), 64_000);
    assert_eq!(Params::new(64_001, 1), Err(Error::TooManyBlocks));
    // N = 65537 would wrap to 1 inside wirehair (16-bit block count): rejected before.
    assert_eq!(Params::new(65_537, 1), Err(Error::TooManyBlocks));
    let p = Params::new(1001, 100).unwrap();
    assert_eq!((p.block_count(), p.final_block_bytes()), (11, 1));
    assert_eq!(p.block_len(10), Some(1));
    assert_eq!(p.block_len(11), Some(100));
    assert_eq!(p.block_len(65_536 + 10), None);
    assert_eq!(p.block_len(2 * 65_536 + 10), None);
    assert_eq!(p.block_len(65_536 + 11), Some(100));
    // With a full last block every id is usable.
    let full = Params::new(1100, 100).unwrap();
    assert_eq!(full.block_len(65_536 + 10), Some(100));
}

/// The reason for `Params::is_usable_id`: wirehair's encoder truncates repair block
/// 65536·k + N-1 to the last block's length, and its decoder refuses the short block.
#[test]
fn wirehair_truncates_repair_ids_aliasing_the_last_block() {
    let message = test_message(1001);
    let encoder = Encoder::new(&message, 100).unwrap();
    let decoder = Decoder::new(1001, 100).unwrap();
    let id = 65_536 + 10;
    let mut out = [0u8; 100];
    let mut written = 0u32;
    // Raw calls on the codecs the safe types own (they stay alive for the whole test).
    let (enc, dec) = (encoder.as_raw(), decoder.as_raw());
    let r = unsafe { ffi::wirehair_encode(enc, id, out.as_mut_ptr().cast(), 100, &mut written) };
    assert_eq!((r, written), (ffi::WIREHAIR_SUCCESS, 1));
    let r = unsafe { ffi::wirehair_decode(dec, id, out.as_ptr().cast(), 1) };
    assert_eq!(r, ffi::WIREHAIR_INVALID_INPUT);
    // The safe types reject the id outright.
    assert_eq!(encoder.encode(id, &mut out), Err(Error::BadBlockId));
}

#[test]
fn decoder_misuse() {
    let message = test_message(10_000);
    let encoder = Encoder::new(&message, 1000).unwrap();
    let mut decoder = Decoder::new(10_000, 1000).unwrap();
    assert_eq!(decoder.recover_vec(), Err(Error::NotComplete));
    let b0 = encoder.encode_vec(0).unwrap();
    assert_eq!(decoder.decode(0, &b0[..999]), Err(Error::BadLength));
    assert_eq!(decoder.decode(0, &[0u8; 1001]), Err(Error::BadLength));
    assert_eq!(decoder.decode(0, &b0), Ok(DecodeStatus::NeedMore));
    assert_eq!(decoder.decode(0, &b0), Ok(DecodeStatus::Duplicate));
    assert_eq!(decoder.received(), 1);
    let mut status = DecodeStatus::NeedMore;
    for id in (1..9).chain(20..30) {
        status = decoder.decode(id, &encoder.encode_vec(id).unwrap()).unwrap();
        // Duplicates in between are harmless.
        assert_ne!(
            decoder.decode(id, &encoder.encode_vec(id).unwrap()),
            Err(Error::Internal)
        );
        if status == DecodeStatus::Complete {
            break;
        }
    }
    assert_eq!(status, DecodeStatus::Complete);
    assert_eq!(
        decoder.decode(25, &encoder.encode_vec(25).unwrap()),
        Err(Error::AlreadyComplete)
    );
    let mut small = vec![0u8; 9_999];
    assert_eq!(decoder.recover(&mut small), Err(Error::BadLength));
    assert_eq!(decoder.recover_vec().unwrap(), message);
    assert_eq!(decoder.recover_vec().unwrap(), message, "recover twice");
}

#[test]
fn last_block_may_come_padded() {
    let message = test_message(2_500);
    let encoder = Encoder::new(&message, 1000).unwrap();
    let mut decoder = Decoder::new(2_500, 1000).unwrap();
    let mut last = encoder.encode_vec(2).unwrap();
    assert_eq!(last.len(), 500);
    assert_eq!(decoder.decode(2, &last[..499]), Err(Error::BadLength));
    last.resize(1000, 0xAA); // padding content is ignored
    assert_eq!(decoder.decode(2, &last), Ok(DecodeStatus::NeedMore));
    assert_eq!(
        decoder.decode(1, &encoder.encode_vec(1).unwrap()),
        Ok(DecodeStatus::NeedMore)
    );
    assert_eq!(
        decoder.decode(7, &encoder.encode_vec(7).unwrap()),
        Ok(DecodeStatus::Complete)
    );
    assert_eq!(decoder.recover_vec().unwrap(), message);
}

#[test]
fn encoder_misuse() {
    let message = test_message(10_000);
    let encoder = Encoder::new(&message, 1000).unwrap();
    let mut out = [0u8; 999];
    assert_eq!(encoder.encode(0, &mut out), Err(Error::BadLength));
    assert_eq!(Encoder::new(&message, 10_000).err(), Some(Error::TooFewBlocks));
    assert_eq!(Encoder::new(&[], 10).err(), Some(Error::InvalidParams));
}

#[test]
fn abi_handles_and_errors() {
    let message = test_message(5_000);
    let enc = unsafe { mutp_wh_encoder_create(message.as_ptr(), 5_000, 1000) };
    assert_ne!(enc, 0);
    let dec = mutp_wh_decoder_create(5_000, 1000);
    assert_ne!(dec, 0);
    assert_eq!(mutp_wh_live_codecs(), 2);
    let mut block = vec![0u8; 1000];
    unsafe {
        assert_eq!(mutp_wh_encode(enc, 1, block.as_mut_ptr(), 1000), 1000);
        assert_eq!(mutp_wh_encode(enc, 1, block.as_mut_ptr(), 999), Error::BadLength.code());
        assert_eq!(
            mutp_wh_encode(enc, 1, std::ptr::null_mut(), 1000),
            Error::BadHandle.code()
        );
        assert_eq!(
            mutp_wh_encode(dec, 1, block.as_mut_ptr(), 1000),
            Error::WrongKind.code()
        );
        assert_eq!(mutp_wh_encode(0, 1, block.as_mut_ptr(), 1000), Error::BadHandle.code());
        assert_eq!(
            mutp_wh_encode(enc ^ 0x10000, 1, block.as_mut_ptr(), 1000),
            Error::BadHandle.code()
        );
        assert_eq!(mutp_wh_decode(enc, 1, block.as_ptr(), 1000), Error::WrongKind.code());
        assert_eq!(
            mutp_wh_recover(dec, block.as_mut_ptr(), 1000),
            Error::NotComplete.code()
        );
        assert_eq!(mutp_wh_decode(dec, 1, block.as_ptr(), 1000), 0);
        assert_eq!(mutp_wh_decode(dec, 1, block.as_ptr(), 1000), 2);
        let mut out = vec![0u8; 5_000];
        let mut r = 0;
        for id in 100..110 {
            mutp_wh_encode(enc, id, block.as_mut_ptr(), 1000);
            r = mutp_wh_decode(dec, id, block.as_ptr(), 1000);
            if r == 1 {
                break;
            }
        }
        assert_eq!(r, 1);
        assert_eq!(
            mutp_wh_decode(dec, 200, block.as_ptr(), 1000),
            Error::AlreadyComplete.code()
        );
        assert_eq!(mutp_wh_recover(dec, out.as_mut_ptr(), 4_999), Error::BadLength.code());
        assert_eq!(mutp_wh_recover(dec, out.as_mut_ptr(), 5_000), 5_000);
        assert_eq!(out, message);
    }
    assert_eq!(mutp_wh_codec_free(enc), 0);
    assert_eq!(mutp_wh_codec_free(enc), Error::BadHandle.code(), "double free");
    assert_eq!(
        unsafe { mutp_wh_encode(enc, 1, block.as_mut_ptr(), 1000) },
        Error::BadHandle.code()
    );
    assert_eq!(mutp_wh_codec_free(dec), 0);
    assert_eq!(mutp_wh_live_codecs(), 0);
    // A new codec reuses the slot with a new generation: the old handle stays dead.
    let again = mutp_wh_decoder_create(5_000, 1000);
    assert_ne!(again, dec);
    assert_ne!(again, enc);
    assert_eq!(
        unsafe { mutp_wh_recover(dec, block.as_mut_ptr(), 5_000) },
        Error::BadHandle.code()
    );
    assert_eq!(mutp_wh_codec_free(again), 0);

    assert_eq!(mutp_wh_decoder_create(1000, 1000), 0);
    assert_eq!(mutp_wh_last_error(), Error::TooFewBlocks.code());
    assert_eq!(mutp_wh_decoder_create(1_000_000, 1), 0);
    assert_eq!(mutp_wh_last_error(), Error::TooManyBlocks.code());
    assert_eq!(unsafe { mutp_wh_encoder_create(std::ptr::null(), 5_000, 1000) }, 0);
    assert_eq!(mutp_wh_last_error(), Error::BadHandle.code());
    assert_eq!(Error::from_code(-10), Some(Error::DecoderFailed));
}

#[test]
fn abi_alloc() {
    let p = mutp_wh_alloc(100);
    assert!(!p.is_null());
    assert_eq!(p as usize % 16, 0);
    unsafe { mutp_wh_free_bytes(p, 100) };
    assert!(mutp_wh_alloc(0).is_null());
    unsafe { mutp_wh_free_bytes(std::ptr::null_mut(), 5) };
}

/// Random garbage with random ids never panics; the decoder ends complete (wrong content) or
/// still receiving, never in an internal error.
#[test]
fn garbage_blocks_do_not_break_the_decoder() {
    let mut rng = common::XorShift32(99);
    for round in 0..20 {
        let mut decoder = Decoder::new(20_000, 1000).unwrap();
        for _ in 0..60 {
            let id = if round % 2 == 0 { rng.below(40) } else { rng.next_u32() };
            let mut data = vec![0u8; 1000];
            data.iter_mut().for_each(|b| *b = rng.next_u32() as u8);
            match decoder.decode(id, &data) {
                Ok(DecodeStatus::Complete) => {
                    decoder.recover_vec().unwrap();
                    break;
                }
                Ok(_) | Err(Error::BadBlockId) => {}
                Err(e) => panic!("round {round}: {e}"),
            }
        }
    }
}
