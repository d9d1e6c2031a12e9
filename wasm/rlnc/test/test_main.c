/*
 * test_main.c: native test runner. Usage:
 *   rlnc-test [vectors.json]            run all tests, checking the packet vectors in the file
 *   rlnc-test --write-vectors FILE      rewrite the packet vectors
 */
#include <string.h>

#include "../include/mutp_rlnc.h"
#include "sha256.h"
#include "test_util.h"

int test_failures;
int test_checks;

static void test_sha256(void) {
  char hex[65];
  sha256_hex((const uint8_t *)"abc", 3, hex);
  CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "sha256(abc) %s", hex);
  sha256_hex((const uint8_t *)"", 0, hex);
  CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0, "sha256('') %s", hex);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--write-vectors") == 0) return test_vectors(argv[2], 1);
  const char *vectors = argc > 1 ? argv[1] : "test/vectors.json";
  printf("sha256\n");
  test_sha256();
  printf("kernels\n");
  test_kernels();
  printf("codec\n");
  test_codec();
  printf("vectors (%s)\n", vectors);
  test_vectors(vectors, 0);
  printf("%d checks, %d failed\n", test_checks, test_failures);
  return test_failures ? 1 : 0;
}
