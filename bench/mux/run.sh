#!/usr/bin/env bash
# Loopback benchmark of thinwan-mux edge+core (TLS 1.3, PSK), beside direct TCP, two bare
# relays, a yamux forwarder (thinwan-yamux-peer) and OpenSSH local forwarding (`ssh -N -L`,
# one connection; a private sshd with keys generated in a temporary directory, removed on
# exit or Ctrl-C). Prints JSON.
# Usage: bash bench/mux/run.sh [--streams 1000] [--interval-ms 100] [--seconds 5] [--bulk-mb 2048] [--lanes 1] [--threads 2] [--bulk-limit] [--no-ssh] [--no-yamux]
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo build --release -q -p thinwan-mux --bin thinwan-mux-bench --bin thinwan-yamux-peer
# ssh and sshd hold one descriptor per stream each (1,000 by default).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
ssh_dir=$(mktemp -d "${TMPDIR:-/tmp}/thinwan-bench-ssh.XXXXXX")
# The benchmark stops ssh and sshd itself (and they get SIGTERM if it dies: PR_SET_PDEATHSIG);
# the keys and logs go with the directory.
trap 'rm -rf "$ssh_dir"' EXIT
trap 'exit 130' INT TERM
"$CARGO_TARGET_DIR/release/thinwan-mux-bench" --ssh-dir "$ssh_dir" "$@"
