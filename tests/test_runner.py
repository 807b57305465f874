"""``thinwan run``'s execution (thinwan.execute.runs): output layout and reruns with the
real simulator in real worker processes; failure handling with an injected failing
simulator (threads stand in for processes there, since a spawned process would import
the real, not the patched, module)."""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import thinwan._native
import tomllib

import thinwan
from thinwan.config.scenario import Scenario
from thinwan.execute import executors, runs
from thinwan.execute.errors import RunError
from thinwan.records.meta import dumps_json, git_revision, revision_of, short_revision
from thinwan.records.schema import RunRecords
from thinwan.report.run_page import write_run_report


@pytest.fixture
def fake_simulator(monkeypatch: pytest.MonkeyPatch, fake_native: Callable[..., Any]) -> list[tuple[str, int]]:
    """Patch in a fake ``simulate`` and in-process workers; returns the calls made."""
    calls: list[tuple[str, int]] = []

    def simulate(config_json: str, run: int) -> dict[str, Any]:
        calls.append((config_json, run))
        config = json.loads(config_json)
        out = fake_native(pairs=config["topology"]["pairs"], seed=run, run=run)
        del out["meta"]["seed"]  # let the runner fill it in
        return out

    monkeypatch.setattr(thinwan._native, "simulate", simulate, raising=False)
    monkeypatch.setattr(executors.LocalProcesses, "_pool", lambda self, workers: ThreadPoolExecutor(workers))
    return calls


def test_run_scenario_writes_the_documented_layout(tmp_path: Path, scenario: Scenario) -> None:
    scenario = scenario.with_overrides(runs=3, seed=10)
    result = runs.run_scenario(scenario, tmp_path, progress=False)
    write_run_report(tmp_path, scenario, result.digests, result.document["summary"])
    summaries = result.summaries
    assert len(summaries) == 3
    for k in range(3):
        meta = RunRecords.read(tmp_path / "runs" / f"run-{k}").meta
        assert (meta["run"], meta["seed"], meta["scenario"]) == (k, 10 + k, "fake")
        assert meta["version"] == thinwan.__version__
        assert meta["git_rev"] == git_revision()
        assert meta["config"] == scenario.model_dump(mode="json")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["seeds"] == [10, 11, 12]
    assert summary["runs"] == json.loads(dumps_json(summaries))
    assert summary["summary"]["runs"] == 3
    assert "CCDF of end-to-end delay" in (tmp_path / "report.html").read_text()
    assert Scenario.model_validate(tomllib.loads((tmp_path / "scenario.toml").read_text())) == scenario


def test_a_smaller_rerun_removes_stale_results(tmp_path: Path, scenario: Scenario) -> None:
    result = runs.run_scenario(scenario.with_overrides(runs=3), tmp_path, progress=False)
    write_run_report(tmp_path, scenario, result.digests, result.document["summary"])
    runs.run_scenario(scenario.with_overrides(runs=1), tmp_path, progress=False)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["run-0"]
    assert not (tmp_path / "report.html").exists()


def test_a_failing_run_raises_run_error(
    tmp_path: Path, scenario: Scenario, fake_simulator: list[tuple[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(config_json: str, run: int) -> dict[str, Any]:
        raise ValueError("unsupported option")

    monkeypatch.setattr(thinwan._native, "simulate", broken)
    with pytest.raises(RunError, match="run 0 failed: ValueError: unsupported option"):
        runs.run_scenario(scenario, tmp_path, progress=False)
    assert not (tmp_path / "summary.json").exists()


def test_dumps_json_writes_non_finite_numbers_as_null() -> None:
    text = dumps_json({"T": math.inf, "r": [0.5, math.nan], "n": 3})
    assert json.loads(text) == {"T": None, "r": [0.5, None], "n": 3}


def test_git_revision_is_a_hash_or_unknown() -> None:
    rev = git_revision().removesuffix("-dirty")
    assert rev == "unknown" or (len(rev) == 40 and int(rev, 16) >= 0)


def test_git_revision_says_when_the_tree_differs_from_it(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()

    assert revision_of(tmp_path) == "unknown"  # not a work tree
    git("init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a")
    head = git("rev-parse", "HEAD")
    (tmp_path / "new.txt").write_text("untracked files are not the source\n")
    assert revision_of(tmp_path) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert revision_of(tmp_path) == head + "-dirty"
    assert short_revision(head + "-dirty") == head[:12] + "-dirty" and short_revision(head) == head[:12]


def _panics(task: int) -> int:
    """A task that fails as a panic in the native simulator does: with a BaseException
    whose class (local here, ``pyo3_runtime``'s there) no other process can import."""

    class PanicException(BaseException):
        pass

    raise PanicException(f"index out of bounds in task {task}")


def test_a_panic_in_a_worker_process_reaches_the_user_with_its_message() -> None:
    # Real spawned workers: the exception must cross a pickle (it once arrived as
    # "PicklingError: Can't pickle PanicException", without the panic's text).
    pool = executors.LocalProcesses(jobs=2)
    with pytest.raises(RunError, match=r"^task 1 failed: PanicException: index out of bounds in task 1$"):
        list(pool.map(_panics, [1, 1], describe=lambda t: f"task {t}"))
    with pytest.raises(RunError, match=r"^task 3 failed: PanicException: index out of bounds in task 3$"):
        list(executors.LocalProcesses(jobs=1).map(_panics, [3], describe=lambda t: f"task {t}"))
