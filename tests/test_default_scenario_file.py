"""The Rust tests build their default scenario from crates/sim/tests/data/default-scenario.json
(crates/sim/tests/common/mod.rs), never from a hand copy of the defaults: this test fails
when that file and the Python scenario model's defaults differ. Regenerate it with

    THINWAN_REGEN=1 .venv/bin/python -m pytest tests/test_default_scenario_file.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from thinwan.config.scenario import Scenario

FILE = Path(__file__).resolve().parents[1] / "crates" / "sim" / "tests" / "data" / "default-scenario.json"


def defaults() -> dict:
    return Scenario().model_dump(mode="json")


def test_rust_default_scenario_file_is_the_python_defaults():
    want = defaults()
    if os.environ.get("THINWAN_REGEN") == "1":
        FILE.write_text(json.dumps(want, indent=1) + "\n")
    assert FILE.is_file(), f"{FILE} is missing; create it with THINWAN_REGEN=1 pytest {Path(__file__).name}"
    have = json.loads(FILE.read_text())
    assert have == want, (
        f"{FILE.name} differs from the Python scenario defaults; regenerate it with "
        f"THINWAN_REGEN=1 pytest tests/{Path(__file__).name} (and check the Rust tests still pass)"
    )
