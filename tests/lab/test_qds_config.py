"""The lab's side of thinwan-qds without root: the TOML it writes is what the daemon
accepts, interface names are swapped for ``--lab``, and rates print as ``tc`` prints
them (checked against iproute2 6.1 output)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from thinwan.substrates.binaries import MissingBinary, find_binary
from thinwan.substrates.lab.htb_middlebox import QdsSettings, daemon_toml, tc_rate_bits, with_interfaces


@pytest.fixture(scope="module")
def qds_bin() -> str:
    try:
        return str(find_binary("thinwan-qds"))
    except MissingBinary as e:
        pytest.fail(str(e))


def check(qds_bin: str, text: str, tmp_path: Path) -> dict:
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    done = subprocess.run([qds_bin, str(cfg), "--check"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_static_settings_give_a_config_the_daemon_accepts(qds_bin: str, tmp_path: Path) -> None:
    s = QdsSettings(capacity_mbps=30.0, static_rates_mbps=(20.0, 10.0), static_ports={5002: 1, 5001: 0})
    got = check(qds_bin, daemon_toml(s, "a-l", "a-w", tmp_path / "st"), tmp_path)
    assert (got["downlink"], got["uplink"], got["capacity_mbps"]) == ("a-l", "a-w", 30.0)
    assert got["static"]["rates_mbps"] == [20.0, 10.0]
    assert [(f["port"], f["class"]) for f in got["static"]["flows"]] == [(5001, 0), (5002, 1)]
    assert got["servers"]["nets"] == ["198.18.1.0/24"]


def test_qds_settings_give_a_config_the_daemon_accepts(qds_bin: str, tmp_path: Path) -> None:
    s = QdsSettings(controller="qds", oracle_ports={5001: "video", 5002: "data"}, alpha=0.3, variant="demand_first")
    got = check(qds_bin, daemon_toml(s, "a-l", "a-w", tmp_path / "st"), tmp_path)
    assert got["controller"] == "qds" and got["qds"]["classifier"] == "oracle"
    assert got["qds"]["variant"] == "demand_first" and got["qds"]["alpha"] == 0.3
    assert got["qds"]["period_ms"] == 100 and got["qds"]["classes"] == 10  # the core's defaults
    assert [(e["server_port"], e["app"]) for e in got["qds"]["oracle"]] == [(5001, "video"), (5002, "data")]


def test_lab_interfaces_replace_the_configs() -> None:
    text = 'downlink = "eth1"\nuplink = "eth0"\ncapacity_mbps = 20\n[servers]\nnets = ["10.0.0.0/8"]\n'
    out = with_interfaces(text, "tw-1-l", "tw-1-w")
    assert out.count("downlink") == 1 and 'downlink = "tw-1-l"' in out and 'uplink = "tw-1-w"' in out
    assert "eth0" not in out and "capacity_mbps = 20" in out


@pytest.mark.parametrize(
    "bits,printed",
    [
        (20_000_000, "20Mbit"),
        (500_000, "500Kbit"),
        (1_234_567, "1234Kbit"),
        (999_999, "999992bit"),
        (2_000_001, "2Mbit"),
        (12_345_000, "12345Kbit"),
    ],
)
def test_rates_print_as_tc_prints_them(bits: int, printed: str) -> None:
    assert tc_rate_bits(bits) == printed


def test_lab_mode_checks_the_config_before_creating_anything(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(
        'downlink = "x"\nuplink = "y"\ncapacity_mbps = 0\ncontroller = "qds"\n[servers]\nnets = ["10.0.0.0/8"]\n'
    )
    before = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    done = subprocess.run(
        [sys.executable, "-m", "thinwan", "qds", "--lab", str(cfg)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done
    assert done.stderr.startswith(f"thinwan-qds: {cfg}: capacity_mbps:"), done.stderr
    assert subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout == before
