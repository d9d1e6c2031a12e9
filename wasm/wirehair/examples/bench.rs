//! Native wirehair throughput: `cargo run --release --example bench` (build.sh builds it to
//! target/release/examples/bench). One JSON line per row.
//!
//! A sender emits block ids 0, 1, 2, … and each is lost with probability `loss` (seeded), until
//! the receiver completes. encode = encoder set-up + every block sent (lost ones too);
//! decode = decoder set-up + every block received + recover. MBps = objectBytes / time / 1e6,
//! best of 3 runs, each repeating the operation for at least 0.2 s.
//!
//! glibc is told to keep freed memory (no mmap for large blocks, no trimming): otherwise whether a
//! codec's buffers come back as fresh zero pages (page faults) or as recycled heap depends on its
//! dynamic thresholds, and the same run measured 1.9 or 10 GB/s depending on the order of rows.
//! The WebAssembly heap (dlmalloc in linear memory) behaves like this anyway.

use mutp_wirehair::{DecodeStatus, Decoder, Encoder};
use std::hint::black_box;
use std::time::{Duration, Instant};

const PACKET_BYTES: usize = 1200;

struct XorShift32(u32);

impl XorShift32 {
    fn next_u32(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }
}

fn message(len: usize) -> Vec<u8> {
    let mut rng = XorShift32(0x9E37_79B9 ^ len as u32);
    (0..len).map(|_| (rng.next_u32() >> 24) as u8).collect()
}

/// Seconds per operation: best of 3 runs of ≥ 0.2 s each.
fn measure(mut op: impl FnMut()) -> f64 {
    op(); // warm-up
    (0..3)
        .map(|_| {
            let start = Instant::now();
            let mut reps = 0u32;
            while start.elapsed() < Duration::from_millis(200) {
                op();
                reps += 1;
            }
            start.elapsed().as_secs_f64() / reps as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn row(op: &str, object_bytes: usize, loss: f64, seconds: f64) {
    println!(
        "{{\"codec\":\"wirehair\",\"op\":\"{op}\",\"env\":\"native\",\"variant\":\"native\",\"g\":null,\"packetBytes\":{PACKET_BYTES},\"objectBytes\":{object_bytes},\"loss\":{loss},\"MBps\":{:.1}}}",
        object_bytes as f64 / seconds / 1e6
    );
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_memory() {
    extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    const M_TRIM_THRESHOLD: i32 = -1;
    const M_MMAP_THRESHOLD: i32 = -3;
    // SAFETY: plain libc calls before any other thread exists.
    unsafe {
        mallopt(M_MMAP_THRESHOLD, 1 << 30);
        mallopt(M_TRIM_THRESHOLD, i32::MAX);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_memory() {}

fn main() {
    keep_freed_memory();
    for object_bytes in [1 << 20, 2 << 20] {
        let msg = message(object_bytes);
        for loss in [0.0, 0.1] {
            // Which ids arrive, and how many the sender had to emit.
            let encoder = Encoder::new(&msg, PACKET_BYTES).unwrap();
            let mut decoder = Decoder::new(object_bytes, PACKET_BYTES).unwrap();
            let mut rng = XorShift32(0xC0FF_EE11);
            let threshold = (loss * u32::MAX as f64) as u32;
            let mut received: Vec<(u32, Vec<u8>)> = Vec::new();
            let mut sent = 0u32;
            loop {
                let id = sent;
                sent += 1;
                if rng.next_u32() < threshold {
                    continue;
                }
                let block = encoder.encode_vec(id).unwrap();
                let status = decoder.decode(id, &block).unwrap();
                received.push((id, block));
                if status == DecodeStatus::Complete {
                    break;
                }
            }
            assert_eq!(decoder.recover_vec().unwrap(), msg);
            drop((encoder, decoder));

            let mut out = vec![0u8; PACKET_BYTES];
            let encode = measure(|| {
                let encoder = Encoder::new(&msg, PACKET_BYTES).unwrap();
                for id in 0..sent {
                    encoder.encode(id, &mut out).unwrap();
                }
                black_box(&out);
            });
            let mut recovered = vec![0u8; object_bytes];
            let decode = measure(|| {
                let mut decoder = Decoder::new(object_bytes, PACKET_BYTES).unwrap();
                for (id, block) in &received {
                    decoder.decode(*id, block).unwrap();
                }
                decoder.recover(&mut recovered).unwrap();
                black_box(&recovered);
            });
            row("encode", object_bytes, loss, encode);
            row("decode", object_bytes, loss, decode);
        }
    }
}
