#!/usr/bin/env bash
# Command 1 (README): set up (scripts/setup.sh), then the local demo (npm run demo, e2e/src/demo.ts).
# The demo starts a local origin serving generated H.264 segments of about 2 MB, origo and four
# proxy processes capped like the paper's edge servers (two at 0.92 MB/s, two at 1.84 MB/s); it
# downloads the same segments in every mode (Parallel HTTP, uncoded, rlnc, fountain) through all
# four proxies with the Node client on loopback (HTTP for Parallel HTTP, WebRTC for the others),
# checks every byte against the origin and prints per-proxy shares and a comparison table. It says
# what it will do before it starts.
# Arguments go to the demo: --segments N (segments per mode, default 4), --json.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
npm run --silent demo -- "$@"
