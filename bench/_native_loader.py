"""Load a built `thinwan._native` extension from an explicit file, so two builds (say,
before and after a change) can run side by side in one process or each in a child of
its own; and what the benchmarks that do so share: the PAIRSxSECONDS size argument."""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_native(path: str | Path) -> ModuleType:
    path = Path(path)
    if not path.is_file():
        sys.exit(
            f"error: {path}: no such file (build it with maturin develop --release "
            "and copy python/thinwan/_native.abi3.so aside)"
        )
    loader = importlib.machinery.ExtensionFileLoader("thinwan._native", str(path))
    spec = importlib.util.spec_from_file_location("thinwan._native", str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    try:
        loader.exec_module(module)
    except ImportError as e:
        sys.exit(f"error: {path}: not a thinwan native module ({e})")
    return module


def size(text: str) -> tuple[int, float]:
    """A PAIRSxSECONDS argument of bench_scaling.py's workload, e.g. 10000x20."""
    try:
        pairs, seconds = text.split("x")
        return int(pairs), float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not PAIRSxSECONDS (e.g. 10000x20)") from None


def sizes(text: str) -> list[tuple[int, float]]:
    """A comma-separated list of [`size`]s."""
    return [size(s) for s in text.split(",")]


def child_code(so: str | Path, pairs: int, seconds: float) -> str:
    """A `python -c` program that runs the workload of `pairs` for `seconds` on build
    `so` and prints the packets it created last on stdout (for tools that need a fresh
    process per run: per-thread counters, valgrind). Run it from the repository root,
    where ``bench`` is importable (``python -c`` puts the working directory first)."""
    return f"""
from bench._native_loader import load_native
from bench.bench_scaling import scaled
m = load_native({str(so)!r})
meta = m.simulate(scaled({pairs}, {seconds}).to_native_json(), 0)["meta"]
print(meta["packets"]["created"])
"""
