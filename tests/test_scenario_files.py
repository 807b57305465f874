"""Every file in scenarios/ loads with the loader its kind names (scenario, sweep,
desktop benchmark, QDS training set), so a key renamed or
removed in the code cannot leave a shipped scenario, sweep or benchmark file broken
(the daemons' configs — thinwan-mux's in scenarios/mux/, thinwan-qds's with a top-level
``downlink`` — are read by the Rust daemons and checked by their tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from thinwan.config.desktop_bench import load_bench
from thinwan.config.files import read_toml
from thinwan.config.scenario import load_scenario
from thinwan.config.sweepfile import load_sweep
from thinwan.execute.qds_train import read_train_set

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(p for p in (ROOT / "scenarios").rglob("*.toml") if p.parent.name != "mux")


def test_the_scenario_tree_has_files() -> None:
    assert len(FILES) >= 30


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT / "scenarios")))
def test_every_shipped_file_loads(path: Path) -> None:
    top = read_toml(path)
    if "downlink" in top:
        pytest.skip("a thinwan-qds daemon config")
    if "capture" in top or "sim" in top:
        assert read_train_set(path).sources  # a QDS classifier training set (docs/qds.md)
    elif "sweep" in top:
        assert load_sweep(path).points
    elif "benchmark" in top:
        assert load_bench(path).platforms
    else:
        assert load_scenario(path).name
