#!/usr/bin/env bash
# Builds the two standalone WebAssembly modules of the RLNC core with Emscripten:
#   ../dist/mutp-rlnc-simd.wasm    SIMD128 split-nibble kernels (-msimd128)
#   ../dist/mutp-rlnc-scalar.wasm  table kernels, for engines without SIMD128
# No JavaScript glue: load with WebAssembly.instantiate(bytes, imports) and call
# exports._initialize() once (see wasm/src/rlnc.ts). Idempotent: a module is rebuilt only when a
# source, a header or this script is newer than it (--force rebuilds anyway).
set -euo pipefail
cd "$(dirname "$0")"

OUT=../dist
force=0
[ "${1:-}" = "--force" ] && force=1

if ! command -v emcc >/dev/null 2>&1; then
  echo "[rlnc] emcc not found: apt-get install emscripten" >&2
  exit 1
fi
# Debian's emcc needs Node's global module path for its JS optimizer passes (-O2 and above).
export NODE_PATH=/usr/share/nodejs

SOURCES=(src/alloc.c src/status.c src/layout.c src/coefficients.c src/encoder.c src/decoder.c
  src/gf256_tables.c src/gf256_dispatch.c src/gf256_kernels_scalar.c src/wasm_runtime.c)
FUNCTIONS=(mutp_abi_version mutp_rlnc_simd mutp_rlnc_last_error
  mutp_alloc mutp_free mutp_allocated_bytes mutp_live_allocations
  mutp_gf256_muladd mutp_gf256_mul mutp_rlnc_coefficients
  mutp_rlnc_encoder_new mutp_rlnc_encode mutp_rlnc_encoder_free
  mutp_rlnc_decoder_new mutp_rlnc_decoder_add mutp_rlnc_decoder_rank
  mutp_rlnc_decoder_complete mutp_rlnc_decoder_object mutp_rlnc_decoder_free
  malloc free)
exports=$(printf '_%s,' "${FUNCTIONS[@]}")
exports=${exports%,}

FLAGS=(-std=c11 -O3 -Wall -Wextra
  --no-entry -sSTANDALONE_WASM
  -sALLOW_MEMORY_GROWTH -sINITIAL_MEMORY=1MB -sMAXIMUM_MEMORY=4GB -sTOTAL_STACK=64KB
  -sFILESYSTEM=0 -sERROR_ON_UNDEFINED_SYMBOLS=1
  "-sEXPORTED_FUNCTIONS=$exports")

up_to_date() {
  local out=$1
  [ "$force" = 0 ] && [ -f "$out" ] && [ -z "$(find include src build.sh -newer "$out" -print -quit)" ]
}

build() {
  local name=$1
  shift
  local out="$OUT/mutp-rlnc-$name.wasm"
  if up_to_date "$out"; then
    echo "[rlnc] wasm/dist/${out##*/} up to date"
    return
  fi
  mkdir -p "$OUT"
  echo "[rlnc] emcc -> wasm/dist/${out##*/}"
  emcc "${FLAGS[@]}" "$@" "${SOURCES[@]}" -o "$out.tmp.wasm"
  mv "$out.tmp.wasm" "$out"
}

build simd -msimd128 src/gf256_kernels_wasm128.c
build scalar
