"""Shared helpers of the hostile-input suite: run thinwan as a user would, and check
that a refusal is a clear one (exit status, no traceback, the culprit named)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

TINY = """
[scenario]
duration_s = 2.0
drain_s = 1.0
runs = 1

[topology]
pairs = 2
"""


def thinwan(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m thinwan ARGS``, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "thinwan", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def assert_refused(done: subprocess.CompletedProcess[str], *named: str, status: int = 2) -> None:
    """Exit ``status``, no traceback or panic, and every string of ``named`` in stderr."""
    err = done.stderr
    assert done.returncode == status, f"exit {done.returncode}, expected {status}:\n{err}"
    assert "Traceback" not in err and "panicked" not in err, err
    for name in named:
        assert name in err, f"{name!r} not named in:\n{err}"


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (the namespace lab)")
