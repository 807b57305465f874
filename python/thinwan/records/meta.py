"""Run metadata that travels with every result file (STYLE rule 15): the git revision
of the source tree, and strict JSON for summaries."""

from __future__ import annotations

import functools
import json
import math
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["git_revision", "dumps_json"]


@functools.cache
def git_revision() -> str:
    """``git rev-parse HEAD`` of the thinwan source tree, or "unknown"."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def dumps_json(obj: Any, **kwargs: Any) -> str:
    """Strict JSON where ``inf`` and ``nan`` (e.g. T_I with no violations) become ``null``."""
    return json.dumps(_finite(obj), allow_nan=False, **kwargs)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj
