#!/usr/bin/env bash
# Command 2: set up, then run every check: type-check, lint, format check, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[test] type-check"
npx tsc -p tsconfig.json
npx tsc -p extension/tsconfig.json
echo "[test] lint"
npx eslint .
npx prettier --check . >/dev/null || { npx prettier --check .; exit 1; }
echo "[test] native codec tests (C RLNC, Rust wirehair)"
make -s -C wasm/rlnc test
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
(cd wasm/wirehair && CARGO_TARGET_DIR=target cargo test --locked --release --quiet)
echo "[test] jest"
npx jest --ci
