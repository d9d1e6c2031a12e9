#!/usr/bin/env bash
# Command 2: set up, then run every check: type-check, lint, format check, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
setup_t0=$SECONDS
bash scripts/setup.sh
echo "[test] set-up took $((SECONDS - setup_t0)) s"
# Each phase prints its wall time when the next begins (the note on CI time reads them).
phase_name=
phase() {
  [ -n "$phase_name" ] && echo "[test] $phase_name took $((SECONDS - phase_t0)) s"
  phase_name=$1
  phase_t0=$SECONDS
  [ -n "$phase_name" ] && echo "[test] $phase_name"
  return 0
}
# Checks that are independent of each other run side by side, each timed, its output in a log; a
# failing one prints its log after all have finished (wait_checks), and the run stops there.
checks=$(mktemp -d)
trap 'rm -rf "$checks"' EXIT
check_pids=()
check_names=()
start_check() {
  local name=$1
  shift
  (
    t0=$SECONDS
    "$@" >"$checks/$name.log" 2>&1
    echo "[test] $name passed in $((SECONDS - t0)) s"
  ) &
  check_pids+=($!)
  check_names+=("$name")
}
# Waits for every check started; with --show-output prints each log (a test run's counts) as well.
wait_checks() {
  local failed=0 i
  for i in "${!check_pids[@]}"; do
    if ! wait "${check_pids[$i]}"; then
      echo "[test] ${check_names[$i]} failed:" >&2
      cat "$checks/${check_names[$i]}.log" >&2
      failed=1
    elif [ "${1:-}" = --show-output ]; then
      cat "$checks/${check_names[$i]}.log"
    fi
  done
  check_pids=()
  check_names=()
  [ "$failed" -eq 0 ] || exit 1
}
# The static checks are each single-threaded.
phase "type-check, lint, format check and import circles (side by side)"
start_check type-check npx tsc -p tsconfig.json
start_check type-check-extension npx tsc -p extension/tsconfig.json
start_check lint npx eslint .
start_check format npx prettier --check .
start_check import-circles npm run --silent lint:cycles
wait_checks
# The native suites are mostly the compilation of their test binaries, one compiler at a time
# each, in directories and cargo target directories of their own: side by side (they took 31 s
# one after the other in CI).
phase "native tests: C RLNC, Rust wirehair, linkem (testbed/emulator), quic (side by side)"
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
start_check rlnc make -s -C wasm/rlnc test
start_check wirehair env -C wasm/wirehair CARGO_TARGET_DIR=target cargo test --locked --release --quiet
start_check linkem env -C testbed/emulator cargo test --locked --release --quiet
start_check quic-native env -C quic/native cargo test --locked --release --quiet
wait_checks --show-output
phase "jest: unit and component tests"
# Suites over real WebRTC (node-datachannel on loopback, `*.rtc.test.ts`; eslint refuses
# @mutp/node-rtc in other unit tests) wait on its native threads: they run on their own below, not
# beside the CPU-bound unit tests (a loopback channel then once took over 15 s to open).
REAL_RTC='\.rtc\.test\.ts$'
# Two workers: jest's default on these 2-core machines (cores - 1) is one worker, and with one it
# runs every suite in its own process, one after the other, on about one core (the phase took the
# sum of its suites' times, 165 s). The 24 slowest suites: 190 s that way, 128 s with two workers,
# every test passing (back to back, on a machine busy with other work).
npx jest --ci --maxWorkers=2 --testPathIgnorePatterns '\.browser\.test\.ts$' '/e2e/' '/testbed/test/' "$REAL_RTC"
# One at a time in a process of their own, before the whole-system suites: in the same process
# after them (which start and clean up node-datachannel, browsers and the testbed) a loopback data
# channel once did not open within 10 s.
phase "jest: real-WebRTC suites"
npx jest --ci --runInBand --testPathPattern "$REAL_RTC"
# Whole-system, browser and testbed suites start many processes or native threads each (and the
# link emulator's validation measures timing): one at a time on these 2-core machines.
phase "jest: end-to-end, browser and testbed tests"
npx jest --ci --runInBand --testPathPattern '(\.browser\.test\.ts|/e2e/|/testbed/test/)'
phase ""
