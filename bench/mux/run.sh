#!/usr/bin/env bash
# Loopback benchmark of thinwan-mux edge+core (TLS 1.3, PSK). Prints JSON.
# Usage: bash bench/mux/run.sh [--streams 1000] [--interval-ms 100] [--seconds 5] [--bulk-mb 2048] [--lanes 1] [--threads 2]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release -q -p thinwan-mux --bin thinwan-mux-bench
exec "$CARGO_TARGET_DIR/release/thinwan-mux-bench" "$@"
