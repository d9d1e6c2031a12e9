#!/usr/bin/env bash
# Builds the @mutp/quic native addon (quic/native, Rust: napi-rs, wtransport, quinn) into
# quic/dist/mutp_quic.node. Idempotent: rebuilds only when a source, Cargo.toml or Cargo.lock is
# newer than the addon.
set -euo pipefail
cd "$(dirname "$0")"
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
out=dist/mutp_quic.node
if [ -f "$out" ] && [ -z "$(find native/src native/build.rs native/Cargo.toml native/Cargo.lock -newer "$out" -print -quit)" ]; then
  echo "[quic] native addon up to date"
  exit 0
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "[quic] Rust (rustup, cargo) is required to build quic/native and is not installed" >&2
  exit 1
fi
echo "[quic] building the native addon (quic/native, cargo build --release)"
(cd native && cargo build --release --locked --quiet)
mkdir -p dist
# Copy then rename: a running process that has the old addon loaded keeps its mapping.
cp native/target/release/libmutp_quic.so "$out.tmp"
mv -f "$out.tmp" "$out"
echo "[quic] built $out"
