/* coefficients.c: RLNC coefficients from a 32-bit seed (xorshift32 13/17/5, top byte per step). */
#include "rlnc_internal.h"

void mutp_rlnc_coefficients(uint32_t seed, uint8_t *out, uint32_t count) {
  uint32_t s = seed ? seed : 0x9E3779B9u;
  if (!out) return;
  for (uint32_t i = 0; i < count; i++) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    out[i] = (uint8_t)(s >> 24);
  }
}
