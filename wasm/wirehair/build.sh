#!/usr/bin/env bash
# Builds the wirehair WebAssembly module wasm/dist/mutp-wirehair.wasm (Rust crate in this folder,
# wasm32-unknown-emscripten, standalone: no emscripten JS glue) and the native bench binary.
# Idempotent: does nothing when both outputs are newer than every input (FORCE=1 rebuilds).
# Needs: rustup with the wasm32-unknown-emscripten target, emscripten (emcc), Node (emcc's JS
# optimiser), and crates.io the first time (or a filled ~/.cargo registry).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
dist="$(cd "$here/.." && pwd)/dist"
wasm_out="$dist/mutp-wirehair.wasm"
export CARGO_TARGET_DIR="$here/target"
bench_bin="$CARGO_TARGET_DIR/release/examples/bench"

log() { printf '[wirehair] %s\n' "$*"; }

cd "$here"

inputs=(Cargo.toml build.sh src examples)
[ -f Cargo.lock ] && inputs+=(Cargo.lock)
if [ "${FORCE:-0}" != 1 ] && [ -f "$wasm_out" ] && [ -f "$bench_bin" ]; then
  oldest="$wasm_out"
  [ "$bench_bin" -ot "$oldest" ] && oldest="$bench_bin"
  if [ -z "$(find "${inputs[@]}" -newer "$oldest" -print -quit)" ]; then
    log "up to date: $wasm_out"
    exit 0
  fi
fi

for tool in cargo emcc node; do
  command -v "$tool" >/dev/null 2>&1 || { echo "[wirehair] $tool not found (run bash scripts/setup.sh)" >&2; exit 1; }
done

# The exports of src/abi.rs (keep in sync; the TypeScript loader checks mutp_wh_abi_version).
exports=(
  mutp_wh_abi_version mutp_wh_init mutp_wh_alloc mutp_wh_free_bytes
  mutp_wh_encoder_create mutp_wh_encode mutp_wh_decoder_create mutp_wh_decode mutp_wh_recover
  mutp_wh_codec_free mutp_wh_last_error mutp_wh_allocated_bytes mutp_wh_live_codecs
)
exported_functions=$(printf '_%s,' "${exports[@]}")
exported_functions=${exported_functions%,}

# emcc's JS optimiser (run at -O2 and above) needs Debian's node modules (acorn).
export NODE_PATH="${NODE_PATH:+$NODE_PATH:}/usr/share/nodejs"
# wirehair-wrapper's build.rs passes -msse4.1, which emscripten only accepts with -msimd128; the
# x86 code path (cpuid inline asm) does not compile for wasm, GF256_TARGET_MOBILE selects the
# portable 64-bit one.
export CXXFLAGS_wasm32_unknown_emscripten="-msimd128 -DGF256_TARGET_MOBILE"
# A cdylib is otherwise linked as an emscripten side module, which fails. The module is
# standalone (no JS glue), has no main, and may grow its memory (up to emscripten's default 2 GiB).
export CARGO_TARGET_WASM32_UNKNOWN_EMSCRIPTEN_RUSTFLAGS="-C link-arg=-sSIDE_MODULE=0 -C link-arg=--no-entry \
-C link-arg=-sSTANDALONE_WASM -C link-arg=-sALLOW_MEMORY_GROWTH -C link-arg=-sEXPORTED_FUNCTIONS=$exported_functions"
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS

start=$(date +%s)
log "cargo build --release --target wasm32-unknown-emscripten"
cargo build --locked --release --target wasm32-unknown-emscripten --lib
mkdir -p "$dist"
cp "$CARGO_TARGET_DIR/wasm32-unknown-emscripten/release/mutp_wirehair.wasm" "$wasm_out"
log "wrote $wasm_out ($(wc -c <"$wasm_out") bytes)"

log "cargo build --release --example bench (native)"
cargo build --locked --release --example bench
touch "$bench_bin" "$wasm_out"
log "done in $(($(date +%s) - start)) s"
