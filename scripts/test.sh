#!/usr/bin/env bash
# Set everything up and run every test: Rust (unit, transcript, property, whole-run) and
# Python (scenario, metrics, report, CLI, ns-3 cross-check, lab). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
THINWAN_EXTRAS=test,ns3 bash scripts/setup.sh
echo "== cargo test" >&2
# The PyO3 extension crate links against the interpreter at import time, not in a test
# binary; it is exercised through the Python tests instead.
cargo test --workspace --release --exclude thinwan-py -q
echo "== pytest" >&2
.venv/bin/python -m pytest -q tests
