/* status.c: the status of the last failed constructor, for callers that only see NULL. */
#include "rlnc_internal.h"

static int32_t last_error = MUTP_RLNC_OK;

void *mutp_rlnc_fail(int32_t status) {
  last_error = status;
  return NULL;
}

int32_t mutp_rlnc_last_error(void) { return last_error; }
