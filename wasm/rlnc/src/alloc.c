/*
 * alloc.c: counted allocation. Each block carries a 16-byte header with its size, so the module
 * can report the bytes and blocks it holds (leak checks from tests and from JavaScript).
 */
#include <stdlib.h>
#include <string.h>

#include "rlnc_internal.h"

#define HEADER 16

static uint64_t allocated_bytes;
static uint32_t live_allocations;

void *mutp_mem_alloc(size_t n) {
  if (n == 0) n = 1;
  if (n > SIZE_MAX - HEADER) return NULL;
  unsigned char *p = malloc(n + HEADER);
  if (!p) return NULL;
  uint64_t size = n;
  memcpy(p, &size, sizeof size);
  allocated_bytes += n;
  live_allocations++;
  return p + HEADER;
}

void *mutp_mem_calloc(size_t n) {
  void *p = mutp_mem_alloc(n);
  if (p) memset(p, 0, n);
  return p;
}

void mutp_mem_free(void *q) {
  if (!q) return;
  unsigned char *p = (unsigned char *)q - HEADER;
  uint64_t size;
  memcpy(&size, p, sizeof size);
  allocated_bytes -= size;
  live_allocations--;
  free(p);
}

void *mutp_alloc(uint32_t n) { return mutp_mem_alloc(n); }

void mutp_free(void *p) { mutp_mem_free(p); }

uint32_t mutp_allocated_bytes(void) { return allocated_bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)allocated_bytes; }

uint32_t mutp_live_allocations(void) { return live_allocations; }
