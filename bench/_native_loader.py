"""Load a built `thinwan._native` extension from an explicit file, so two builds (say,
before and after a change) can run side by side in one process."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_native(path: str | Path) -> ModuleType:
    path = Path(path)
    if not path.is_file():
        sys.exit(f"error: {path}: no such file (build it with maturin develop --release "
                 "and copy python/thinwan/_native.abi3.so aside)")
    loader = importlib.machinery.ExtensionFileLoader("thinwan._native", str(path))
    spec = importlib.util.spec_from_file_location("thinwan._native", str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    try:
        loader.exec_module(module)
    except ImportError as e:
        sys.exit(f"error: {path}: not a thinwan native module ({e})")
    return module
