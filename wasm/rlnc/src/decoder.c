/*
 * decoder.c: RLNC decoder, on-the-fly Gauss-Jordan elimination per generation, decoded in place.
 *
 * The decoder owns one buffer of symbol_count * symbol_size bytes. The payload row with pivot
 * column p of generation g lives at symbol g * G + p of that buffer, and rows are kept fully
 * reduced (reduced row echelon form) after every packet, so at full rank every row is its source
 * symbol and the buffer is the object: no back-substitution at the end, no reassembly copy.
 *
 * Adding a packet with coefficient vector v to a generation of rank r:
 *  1. Because the rows are fully reduced, the multiplier of pivot row j is simply v[j]; the
 *     coefficient vector is reduced first (r rows of n bytes), the payload not yet touched.
 *  2. If nothing is left, the packet is redundant: cost O(r * n), the payload is never read.
 *  3. Otherwise its first non-zero column p becomes a pivot: the new row
 *     inv * payload + sum_j (inv * v[j]) * row_j, inv = 1 / v'[p], is written straight into slot p
 *     in one lincomb pass.
 *  4. Column p is eliminated from the other rows (one scatter pass of the new row over them).
 * The per-generation elimination state (n x n coefficient rows and the pivot bookkeeping) is
 * allocated with the first packet of the generation and freed when the generation completes.
 */
#include <string.h>

#include "gf256.h"
#include "rlnc_internal.h"

#define GMAX MUTP_RLNC_MAX_GENERATION_SIZE

struct mutp_rlnc_decoder {
  mutp_layout layout;
  uint8_t *object;  /* symbol_count * symbol_size bytes, decoded in place */
  uint8_t *rank;    /* per generation */
  uint8_t **state;  /* per generation, while 0 < rank < size: [coef n*n][pivots n] */
  uint32_t complete; /* generations at full rank */
  /* scratch for one add() */
  uint8_t v[GMAX];
  uint8_t mult[GMAX];
  uint8_t mult_col[GMAX];
  uint8_t c[GMAX + 1];
  const uint8_t *src[GMAX + 1];
  uint8_t *coef_rows[GMAX];
  uint8_t *data_rows[GMAX];
};

mutp_rlnc_decoder *mutp_rlnc_decoder_new(uint32_t object_len, uint32_t symbol_size, uint32_t generation_size) {
  mutp_layout layout;
  mutp_gf256_init();
  if (mutp_layout_init(&layout, object_len, symbol_size, generation_size) != MUTP_RLNC_OK)
    return mutp_rlnc_fail(MUTP_RLNC_ERR_PARAM);
  /* All sizes in 64 bits first: on wasm32 size_t is 32 bits. */
  uint64_t object_bytes = (uint64_t)layout.symbol_count * symbol_size;
  uint64_t state_bytes = (uint64_t)layout.generation_count * sizeof(uint8_t *);
  if (object_bytes > SIZE_MAX / 2 || state_bytes > SIZE_MAX / 2) return mutp_rlnc_fail(MUTP_RLNC_ERR_NOMEM);
  mutp_rlnc_decoder *dec = mutp_mem_alloc(sizeof *dec);
  if (!dec) return mutp_rlnc_fail(MUTP_RLNC_ERR_NOMEM);
  memset(dec, 0, sizeof *dec);
  dec->layout = layout;
  dec->object = object_bytes ? mutp_mem_alloc((size_t)object_bytes) : NULL;
  dec->rank = mutp_mem_calloc(layout.generation_count);
  dec->state = mutp_mem_calloc((size_t)state_bytes);
  if ((object_bytes && !dec->object) || !dec->rank || !dec->state) {
    mutp_rlnc_decoder_free(dec);
    return mutp_rlnc_fail(MUTP_RLNC_ERR_NOMEM);
  }
  return dec;
}

