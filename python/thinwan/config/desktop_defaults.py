"""Defaults of the desktop benchmark shared by the library and the CLI's help (a light
module: ``thinwan --help`` imports it, so it imports nothing)."""

from __future__ import annotations

__all__ = ["DEFAULT_IDLE_MS", "DEFAULT_REPEAT", "OPERATIONS"]

# Silence (no payload either way) that ends an operation. 500 ms is the driver's own
# idle watch (DesktopSettings.idle_s): every pause of a run lasts at least this long, and
# no update seen here pauses that long inside itself (TigerVNC's lossless refresh over a
# WAN comes in pieces ~1 RTT apart); docs/desktop.md discusses the choice.
DEFAULT_IDLE_MS = 500.0
# Repetitions of each operation per platform × environment (the source's).
DEFAULT_REPEAT = 10
# The latency micro-benchmark's operations (spec "Benchmarks"), in the order they run.
OPERATIONS = ("letter", "scroll", "fill", "red_bitmap", "image")
