/*
 * sha256.c: SHA-256 as specified in FIPS 180-4, written for the tests. The round constants and
 * the initial hash value are the first 32 bits of the fractional parts of the cube roots of the
 * first 64 primes and of the square roots of the first 8 primes; they are derived here, and the
 * result is checked against the FIPS "abc" example by the test runner.
 */
#include "sha256.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static uint32_t K[64], H0[8];

static void constants(void) {
  static int ready;
  if (ready) return;
  int found = 0;
  for (int p = 2; found < 64; p++) {
    int prime = 1;
    for (int d = 2; d * d <= p; d++)
      if (p % d == 0) prime = 0;
    if (!prime) continue;
    double c = cbrt((double)p);
    K[found] = (uint32_t)((c - floor(c)) * 4294967296.0);
    if (found < 8) {
      double s = sqrt((double)p);
      H0[found] = (uint32_t)((s - floor(s)) * 4294967296.0);
    }
    found++;
  }
  ready = 1;
}

static inline uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void block(uint32_t h[8], const uint8_t *b) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 | (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c));
    hh = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = bb;
    bb = a;
    a = t1 + t2;
  }
  h[0] += a;
  h[1] += bb;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += hh;
}

void sha256(const uint8_t *data, size_t len, uint8_t digest[32]) {
  constants();
  uint32_t h[8];
  memcpy(h, H0, sizeof h);
  size_t i = 0;
  for (; i + 64 <= len; i += 64) block(h, data + i);
  uint8_t last[128] = {0};
  size_t rest = len - i;
  memcpy(last, data + i, rest);
  last[rest] = 0x80;
  size_t total = rest + 9 <= 64 ? 64 : 128;
  uint64_t bits = (uint64_t)len * 8;
  for (int j = 0; j < 8; j++) last[total - 1 - j] = (uint8_t)(bits >> (8 * j));
  block(h, last);
  if (total == 128) block(h, last + 64);
  for (int j = 0; j < 8; j++) {
    digest[4 * j] = (uint8_t)(h[j] >> 24);
    digest[4 * j + 1] = (uint8_t)(h[j] >> 16);
    digest[4 * j + 2] = (uint8_t)(h[j] >> 8);
    digest[4 * j + 3] = (uint8_t)h[j];
  }
}

void sha256_hex(const uint8_t *data, size_t len, char hex[65]) {
  uint8_t d[32];
  sha256(data, len, d);
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}
