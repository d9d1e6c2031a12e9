/*
 * mutp_rlnc.h: the public ABI of the MUTP RLNC core (random linear network coding over GF(2^8)).
 *
 * The same functions are exported, with the same names, by the native library and by the two
 * standalone WebAssembly modules (mutp-rlnc-simd.wasm built with SIMD128, mutp-rlnc-scalar.wasm
 * without). In WebAssembly every pointer is a 32-bit offset into the module's exported memory;
 * uint32_t/int32_t arguments and results are wasm i32 (JavaScript callers read pointers and
 * byte counts with `>>> 0`, memory may grow up to 4 GiB).
 *
 * Normative coding rules (they match the pure-TypeScript reference in shared/src byte for byte):
 *  - GF(2^8) with polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11D), generator 2.
 *  - Coefficients from a 32-bit seed (docs/protocol.md §8.2), all arithmetic mod 2^32:
 *      fmix32(z): z ^= z >> 16; z *= 0x85EBCA6B; z ^= z >> 13; z *= 0xC2B2AE35; z ^= z >> 16
 *      coef[i] = (fmix32(seed + (i / 4 + 1) * 0x9E3779B9) >> (8 * (i % 4))) & 0xFF
 *    (MurmurHash3's 32-bit finaliser over a Weyl sequence, four coefficients per output, low byte
 *    first). Every seed, 0 included, is an ordinary seed. The generator is not linear over GF(2),
 *    so seeded packets reach full rank for every generation size, like random vectors.
 *  - Layout: the object is cut into symbols of symbol_size bytes (the last one zero-padded) and
 *    the symbols into generations of generation_size symbols (the last one may be short:
 *    unit_size(g) = min(G, symbol_count - g * G)).
 *  - The packet for (generation g, seed) is sum_k coef[k] * symbol[g * G + k], k < unit_size(g);
 *    a coded payload is always exactly symbol_size bytes.
 *
 * Memory: every allocation made by this library (objects, decoders, buffers from mutp_alloc) is
 * counted; mutp_allocated_bytes() and mutp_live_allocations() let tests check for leaks.
 * Nothing here traps or aborts on bad input: functions return NULL or a negative status.
 * Not thread-safe per object (one encoder/decoder must not be used by two threads at once).
 */
#ifndef MUTP_RLNC_H
#define MUTP_RLNC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define MUTP_API __attribute__((visibility("default")))
#else
#define MUTP_API
#endif

/* Version of this ABI; bumped on any incompatible change. */
#define MUTP_RLNC_ABI_VERSION 1

/* Limits checked by the *_new functions. */
#define MUTP_RLNC_MAX_GENERATION_SIZE 255u
#define MUTP_RLNC_MAX_SYMBOL_SIZE 65535u
#define MUTP_RLNC_MAX_OBJECT_BYTES (1u << 30) /* 1 GiB */

/* Status codes: 0 or positive is success, negative is an error. */
typedef enum mutp_rlnc_status {
  MUTP_RLNC_OK = 0,
  MUTP_RLNC_ERR_PARAM = -1,  /* bad parameter: size outside the limits, NULL pointer */
  MUTP_RLNC_ERR_LENGTH = -2, /* payload length differs from symbol_size */
  MUTP_RLNC_ERR_RANGE = -3,  /* generation index out of range */
  MUTP_RLNC_ERR_NOMEM = -4   /* out of memory */
} mutp_rlnc_status;

/* Results of mutp_rlnc_decoder_add besides the negative errors. */
#define MUTP_RLNC_REDUNDANT 0
#define MUTP_RLNC_INNOVATIVE 1

typedef struct mutp_rlnc_encoder mutp_rlnc_encoder;
typedef struct mutp_rlnc_decoder mutp_rlnc_decoder;

/* ---------------------------------------------------------------- module */

/* MUTP_RLNC_ABI_VERSION of the build. */
MUTP_API int32_t mutp_abi_version(void);

/* 1 if the GF(2^8) kernels of this build use WebAssembly SIMD128, 0 otherwise (native: 0). */
MUTP_API int32_t mutp_rlnc_simd(void);

/* Status (mutp_rlnc_status) of the last failed mutp_rlnc_*_new call, MUTP_RLNC_OK before any. */
MUTP_API int32_t mutp_rlnc_last_error(void);

/* ---------------------------------------------------------------- memory */

/* Counted allocation of n bytes (n = 0 allocates a minimal block); NULL when out of memory.
 * The block is 16-byte aligned when the system allocator is. */
