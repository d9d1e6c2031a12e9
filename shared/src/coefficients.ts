/**
 * RLNC coding coefficients from a 32-bit seed, so a DATA_RLNC header carries 4 bytes instead of g.
 * Generator (normative, docs/protocol.md §8.2): MurmurHash3's 32-bit finaliser over the Weyl
 * sequence seed + k * 0x9E3779B9 (k = 1, 2, ...), four coefficients per output, low byte first.
 * The multiplications make it non-linear over GF(2): a linear generator (such as xorshift) gives
 * coefficient vectors in a space of rank <= 32, and generations larger than 32 never decode.
 */
export function fillCoefficients(seed: number, out: Uint8Array, count: number = out.length): void {
  const base = seed >>> 0;
  for (let k = 1, i = 0; i < count; k++) {
    let z = (base + Math.imul(k, 0x9e3779b9)) >>> 0;
    z ^= z >>> 16;
    z = Math.imul(z, 0x85ebca6b);
    z ^= z >>> 13;
    z = Math.imul(z, 0xc2b2ae35);
    z ^= z >>> 16;
    for (let j = 0; j < 4 && i < count; j++, i++) out[i] = (z >>> (8 * j)) & 0xff;
  }
}
