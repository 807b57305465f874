"""Generated hostile files: every shipped scenario, sweep, lab and mux file, mutated
(wrong types, out-of-range and huge values, unknown keys, deleted keys, bytes that are
not UTF-8). For every mutant: no traceback or panic, and either exit 2 naming the file
and the key, or success. Nothing is simulated: ``thinwan run|sweep --check`` validates
(limits included) in this process, ``thinwan mux core|edge --config F --check`` is the
daemon's own check. Derandomized: CI sees the same mutants every time."""

from __future__ import annotations

import contextlib
import io
import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest
import tomllib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinwan.cli import main
from thinwan.config.desktop_bench import load_bench
from thinwan.config.files import ScenarioError
from thinwan.config.scenario import LAB_ONLY_MUX_MODES, load_scenario
from thinwan.substrates.binaries import MissingBinary, find_binary
from thinwan.substrates.sim import simulate

from .helpers import REPO

SCENARIOS = REPO / "scenarios"
MUX = sorted((SCENARIOS / "mux").glob("*.toml"))
# thinwan-qds daemon configs: checked by the daemon itself.
QDS_DAEMON = [SCENARIOS / "qds" / "daemon.toml"]
# Remote-desktop benchmark files ([benchmark]): checked by their own loader.
DESKTOP = sorted(p for p in SCENARIOS.rglob("*.toml") if "[benchmark]" in p.read_text())
# QDS classifier training sets ([[capture]], [[sim]]): read by thinwan qds train/evaluate.
TRAIN_SETS = sorted(p for p in SCENARIOS.rglob("*.toml") if {"[[capture]]", "[[sim]]"} & set(p.read_text().split()))
FILES = sorted(p for p in SCENARIOS.rglob("*.toml") if p not in MUX + DESKTOP + QDS_DAEMON + TRAIN_SETS)
# Keys holding paths relative to their file: made absolute so a mutant can live elsewhere.
PATH_KEYS = {"inherits", "base", "pcap_file", "model_file", "psk_file", "cert", "key", "ca", "file"}