MUTP_API void *mutp_alloc(uint32_t n);
/* Frees a block from mutp_alloc; NULL is a no-op. */
MUTP_API void mutp_free(void *p);
/* Bytes currently allocated by this library (payload bytes, saturated at 2^32 - 1). */
MUTP_API uint32_t mutp_allocated_bytes(void);
/* Number of live allocations of this library. */
MUTP_API uint32_t mutp_live_allocations(void);

/* ---------------------------------------------------------------- GF(2^8) region kernels */

/* dst[i] ^= c * src[i] for i < n, with the best kernel of the build. dst and src must not overlap
 * unless dst == src. */
MUTP_API void mutp_gf256_muladd(uint8_t *dst, const uint8_t *src, uint8_t c, uint32_t n);
/* dst[i] = c * dst[i] for i < n. */
MUTP_API void mutp_gf256_mul(uint8_t *dst, uint8_t c, uint32_t n);
/* The first `count` coefficients of `seed` into out[0 .. count). */
MUTP_API void mutp_rlnc_coefficients(uint32_t seed, uint8_t *out, uint32_t count);

/* ---------------------------------------------------------------- encoder */

/* An encoder over object[0 .. object_len). The encoder keeps the pointer (no copy of the object
 * except the padded last symbol): the caller keeps the object alive and unchanged until
 * mutp_rlnc_encoder_free. object may be NULL only when object_len is 0.
 * Limits: 1 <= generation_size <= 255, 1 <= symbol_size <= 65535, object_len <= 1 GiB.
 * Returns NULL on bad parameters or out of memory (see mutp_rlnc_last_error). */
MUTP_API mutp_rlnc_encoder *mutp_rlnc_encoder_new(const uint8_t *object, uint32_t object_len, uint32_t symbol_size,
                                                  uint32_t generation_size);
/* Writes the symbol_size bytes of packet (generation, seed) to out, which must not overlap the
 * object. Returns MUTP_RLNC_OK, MUTP_RLNC_ERR_RANGE or MUTP_RLNC_ERR_PARAM (NULL pointers). */
MUTP_API int32_t mutp_rlnc_encode(mutp_rlnc_encoder *enc, uint32_t generation, uint32_t seed, uint8_t *out);
/* NULL is a no-op. */
MUTP_API void mutp_rlnc_encoder_free(mutp_rlnc_encoder *enc);

/* ---------------------------------------------------------------- decoder */

/* A decoder for an object of object_len bytes (same limits as the encoder). It allocates the
 * object buffer (object_len rounded up to whole symbols) once, here, and the elimination state of
 * a generation when its first packet arrives; the state of a generation is released as soon as
 * the generation is complete. Returns NULL on bad parameters or out of memory. */
MUTP_API mutp_rlnc_decoder *mutp_rlnc_decoder_new(uint32_t object_len, uint32_t symbol_size, uint32_t generation_size);
/* Adds packet (generation, seed, payload). Returns MUTP_RLNC_INNOVATIVE (1), MUTP_RLNC_REDUNDANT
 * (0), or MUTP_RLNC_ERR_LENGTH (payload_len != symbol_size), MUTP_RLNC_ERR_RANGE (generation
 * out of range), MUTP_RLNC_ERR_PARAM (NULL pointers), MUTP_RLNC_ERR_NOMEM. The payload is only
 * read, and must not point into the decoder's object buffer. A redundant packet costs the
 * reduction of its coefficient vector only; its payload is not touched. */
MUTP_API int32_t mutp_rlnc_decoder_add(mutp_rlnc_decoder *dec, uint32_t generation, uint32_t seed,
                                       const uint8_t *payload, uint32_t payload_len);
/* Degrees of freedom received for a generation (0 .. unit_size), or MUTP_RLNC_ERR_RANGE /
 * MUTP_RLNC_ERR_PARAM. */
MUTP_API int32_t mutp_rlnc_decoder_rank(const mutp_rlnc_decoder *dec, uint32_t generation);
/* Number of complete generations (equal to the generation count when the object is decoded). */
MUTP_API int32_t mutp_rlnc_decoder_complete(const mutp_rlnc_decoder *dec);
/* The object buffer, decoded in place: symbol k of a complete generation is at its final
 * position, so once every generation is complete, bytes [0, object_len) are the object (no
 * reassembly copy). Bytes of incomplete generations are unspecified. Valid until
 * mutp_rlnc_decoder_free. NULL for a NULL decoder or an empty object. */
MUTP_API const uint8_t *mutp_rlnc_decoder_object(const mutp_rlnc_decoder *dec);
/* NULL is a no-op. */
MUTP_API void mutp_rlnc_decoder_free(mutp_rlnc_decoder *dec);

#ifdef __cplusplus
}
#endif

#endif /* MUTP_RLNC_H */
