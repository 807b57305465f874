"""``thinwan validate`` end to end: both substrates, the agreement in JSON, table and page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lab.test_lab_run import SCENARIO
from thinwan.analysis.agreement import COUNTED, DEFAULT_TOLERANCES, JUDGED

pytestmark = pytest.mark.usefixtures("lab_env")


def validate_cli(scenario: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "thinwan", "validate", str(scenario), "--out", str(out), "--quiet", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_validate_reports_agreement(tmp_path: Path) -> None:
    scn = tmp_path / "s.toml"
    scn.write_text(SCENARIO)
    out = tmp_path / "out"
    done = validate_cli(scn, out, "--json", "--tolerance", "utilisation=x1000")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc == json.loads((out / "validate.json").read_text())
    assert doc["tolerance"] == {**{k: t.spec for k, t in DEFAULT_TOLERANCES.items()}, "utilisation": "x1000"}
    for metric in JUDGED:
        a = doc["agreement"][metric]
        counted = {"events", "ratio_interval", "undecided"} if metric in COUNTED else set()
        assert set(a) == {"sim", "lab", "rel_diff", "ok"} | counted, metric
    # The counted metrics' events are the summaries' shares of their interactive messages.
    for side in ("sim", "lab"):
        n = doc[side]["interactive_messages"] * doc[side]["runs"]
        assert doc["agreement"]["r_I150"]["events"][side] == round(doc[side]["r_I150"] * round(n))
    # Values are the summaries' (one run: the pooled p50 is that run's p50, to float32).
    for metric in ("utilisation", "r_I150", "timeouts_per_conn"):
        assert doc["agreement"][metric]["sim"] == doc["sim"][metric]
        assert doc["agreement"][metric]["lab"] == doc["lab"][metric]
    assert doc["agreement"]["interactive_delay_p50_ms"]["sim"] == pytest.approx(
        doc["sim"]["interactive_delay_p50_ms"], rel=1e-6
    )
    # Both substrates fill the 10-Mbit/s link to within a factor of 1000.
    assert doc["agreement"]["utilisation"]["ok"] is True
    page = (out / "report.html").read_text()
    assert "utilisation" in page and "×1000" in page and 'href="lab/report.html"' in page


def test_validate_runs_a_tunnel_scenario_on_the_chain(tmp_path: Path) -> None:
    from tests.lab.test_lab_mux import LAST_HOP_MS, WAN_MS, small

    scn = tmp_path / "mux.toml"
    scn.write_text(small().to_toml())
    done = validate_cli(scn, tmp_path / "out", "--json")
    assert done.returncode == 0, done.stderr
    p50 = json.loads(done.stdout)["agreement"]["interactive_delay_p50_ms"]
    # The lab side crossed the WAN *and* the last hop (the three-namespace chain), as the
    # simulator does: the two-namespace lab would give the WAN delay alone.
    assert p50["lab"] >= WAN_MS + LAST_HOP_MS and p50["sim"] >= WAN_MS + LAST_HOP_MS
    assert p50["ok"] is True


def test_fail_on_disagreement_exits_3_after_writing_everything(tmp_path: Path) -> None:
    scn = tmp_path / "s.toml"
    scn.write_text(SCENARIO)
    out = tmp_path / "out"
    # Real Linux and the model never fill the link to the same byte: 0 % must differ.
    done = validate_cli(scn, out, "--tolerance", "utilisation=0%", "--fail-on-disagreement")
    assert done.returncode == 3, done.stderr
    assert "differs" in done.stdout and "utilisation ±0 %" in done.stdout
    assert json.loads((out / "validate.json").read_text())["agreement"]["utilisation"]["ok"] is False
