/* gf256_tables.c: GF(2^8) tables (polynomial 0x11D, generator 2), built once at start-up. */
#include "gf256.h"

uint8_t mutp_gf256_exp[512];
uint8_t mutp_gf256_log[256];
uint8_t mutp_gf256_inv[256];
uint8_t mutp_gf256_mul_table[256][256];
_Alignas(32) uint8_t mutp_gf256_nibble[256][32];

static volatile int tables_ready;

void mutp_gf256_init(void) {
  if (tables_ready) return;
  unsigned x = 1;
  for (int i = 0; i < 255; i++) {
    mutp_gf256_exp[i] = (uint8_t)x;
    mutp_gf256_log[x] = (uint8_t)i;
    x <<= 1;
    if (x & 0x100) x ^= MUTP_GF256_POLYNOMIAL;
  }
  for (int i = 255; i < 512; i++) mutp_gf256_exp[i] = mutp_gf256_exp[i - 255];
  mutp_gf256_log[0] = 0; /* unused: 0 has no logarithm */
  mutp_gf256_inv[0] = 0; /* by convention; callers never invert 0 */
  for (int a = 0; a < 256; a++) {
    for (int b = 0; b < 256; b++) {
      mutp_gf256_mul_table[a][b] =
          (a && b) ? mutp_gf256_exp[mutp_gf256_log[a] + mutp_gf256_log[b]] : 0;
    }
    if (a) mutp_gf256_inv[a] = mutp_gf256_exp[255 - mutp_gf256_log[a]];
    for (int i = 0; i < 16; i++) {
      mutp_gf256_nibble[a][i] = mutp_gf256_mul_table[a][i];
      mutp_gf256_nibble[a][16 + i] = mutp_gf256_mul_table[a][i << 4];
    }
  }
  tables_ready = 1;
}

/* Filled before main() natively and by _initialize() in a WebAssembly reactor. */
__attribute__((constructor)) static void gf256_tables_constructor(void) { mutp_gf256_init(); }
