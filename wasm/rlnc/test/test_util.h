/* test_util.h: tiny assertion helpers and a seeded PRNG shared by the native tests. */
#ifndef MUTP_TEST_UTIL_H
#define MUTP_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>

extern int test_failures;
extern int test_checks;

#define CHECK(cond, ...)                                                                                               \
  do {                                                                                                                 \
    test_checks++;                                                                                                     \
    if (!(cond)) {                                                                                                     \
      if (++test_failures <= 20) {                                                                                     \
        fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                                       \
        fprintf(stderr, __VA_ARGS__);                                                                                  \
        fputc('\n', stderr);                                                                                           \
      }                                                                                                                \
    }                                                                                                                  \
  } while (0)

/* splitmix64: seeded, deterministic test data. */
static inline uint64_t test_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static inline uint32_t test_below(uint64_t *state, uint32_t n) { return (uint32_t)(test_rand(state) % n); }

/* x * y in GF(2^8) mod 0x11D by shift-and-add, independent of the library's tables. */
static inline uint8_t ref_mul(uint8_t x, uint8_t y) {
  unsigned a = x, b = y, p = 0;
  while (b) {
    if (b & 1) p ^= a;
    a <<= 1;
    if (a & 0x100) a ^= 0x11D;
    b >>= 1;
  }
  return (uint8_t)p;
}

void test_kernels(void);
void test_codec(void);
/* Checks the packets against vectors.json at `path`, or rewrites the file when `write` is set. */
int test_vectors(const char *path, int write);

#endif
