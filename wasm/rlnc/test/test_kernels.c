/*
 * test_kernels.c: GF(2^8) tables against shift-and-add multiplication; every kernel variant the
 * CPU supports against the scalar kernel and a byte-wise reference, for all 256 coefficients,
 * odd lengths and misaligned pointers; coefficient generator against the protocol vectors.
 */
#include <stdlib.h>
#include <string.h>

#include "../include/mutp_rlnc.h"
#include "../src/gf256.h"
#include "test_util.h"

static const char *const variants[] = {"scalar", "ssse3", "avx2", "simd128"};
static const size_t lengths[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 95, 127, 128, 129, 1200, 1201, 1258, 4099};
#define NLEN (sizeof lengths / sizeof lengths[0])
#define MAXLEN 4099
#define PAD 64

static void test_tables(void) {
  int bad = 0;
  for (int a = 0; a < 256; a++)
    for (int b = 0; b < 256; b++) bad += gf_mul((uint8_t)a, (uint8_t)b) != ref_mul((uint8_t)a, (uint8_t)b);
  CHECK(bad == 0, "%d wrong products", bad);
  for (int a = 1; a < 256; a++) CHECK(ref_mul((uint8_t)a, gf_inv((uint8_t)a)) == 1, "inverse of %d", a);
  for (int c = 0; c < 256; c++)
    for (int i = 0; i < 16; i++) {
      CHECK(mutp_gf256_nibble[c][i] == ref_mul((uint8_t)c, (uint8_t)i), "nibble lo %d %d", c, i);
      CHECK(mutp_gf256_nibble[c][16 + i] == ref_mul((uint8_t)c, (uint8_t)(i << 4)), "nibble hi %d %d", c, i);
    }
}

static void test_coefficients(void) {
  /* From shared/test/vectors/coding-v1.json (the protocol's coefficient vectors). */
  static const struct {
    uint32_t seed;
    const char *hex;
  } v[] = {
      {0, "0e2fca92f3e3d63ccc7d141bbf1d084cab8179489d8c40db8f1bbc78e57230d8"},
      {1, "6bf9a0969083bc1264991e97e7c7ad79d88d1c59c98765cda216edf8600bc35a"},
      {305419896u, "ea607604dcb37260a9cedc4922e8c13bb95ddbab310f8904"},
      {3735928559u, "9790ced3ed7c11624108c8f2714188a4b0b8b3b7ef86fbbd"},
      {4294967295u, "03b5de36b6b92ffcb5c1942934e1066a"},
      {2463534242u, "224a44ee"},
      /* Known answers of fmix32 (MurmurHash3_x86_32 of "" with seeds 1 and 0xFFFFFFFF):
       * seed + 1 * 0x9E3779B9 = 1 resp. 0xFFFFFFFF, so the first 4 coefficients are
       * fmix32(1) = 0x514E28B7 resp. fmix32(0xFFFFFFFF) = 0x81F16F39, low byte first. */
      {0x61C88648u, "b7284e51"},
      {0x61C88646u, "396ff181"},
  };
  for (size_t t = 0; t < sizeof v / sizeof v[0]; t++) {
    uint8_t out[32];
    char hex[65];
    uint32_t count = (uint32_t)strlen(v[t].hex) / 2;
    mutp_rlnc_coefficients(v[t].seed, out, count);
    for (uint32_t i = 0; i < count; i++) snprintf(hex + 2 * i, 3, "%02x", out[i]);
    CHECK(strcmp(hex, v[t].hex) == 0, "seed %u: %s", v[t].seed, hex);
  }
  /* A prefix of a longer run is the shorter run; seed + 0x9E3779B9 is the same Weyl sequence one
   * output (4 coefficients) further on; count 0 and NULL write nothing. */
  uint8_t a[255 + 4], b[255];
  memset(a, 0xEE, sizeof a);
  mutp_rlnc_coefficients(12345u, a, 255 + 4);
  mutp_rlnc_coefficients(12345u + 0x9E3779B9u, b, 255);
  CHECK(memcmp(a + 4, b, 255) == 0, "seed + 0x9E3779B9 is not the sequence shifted by 4");
  memset(b, 0xEE, sizeof b);
  mutp_rlnc_coefficients(12345u, b, 10);
  CHECK(memcmp(a, b, 10) == 0 && b[10] == 0xEE, "prefix of 10");
  mutp_rlnc_coefficients(12345u, b, 0);
  CHECK(b[0] == a[0], "count 0 wrote");
  mutp_rlnc_coefficients(12345u, NULL, 4);
}

static void fill(uint64_t *rng, uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)test_rand(rng);
}

