//! Shared test helpers. The TypeScript tests (wasm/test/wirehair.test.ts) reimplement
//! `test_message` and read the same vectors.json.

#![allow(dead_code)]

/// xorshift32 (13, 17, 5).
pub struct XorShift32(pub u32);

impl XorShift32 {
    pub fn next_u32(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }

    /// Uniform-ish in 0..n (n > 0).
    pub fn below(&mut self, n: u32) -> u32 {
        ((self.next_u32() as u64 * n as u64) >> 32) as u32
    }
}

/// The test message of `len` bytes: xorshift32 seeded with `0x9E3779B9 ^ len`, byte i = the top
/// 8 bits of the (i+1)-th output.
pub fn test_message(len: usize) -> Vec<u8> {
    let mut rng = XorShift32(0x9E37_79B9 ^ len as u32);
    (0..len).map(|_| (rng.next_u32() >> 24) as u8).collect()
}
