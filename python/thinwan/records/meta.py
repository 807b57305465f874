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

__all__ = ["git_revision", "revision_of", "short_revision", "dumps_json"]


@functools.cache
def git_revision() -> str:
    """The git revision of the thinwan source tree (``git rev-parse HEAD``), with
    ``-dirty`` when tracked files differ from it (a result of uncommitted code must not
    pass for the commit's), or "unknown"."""
    return revision_of(Path(__file__).parent)


def revision_of(path: Path) -> str:
    """:func:`git_revision` of the work tree that holds ``path``."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=path, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    rev = git("rev-parse", "HEAD")
    if not rev:
        return "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no")
    return rev + "-dirty" if changed else rev


def short_revision(rev: str) -> str:
    """``rev`` for a page's header: the commit's first 12 digits, keeping ``-dirty``."""
    return rev[:12] + ("-dirty" if rev.endswith("-dirty") else "")


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
