/*
 * gf256_kernels_wasm128.c: split-nibble region kernels with WebAssembly SIMD128
 * (wasm_i8x16_swizzle), for the SIMD wasm build (compiled with -msimd128). The nibble indices are
 * masked to 0..15, so swizzle's "out of range gives 0" rule never applies. 64 bytes per step in
 * the single-row kernels; up to 4 rows per pass in lincomb/scatter.
 */
#include <string.h>
#include <wasm_simd128.h>

#include "gf256.h"

#define INLINE static inline __attribute__((always_inline))
#define LD(p) wasm_v128_load((const void *)(p))
#define ST(p, v) wasm_v128_store((void *)(p), (v))
#define LO(c) wasm_v128_load((const void *)mutp_gf256_nibble[c])
#define HI(c) wasm_v128_load((const void *)(mutp_gf256_nibble[c] + 16))

INLINE v128_t mul16(v128_t x, v128_t lo, v128_t hi, v128_t m) {
  v128_t l = wasm_v128_and(x, m);
  v128_t h = wasm_v128_and(wasm_u16x8_shr(x, 4), m);
  return wasm_v128_xor(wasm_i8x16_swizzle(lo, l), wasm_i8x16_swizzle(hi, h));
}

static void muladd_simd128(uint8_t *dst, const uint8_t *src, uint8_t c, size_t n) {
  if (c == 0) return;
  const v128_t m = wasm_i8x16_splat(0x0f), lo = LO(c), hi = HI(c);
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    v128_t p0 = mul16(LD(src + i), lo, hi, m), p1 = mul16(LD(src + i + 16), lo, hi, m);
    v128_t p2 = mul16(LD(src + i + 32), lo, hi, m), p3 = mul16(LD(src + i + 48), lo, hi, m);
    ST(dst + i, wasm_v128_xor(LD(dst + i), p0));
    ST(dst + i + 16, wasm_v128_xor(LD(dst + i + 16), p1));
    ST(dst + i + 32, wasm_v128_xor(LD(dst + i + 32), p2));
    ST(dst + i + 48, wasm_v128_xor(LD(dst + i + 48), p3));
  }
  for (; i + 16 <= n; i += 16) ST(dst + i, wasm_v128_xor(LD(dst + i), mul16(LD(src + i), lo, hi, m)));
  if (i < n) mutp_gf256_muladd_scalar(dst + i, src + i, c, n - i);
}

static void mul_simd128(uint8_t *dst, uint8_t c, size_t n) {
  if (c == 1) return;
  if (c == 0) {
    memset(dst, 0, n);
    return;
  }
  const v128_t m = wasm_i8x16_splat(0x0f), lo = LO(c), hi = HI(c);
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    v128_t p0 = mul16(LD(dst + i), lo, hi, m), p1 = mul16(LD(dst + i + 16), lo, hi, m);
    v128_t p2 = mul16(LD(dst + i + 32), lo, hi, m), p3 = mul16(LD(dst + i + 48), lo, hi, m);
    ST(dst + i, p0);
    ST(dst + i + 16, p1);
    ST(dst + i + 32, p2);
    ST(dst + i + 48, p3);
  }
  for (; i + 16 <= n; i += 16) ST(dst + i, mul16(LD(dst + i), lo, hi, m));
  if (i < n) mutp_gf256_mul_scalar(dst + i, c, n - i);
}

INLINE void lincomb_group(uint8_t *dst, const uint8_t *const *src, const uint8_t *c, size_t n, const int ACC,
                          const int K) {
  const v128_t m = wasm_i8x16_splat(0x0f);
  const uint8_t *s[4];
  uint8_t cc[4];
  v128_t lo[4], hi[4];
  for (int j = 0; j < K; j++) {
    s[j] = src[j];
    cc[j] = c[j];
    lo[j] = LO(cc[j]);
    hi[j] = HI(cc[j]);
  }
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v128_t a = mul16(LD(s[0] + i), lo[0], hi[0], m);
    for (int j = 1; j < K; j++) a = wasm_v128_xor(a, mul16(LD(s[j] + i), lo[j], hi[j], m));
    if (ACC) a = wasm_v128_xor(a, LD(dst + i));
    ST(dst + i, a);
  }
  for (; i < n; i++) {
    uint8_t a = ACC ? dst[i] : 0;
    for (int j = 0; j < K; j++) a ^= mutp_gf256_mul_table[cc[j]][s[j][i]];
    dst[i] = a;
  }
}

static void lincomb_simd128(uint8_t *dst, const uint8_t *const *src, const uint8_t *c, size_t k, size_t n, int acc) {
  if (k == 0 && !acc) memset(dst, 0, n);
  for (size_t j = 0; j < k; acc = 1) {
#define GROUP(K)                                                                                                       \
  do {                                                                                                                 \
    if (acc)                                                                                                           \
      lincomb_group(dst, src + j, c + j, n, 1, K);                                                                     \
    else                                                                                                               \
      lincomb_group(dst, src + j, c + j, n, 0, K);                                                                     \
    j += K;                                                                                                            \
  } while (0)
    switch (k - j >= 4 ? 4 : k - j) {
      case 4: GROUP(4); break;
      case 3: GROUP(3); break;
      case 2: GROUP(2); break;
      default: GROUP(1); break;
    }
#undef GROUP
  }
}

INLINE void scatter_group(uint8_t *const *dst, const uint8_t *src, const uint8_t *c, size_t n, const int K) {
  const v128_t m = wasm_i8x16_splat(0x0f);
  uint8_t *d[4];
  uint8_t cc[4];
  v128_t lo[4], hi[4];
  for (int j = 0; j < K; j++) {
    d[j] = dst[j];
    cc[j] = c[j];
    lo[j] = LO(cc[j]);
    hi[j] = HI(cc[j]);
  }
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v128_t x = LD(src + i);
    v128_t l = wasm_v128_and(x, m), h = wasm_v128_and(wasm_u16x8_shr(x, 4), m);
    for (int j = 0; j < K; j++) {
      v128_t p = wasm_v128_xor(wasm_i8x16_swizzle(lo[j], l), wasm_i8x16_swizzle(hi[j], h));
      ST(d[j] + i, wasm_v128_xor(LD(d[j] + i), p));
    }
  }
  if (i < n)
    for (int j = 0; j < K; j++) mutp_gf256_muladd_scalar(d[j] + i, src + i, cc[j], n - i);
}

static void scatter_simd128(uint8_t *const *dst, const uint8_t *src, const uint8_t *c, size_t k, size_t n) {
  size_t j = 0;
  for (; j + 4 <= k; j += 4) scatter_group(dst + j, src, c + j, n, 4);
  switch (k - j) {
    case 3: scatter_group(dst + j, src, c + j, n, 3); break;
    case 2: scatter_group(dst + j, src, c + j, n, 2); break;
    case 1: scatter_group(dst + j, src, c + j, n, 1); break;
    default: break;
  }
}

const mutp_gf256_kernel mutp_gf256_kernel_simd128 = {
    "simd128", muladd_simd128, mul_simd128, lincomb_simd128, scatter_simd128,
};
