"""Fixtures of the namespace-lab tests: they need root, /dev/net/tun and the
``thinwan-link`` / ``thinwan-net`` binaries (built here if cargo is available)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from thinwan.substrates.binaries import MissingBinary, find_binary

REPO = Path(__file__).resolve().parents[2]
# small_grid's one-way delays (ms): WAN, then the last hop.
WAN_MS, LAST_HOP_MS = 40.0, 10.0


def _have_binaries() -> str | None:
    try:
        find_binary("thinwan-link")
        find_binary("thinwan-net")
        return None
    except MissingBinary as e:
        if shutil.which("cargo") is None:
            return str(e)
    env = {**os.environ, "CARGO_TARGET_DIR": str(REPO / "target" / "net")}
    done = subprocess.run(
        ["cargo", "build", "--release", "-p", "thinwan-net"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return None if done.returncode == 0 else f"cargo build -p thinwan-net failed:\n{done.stderr[-2000:]}"


@pytest.fixture(scope="session")
def lab_env() -> None:
    """Skip unless the lab can run here."""
    if os.geteuid() != 0:
        pytest.skip("lab tests need root")
    if not Path("/dev/net/tun").exists():
        pytest.skip("no /dev/net/tun")
    problem = _have_binaries()
    if problem:
        pytest.fail(problem)


@pytest.fixture
def net_bin(lab_env: None) -> str:
    return str(find_binary("thinwan-net"))


def lab_run_cli(scenario: Path, out: Path, *extra: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``thinwan lab run SCENARIO --out OUT --json --quiet EXTRA…`` in a subprocess (as a
    user runs it), its output captured."""
    argv = [sys.executable, "-m", "thinwan", "lab", "run", str(scenario), "--out", str(out), "--json", "--quiet"]
    return subprocess.run([*argv, *extra], capture_output=True, text=True, timeout=timeout)


def lab_run_records(tmp_path: Path, scenario_text: str, *extra: str):
    """Write ``scenario_text`` as a scenario file, ``thinwan lab run`` it with ``extra``
    options (see :func:`lab_run_cli`), and return run 0's records and the output directory."""
    from thinwan.records.schema import RunRecords

    scn = tmp_path / "s.toml"
    scn.write_text(scenario_text)
    out = tmp_path / "out"
    done = lab_run_cli(scn, out, *extra)
    assert done.returncode == 0, done.stderr
    return RunRecords.read(out / "runs" / "run-0"), out


def small_grid(**values: object):
    """The tunnel grid's base (scenarios/carlmar2011/base.toml) shrunk to 3 streams for 4 s
    of traffic, 40 ms one way with 2 % loss both ways and a 10-ms last hop: what the
    tunnel and its peers' lab tests run."""
    from thinwan.config.scenario import load_scenario

    return load_scenario(REPO / "scenarios" / "carlmar2011" / "base.toml").with_values(
        {
            "topology.pairs": 3,
            "scenario.duration_s": 4.0,
            "scenario.drain_s": 30.0,
            "scenario.runs": 1,
            "topology.bottleneck_delay_ms": WAN_MS,
            "topology.last_hop_delay_ms": LAST_HOP_MS,
            "topology.bottleneck_loss": 0.02,
            "topology.bottleneck_loss_rev": 0.02,
            **values,
        }
    )
