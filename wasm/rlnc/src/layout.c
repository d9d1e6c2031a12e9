/* layout.c: the object layout and its limits. */
#include "rlnc_internal.h"

int32_t mutp_layout_init(mutp_layout *l, uint32_t object_len, uint32_t symbol_size, uint32_t generation_size) {
  if (generation_size < 1 || generation_size > MUTP_RLNC_MAX_GENERATION_SIZE) return MUTP_RLNC_ERR_PARAM;
  if (symbol_size < 1 || symbol_size > MUTP_RLNC_MAX_SYMBOL_SIZE) return MUTP_RLNC_ERR_PARAM;
  if (object_len > MUTP_RLNC_MAX_OBJECT_BYTES) return MUTP_RLNC_ERR_PARAM;
  l->object_len = object_len;
  l->symbol_size = symbol_size;
  l->generation_size = generation_size;
  /* object_len <= 2^30, so none of these overflow 32 bits. */
  l->symbol_count = (uint32_t)(((uint64_t)object_len + symbol_size - 1) / symbol_size);
  l->generation_count = (l->symbol_count + generation_size - 1) / generation_size;
  return MUTP_RLNC_OK;
}
