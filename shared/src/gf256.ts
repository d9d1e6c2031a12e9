/**
 * GF(2^8) arithmetic with the polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11D), generator 2.
 * The pure-TypeScript reference; the WebAssembly kernels must match it byte for byte.
 */

export const GF_POLYNOMIAL = 0x11d;

const EXP = new Uint8Array(512);
const LOG = new Uint8Array(256);
/** MUL[(a << 8) | b] = a * b. 64 KiB, so a region multiply is one lookup per byte. */
const MUL = new Uint8Array(65536);
const INV = new Uint8Array(256);

(function buildTables() {
  let x = 1;
  for (let i = 0; i < 255; i++) {
    EXP[i] = x;
    LOG[x] = i;
    x <<= 1;
    if (x & 0x100) x ^= GF_POLYNOMIAL;
  }
  for (let i = 255; i < 512; i++) EXP[i] = EXP[i - 255];
  for (let a = 1; a < 256; a++) {
    for (let b = 1; b < 256; b++) MUL[(a << 8) | b] = EXP[LOG[a] + LOG[b]];
    INV[a] = EXP[255 - LOG[a]];
  }
})();

export function gfMul(a: number, b: number): number {
  return MUL[((a & 0xff) << 8) | (b & 0xff)];
}

/** Multiplicative inverse; inverse of 0 is reported as 0 (callers never divide by 0). */
export function gfInv(a: number): number {
  return INV[a & 0xff];
}

/** dst[i] ^= c * src[i] for i < n. */
export function gfMulAddRegion(dst: Uint8Array, src: Uint8Array, c: number, n: number = src.length): void {
  if (c === 0) return;
  if (c === 1) {
    for (let i = 0; i < n; i++) dst[i] ^= src[i];
    return;
  }
  const row = MUL.subarray(c << 8, (c << 8) + 256);
  for (let i = 0; i < n; i++) dst[i] ^= row[src[i]];
}

/** dst[i] = c * dst[i] for i < n. */
export function gfMulRegion(dst: Uint8Array, c: number, n: number = dst.length): void {
  if (c === 1) return;
  const row = MUL.subarray(c << 8, (c << 8) + 256);
  for (let i = 0; i < n; i++) dst[i] = row[dst[i]];
}
