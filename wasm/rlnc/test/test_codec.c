/*
 * test_codec.c: encoder against a definition-level reference, encode -> decode round trips with
 * seeded loss and duplicates for every kernel variant, redundancy reporting, bad parameters, and
 * no leaked allocation at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "../include/mutp_rlnc.h"
#include "../src/gf256.h"
#include "test_util.h"

typedef struct {
  uint32_t object_len, symbol_size, generation_size;
} layout_t;

static const layout_t layouts[] = {
    {1, 1, 1},         {1000, 100, 1},     {5000, 1200, 1},   {40000, 1200, 16}, {100003, 1258, 24},
    {200000, 1120, 64}, {300001, 1000, 255}, {777, 13, 7},     {4096, 16, 32},    {65535 * 3 + 1, 65535, 2},
    {2000, 3, 255},    {24 * 1200, 1200, 24},
};

static uint32_t symbols_of(const layout_t *l) { return (l->object_len + l->symbol_size - 1) / l->symbol_size; }
static uint32_t gens_of(const layout_t *l) { return (symbols_of(l) + l->generation_size - 1) / l->generation_size; }
static uint32_t unit_of(const layout_t *l, uint32_t g) {
  uint32_t left = symbols_of(l) - g * l->generation_size;
  return left < l->generation_size ? left : l->generation_size;
}

/* The packet straight from the definition: sum_k coef[k] * padded symbol k. */
static void reference_encode(const layout_t *l, const uint8_t *object, uint32_t g, const uint8_t *coef,
                             uint8_t *out) {
  uint32_t n = unit_of(l, g);
  memset(out, 0, l->symbol_size);
  for (uint32_t k = 0; k < n; k++) {
    size_t start = ((size_t)g * l->generation_size + k) * l->symbol_size;
    for (uint32_t i = 0; i < l->symbol_size; i++) {
      uint8_t byte = start + i < l->object_len ? object[start + i] : 0;
      out[i] ^= ref_mul(coef[k], byte);
    }
  }
}

/*
 * Encode -> decode with seeded packets, 30 % loss and 1/8 repeats of the previous packet; the
 * first packets are also checked against the definition.
 */
static void round_trip(const layout_t *l, uint64_t seed) {
  uint64_t rng = seed;
  uint8_t *object = malloc(l->object_len);
  for (uint32_t i = 0; i < l->object_len; i++) object[i] = (uint8_t)test_rand(&rng);
  mutp_rlnc_encoder *enc = mutp_rlnc_encoder_new(object, l->object_len, l->symbol_size, l->generation_size);
  mutp_rlnc_decoder *dec = mutp_rlnc_decoder_new(l->object_len, l->symbol_size, l->generation_size);
  CHECK(enc && dec, "new failed for %u/%u/%u", l->object_len, l->symbol_size, l->generation_size);
  if (!enc || !dec) goto out;
  uint8_t *packet = malloc(l->symbol_size), *want = malloc(l->symbol_size);
  uint8_t coef[255];
  uint32_t gens = gens_of(l);
  int reference_checked = 0;
  for (uint32_t g = 0; g < gens; g++) {
    uint32_t n = unit_of(l, g), innovative = 0, sent = 0;
    uint32_t pseed = 0, prev_seed = 0;
    int have_prev = 0;
    while (mutp_rlnc_decoder_rank(dec, g) < (int32_t)n) {
      CHECK(sent < 4 * n + 64, "generation %u never completes", g);
      if (sent >= 4 * n + 64) break;
      int duplicate = have_prev && test_below(&rng, 8) == 0;
      pseed = duplicate ? prev_seed : (uint32_t)test_rand(&rng);
      mutp_rlnc_coefficients(pseed, coef, n);
      int32_t rc = mutp_rlnc_encode(enc, g, pseed, packet);
      CHECK(rc == MUTP_RLNC_OK, "encode");
      if (reference_checked < 40) {
        reference_encode(l, object, g, coef, want);
        CHECK(memcmp(packet, want, l->symbol_size) == 0, "packet g=%u differs from the definition", g);
        reference_checked++;
      }
      sent++;
      if (test_below(&rng, 10) < 3) continue; /* 30 % loss */
      int32_t before = mutp_rlnc_decoder_rank(dec, g);
      rc = mutp_rlnc_decoder_add(dec, g, pseed, packet, l->symbol_size);
      CHECK(rc == 0 || rc == 1, "add returned %d", rc);
      CHECK(mutp_rlnc_decoder_rank(dec, g) == before + rc, "rank moved by %d", rc);
      if (duplicate) CHECK(rc == 0, "repeated packet reported innovative");
      innovative += rc == 1;
      prev_seed = pseed;
      have_prev = 1;
    }
    CHECK(innovative == n, "generation %u: %u innovative of %u", g, innovative, n);
    /* Complete: any further packet is redundant. */
    mutp_rlnc_encode(enc, g, 12345, packet);
    CHECK(mutp_rlnc_decoder_add(dec, g, 12345, packet, l->symbol_size) == 0, "redundant after completion");
  }
  CHECK(mutp_rlnc_decoder_complete(dec) == (int32_t)gens, "complete count");
  CHECK(l->object_len == 0 || memcmp(mutp_rlnc_decoder_object(dec), object, l->object_len) == 0,
        "decoded object differs (%u/%u/%u)", l->object_len, l->symbol_size, l->generation_size);
  free(packet);
  free(want);
out:
  mutp_rlnc_encoder_free(enc);
  mutp_rlnc_decoder_free(dec);
  free(object);
}