HOSTILE_VALUES = [
    "x",
    "",
    True,
    -1,
    0,
    2**63,
    2**64,
    -(2**63),
    1e308,
    -1e308,
    0.5,
    1e-300,
    [],
    [1, "a"],
    {},
    {"nested": 1},
]
settings.register_profile(
    "hostile",
    derandomize=True,
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _absolute(data: Any, where: Path) -> Any:
    if isinstance(data, dict):
        return {
            k: str((where / v).resolve()) if k in PATH_KEYS and isinstance(v, str) and v else _absolute(v, where)
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [_absolute(v, where) for v in data]
    return data


def _leaves(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for k, v in data.items():
        if isinstance(v, dict) and v:
            out += _leaves(v, (*prefix, k))
        else:
            out.append((*prefix, k))
    return out


def _set(data: dict[str, Any], path: tuple[str, ...], value: Any, delete: bool = False) -> None:
    for k in path[:-1]:
        data = data[k]
    if delete:
        del data[path[-1]]
    else:
        data[path[-1]] = value


def dump_toml(data: dict[str, Any]) -> str:
    """A minimal TOML writer: scalars, arrays, tables, arrays of tables."""
    lines: list[str] = []

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float) and not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        if isinstance(v, (int, float, str)):
            return json.dumps(v, ensure_ascii=False)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + "}"
        raise TypeError(v)

    def table(d: dict[str, Any], name: tuple[str, ...]) -> None:
        scalars = {k: v for k, v in d.items() if not _is_table(v) and not _is_table_array(v)}
        if name:
            lines.append("[" + ".".join(json.dumps(k) for k in name) + "]")
        lines.extend(f"{json.dumps(k)} = {value(v)}" for k, v in scalars.items())
        for k, v in d.items():
            if _is_table(v):
                table(v, (*name, k))
            elif _is_table_array(v):
                for item in v:
                    lines.append("[[" + ".".join(json.dumps(x) for x in (*name, k)) + "]]")
                    lines.extend(f"{json.dumps(a)} = {value(b)}" for a, b in item.items())

    table(data, ())
    return "\n".join(lines) + "\n"


def _is_table(v: Any) -> bool:
    return isinstance(v, dict) and bool(v)


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


@st.composite
def mutants(draw: st.DrawFn, files: list[Path]) -> tuple[Path, bytes, str | None]:
    """(original file, mutant bytes, the key it changed or None for an encoding mutant)."""
    source = draw(st.sampled_from(files))
    data = _absolute(tomllib.loads(source.read_text()), source.parent)
    kind = draw(st.sampled_from(["value", "value", "delete", "unknown", "utf8"]))
    if kind == "utf8":
        text = dump_toml(data).encode()
        at = draw(st.integers(0, len(text)))
        return source, text[:at] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80"])) + text[at:], None
    leaves = [p for p in _leaves(data) if p[-1] not in PATH_KEYS]
    path = draw(st.sampled_from(leaves))
    if kind == "delete":
        _set(data, path, None, delete=True)
    elif kind == "unknown":
        path = (*path[:-1], "no_such_key")
        _set(data, path, 1)
    else:
        value = draw(st.sampled_from(HOSTILE_VALUES))
        _set(data, path, value)
        if isinstance(value, dict) and value:  # a table where a value was: its own key is the culprit
            path = (*path, *value)
    return source, dump_toml(data).encode(), ".".join(path)


def _check_in_process(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as e:
            status = int(e.code or 0)
    return status, err.getvalue()


def _assert_clear(status: int, err: str, mutant: Path, key: str | None, kind_of_file: str) -> None:
    assert "Traceback" not in err and "panicked" not in err, err
    assert status in (0, 2), f"{kind_of_file} mutant of {key}: exit {status}\n{err}"
    if status == 0:
        return
    assert mutant.name in err, f"the file is not named:\n{err}"
    if key is None:
        assert "UTF-8" in err, err
        return
    # The key's own name, or a limit that several keys make up (docs/limits.md), or a
    # missing key the file needs (which the deletion removed).
    # A table put where a value was: the value's key or the key inside it.
    names = key.split(".")[-2:] if key.endswith(".nested") else key.split(".")[-1:]
    # A key inside a sweep's named bundle: naming the bundle will do (a bundle emptied by
    # the deletion is an error of the bundle, e.g. a second base point).
    parts = key.split(".")
    if parts[0] == "vary" and len(parts) > 3:
        names.append(parts[2])
    assert any(n in err for n in names) or "docs/limits.md" in err, f"{key} is not named:\n{err}"


@settings(settings.get_profile("hostile"))
@given(m=mutants([p for p in FILES if "[sweep]" not in p.read_text()]))
def test_scenario_mutants_fail_clearly_or_pass(tmp_path: Path, m: tuple[Path, bytes, str | None]) -> None:
    source, text, key = m
    f = tmp_path / f"mutant-{source.stem}.toml"
    f.write_bytes(text)
    status, err = _check_in_process(["run", str(f), "--check"])
    _assert_clear(status, err, f, key, "scenario")
    if status == 0:
        _simulate_briefly(f)


def _simulate_briefly(path: Path) -> None:
    """A mutant that passed --check also runs in the simulator, shortened to 50 ms of
    traffic on at most 4 pairs (every other key as mutated), so an error only the Rust
    side would see still fails here rather than in a user's run."""
    scenario = load_scenario(path)
    s, t = scenario.scenario, scenario.topology
    # A mix names the model of every pair (traffic.mix adds up to topology.pairs): its
    # pairs stay (the QDS scenarios have at most 16).
    pairs = t.pairs if scenario.traffic.model == "mix" else min(t.pairs, 4)
    short = scenario.with_values(
        {
            "scenario.duration_s": min(s.duration_s, 0.05),
            "scenario.drain_s": min(s.drain_s, 0.05),
            "topology.pairs": pairs,
        }
    )
    simulate(short, 0)


@settings(settings.get_profile("hostile"), max_examples=200)
@given(m=mutants([p for p in FILES if "[sweep]" in p.read_text()]))
def test_sweep_mutants_fail_clearly_or_pass(tmp_path: Path, m: tuple[Path, bytes, str | None]) -> None:
    source, text, key = m
    f = tmp_path / f"mutant-{source.stem}.toml"
    f.write_bytes(text)
    # A lab-only sweep (OpenSSH, yamux peers: grid-lab.toml) is checked as the lab runs it.
    lab = ["--lab"] if any(f'"{m}"' in source.read_text() for m in LAB_ONLY_MUX_MODES) else []
    status, err = _check_in_process(["sweep", str(f), "--check", *lab])
    _assert_clear(status, err, f, key, "sweep")


def _mux_binary() -> str:
    try:
        return str(find_binary("thinwan-mux"))
    except MissingBinary as e:
        pytest.skip(str(e))


@settings(settings.get_profile("hostile"), max_examples=200)
@given(m=mutants(MUX))
def test_mux_mutants_fail_clearly_or_pass(tmp_path: Path, m: tuple[Path, bytes, str | None]) -> None:
    source, text, key = m
    f = tmp_path / f"mutant-{source.stem}.toml"
    f.write_bytes(text)
    role = source.stem  # core.toml / edge.toml
    done = subprocess.run(
        [_mux_binary(), role, "--config", str(f), "--check"], capture_output=True, text=True, timeout=30
    )
    _assert_clear(done.returncode, done.stderr, f, key, "mux")


@settings(settings.get_profile("hostile"), max_examples=200)
@given(m=mutants(QDS_DAEMON))
def test_qds_daemon_mutants_fail_clearly_or_pass(tmp_path: Path, m: tuple[Path, bytes, str | None]) -> None:
    source, text, key = m
    f = tmp_path / f"mutant-{source.stem}.toml"
    f.write_bytes(text)
    done = subprocess.run(
        [str(find_binary("thinwan-qds")), str(f), "--check"], capture_output=True, text=True, timeout=30
    )
    _assert_clear(done.returncode, done.stderr, f, key, "thinwan-qds")


def _check_desktop_bench(path: Path) -> tuple[int, str]:
    """What ``thinwan desktop run`` does with the file before it touches the lab."""
    try:
        load_bench(path)
    except ScenarioError as e:
        return 2, f"thinwan: error: {e}\n"
    return 0, ""


@settings(settings.get_profile("hostile"), max_examples=200)
@given(m=mutants(DESKTOP))
def test_desktop_bench_mutants_fail_clearly_or_pass(tmp_path: Path, m: tuple[Path, bytes, str | None]) -> None:
    source, text, key = m
    f = tmp_path / f"mutant-{source.stem}.toml"
    f.write_bytes(text)
    status, err = _check_desktop_bench(f)
    _assert_clear(status, err, f, key, "desktop benchmark")


@settings(settings.get_profile("hostile"), max_examples=100)
@given(m=mutants(TRAIN_SETS))
def test_training_set_mutants_fail_clearly_or_pass(tmp_path: Path, m: tuple[Path, bytes, str | None]) -> None:
    from thinwan.execute.qds_train import TrainSetError, read_train_set

    source, text, key = m
    f = tmp_path / f"mutant-{source.stem}.toml"
    f.write_bytes(text)
    try:
        read_train_set(f, tmp_path)
        status, err = 0, ""
    except (TrainSetError, ScenarioError) as e:
        status, err = 2, f"thinwan: error: {e}"
    _assert_clear(status, err, f, key, "training set")
