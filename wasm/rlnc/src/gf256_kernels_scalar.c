/*
 * gf256_kernels_scalar.c: portable region kernels, one 64 KiB-table lookup per byte, eight bytes
 * per step through 64-bit words (lane k of a word maps to lane k of the result whatever the byte
 * order). The reference every vector kernel is tested against, and the tail handler of those.
 */
#include <string.h>

#include "gf256.h"

static inline uint64_t load64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static inline void store64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static inline uint64_t mul64(const uint8_t *t, uint64_t s) {
  return (uint64_t)t[s & 0xff] | (uint64_t)t[(s >> 8) & 0xff] << 8 | (uint64_t)t[(s >> 16) & 0xff] << 16 |
         (uint64_t)t[(s >> 24) & 0xff] << 24 | (uint64_t)t[(s >> 32) & 0xff] << 32 |
         (uint64_t)t[(s >> 40) & 0xff] << 40 | (uint64_t)t[(s >> 48) & 0xff] << 48 | (uint64_t)t[s >> 56] << 56;
}

void mutp_gf256_muladd_scalar(uint8_t *dst, const uint8_t *src, uint8_t c, size_t n) {
  size_t i = 0;
  if (c == 0) return;
  if (c == 1) {
    for (; i + 8 <= n; i += 8) store64(dst + i, load64(dst + i) ^ load64(src + i));
    for (; i < n; i++) dst[i] ^= src[i];
    return;
  }
  const uint8_t *t = mutp_gf256_mul_table[c];
  for (; i + 8 <= n; i += 8) store64(dst + i, load64(dst + i) ^ mul64(t, load64(src + i)));
  for (; i < n; i++) dst[i] ^= t[src[i]];
}

void mutp_gf256_mul_scalar(uint8_t *dst, uint8_t c, size_t n) {
  size_t i = 0;
  if (c == 1) return;
  if (c == 0) {
    memset(dst, 0, n);
    return;
  }
  const uint8_t *t = mutp_gf256_mul_table[c];
  for (; i + 8 <= n; i += 8) store64(dst + i, mul64(t, load64(dst + i)));
  for (; i < n; i++) dst[i] = t[dst[i]];
}

static void lincomb_scalar(uint8_t *dst, const uint8_t *const *src, const uint8_t *c, size_t k, size_t n, int acc) {
  if (!acc) memset(dst, 0, n);
  for (size_t j = 0; j < k; j++) mutp_gf256_muladd_scalar(dst, src[j], c[j], n);
}

static void scatter_scalar(uint8_t *const *dst, const uint8_t *src, const uint8_t *c, size_t k, size_t n) {
  for (size_t j = 0; j < k; j++) mutp_gf256_muladd_scalar(dst[j], src, c[j], n);
}

const mutp_gf256_kernel mutp_gf256_kernel_scalar = {
    "scalar", mutp_gf256_muladd_scalar, mutp_gf256_mul_scalar, lincomb_scalar, scatter_scalar,
};
