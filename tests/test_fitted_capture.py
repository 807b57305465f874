"""The shipped real capture (scenarios/fitted/tigervnc-wan.pcap) fits to the shipped
scenario: `thinwan fit` is deterministic and the committed file is what it writes today,
so a change of the analyser or the fit shows up here (re-fit and commit, saying why)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
FITTED = ROOT / "scenarios" / "fitted"


def test_the_shipped_capture_fits_to_the_shipped_scenario(tmp_path: Path) -> None:
    out = tmp_path / "fitted.toml"
    done = subprocess.run(
        [sys.executable, "-m", "thinwan", "fit", str(FITTED / "tigervnc-wan.pcap"), "--server-port", "5900",
         "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    got = tomllib.loads(out.read_text())
    shipped = tomllib.loads((FITTED / "tigervnc-wan.toml").read_text())
    assert got["traffic"] == shipped["traffic"]
    # The fitted session is the busy one docs/model.md describes.
    t = got["traffic"]
    assert t["bulk_packets_mean"] > 2 * 7.4 and t["p_interactive_to_bulk"] > 0.09
