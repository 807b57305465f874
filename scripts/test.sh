#!/usr/bin/env bash
# Set everything up and run every test: Rust (unit, transcript, property, whole-run) and
# Python (scenario, metrics, report, CLI, ns-3 cross-check, lab), after the formatters and
# linters (rustfmt, clippy, ruff). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
THINWAN_EXTRAS=test,ns3 bash scripts/setup.sh
echo "== formatting and lints (cargo fmt, clippy, ruff)" >&2
cargo fmt --all -- --check
# --all-features compiles the diagnostic builds too, so they cannot rot.
cargo clippy --workspace --all-targets --all-features -q -- -D warnings
.venv/bin/ruff check -q python tests bench
.venv/bin/ruff format -q --check python tests bench
echo "== cargo test" >&2
# The PyO3 extension crate links against the interpreter at import time, not in a test
# binary; it is exercised through the Python tests instead.
cargo test --workspace --release --exclude thinwan-py -q
echo "== pytest" >&2
.venv/bin/python -m pytest -q tests
