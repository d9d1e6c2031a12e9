//! Cross-check vectors: SHA-256 of encoded blocks for fixed messages and block ids, stored in
//! tests/vectors.json and checked again by the WebAssembly build (wasm/test/wirehair.test.ts).
//! `UPDATE_VECTORS=1 cargo test --test vectors` rewrites the file.

mod common;

use common::{test_message, XorShift32};
use mutp_wirehair::{DecodeStatus, Decoder, Encoder, Params};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// (messageBytes, blockBytes): short and full last blocks, N from 3 to 874.
const CASES: &[(usize, usize)] = &[
    (1_048_576, 1200), // N = 874, last block 976 bytes
    (102_400, 1200),   // N = 86, last block 400 bytes
    (120_000, 1200),   // N = 100, last block full
    (1_000_003, 1200), // N = 834, last block 403 bytes
    (2_401, 1200),     // N = 3, last block 1 byte
    (65_536, 64),      // N = 1024, last block full
];

fn block_ids(n: u32) -> Vec<u32> {
    let mut ids = vec![
        0,
        1,
        n / 2,
        n - 2,
        n - 1,
        n,
        n + 1,
        n + 2,
        2 * n,
        10 * n + 7,
        65_535,
        65_536,
        100_000,
        1_000_000,
        0x7FFF_FFFF,
        0xFFFF_FFFF,
    ];
    ids.sort_unstable();
    ids.dedup();
    ids
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors.json")
}

fn compute() -> Value {
    let cases: Vec<Value> = CASES
        .iter()
        .map(|&(message_bytes, block_bytes)| {
            let message = test_message(message_bytes);
            let encoder = Encoder::new(&message, block_bytes).unwrap();
            let params = *encoder.params();
            let blocks: Vec<Value> = block_ids(params.block_count())
                .into_iter()
                .filter(|&id| params.is_usable_id(id))
                .map(|id| {
                    let block = encoder.encode_vec(id).unwrap();
                    json!({ "id": id, "bytes": block.len(), "sha256": sha256_hex(&block) })
                })
                .collect();
            json!({
                "messageBytes": message_bytes,
                "blockBytes": block_bytes,
                "blockCount": params.block_count(),
                "messageSha256": sha256_hex(&message),
                "blocks": blocks,
            })
        })
        .collect();
    json!({
        "description": "wirehair (wirehair-wrapper 0.1.3) blocks of fixed messages: SHA-256 of each encoded block. Written by `UPDATE_VECTORS=1 cargo test --test vectors` in wasm/wirehair (native build); checked by that test and by wasm/test/wirehair.test.ts (WebAssembly build).",
        "message": "byte i of a message of L bytes = top 8 bits of the (i+1)-th output of xorshift32 (x ^= x << 13; x ^= x >> 17; x ^= x << 5; 32-bit) seeded with 0x9E3779B9 ^ L",
        "cases": cases,
    })
}

#[test]
fn blocks_match_vectors() {
    let computed = compute();
    let path = vectors_path();
    if std::env::var("UPDATE_VECTORS").as_deref() == Ok("1") {
        let text = serde_json::to_string_pretty(&computed).unwrap() + "\n";
        std::fs::write(&path, text).unwrap();
        eprintln!("wrote {}", path.display());
        return;
    }
    let stored: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).expect("tests/vectors.json missing: run UPDATE_VECTORS=1 cargo test"),
    )
    .unwrap();
    let (stored, computed) = (&stored["cases"], &computed["cases"]);
    assert_eq!(
        stored.as_array().unwrap().len(),
        computed.as_array().unwrap().len(),
        "case count"
    );
    for (s, c) in stored.as_array().unwrap().iter().zip(computed.as_array().unwrap()) {
        assert_eq!(
            s, c,
            "case messageBytes={} blockBytes={}",
            c["messageBytes"], c["blockBytes"]
        );
    }
}

/// Systematic blocks are the message itself.
#[test]
fn systematic_blocks_are_the_message() {
    let message = test_message(102_400);
    let encoder = Encoder::new(&message, 1200).unwrap();
    let n = encoder.params().block_count();
    for id in 0..n {
        let block = encoder.encode_vec(id).unwrap();
        let start = id as usize * 1200;
        assert_eq!(block, message[start..(start + 1200).min(message.len())], "block {id}");
    }
}

/// Decodes with seeded random loss and checks the recovered message byte for byte.
fn round_trip(message_bytes: usize, block_bytes: usize, loss: f64, seed: u32) -> u32 {
    let message = test_message(message_bytes);
    let encoder = Encoder::new(&message, block_bytes).unwrap();
    let params = *encoder.params();
    let mut decoder = Decoder::new(message_bytes, block_bytes).unwrap();
    let mut rng = XorShift32(seed | 1);
    let threshold = (loss * u32::MAX as f64) as u32;
    let mut id = 0u32;
    let mut fed = 0u32;
    loop {
        assert!(id < 10 * params.block_count() + 100, "no success after {fed} blocks");
        if rng.next_u32() >= threshold && params.is_usable_id(id) {
            let block = encoder.encode_vec(id).unwrap();
            fed += 1;
            if decoder.decode(id, &block).unwrap() == DecodeStatus::Complete {
                break;
            }
        }
        id += 1;
    }
    assert_eq!(
        decoder.recover_vec().unwrap(),
        message,
        "{message_bytes}/{block_bytes} loss {loss}"
    );
    fed - params.block_count()
}

#[test]
fn round_trips_with_loss() {
    for &(message_bytes, block_bytes) in CASES {
        for (i, loss) in [0.0, 0.1, 0.5].into_iter().enumerate() {
            let overhead = round_trip(message_bytes, block_bytes, loss, 0x1234_5678 + i as u32);
            assert!(
                overhead <= 3,
                "{message_bytes}/{block_bytes} loss {loss}: overhead {overhead}"
            );
        }
    }
}

/// Only repair blocks, starting at a large id.
#[test]
fn recovers_from_repair_blocks_only() {
    let message = test_message(100_000);
    let encoder = Encoder::new(&message, 1200).unwrap();
    let params: Params = *encoder.params();
    let mut decoder = Decoder::new(100_000, 1200).unwrap();
    let mut id = 1_000_000u32;
    while decoder.decode(id, &encoder.encode_vec(id).unwrap()).unwrap() != DecodeStatus::Complete {
        id += 1;
    }
    assert!(decoder.received() <= params.block_count() + 3);
    assert_eq!(decoder.recover_vec().unwrap(), message);
}

#[test]
fn round_trips_at_the_block_count_limits() {
    for &(message_bytes, block_bytes) in &[(2_000, 1000), (1_201, 1200), (64_000 * 16, 16), (64_000 * 16 - 5, 16)] {
        for (i, loss) in [0.0, 0.1].into_iter().enumerate() {
            round_trip(message_bytes, block_bytes, loss, 0x0BAD_CAFE + i as u32);
        }
    }
}
