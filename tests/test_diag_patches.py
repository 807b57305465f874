"""The diagnostic patches in bench/diag (BENCHMARKS.md gives the commands that apply
them) still apply to the simulator as it is: a patch that no longer applies would leave
the figures it produced without a way to reproduce them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATCHES = sorted((ROOT / "bench" / "diag").glob("*.patch"))


def test_there_are_patches():
    assert {p.name for p in PATCHES} >= {"event-cycles.patch", "footprint-pad.patch"}


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_patch_applies(patch: Path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout")
    r = subprocess.run(["git", "apply", "--check", str(patch)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, f"{patch.name} no longer applies: {r.stderr}"
