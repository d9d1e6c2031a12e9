/* sha256.h: SHA-256 (FIPS 180-4) for the test vectors. */
#ifndef MUTP_TEST_SHA256_H
#define MUTP_TEST_SHA256_H

#include <stddef.h>
#include <stdint.h>

void sha256(const uint8_t *data, size_t len, uint8_t digest[32]);
void sha256_hex(const uint8_t *data, size_t len, char hex[65]);

#endif