/*
 * Seeded packets reach full rank at every generation size (a GF(2)-linear generator would stall at
 * rank 32): over many generations of g = 33, 64, 255, every one is complete after at most g + 2
 * consecutive seeds, and the extra packets over g average well under 0.1 (about 0.004 expected).
 */
static void test_seeded_rank(void) {
  static const uint32_t sizes[] = {33, 64, 255};
  static const uint32_t trials[] = {200, 100, 20};
  uint8_t object[255 * 4], packet[4];
  for (uint32_t i = 0; i < sizeof object; i++) object[i] = (uint8_t)(i * 29 + 3);
  for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
    const uint32_t g = sizes[t];
    mutp_rlnc_encoder *enc = mutp_rlnc_encoder_new(object, g * 4, 4, g);
    uint32_t extra = 0, worst = 0;
    for (uint32_t trial = 0; trial < trials[t]; trial++) {
      mutp_rlnc_decoder *dec = mutp_rlnc_decoder_new(g * 4, 4, g);
      uint32_t seed = trial * 0x01000193u + g, sent = 0;
      while (mutp_rlnc_decoder_rank(dec, 0) < (int32_t)g && sent < g + 2) {
        mutp_rlnc_encode(enc, 0, seed, packet);
        mutp_rlnc_decoder_add(dec, 0, seed++, packet, 4);
        sent++;
      }
      CHECK(mutp_rlnc_decoder_rank(dec, 0) == (int32_t)g, "g=%u trial %u: rank %d after %u seeds", g, trial,
            mutp_rlnc_decoder_rank(dec, 0), sent);
      CHECK(memcmp(mutp_rlnc_decoder_object(dec), object, g * 4) == 0, "g=%u trial %u: object differs", g, trial);
      extra += sent - g;
      if (sent - g > worst) worst = sent - g;
      mutp_rlnc_decoder_free(dec);
    }
    CHECK(extra * 10 < trials[t], "g=%u: %u extra packets in %u generations", g, extra, trials[t]);
    printf("  seeded g=%-3u %u generations, %u extra packets (worst %u)\n", g, trials[t], extra, worst);
    mutp_rlnc_encoder_free(enc);
  }
}

/* Packets that are combinations of earlier ones are redundant, and their payload is not read. */
static void test_redundancy(void) {
  const uint32_t s = 64, g = 8, len = s * g;
  uint8_t object[512], packet[64], junk[64];
  for (uint32_t i = 0; i < len; i++) object[i] = (uint8_t)(i * 13 + 5);
  mutp_rlnc_encoder *enc = mutp_rlnc_encoder_new(object, len, s, g);
  mutp_rlnc_decoder *dec = mutp_rlnc_decoder_new(len, s, g);
  uint32_t seeds[8];
  int n = 0;
  for (uint32_t seed = 1; n < 4; seed++) {
    mutp_rlnc_encode(enc, 0, seed, packet);
    if (mutp_rlnc_decoder_add(dec, 0, seed, packet, s) == 1) seeds[n++] = seed;
  }
  for (int i = 0; i < n; i++) {
    /* Same coefficients again, with a garbage payload: redundant, and the state is unchanged. */
    memset(junk, 0xA5, sizeof junk);
    CHECK(mutp_rlnc_decoder_add(dec, 0, seeds[i], junk, s) == 0, "repeat of seed %u", seeds[i]);
  }
  CHECK(mutp_rlnc_decoder_rank(dec, 0) == 4, "rank 4");
  for (uint32_t seed = 1000; mutp_rlnc_decoder_rank(dec, 0) < (int32_t)g; seed++) {
    mutp_rlnc_encode(enc, 0, seed, packet);
    mutp_rlnc_decoder_add(dec, 0, seed, packet, s);
  }
  CHECK(memcmp(mutp_rlnc_decoder_object(dec), object, len) == 0, "decoded after junk repeats");
  mutp_rlnc_encoder_free(enc);
  mutp_rlnc_decoder_free(dec);
}

