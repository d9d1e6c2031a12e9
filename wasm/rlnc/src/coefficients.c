/* coefficients.c: RLNC coefficients from a 32-bit seed (docs/protocol.md §8.2): MurmurHash3's
 * fmix32 over seed + k * 0x9E3779B9 (k = 1, 2, ...), four coefficients per output, low byte first.
 * Non-linear over GF(2), so seeded vectors reach full rank for every generation size. */
#include "rlnc_internal.h"

static uint32_t fmix32(uint32_t z) {
  z ^= z >> 16;
  z *= 0x85EBCA6Bu;
  z ^= z >> 13;
  z *= 0xC2B2AE35u;
  z ^= z >> 16;
  return z;
}

void mutp_rlnc_coefficients(uint32_t seed, uint8_t *out, uint32_t count) {
  if (!out) return;
  uint32_t i = 0;
  for (uint32_t k = 1; i < count; k++) {
    uint32_t z = fmix32(seed + k * 0x9E3779B9u);
    for (uint32_t j = 0; j < 4 && i < count; j++, i++) out[i] = (uint8_t)(z >> (8 * j));
  }
}
