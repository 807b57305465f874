"""Where ``tests/mux`` finds the tunnel daemon (``mux_binary``); kept only until that test
imports :func:`thinwan.substrates.binaries.find_binary` itself. Counts as a substrate
module in the import order (tests/test_layout.py)."""

from __future__ import annotations

from pathlib import Path

from .substrates.binaries import MissingBinary, find_binary

__all__ = ["mux_binary"]


def mux_binary() -> Path:
    """``thinwan-mux`` as :func:`~thinwan.substrates.binaries.find_binary` finds it, else
    the bare name (a path that does not exist, for a test to skip on)."""
    try:
        return find_binary("thinwan-mux")
    except MissingBinary:
        return Path("thinwan-mux")
