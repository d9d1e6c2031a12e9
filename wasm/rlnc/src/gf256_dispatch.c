/*
 * gf256_dispatch.c: picks the region kernel. WebAssembly: fixed at build time (SIMD128 or
 * scalar). x86-64: AVX2 > SSSE3 > scalar, by CPUID at first use. Also the exported kernels.
 */
#include <string.h>

#include "../include/mutp_rlnc.h"
#include "gf256.h"

static const mutp_gf256_kernel *active;

static int supported(const mutp_gf256_kernel *k) {
  if (k == &mutp_gf256_kernel_scalar) return 1;
#if defined(__wasm_simd128__)
  if (k == &mutp_gf256_kernel_simd128) return 1;
#endif
#if defined(__x86_64__) || defined(_M_X64)
  __builtin_cpu_init();
  if (k == &mutp_gf256_kernel_ssse3) return __builtin_cpu_supports("ssse3");
  if (k == &mutp_gf256_kernel_avx2) return __builtin_cpu_supports("avx2");
#endif
  return 0;
}

static const mutp_gf256_kernel *const candidates[] = {
#if defined(__wasm_simd128__)
    &mutp_gf256_kernel_simd128,
#endif
#if defined(__x86_64__) || defined(_M_X64)
    &mutp_gf256_kernel_avx2,
    &mutp_gf256_kernel_ssse3,
#endif
    &mutp_gf256_kernel_scalar,
};

static const mutp_gf256_kernel *best(void) {
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
    if (supported(candidates[i])) return candidates[i];
  return &mutp_gf256_kernel_scalar;
}

const mutp_gf256_kernel *mutp_gf256_active(void) {
  if (!active) {
    mutp_gf256_init();
    active = best();
  }
  return active;
}

const mutp_gf256_kernel *mutp_gf256_kernel_named(const char *name) {
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
    if (strcmp(candidates[i]->name, name) == 0) return supported(candidates[i]) ? candidates[i] : NULL;
  return NULL;
}

void mutp_gf256_set_active(const mutp_gf256_kernel *k) {
  mutp_gf256_init();
  active = k ? k : best();
}

int32_t mutp_rlnc_simd(void) {
#if defined(__wasm_simd128__)
  return 1;
#else
  return 0;
#endif
}

int32_t mutp_abi_version(void) { return MUTP_RLNC_ABI_VERSION; }

void mutp_gf256_muladd(uint8_t *dst, const uint8_t *src, uint8_t c, uint32_t n) {
  if (!dst || !src || n == 0) return;
  mutp_gf256_active()->muladd(dst, src, c, n);
}

void mutp_gf256_mul(uint8_t *dst, uint8_t c, uint32_t n) {
  if (!dst || n == 0) return;
  mutp_gf256_active()->mul(dst, c, n);
}
