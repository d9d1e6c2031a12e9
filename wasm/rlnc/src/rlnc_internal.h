/* rlnc_internal.h (internal): counted memory, status and the object layout shared by the codec. */
#ifndef MUTP_RLNC_INTERNAL_H
#define MUTP_RLNC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "../include/mutp_rlnc.h"

/* Counted allocation (see alloc.c); sizes are size_t and checked for overflow. */
void *mutp_mem_alloc(size_t n);
void *mutp_mem_calloc(size_t n);
void mutp_mem_free(void *p);

/* Records the status of a failed *_new for mutp_rlnc_last_error; returns NULL for convenience. */
void *mutp_rlnc_fail(int32_t status);

/* How the object is cut: symbols of symbol_size bytes, generations of generation_size symbols. */
typedef struct mutp_layout {
  uint32_t object_len;
  uint32_t symbol_size;
  uint32_t generation_size;
  uint32_t symbol_count;     /* ceil(object_len / symbol_size) */
  uint32_t generation_count; /* ceil(symbol_count / generation_size) */
} mutp_layout;

/* Checks the limits and fills `l`; returns MUTP_RLNC_OK or MUTP_RLNC_ERR_PARAM. */
int32_t mutp_layout_init(mutp_layout *l, uint32_t object_len, uint32_t symbol_size, uint32_t generation_size);

/* Symbols in generation g (< generation_count); only the last generation can be short. */
static inline uint32_t mutp_layout_unit_size(const mutp_layout *l, uint32_t g) {
  uint32_t first = g * l->generation_size;
  uint32_t left = l->symbol_count - first;
  return left < l->generation_size ? left : l->generation_size;
}

#endif /* MUTP_RLNC_INTERNAL_H */
