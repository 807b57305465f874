"""Defaults of the desktop benchmark shared by the library and the CLI's help (a light
module: ``thinwan --help`` imports it, so it imports nothing)."""

from __future__ import annotations

__all__ = ["DEFAULT_IDLE_MS", "DEFAULT_REPEAT", "OPERATIONS", "PAUSE_S", "IDLE_S", "MAX_WAIT_S"]

# Silence (no payload either way) that ends an operation. 500 ms is the driver's own
# idle watch (DesktopSettings.idle_s): every pause of a run lasts at least this long, and
# no update seen here pauses that long inside itself (TigerVNC's lossless refresh over a
# WAN comes in pieces ~1 RTT apart); docs/desktop.md discusses the choice.
DEFAULT_IDLE_MS = 500.0
# Repetitions of each operation per platform × environment (the source's).
DEFAULT_REPEAT = 10
# The latency micro-benchmark's operations (spec "Benchmarks"), in the order they run.
OPERATIONS = ("letter", "scroll", "fill", "red_bitmap", "image")
# Slow motion (DesktopSettings and a benchmark file's [desktop]): after each input wait at
# least PAUSE_S, and while capturing until the capture has not grown for IDLE_S, but at
# most MAX_WAIT_S. The idle watch, not the pause, is what lets a long update finish, so
# the pause only sets the floor: 0.5 s and 1 s give the same letter/fill medians over
# 66 ms RTT (75.8 vs 76.2 ms for tigervnc) and 0.5 s brings one platform in two
# environments to 2 min 22 s (docs/desktop.md).
PAUSE_S = 0.5
IDLE_S = 0.5
MAX_WAIT_S = 15.0
