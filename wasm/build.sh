#!/usr/bin/env bash
# Builds the codec artefacts into wasm/dist: the RLNC modules (SIMD128 and scalar), the native RLNC
# test and bench binaries, the wirehair module and its native bench. Every step skips itself when
# its outputs are newer than its inputs, so running this again is quick.
set -euo pipefail
cd "$(dirname "$0")"
bash rlnc/build.sh
make -s -C rlnc all
bash wirehair/build.sh