static void test_region(const mutp_gf256_kernel *k) {
  uint64_t rng = 42;
  uint8_t *src = malloc(MAXLEN + PAD), *dst = malloc(MAXLEN + PAD), *want = malloc(MAXLEN + PAD);
  int bad_muladd = 0, bad_mul = 0;
  for (int c = 0; c < 256; c++) {
    for (size_t li = 0; li < NLEN; li++) {
      size_t n = lengths[li];
      size_t so = (size_t)(c + li) % 5, d_o = (size_t)(c * 3 + li) % 7; /* misalignments 0..4 and 0..6 */
      fill(&rng, src, MAXLEN + PAD);
      fill(&rng, dst, MAXLEN + PAD);
      memcpy(want, dst, MAXLEN + PAD);
      for (size_t i = 0; i < n; i++) want[d_o + i] ^= ref_mul((uint8_t)c, src[so + i]);
      k->muladd(dst + d_o, src + so, (uint8_t)c, n);
      bad_muladd += memcmp(dst, want, MAXLEN + PAD) != 0; /* also catches writes past n */
      for (size_t i = 0; i < n; i++) want[d_o + i] = ref_mul((uint8_t)c, want[d_o + i]);
      k->mul(dst + d_o, (uint8_t)c, n);
      bad_mul += memcmp(dst, want, MAXLEN + PAD) != 0;
    }
  }
  CHECK(bad_muladd == 0, "%s: muladd wrong in %d cases", k->name, bad_muladd);
  CHECK(bad_mul == 0, "%s: mul wrong in %d cases", k->name, bad_mul);
  free(src);
  free(dst);
  free(want);
}

static void test_multi(const mutp_gf256_kernel *k) {
  enum { MAXK = 11 };
  uint64_t rng = 7;
  uint8_t *rows[MAXK], *out = malloc(MAXLEN + PAD), *want = malloc(MAXLEN + PAD);
  uint8_t *wrows[MAXK];
  uint8_t c[MAXK];
  int bad_lin = 0, bad_scatter = 0;
  for (int j = 0; j < MAXK; j++) {
    rows[j] = malloc(MAXLEN + PAD);
    wrows[j] = malloc(MAXLEN + PAD);
  }
  for (int round = 0; round < 200; round++) {
    size_t n = lengths[test_below(&rng, NLEN)];
    size_t nk = test_below(&rng, MAXK + 1);
    int acc = (int)test_below(&rng, 2);
    size_t off = test_below(&rng, 9);
    for (size_t j = 0; j < nk; j++) {
      uint32_t r = test_below(&rng, 10);
      c[j] = r == 0 ? 0 : r == 1 ? 1 : (uint8_t)test_rand(&rng);
    }
    /* lincomb */
    uint8_t *ptrs[MAXK];
    for (size_t j = 0; j < nk; j++) {
      fill(&rng, rows[j], MAXLEN + PAD);
      ptrs[j] = rows[j] + test_below(&rng, 5);
    }
    fill(&rng, out, MAXLEN + PAD);
    memcpy(want, out, MAXLEN + PAD);
    for (size_t i = 0; i < n; i++) {
      uint8_t a = acc ? want[off + i] : 0;
      for (size_t j = 0; j < nk; j++) a ^= ref_mul(c[j], ptrs[j][i]);
      want[off + i] = a;
    }
    k->lincomb(out + off, (const uint8_t *const *)ptrs, c, nk, n, acc);
    bad_lin += memcmp(out, want, MAXLEN + PAD) != 0;
    /* scatter: the source is `out`, the destinations the rows */
    for (size_t j = 0; j < nk; j++) {
      memcpy(wrows[j], rows[j], MAXLEN + PAD);
      size_t o = (size_t)(ptrs[j] - rows[j]);
      for (size_t i = 0; i < n; i++) wrows[j][o + i] ^= ref_mul(c[j], out[off + i]);
    }
    k->scatter(ptrs, out + off, c, nk, n);
    for (size_t j = 0; j < nk; j++) bad_scatter += memcmp(rows[j], wrows[j], MAXLEN + PAD) != 0;
  }
  CHECK(bad_lin == 0, "%s: lincomb wrong in %d cases", k->name, bad_lin);
  CHECK(bad_scatter == 0, "%s: scatter wrong in %d cases", k->name, bad_scatter);
  for (int j = 0; j < MAXK; j++) {
    free(rows[j]);
    free(wrows[j]);
  }
  free(out);
  free(want);
}

void test_kernels(void) {
  mutp_gf256_init();
  test_tables();
  test_coefficients();
  for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
    const mutp_gf256_kernel *k = mutp_gf256_kernel_named(variants[v]);
    if (!k) {
      printf("  kernel %-8s not available, skipped\n", variants[v]);
      continue;
    }
    int before = test_failures;
    test_region(k);
    test_multi(k);
    printf("  kernel %-8s %s\n", variants[v], test_failures == before ? "ok" : "FAILED");
  }
  /* The exported entry points use the active kernel. */
  uint8_t a[100], b[100], w[100];
  for (int i = 0; i < 100; i++) a[i] = (uint8_t)(i * 7), b[i] = (uint8_t)(255 - i), w[i] = a[i] ^ ref_mul(0x53, b[i]);
  mutp_gf256_muladd(a, b, 0x53, 100);
  CHECK(memcmp(a, w, 100) == 0, "mutp_gf256_muladd");
  for (int i = 0; i < 100; i++) w[i] = ref_mul(0xCA, a[i]);
  mutp_gf256_mul(a, 0xCA, 100);
  CHECK(memcmp(a, w, 100) == 0, "mutp_gf256_mul");
}
