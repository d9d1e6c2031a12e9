#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine of this kind (Debian, root, Node 20).
# Idempotent and quick when already done: each step checks before it acts.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*"; }

# System packages: emscripten and a C toolchain build wasm/ (python3 and the toolchain also build
# better-sqlite3 for origo), chromium runs the in-browser codec benchmark and the end-to-end
# tests, ffmpeg makes the test streams; iproute2 and procps run the namespace testbed;
# redis-server and postgresql back the tests of origo's shared state and records (the tests start
# their own servers on loopback ports, the packaged services are not used).
APT_PACKAGES=(ca-certificates git curl openssl build-essential python3 emscripten chromium firefox-esr ffmpeg iproute2 procps redis-server postgresql)
missing=()
for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then echo "[setup] need root to install: ${missing[*]}" >&2; exit 1; fi
  log "apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v node >/dev/null 2>&1; then
  echo "[setup] Node.js >= 20 is required and not installed" >&2
  exit 1
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "[setup] Node.js >= 20 is required, found $(node -v)" >&2
  exit 1
fi

# node-gyp (better-sqlite3 for origo) builds against the installed Node's headers; it cannot
# download them here.
if [ -z "${npm_config_nodedir:-}" ] && [ -f /usr/include/node/node.h ]; then export npm_config_nodedir=/usr; fi

# npm dependencies: reinstall only when the lockfile changed since the last install.
stamp=node_modules/.setup-stamp
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log "npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" >"$stamp"
else
  log "npm dependencies up to date"
fi
# Rust with the emscripten target builds the wirehair module (wasm/wirehair).
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null 2>&1; then
  echo "[setup] Rust (rustup, cargo) is required and not installed" >&2
  exit 1
fi
if ! rustup target list --installed | grep -qx wasm32-unknown-emscripten; then
  log "rustup target add wasm32-unknown-emscripten"
  rustup target add wasm32-unknown-emscripten
fi

# The builds below do not depend on each other: they run side by side (cargo and emcc leave a core
# idle in their serial phases: the last crate, linking, LTO), each timed, and any failure fails
# set-up after all have finished.
build_pids=()
build_names=()
start_build() {
  local name=$1
  shift
  (
    t0=$SECONDS
    "$@"
    log "$name finished in $((SECONDS - t0)) s"
  ) &
  build_pids+=($!)
  build_names+=("$name")
}
# The browser extension (Chrome and Firefox packages in extension/dist), rebuilt when a source
# is newer than the package.
build_extension() {
  local package=extension/dist/mutp-chrome.zip
  if [ ! -f "$package" ] || [ -n "$(find extension/src extension/static extension/webpack.config.mjs shared/src wasm/src wasm/dist/*.wasm \
    -newer "$package" -print -quit)" ]; then
    log "building the extension"
    npm run --silent build -w extension
  else
    log "extension up to date"
  fi
}
# WebAssembly and native codec builds (each step skips itself when its outputs are current), then
# the extension, which needs only the WebAssembly modules: built beside the cargo builds and the
# media instead of after them (webpack is mostly one core; the quic build's last crates, LTO and
# link leave a core idle).
build_wasm_then_extension() {
  bash wasm/build.sh
  build_extension
}
start_build "wasm and the extension" build_wasm_then_extension
# linkem, the testbed's link emulator (cargo rebuilds only what changed); then @mutp/quic's native
# addon (napi-rs, wtransport/quinn: quic/native -> quic/dist/mutp_quic.node). One after the other:
# two cargo builds at once would only fight over the same two cores.
build_native() {
  if [ ! -x testbed/emulator/target/release/linkem ] || [ -n "$(find testbed/emulator/src testbed/emulator/Cargo.toml testbed/emulator/Cargo.lock \
    -newer testbed/emulator/target/release/linkem -print -quit)" ]; then
    log "building linkem (testbed/emulator)"
    (cd testbed/emulator && cargo build --release --locked --quiet)
  else
    log "linkem up to date"
  fi
  bash quic/build.sh
}
start_build "linkem and the quic addon" build_native
# Test media for the demo, the end-to-end tests and benchmarks (ffmpeg, once).
start_build "media" bash e2e/media/generate.sh
build_failed=()
for i in "${!build_pids[@]}"; do
  wait "${build_pids[$i]}" || build_failed+=("${build_names[$i]}")
done
if [ "${#build_failed[@]}" -gt 0 ]; then
  echo "[setup] failed: ${build_failed[*]} (its output is above)" >&2
  exit 1
fi
log "done"
