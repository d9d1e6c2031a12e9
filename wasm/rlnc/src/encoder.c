/*
 * encoder.c: RLNC encoder. A packet is one linear combination of the symbols of a generation,
 * computed in one call to the kernel's lincomb (several source rows per pass over the output).
 * The object is referenced, not copied; only its zero-padded last symbol is copied, so every
 * source row is a full symbol.
 */
#include <string.h>

#include "gf256.h"
#include "rlnc_internal.h"

struct mutp_rlnc_encoder {
  mutp_layout layout;
  const uint8_t *object;
  uint8_t *last_symbol; /* padded copy of the last symbol when it is short, else NULL */
  uint8_t raw[MUTP_RLNC_MAX_GENERATION_SIZE];
  uint8_t coef[MUTP_RLNC_MAX_GENERATION_SIZE];
  const uint8_t *src[MUTP_RLNC_MAX_GENERATION_SIZE];
};

mutp_rlnc_encoder *mutp_rlnc_encoder_new(const uint8_t *object, uint32_t object_len, uint32_t symbol_size,
                                         uint32_t generation_size) {
  mutp_layout layout;
  mutp_gf256_init();
  if (mutp_layout_init(&layout, object_len, symbol_size, generation_size) != MUTP_RLNC_OK)
    return mutp_rlnc_fail(MUTP_RLNC_ERR_PARAM);
  if (!object && object_len) return mutp_rlnc_fail(MUTP_RLNC_ERR_PARAM);
  mutp_rlnc_encoder *enc = mutp_mem_alloc(sizeof *enc);
  if (!enc) return mutp_rlnc_fail(MUTP_RLNC_ERR_NOMEM);
  enc->layout = layout;
  enc->object = object;
  enc->last_symbol = NULL;
  uint32_t tail = object_len % symbol_size;
  if (tail) {
    enc->last_symbol = mutp_mem_calloc(symbol_size);
    if (!enc->last_symbol) {
      mutp_mem_free(enc);
      return mutp_rlnc_fail(MUTP_RLNC_ERR_NOMEM);
    }
    memcpy(enc->last_symbol, object + (object_len - tail), tail);
  }
  return enc;
}

int32_t mutp_rlnc_encode(mutp_rlnc_encoder *enc, uint32_t generation, uint32_t seed, uint8_t *out) {
  if (!enc || !out) return MUTP_RLNC_ERR_PARAM;
  const mutp_layout *l = &enc->layout;
  if (generation >= l->generation_count) return MUTP_RLNC_ERR_RANGE;
  uint32_t size = mutp_layout_unit_size(l, generation);
  mutp_rlnc_coefficients(seed, enc->raw, size);
  uint32_t first = generation * l->generation_size;
  size_t s = l->symbol_size;
  size_t k = 0;
  for (uint32_t i = 0; i < size; i++) {
    if (!enc->raw[i]) continue;
    uint32_t symbol = first + i;
    enc->src[k] = (enc->last_symbol && symbol == l->symbol_count - 1) ? enc->last_symbol : enc->object + symbol * s;
    enc->coef[k++] = enc->raw[i];
  }
  mutp_gf256_active()->lincomb(out, enc->src, enc->coef, k, s, 0);
  return MUTP_RLNC_OK;
}

void mutp_rlnc_encoder_free(mutp_rlnc_encoder *enc) {
  if (!enc) return;
  mutp_mem_free(enc->last_symbol);
  mutp_mem_free(enc);
}
