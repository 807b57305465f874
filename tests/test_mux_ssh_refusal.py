"""``mux.mode = "ssh"`` (OpenSSH forwarding) and ``"yamux"`` (the yamux peer) run only
in the lab: the simulator refuses them before anything runs, with the key named and no
traceback (docs/mux.md "OpenSSH as a peer"); the native simulator refuses them too, for
direct callers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from thinwan import _native
from thinwan.config.scenario import ScenarioError, check_simulable, load_scenario
from thinwan.config.sweepfile import load_sweep

ROOT = Path(__file__).resolve().parent.parent
GRID = ROOT / "scenarios" / "carlmar2011"


def _ssh_scenario(tmp_path: Path) -> Path:
    """The grid's base scenario file with ``mux.mode = "ssh"``."""
    text = (GRID / "base.toml").read_text()
    assert 'mode = "direct"' in text and 'name = "carlmar2011-base"' in text
    path = tmp_path / "ssh.toml"
    path.write_text(
        text.replace('mode = "direct"', 'mode = "ssh"', 1).replace('name = "carlmar2011-base"', 'name = "ssh-peer"', 1)
    )
    return path


def test_check_simulable_refuses_ssh_and_names_the_key(tmp_path: Path) -> None:
    scenario = load_scenario(_ssh_scenario(tmp_path))
    assert scenario.mux.mode == "ssh"
    with pytest.raises(ScenarioError, match=r"ssh-peer: mux\.mode: .*only in the lab.*--lab"):
        check_simulable(scenario)
    check_simulable(scenario.with_values({"mux.mode": "mux"}))  # the tunnel simulates
    check_simulable(scenario.with_values({"topology.kind": "dumbbell"}))  # [mux] ignored


@pytest.mark.parametrize("mode", ["ssh", "yamux"])
def test_native_simulator_refuses_the_peers(mode: str) -> None:
    scenario = load_scenario(GRID / "base.toml").with_values({"mux.mode": mode, "topology.pairs": 2})
    with pytest.raises(Exception, match=rf'mux\.mode: "{mode}" runs only in the lab'):
        _native.simulate(scenario.to_native_json(), 0)
    with pytest.raises(ScenarioError, match=rf'mux\.mode: "{mode}" runs only in the lab'):
        check_simulable(scenario)


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_cli_refuses_ssh_in_the_simulator(tmp_path: Path, command: str) -> None:
    target = _ssh_scenario(tmp_path) if command == "run" else GRID / "grid-lab.toml"
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "thinwan", command, str(target), "--out", str(out), "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "mux.mode" in done.stderr and "only in the lab" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (out / "runs").exists()  # refused before anything ran
    checked = subprocess.run(
        [sys.executable, "-m", "thinwan", command, str(target), "--check"], capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 2 and "only in the lab" in checked.stderr, checked.stderr


def test_anatomy_refuses_ssh(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "thinwan", "anatomy", str(_ssh_scenario(tmp_path))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "mux.mode" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_lab_grid_has_the_peers_side_by_side() -> None:
    sweep = load_sweep(GRID / "grid-lab.toml")
    (config,) = [a for a in sweep.axes if a.name == "config"]
    assert list(config.labels) == ["direct", "mux-1", "mux-4", "mux-adaptive", "mux-held", "ssh", "yamux"]
    modes = {p.scenario.mux.mode for p in sweep.points}
    assert modes == {"direct", "mux", "ssh", "yamux"} and len(sweep.points) == 8 * 7
    # The two adaptive configurations: the backlog rule (unset) and the held rule.
    rules = {p.scenario.mux.lane_rule for p in sweep.points if p.scenario.mux.lanes == "adaptive"}
    assert rules == {None, "held"}
