/*
 * gf256_kernels_ssse3.c: split-nibble region kernels with SSSE3 (_mm_shuffle_epi8), native only
 * (compiled with -mssse3, chosen at run time). c * x = lo[x & 15] ^ hi[x >> 4] with the two
 * 16-byte tables of c from mutp_gf256_nibble. Tails shorter than 16 bytes go to the scalar code.
 */
#include <string.h>
#include <tmmintrin.h>

#include "gf256.h"

#define INLINE static inline __attribute__((always_inline))
#define LD(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define ST(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))
#define LO(c) _mm_load_si128((const __m128i *)(const void *)mutp_gf256_nibble[c])
#define HI(c) _mm_load_si128((const __m128i *)(const void *)(mutp_gf256_nibble[c] + 16))

INLINE __m128i mul16(__m128i x, __m128i lo, __m128i hi, __m128i m) {
  __m128i l = _mm_and_si128(x, m);
  __m128i h = _mm_and_si128(_mm_srli_epi64(x, 4), m);
  return _mm_xor_si128(_mm_shuffle_epi8(lo, l), _mm_shuffle_epi8(hi, h));
}

static void muladd_ssse3(uint8_t *dst, const uint8_t *src, uint8_t c, size_t n) {
  if (c == 0) return;
  const __m128i m = _mm_set1_epi8(0x0f), lo = LO(c), hi = HI(c);
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i p0 = mul16(LD(src + i), lo, hi, m), p1 = mul16(LD(src + i + 16), lo, hi, m);
    __m128i p2 = mul16(LD(src + i + 32), lo, hi, m), p3 = mul16(LD(src + i + 48), lo, hi, m);
    ST(dst + i, _mm_xor_si128(LD(dst + i), p0));
    ST(dst + i + 16, _mm_xor_si128(LD(dst + i + 16), p1));
    ST(dst + i + 32, _mm_xor_si128(LD(dst + i + 32), p2));
    ST(dst + i + 48, _mm_xor_si128(LD(dst + i + 48), p3));
  }
  for (; i + 16 <= n; i += 16) ST(dst + i, _mm_xor_si128(LD(dst + i), mul16(LD(src + i), lo, hi, m)));
  if (i < n) mutp_gf256_muladd_scalar(dst + i, src + i, c, n - i);
}

static void mul_ssse3(uint8_t *dst, uint8_t c, size_t n) {
  if (c == 1) return;
  if (c == 0) {
    memset(dst, 0, n);
    return;
  }
  const __m128i m = _mm_set1_epi8(0x0f), lo = LO(c), hi = HI(c);
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i p0 = mul16(LD(dst + i), lo, hi, m), p1 = mul16(LD(dst + i + 16), lo, hi, m);
    __m128i p2 = mul16(LD(dst + i + 32), lo, hi, m), p3 = mul16(LD(dst + i + 48), lo, hi, m);
    ST(dst + i, p0);
    ST(dst + i + 16, p1);
    ST(dst + i + 32, p2);
    ST(dst + i + 48, p3);
  }
  for (; i + 16 <= n; i += 16) ST(dst + i, mul16(LD(dst + i), lo, hi, m));
  if (i < n) mutp_gf256_mul_scalar(dst + i, c, n - i);
}

/* dst = (ACC ? dst : 0) ^ sum of K sources, one pass over dst. */
INLINE void lincomb_group(uint8_t *dst, const uint8_t *const *src, const uint8_t *c, size_t n, const int ACC,
                          const int K) {
  const __m128i m = _mm_set1_epi8(0x0f);
  const uint8_t *s[4];
  uint8_t cc[4];
  __m128i lo[4], hi[4];
  for (int j = 0; j < K; j++) {
    s[j] = src[j];
    cc[j] = c[j];
    lo[j] = LO(cc[j]);
    hi[j] = HI(cc[j]);
  }
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i a = mul16(LD(s[0] + i), lo[0], hi[0], m);
    for (int j = 1; j < K; j++) a = _mm_xor_si128(a, mul16(LD(s[j] + i), lo[j], hi[j], m));
    if (ACC) a = _mm_xor_si128(a, LD(dst + i));
    ST(dst + i, a);
  }
  for (; i < n; i++) {
    uint8_t a = ACC ? dst[i] : 0;
    for (int j = 0; j < K; j++) a ^= mutp_gf256_mul_table[cc[j]][s[j][i]];
    dst[i] = a;
  }
}

static void lincomb_ssse3(uint8_t *dst, const uint8_t *const *src, const uint8_t *c, size_t k, size_t n, int acc) {
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

/* dst[j] ^= c[j] * src for K rows, one pass over src. */
INLINE void scatter_group(uint8_t *const *dst, const uint8_t *src, const uint8_t *c, size_t n, const int K) {
  const __m128i m = _mm_set1_epi8(0x0f);
  uint8_t *d[4];
  uint8_t cc[4];
  __m128i lo[4], hi[4];
  for (int j = 0; j < K; j++) {
    d[j] = dst[j];
    cc[j] = c[j];
    lo[j] = LO(cc[j]);
    hi[j] = HI(cc[j]);
  }
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i x = LD(src + i);
    __m128i l = _mm_and_si128(x, m), h = _mm_and_si128(_mm_srli_epi64(x, 4), m);
    for (int j = 0; j < K; j++) {
      __m128i p = _mm_xor_si128(_mm_shuffle_epi8(lo[j], l), _mm_shuffle_epi8(hi[j], h));
      ST(d[j] + i, _mm_xor_si128(LD(d[j] + i), p));
    }
  }
  if (i < n)
    for (int j = 0; j < K; j++) mutp_gf256_muladd_scalar(d[j] + i, src + i, cc[j], n - i);
}

static void scatter_ssse3(uint8_t *const *dst, const uint8_t *src, const uint8_t *c, size_t k, size_t n) {
  size_t j = 0;
  for (; j + 4 <= k; j += 4) scatter_group(dst + j, src, c + j, n, 4);
  switch (k - j) {
    case 3: scatter_group(dst + j, src, c + j, n, 3); break;
    case 2: scatter_group(dst + j, src, c + j, n, 2); break;
    case 1: scatter_group(dst + j, src, c + j, n, 1); break;
    default: break;
  }
}

const mutp_gf256_kernel mutp_gf256_kernel_ssse3 = {
    "ssse3", muladd_ssse3, mul_ssse3, lincomb_ssse3, scatter_ssse3,
};
