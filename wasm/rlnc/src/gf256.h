/*
 * gf256.h (internal): GF(2^8) tables and region kernels.
 *
 * Field: polynomial 0x11D, generator 2. Tables are filled by mutp_gf256_init() (idempotent; run
 * by a constructor and again by every public entry point that needs them).
 *
 * Kernel contract (every variant computes exactly the same bytes as the scalar one):
 *   muladd(dst, src, c, n)                 dst[i] ^= c * src[i]
 *   mul(dst, c, n)                         dst[i]  = c * dst[i]
 *   lincomb(dst, src[], c[], k, n, acc)    dst[i]  = (acc ? dst[i] : 0) ^ sum_j c[j] * src[j][i]
 *   scatter(dst[], src, c[], k, n)         dst[j][i] ^= c[j] * src[i]          for every j < k
 * No pointer of dst may overlap a source (except muladd with dst == src).
 */
#ifndef MUTP_GF256_H
#define MUTP_GF256_H

#include <stddef.h>
#include <stdint.h>

#define MUTP_GF256_POLYNOMIAL 0x11D

extern uint8_t mutp_gf256_exp[512];
extern uint8_t mutp_gf256_log[256];
extern uint8_t mutp_gf256_inv[256];
/* mutp_gf256_mul_table[a][b] = a * b (64 KiB). */
extern uint8_t mutp_gf256_mul_table[256][256];
/* Split-nibble tables: [c][0..15] = c * i, [c][16..31] = c * (i << 4); 32-byte aligned. */
extern uint8_t mutp_gf256_nibble[256][32];

void mutp_gf256_init(void);

static inline uint8_t gf_mul(uint8_t a, uint8_t b) { return mutp_gf256_mul_table[a][b]; }
static inline uint8_t gf_inv(uint8_t a) { return mutp_gf256_inv[a]; }

typedef struct mutp_gf256_kernel {
  const char *name; /* "scalar", "ssse3", "avx2", "simd128" */
  void (*muladd)(uint8_t *dst, const uint8_t *src, uint8_t c, size_t n);
  void (*mul)(uint8_t *dst, uint8_t c, size_t n);
  void (*lincomb)(uint8_t *dst, const uint8_t *const *src, const uint8_t *c, size_t k, size_t n, int acc);
  void (*scatter)(uint8_t *const *dst, const uint8_t *src, const uint8_t *c, size_t k, size_t n);
} mutp_gf256_kernel;

/* Variants compiled into this build; use mutp_gf256_kernel_named() to get one the CPU supports. */
extern const mutp_gf256_kernel mutp_gf256_kernel_scalar;
#if defined(__x86_64__) || defined(_M_X64)
extern const mutp_gf256_kernel mutp_gf256_kernel_ssse3;
extern const mutp_gf256_kernel mutp_gf256_kernel_avx2;
#endif
#if defined(__wasm_simd128__)
extern const mutp_gf256_kernel mutp_gf256_kernel_simd128;
#endif

/* The kernel the codec uses: the best one the build and the CPU support. */
const mutp_gf256_kernel *mutp_gf256_active(void);
/* Looks a compiled and CPU-supported variant up by name; NULL if there is none. */
const mutp_gf256_kernel *mutp_gf256_kernel_named(const char *name);
/* Makes `k` the active kernel (tests and benchmarks); NULL restores the best one. */
void mutp_gf256_set_active(const mutp_gf256_kernel *k);

/* Scalar helpers shared by the vector kernels for their tails. */
void mutp_gf256_muladd_scalar(uint8_t *dst, const uint8_t *src, uint8_t c, size_t n);
void mutp_gf256_mul_scalar(uint8_t *dst, uint8_t c, size_t n);

#endif /* MUTP_GF256_H */
