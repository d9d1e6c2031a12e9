#!/usr/bin/env bash
# Command 2: set up, then run every check: type-check, lint, format check, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "[test] type-check"
npx tsc -p tsconfig.json
echo "[test] lint"
npx eslint .
npx prettier --check . >/dev/null || { npx prettier --check .; exit 1; }
echo "[test] jest"
npx jest --ci
