#!/usr/bin/env bash
# Command 1: set up, then run the main job. Today that is the simulator comparison of every mode
# against Parallel HTTP (N = 1, 2, 4, 6 proxies, mixed caps, 2 MiB segments); it becomes the
# local demo with origo and real proxies when those land.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
npm run --silent demo
