/*
 * gf256_kernels_avx2.c: split-nibble region kernels with AVX2 (_mm256_shuffle_epi8), native only
 * (compiled with -mavx2, chosen at run time). The 16-byte nibble tables of c are broadcast to
 * both lanes; a 16-byte remainder uses the 128-bit form, the rest goes to the scalar code.
 */
#include <immintrin.h>
#include <string.h>

#include "gf256.h"

#define INLINE static inline __attribute__((always_inline))
#define LD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define ST(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), (v))
#define LD16(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define ST16(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))
#define LO(c) _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)(const void *)mutp_gf256_nibble[c]))
#define HI(c) _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)(const void *)(mutp_gf256_nibble[c] + 16)))

INLINE __m256i mul32(__m256i x, __m256i lo, __m256i hi, __m256i m) {
  __m256i l = _mm256_and_si256(x, m);
  __m256i h = _mm256_and_si256(_mm256_srli_epi64(x, 4), m);
  return _mm256_xor_si256(_mm256_shuffle_epi8(lo, l), _mm256_shuffle_epi8(hi, h));
}

INLINE __m128i mul16(__m128i x, __m256i lo, __m256i hi, __m256i m) {
  __m128i m16 = _mm256_castsi256_si128(m);
  __m128i l = _mm_and_si128(x, m16);
  __m128i h = _mm_and_si128(_mm_srli_epi64(x, 4), m16);
  return _mm_xor_si128(_mm_shuffle_epi8(_mm256_castsi256_si128(lo), l),
                       _mm_shuffle_epi8(_mm256_castsi256_si128(hi), h));
}

static void muladd_avx2(uint8_t *dst, const uint8_t *src, uint8_t c, size_t n) {
  if (c == 0) return;
  const __m256i m = _mm256_set1_epi8(0x0f), lo = LO(c), hi = HI(c);
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    __m256i p0 = mul32(LD(src + i), lo, hi, m), p1 = mul32(LD(src + i + 32), lo, hi, m);
    __m256i p2 = mul32(LD(src + i + 64), lo, hi, m), p3 = mul32(LD(src + i + 96), lo, hi, m);
    ST(dst + i, _mm256_xor_si256(LD(dst + i), p0));
    ST(dst + i + 32, _mm256_xor_si256(LD(dst + i + 32), p1));
    ST(dst + i + 64, _mm256_xor_si256(LD(dst + i + 64), p2));
    ST(dst + i + 96, _mm256_xor_si256(LD(dst + i + 96), p3));
  }
  for (; i + 32 <= n; i += 32) ST(dst + i, _mm256_xor_si256(LD(dst + i), mul32(LD(src + i), lo, hi, m)));
  if (i + 16 <= n) {
    ST16(dst + i, _mm_xor_si128(LD16(dst + i), mul16(LD16(src + i), lo, hi, m)));
    i += 16;
  }
  if (i < n) mutp_gf256_muladd_scalar(dst + i, src + i, c, n - i);
}

static void mul_avx2(uint8_t *dst, uint8_t c, size_t n) {
  if (c == 1) return;
  if (c == 0) {
    memset(dst, 0, n);
    return;
  }
  const __m256i m = _mm256_set1_epi8(0x0f), lo = LO(c), hi = HI(c);
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    __m256i p0 = mul32(LD(dst + i), lo, hi, m), p1 = mul32(LD(dst + i + 32), lo, hi, m);
    __m256i p2 = mul32(LD(dst + i + 64), lo, hi, m), p3 = mul32(LD(dst + i + 96), lo, hi, m);
    ST(dst + i, p0);
    ST(dst + i + 32, p1);
    ST(dst + i + 64, p2);
    ST(dst + i + 96, p3);
  }
  for (; i + 32 <= n; i += 32) ST(dst + i, mul32(LD(dst + i), lo, hi, m));
  if (i + 16 <= n) {
    ST16(dst + i, mul16(LD16(dst + i), lo, hi, m));
    i += 16;
  }
  if (i < n) mutp_gf256_mul_scalar(dst + i, c, n - i);
}

INLINE void lincomb_group(uint8_t *dst, const uint8_t *const *src, const uint8_t *c, size_t n, const int ACC,
                          const int K) {
  const __m256i m = _mm256_set1_epi8(0x0f);
  const uint8_t *s[4];
  uint8_t cc[4];
  __m256i lo[4], hi[4];
  for (int j = 0; j < K; j++) {
    s[j] = src[j];
    cc[j] = c[j];
    lo[j] = LO(cc[j]);
    hi[j] = HI(cc[j]);
  }
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i a = mul32(LD(s[0] + i), lo[0], hi[0], m);
    for (int j = 1; j < K; j++) a = _mm256_xor_si256(a, mul32(LD(s[j] + i), lo[j], hi[j], m));
    if (ACC) a = _mm256_xor_si256(a, LD(dst + i));
    ST(dst + i, a);
  }
  if (i + 16 <= n) {
    __m128i a = mul16(LD16(s[0] + i), lo[0], hi[0], m);
    for (int j = 1; j < K; j++) a = _mm_xor_si128(a, mul16(LD16(s[j] + i), lo[j], hi[j], m));
    if (ACC) a = _mm_xor_si128(a, LD16(dst + i));
    ST16(dst + i, a);
    i += 16;
  }
  for (; i < n; i++) {
    uint8_t a = ACC ? dst[i] : 0;
    for (int j = 0; j < K; j++) a ^= mutp_gf256_mul_table[cc[j]][s[j][i]];
    dst[i] = a;
  }
}

static void lincomb_avx2(uint8_t *dst, const uint8_t *const *src, const uint8_t *c, size_t k, size_t n, int acc) {
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
  const __m256i m = _mm256_set1_epi8(0x0f);
  uint8_t *d[4];
  uint8_t cc[4];
  __m256i lo[4], hi[4];
  for (int j = 0; j < K; j++) {
    d[j] = dst[j];
    cc[j] = c[j];
    lo[j] = LO(cc[j]);
    hi[j] = HI(cc[j]);
  }
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i x = LD(src + i);
    __m256i l = _mm256_and_si256(x, m), h = _mm256_and_si256(_mm256_srli_epi64(x, 4), m);
    for (int j = 0; j < K; j++) {
      __m256i p = _mm256_xor_si256(_mm256_shuffle_epi8(lo[j], l), _mm256_shuffle_epi8(hi[j], h));
      ST(d[j] + i, _mm256_xor_si256(LD(d[j] + i), p));
    }
  }
  if (i + 16 <= n) {
    __m128i x = LD16(src + i);
    for (int j = 0; j < K; j++) ST16(d[j] + i, _mm_xor_si128(LD16(d[j] + i), mul16(x, lo[j], hi[j], m)));
    i += 16;
  }
  if (i < n)
    for (int j = 0; j < K; j++) mutp_gf256_muladd_scalar(d[j] + i, src + i, cc[j], n - i);
}

static void scatter_avx2(uint8_t *const *dst, const uint8_t *src, const uint8_t *c, size_t k, size_t n) {
  size_t j = 0;
  for (; j + 4 <= k; j += 4) scatter_group(dst + j, src, c + j, n, 4);
  switch (k - j) {
    case 3: scatter_group(dst + j, src, c + j, n, 3); break;
    case 2: scatter_group(dst + j, src, c + j, n, 2); break;
    case 1: scatter_group(dst + j, src, c + j, n, 1); break;
    default: break;
  }
}

const mutp_gf256_kernel mutp_gf256_kernel_avx2 = {
    "avx2", muladd_avx2, mul_avx2, lincomb_avx2, scatter_avx2,
};
