/*
 * test_vectors.c: packet vectors shared with the WebAssembly tests (vectors.json, checked in).
 * For fixed layouts and (generation, seed) pairs, the SHA-256 of each coded packet. The native
 * build writes the file (--write-vectors) and checks it (make test); the Jest test recomputes the
 * packets with both wasm modules and with the TypeScript reference encoder and compares.
 * The file is written in the form `prettier` keeps unchanged.
 */
#include <stdlib.h>
#include <string.h>

#include "../include/mutp_rlnc.h"
#include "sha256.h"
#include "test_util.h"

typedef struct {
  const char *name;
  uint32_t object_len, symbol_size, generation_size;
} vlayout;

static const vlayout layouts[] = {
    {"g1-short-last-symbol", 5000, 1200, 1},
    {"g16-short-last-generation", 40000, 1200, 16},
    {"g24-max-symbol", 100003, 1258, 24},
    {"g64-default-symbol", 200000, 1120, 64},
    {"g255", 300001, 1000, 255},
    {"g7-tiny-symbols", 777, 13, 7},
};

/* Seeds used for every generation; the last one depends on the generation. */
static uint32_t vector_seed(uint32_t g, int i) {
  static const uint32_t fixed[] = {0, 1, 0x9E3779B9u, 0xFFFFFFFFu};
  return i < 4 ? fixed[i] : 0x12345678u + g * 7919u;
}
#define SEEDS_PER_GENERATION 5

static uint8_t object_byte(uint32_t i) { return (uint8_t)(((i * 251u) ^ (i >> 7) ^ 0x5Au) & 0xFFu); }

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)size + 1);
  size_t got = fread(text, 1, (size_t)size, f);
  text[got] = 0;
  fclose(f);
  return text;
}

int test_vectors(const char *path, int write) {
  FILE *out = NULL;
  char *text = NULL, *cursor = NULL;
  if (write) {
    out = fopen(path, "wb");
    if (!out) {
      fprintf(stderr, "cannot write %s\n", path);
      return 1;
    }
    fprintf(out, "{\n");
    fprintf(out, "  \"description\": \"MUTP RLNC packet vectors: SHA-256 of coded packets, written by the native C build "
                 "(wasm/rlnc: make vectors), checked by make test and by wasm/test/rlnc.test.ts against both wasm "
                 "modules and the TypeScript reference encoder.\",\n");
    fprintf(out, "  \"objectBytes\": \"object[i] = ((i * 251) ^ (i >> 7) ^ 0x5a) & 0xff\",\n");
    fprintf(out, "  \"layouts\": [\n");
  } else {
    text = read_file(path);
    CHECK(text != NULL, "cannot read %s", path);
    if (!text) return 1;
    cursor = text;
  }
  size_t nlayouts = sizeof layouts / sizeof layouts[0];
  for (size_t li = 0; li < nlayouts; li++) {
    const vlayout *l = &layouts[li];
    uint8_t *object = malloc(l->object_len), *packet = malloc(l->symbol_size);
    for (uint32_t i = 0; i < l->object_len; i++) object[i] = object_byte(i);
    mutp_rlnc_encoder *enc = mutp_rlnc_encoder_new(object, l->object_len, l->symbol_size, l->generation_size);
    uint32_t symbols = (l->object_len + l->symbol_size - 1) / l->symbol_size;
    uint32_t gens = (symbols + l->generation_size - 1) / l->generation_size;
    if (out) {
      fprintf(out, "    {\n      \"name\": \"%s\",\n      \"objectLength\": %u,\n      \"symbolSize\": %u,\n", l->name,
              l->object_len, l->symbol_size);
      fprintf(out, "      \"generationSize\": %u,\n      \"packets\": [\n", l->generation_size);
    }
    for (uint32_t g = 0; g < gens; g++) {
      for (int i = 0; i < SEEDS_PER_GENERATION; i++) {
        uint32_t seed = vector_seed(g, i);
        char hex[65];
        mutp_rlnc_encode(enc, g, seed, packet);
        sha256_hex(packet, l->symbol_size, hex);
        if (out) {
          int last = g + 1 == gens && i + 1 == SEEDS_PER_GENERATION;
          fprintf(out,
                  "        {\n          \"generation\": %u,\n          \"seed\": %u,\n          \"sha256\": \"%s\"\n"
                  "        }%s\n",
                  g, seed, hex, last ? "" : ",");
        } else {
          /* The hashes must appear in this order in the file. */
          char *at = cursor ? strstr(cursor, hex) : NULL;
          CHECK(at != NULL, "%s generation %u seed %u: %s not found (in order) in %s", l->name, g, seed, hex, path);
          cursor = at ? at + 64 : cursor;
        }
      }
    }
    if (out) fprintf(out, "      ]\n    }%s\n", li + 1 == nlayouts ? "" : ",");
    mutp_rlnc_encoder_free(enc);
    free(object);
    free(packet);
  }
  if (out) {
    fprintf(out, "  ]\n}\n");
    fclose(out);
  }
  free(text);
  return 0;
}