int32_t mutp_rlnc_decoder_add(mutp_rlnc_decoder *dec, uint32_t generation, uint32_t seed, const uint8_t *payload,
                              uint32_t payload_len) {
  if (!dec || !payload) return MUTP_RLNC_ERR_PARAM;
  const mutp_layout *l = &dec->layout;
  if (generation >= l->generation_count) return MUTP_RLNC_ERR_RANGE;
  if (payload_len != l->symbol_size) return MUTP_RLNC_ERR_LENGTH;
  const size_t n = mutp_layout_unit_size(l, generation);
  const size_t s = l->symbol_size;
  const size_t r = dec->rank[generation];
  if (r == n) return MUTP_RLNC_REDUNDANT;

  uint8_t *st = dec->state[generation];
  if (!st) {
    st = mutp_mem_calloc(n * n + n);
    if (!st) return MUTP_RLNC_ERR_NOMEM;
    dec->state[generation] = st;
  }
  uint8_t *coef = st, *pivots = st + n * n;
  uint8_t *base = dec->object + (size_t)generation * l->generation_size * s;
  const mutp_gf256_kernel *kern = mutp_gf256_active();
  uint8_t *v = dec->v;

  /* 1. Reduce the coefficient vector; the multipliers are its entries at the pivot columns. */
  mutp_rlnc_coefficients(seed, v, (uint32_t)n);
  size_t k = 0;
  for (size_t t = 0; t < r; t++) {
    uint8_t col = pivots[t];
    if (!v[col]) continue;
    dec->mult_col[k] = col;
    dec->mult[k] = v[col];
    dec->src[k++] = coef + col * n;
  }
  kern->lincomb(v, dec->src, dec->mult, k, n, 1);

  /* 2. Innovative only if a non-pivot column is left (pivot columns are now zero). */
  size_t p = 0;
  while (p < n && !v[p]) p++;
  if (p == n) return MUTP_RLNC_REDUNDANT;

  /* 3. The new row, normalised, straight into slot p. */
  uint8_t inv = gf_inv(v[p]);
  kern->mul(v, inv, n);
  uint8_t *row = base + p * s;
  dec->src[0] = payload;
  dec->c[0] = inv;
  for (size_t t = 0; t < k; t++) {
    dec->src[t + 1] = base + dec->mult_col[t] * s;
    dec->c[t + 1] = gf_mul(inv, dec->mult[t]);
  }
  kern->lincomb(row, dec->src, dec->c, k + 1, s, 0);

  /* 4. Eliminate column p from the other rows. */
  size_t q = 0;
  for (size_t t = 0; t < r; t++) {
    uint8_t col = pivots[t];
    uint8_t f = coef[col * n + p];
    if (!f) continue;
    dec->coef_rows[q] = coef + col * n;
    dec->data_rows[q] = base + col * s;
    dec->c[q++] = f;
  }
  kern->scatter(dec->coef_rows, v, dec->c, q, n);
  kern->scatter(dec->data_rows, row, dec->c, q, s);

  memcpy(coef + p * n, v, n);
  pivots[r] = (uint8_t)p;
  dec->rank[generation] = (uint8_t)(r + 1);
  if (r + 1 == n) {
    /* Complete: the coefficient rows are the identity now, the payload rows the symbols. */
    mutp_mem_free(st);
    dec->state[generation] = NULL;
    dec->complete++;
  }
  return MUTP_RLNC_INNOVATIVE;
}

int32_t mutp_rlnc_decoder_rank(const mutp_rlnc_decoder *dec, uint32_t generation) {
  if (!dec) return MUTP_RLNC_ERR_PARAM;
  if (generation >= dec->layout.generation_count) return MUTP_RLNC_ERR_RANGE;
  return dec->rank[generation];
}

int32_t mutp_rlnc_decoder_complete(const mutp_rlnc_decoder *dec) {
  if (!dec) return MUTP_RLNC_ERR_PARAM;
  return (int32_t)dec->complete;
}

const uint8_t *mutp_rlnc_decoder_object(const mutp_rlnc_decoder *dec) { return dec ? dec->object : NULL; }

void mutp_rlnc_decoder_free(mutp_rlnc_decoder *dec) {
  if (!dec) return;
  if (dec->state)
    for (uint32_t g = 0; g < dec->layout.generation_count; g++) mutp_mem_free(dec->state[g]);
  mutp_mem_free(dec->state);
  mutp_mem_free(dec->rank);
  mutp_mem_free(dec->object);
  mutp_mem_free(dec);
}
