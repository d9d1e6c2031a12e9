/**
 * RLNC coding coefficients from a 32-bit seed, so a DATA_RLNC header carries 4 bytes instead of g.
 * Generator (normative, docs/protocol.md): xorshift32 with shifts 13, 17, 5; state = seed, or
 * 0x9E3779B9 when seed is 0; each coefficient is the top byte of the next state.
 */
export function fillCoefficients(seed: number, out: Uint8Array, count: number = out.length): void {
  let s = seed >>> 0 || 0x9e3779b9;
  for (let i = 0; i < count; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out[i] = s >>> 24;
  }
}
