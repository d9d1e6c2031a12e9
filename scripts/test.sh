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
echo "[test] native tests (C RLNC, Rust wirehair)"
make -s -C wasm/rlnc test
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
(cd wasm/wirehair && CARGO_TARGET_DIR=target cargo test --locked --release --quiet)
echo "[test] linkem unit tests (testbed/emulator)"
(cd testbed/emulator && cargo test --locked --release --quiet)
echo "[test] quic native unit tests (rate controller, certificates)"
(cd quic/native && cargo test --locked --release --quiet)
echo "[test] jest: unit and component tests"
# Suites over real WebRTC (node-datachannel on loopback) wait on its native threads: they run on
# their own below, not beside the CPU-bound unit tests.
REAL_RTC='(/proxy/test/(webrtc|origo-link|transfer-host)|/client/test/origo-failover)\.test\.ts$'
npx jest --ci --testPathIgnorePatterns '\.browser\.test\.ts$' '/e2e/' '/testbed/test/' "$REAL_RTC"
# One at a time in a process of their own, before the whole-system suites: in the same process
# after them (which start and clean up node-datachannel, browsers and the testbed) a loopback data
# channel once did not open within 10 s.
echo "[test] jest: real-WebRTC suites"
npx jest --ci --runInBand --testPathPattern "$REAL_RTC"
# Whole-system, browser and testbed suites start many processes or native threads each (and the
# link emulator's validation measures timing): one at a time on these 2-core machines.
echo "[test] jest: end-to-end, browser and testbed tests"
npx jest --ci --runInBand --testPathPattern '(\.browser\.test\.ts|/e2e/|/testbed/test/)'