static void test_bad_params(void) {
  uint8_t object[16] = {0}, out[16];
  struct {
    uint32_t len, s, g;
  } bad[] = {{16, 16, 0}, {16, 16, 256}, {16, 0, 4}, {16, 65536, 4}, {(1u << 30) + 1, 16, 4}, {0xFFFFFFFFu, 1, 1}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK(mutp_rlnc_decoder_new(bad[i].len, bad[i].s, bad[i].g) == NULL, "decoder_new accepted case %zu", i);
    CHECK(mutp_rlnc_last_error() == MUTP_RLNC_ERR_PARAM, "last error %d", mutp_rlnc_last_error());
    CHECK(mutp_rlnc_encoder_new(object, bad[i].len, bad[i].s, bad[i].g) == NULL, "encoder_new accepted case %zu", i);
    CHECK(mutp_rlnc_last_error() == MUTP_RLNC_ERR_PARAM, "last error %d", mutp_rlnc_last_error());
  }
  CHECK(mutp_rlnc_encoder_new(NULL, 16, 16, 4) == NULL, "NULL object");

  /* Limits themselves are accepted. */
  mutp_rlnc_encoder *enc = mutp_rlnc_encoder_new(object, 16, 65535, 255);
  CHECK(enc != NULL, "max symbol size and generation size");
  mutp_rlnc_encoder_free(enc);

  enc = mutp_rlnc_encoder_new(object, 16, 4, 2); /* 4 symbols, 2 generations */
  mutp_rlnc_decoder *dec = mutp_rlnc_decoder_new(16, 4, 2);
  CHECK(mutp_rlnc_encode(enc, 2, 1, out) == MUTP_RLNC_ERR_RANGE, "encode range");
  CHECK(mutp_rlnc_encode(enc, 0xFFFFFFFFu, 1, out) == MUTP_RLNC_ERR_RANGE, "encode range max");
  CHECK(mutp_rlnc_encode(NULL, 0, 1, out) == MUTP_RLNC_ERR_PARAM, "encode NULL");
  CHECK(mutp_rlnc_encode(enc, 0, 1, NULL) == MUTP_RLNC_ERR_PARAM, "encode NULL out");
  CHECK(mutp_rlnc_decoder_add(dec, 2, 1, out, 4) == MUTP_RLNC_ERR_RANGE, "add range");
  CHECK(mutp_rlnc_decoder_add(dec, 0, 1, out, 3) == MUTP_RLNC_ERR_LENGTH, "add short");
  CHECK(mutp_rlnc_decoder_add(dec, 0, 1, out, 5) == MUTP_RLNC_ERR_LENGTH, "add long");
  CHECK(mutp_rlnc_decoder_add(dec, 0, 1, NULL, 4) == MUTP_RLNC_ERR_PARAM, "add NULL");
  CHECK(mutp_rlnc_decoder_add(NULL, 0, 1, out, 4) == MUTP_RLNC_ERR_PARAM, "add NULL decoder");
  CHECK(mutp_rlnc_decoder_rank(dec, 2) == MUTP_RLNC_ERR_RANGE, "rank range");
  CHECK(mutp_rlnc_decoder_rank(dec, 1) == 0, "rank 0");
  mutp_rlnc_encoder_free(enc);
  mutp_rlnc_decoder_free(dec);
  mutp_rlnc_encoder_free(NULL);
  mutp_rlnc_decoder_free(NULL);
  mutp_free(NULL);

  /* The empty object: no generations. */
  enc = mutp_rlnc_encoder_new(NULL, 0, 16, 4);
  dec = mutp_rlnc_decoder_new(0, 16, 4);
  CHECK(enc && dec, "empty object");
  CHECK(mutp_rlnc_encode(enc, 0, 1, out) == MUTP_RLNC_ERR_RANGE, "empty encode");
  CHECK(mutp_rlnc_decoder_complete(dec) == 0, "empty complete");
  mutp_rlnc_encoder_free(enc);
  mutp_rlnc_decoder_free(dec);

  /* The largest object is accepted by the decoder (1 GiB buffer) when memory allows. */
  dec = mutp_rlnc_decoder_new(1u << 30, 1258, 255);
  CHECK(dec != NULL || mutp_rlnc_last_error() == MUTP_RLNC_ERR_NOMEM, "1 GiB decoder");
  mutp_rlnc_decoder_free(dec);
}

void test_codec(void) {
  static const char *const variants[] = {"scalar", "ssse3", "avx2", "simd128"};
  for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
    const mutp_gf256_kernel *k = mutp_gf256_kernel_named(variants[v]);
    if (!k) continue;
    mutp_gf256_set_active(k);
    int before = test_failures;
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
      round_trip(&layouts[i], 1000 + i);
    }
    test_redundancy();
    printf("  codec with %-8s %s\n", variants[v], test_failures == before ? "ok" : "FAILED");
  }
  mutp_gf256_set_active(NULL);
  test_seeded_rank();
  test_bad_params();
  CHECK(mutp_live_allocations() == 0, "%u allocations leaked", mutp_live_allocations());
  CHECK(mutp_allocated_bytes() == 0, "%u bytes leaked", mutp_allocated_bytes());
}
