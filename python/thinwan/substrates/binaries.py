"""The one place that finds thinwan's programs (``thinwan-link``, ``thinwan-net``,
``thinwan-mux``, ``thinwan-qds``): ``$THINWAN_BIN_DIR``, then the directory of the running Python (a
virtual environment's ``bin/``, where scripts/setup.sh and an installed wheel put
them), then ``$PATH``."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["MissingBinary", "find_binary", "BINARIES"]

# Program → the cargo package that builds it.
BINARIES = {
    "thinwan-link": "thinwan-net",
    "thinwan-net": "thinwan-net",
    "thinwan-mux": "thinwan-mux",
    "thinwan-qds": "thinwan-qds",
}


class MissingBinary(Exception):
    """A program is not installed; the message says how to build it."""


def find_binary(name: str) -> Path:
    """The path of program ``name``; raises :class:`MissingBinary` if none is found."""
    for directory in (os.environ.get("THINWAN_BIN_DIR"), str(Path(sys.executable).parent)):
        if directory:
            candidate = Path(directory) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    package = BINARIES.get(name, name)
    raise MissingBinary(
        f"{name} not found (looked in $THINWAN_BIN_DIR, {Path(sys.executable).parent} and $PATH); build and "
        f"install it with scripts/setup.sh, or: cargo build --release -p {package} && "
        f"cp target/release/{name} {Path(sys.executable).parent}/ (or set THINWAN_BIN_DIR)"
    )
