/*
 * rlnc_bench.c: native speed ceiling. Prints one JSON line per measurement:
 *   {"codec":"gf256","op":"muladd","env":"native","variant":"avx2","g":null,"packetBytes":1200,"MBps":...}
 *   {"codec":"rlnc","op":"encode"|"decode","env":"native","variant":"avx2","g":24,"packetBytes":1200,"MBps":...}
 * MBps is MB (10^6 bytes) of object data per second: the region size for muladd, packets *
 * packetBytes for encode, decoded object bytes for decode. Each measurement runs >= 0.3 s and the
 * best of 3 runs is reported (--quick: 0.05 s, one run). RLNC uses the best kernel unless
 * --all-variants is given. Decode uses seeded packets for every g.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../include/mutp_rlnc.h"
#include "../src/gf256.h"

static double min_seconds = 0.3; /* --quick: 0.05 */
static int runs = 3;              /* --quick: 1 */
#define PACKET 1200
#define OBJECT_TARGET (1u << 20)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef double (*work_fn)(void *ctx, unsigned iterations); /* returns bytes processed */

/* Best-of-`runs` throughput in MB/s; each run grows its iteration count until it lasts min_seconds. */
static double measure(work_fn fn, void *ctx) {
  double best = 0;
  for (int run = 0; run < runs; run++) {
    double bytes = 0, start = now(), elapsed = 0;
    unsigned batch = 1;
    while ((elapsed = now() - start) < min_seconds) {
      bytes += fn(ctx, batch);
      if (batch < (1u << 20)) batch *= 2;
    }
    double mbps = bytes / elapsed / 1e6;
    if (mbps > best) best = mbps;
  }
  return best;
}

static void print_line(const char *codec, const char *op, const char *variant, int g, unsigned packet, double mbps) {
  char gs[16];
  if (g > 0)
    snprintf(gs, sizeof gs, "%d", g);
  else
    snprintf(gs, sizeof gs, "null");
  printf("{\"codec\":\"%s\",\"op\":\"%s\",\"env\":\"native\",\"variant\":\"%s\",\"g\":%s,\"packetBytes\":%u,"
         "\"MBps\":%.1f}\n",
         codec, op, variant, gs, packet, mbps);
  fflush(stdout);
}

/* ---------------------------------------------------------------- kernel */

typedef struct {
  const mutp_gf256_kernel *k;
  uint8_t *dst, *src;
  size_t n;
  unsigned c;
} kernel_ctx;

static double kernel_work(void *p, unsigned iterations) {
  kernel_ctx *x = p;
  for (unsigned i = 0; i < iterations; i++) {
    x->c = x->c * 7 % 255 + 1; /* varying non-zero coefficients */
    x->k->muladd(x->dst, x->src, (uint8_t)x->c, x->n);
  }
  return (double)iterations * (double)x->n;
}

/* ---------------------------------------------------------------- codec */

typedef struct {
  uint32_t object_len, g, gens;
  uint8_t *object, *packet;
  mutp_rlnc_encoder *enc;
  uint32_t next;
  uint8_t *coded;   /* per generation, `per_gen` pre-encoded packets */
  uint32_t *seeds;
  uint32_t per_gen;
} codec_ctx;

static double encode_work(void *p, unsigned iterations) {
  codec_ctx *x = p;
  for (unsigned i = 0; i < iterations; i++, x->next++)
    mutp_rlnc_encode(x->enc, x->next % x->gens, x->next * 2654435761u + 1, x->packet);
  return (double)iterations * PACKET;
}

