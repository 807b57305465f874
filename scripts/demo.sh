#!/usr/bin/env bash
# Set everything up and run the main job on built-in defaults: the base WAN dumbbell of
# Ogawa et al. (100 thin-client pairs, 10 Mbit/s 20 ms bottleneck, 2500 KB tail-drop,
# 7 runs of 300 s), printing the summary table and writing the HTML report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/thinwan run scenarios/ogawa2011/large-buffer.toml "$@"