static double decode_work(void *p, unsigned iterations) {
  codec_ctx *x = p;
  for (unsigned it = 0; it < iterations; it++) {
    mutp_rlnc_decoder *dec = mutp_rlnc_decoder_new(x->object_len, PACKET, x->g);
    for (uint32_t gen = 0; gen < x->gens; gen++) {
      uint32_t n = x->g; /* the object is a whole number of full generations */
      for (uint32_t j = 0; j < x->per_gen && mutp_rlnc_decoder_rank(dec, gen) < (int32_t)n; j++) {
        size_t idx = (size_t)gen * x->per_gen + j;
        mutp_rlnc_decoder_add(dec, gen, x->seeds[idx], x->coded + idx * PACKET, PACKET);
      }
    }
    if (mutp_rlnc_decoder_complete(dec) != (int32_t)x->gens ||
        memcmp(mutp_rlnc_decoder_object(dec), x->object, x->object_len) != 0) {
      fprintf(stderr, "decode failed\n");
      exit(1);
    }
    mutp_rlnc_decoder_free(dec);
  }
  return (double)iterations * x->object_len;
}

static void bench_codec(const char *variant, uint32_t g) {
  codec_ctx x = {0};
  x.g = g;
  x.gens = (OBJECT_TARGET + g * PACKET - 1) / (g * PACKET);
  x.object_len = x.gens * g * PACKET;
  x.object = malloc(x.object_len);
  x.packet = malloc(PACKET);
  for (uint32_t i = 0; i < x.object_len; i++) x.object[i] = (uint8_t)(i * 2654435761u >> 13);
  x.enc = mutp_rlnc_encoder_new(x.object, x.object_len, PACKET, g);
  print_line("rlnc", "encode", variant, (int)g, PACKET, measure(encode_work, &x));

  x.per_gen = g + 2; /* ~0.004 extra packets per generation on average; decode_work checks completion */
  x.coded = malloc((size_t)x.gens * x.per_gen * PACKET);
  x.seeds = malloc((size_t)x.gens * x.per_gen * sizeof(uint32_t));
  uint64_t rng = 0x243F6A8885A308D3ull;
  for (uint32_t gen = 0; gen < x.gens; gen++)
    for (uint32_t j = 0; j < x.per_gen; j++) {
      size_t idx = (size_t)gen * x.per_gen + j;
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      x.seeds[idx] = (uint32_t)(rng >> 32);
      mutp_rlnc_encode(x.enc, gen, x.seeds[idx], x.coded + idx * PACKET);
    }
  print_line("rlnc", "decode", variant, (int)g, PACKET, measure(decode_work, &x));
  mutp_rlnc_encoder_free(x.enc);
  free(x.object);
  free(x.packet);
  free(x.coded);
  free(x.seeds);
}

int main(int argc, char **argv) {
  static const char *const variants[] = {"scalar", "ssse3", "avx2"};
  static const size_t regions[] = {1200, 65536};
  static const uint32_t gs[] = {16, 24, 32, 64};
  int all = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--all-variants") == 0) {
      all = 1;
    } else if (strcmp(argv[i], "--quick") == 0) {
      min_seconds = 0.05;
      runs = 1;
    } else {
      fprintf(stderr, "usage: rlnc-bench [--quick] [--all-variants]\n");
      return 2;
    }
  }
  mutp_gf256_init();
  for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
    kernel_ctx x = {mutp_gf256_kernel_named(variants[v]), NULL, NULL, 0, 1};
    if (!x.k) continue;
    for (size_t r = 0; r < sizeof regions / sizeof regions[0]; r++) {
      x.n = regions[r];
      x.dst = calloc(1, x.n);
      x.src = malloc(x.n);
      for (size_t i = 0; i < x.n; i++) x.src[i] = (uint8_t)(i * 31 + 7);
      print_line("gf256", "muladd", variants[v], 0, (unsigned)x.n, measure(kernel_work, &x));
      free(x.dst);
      free(x.src);
    }
  }
  for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
    const mutp_gf256_kernel *k = all ? mutp_gf256_kernel_named(variants[v]) : NULL;
    if (all && !k) continue;
    mutp_gf256_set_active(k);
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) bench_codec(mutp_gf256_active()->name, gs[i]);
    if (!all) break;
  }
  return 0;
}
