"""The QDS parts of the reports (issue 18 "Report"): the run report's per-type table and
figures from a short simulated QDS run, the sweep report's Table I and figures from tiny
sweeps, and no QDS section for a run without per-type records."""

from __future__ import annotations

import html as htmllib
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from thinwan.analysis.digest import digest_run
from thinwan.analysis.metrics import summarize_runs
from thinwan.cli import main
from thinwan.config.scenario import Scenario
from thinwan.records.schema import RunRecords
from thinwan.report.qds_run import QDS_TITLES
from thinwan.report.qds_sweep import QDS_SWEEP_TITLES
from thinwan.report.run_page import html_report

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "scenarios" / "qds" / "base.toml"


def figures(page: str) -> dict[str, Any]:
    """The Plotly specs the page hands to plotly.js."""
    return json.loads(re.search(r"const FIGURES = (.*);\n", page).group(1))


def table_rows(page: str, css_class: str) -> list[list[str]]:
    """The text of each data cell (first line only: the mean), row by row."""
    table = re.search(rf'<table class="{css_class}">(.*?)</table>', page, re.S).group(1)
    rows = []
    for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
        if cells:
            rows.append([htmllib.unescape(re.split(r"<br>", c)[0]).strip() for c in cells])
    return rows


def number(cell: str) -> float:
    return float(re.match(r"[-\d.,]+", cell).group(0).replace(",", ""))


def run(tmp_path: Path, name: str, discipline: str = "qds", **keys: Any) -> tuple[str, dict[str, Any]]:
    """A 5-s, 1-run middlebox run through `thinwan run`: its report.html and summary.json."""
    f = tmp_path / f"{name}.toml"
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
    f.write_text(
        f'inherits = "{BASE}"\n[scenario]\nduration_s = 5.0\nruns = 1\n'
        f'[queue]\ndiscipline = "{discipline}"\n[qds]\n{extra}'
    )
    out = tmp_path / name
    assert main(["run", str(f), "--out", str(out), "--quiet"]) == 0
    return (out / "report.html").read_text(), json.loads((out / "summary.json").read_text())


@pytest.fixture(scope="module")
def qds_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    return run(tmp_path_factory.mktemp("qds"), "model")


def test_the_run_report_has_the_per_type_table_from_summary_by_type(qds_run: tuple[str, dict[str, Any]]) -> None:
    page, doc = qds_run
    by_type = doc["summary"]["by_type"]
    assert set(by_type) == {"video", "data"}
    rows = {r[0]: r for r in table_rows(page, "bytype")}
    assert set(rows) == set(by_type)
    for t, m in by_type.items():
        _, qt, rtt, within, within12, throughput, packets, _ = rows[t]
        assert number(qt) == m["qt_ms"]
        mean, sd = (float(x) for x in re.findall(r"[\d.]+", rtt)[:2])
        assert mean == pytest.approx(m["rtt_mean_ms"], abs=0.05) and sd == pytest.approx(m["rtt_sd_ms"], abs=0.05)
        assert number(within) == pytest.approx(m["share_within_qt"] * 100, abs=0.05)
        assert number(within12) == pytest.approx(m["share_within_1_2qt"] * 100, abs=0.05)
        assert number(throughput) == pytest.approx(m["throughput_mbps"], abs=0.005)
        assert number(packets) == m["packets"]
    # The per-type rows are not repeated in the general summary table.
    assert "packets with RTT ≤ QT" not in page


def test_the_run_report_has_the_qds_figures(qds_run: tuple[str, dict[str, Any]]) -> None:
    page, doc = qds_run
    for title in QDS_TITLES.values():
        assert title in page
    figs = figures(page)
    assert {"qds_rtt_ccdf", "qds_flow_classes", "qds_class_load", "qds_confusion"} <= set(figs)
    for name in ("qds_rtt_ccdf", "qds_flow_classes", "qds_class_load", "qds_confusion"):
        assert f'id="fig-{name}"' in page
    ccdf = figs["qds_rtt_ccdf"]
    assert {t["name"] for t in ccdf["data"]} == {"video", "data"}
    assert ccdf["layout"]["yaxis"]["type"] == "log"
    # QT and 1.2·QT of each type as vertical lines: video 50/60 ms, data 100/120 ms.
    assert sorted(s["x0"] for s in ccdf["layout"]["shapes"]) == pytest.approx([50, 60, 100, 120])
    heat = figs["qds_flow_classes"]["data"][0]
    assert len(heat["y"]) == 12 and sum(lab.endswith("video") for lab in heat["y"]) == 3
    load = figs["qds_class_load"]["data"]
    flows_per_period = [sum(v or 0 for v in col) for col in zip(*(t["y"] for t in load if t["stackgroup"] == "flows"))]
    assert max(flows_per_period) == 12, "the stacked flows add up to the flows tracked"
    # The classifier's accuracy, the same as the summary's.
    accuracy = doc["summary"]["qds_classifier_accuracy"]
    assert f"Classifier accuracy: <strong>{accuracy * 100:.1f} %</strong>" in page


def test_an_oracle_run_says_so(tmp_path: Path) -> None:
    page, doc = run(tmp_path, "oracle", classifier="oracle")
    assert doc["summary"]["qds_classifier_accuracy"] == 1.0
    assert "Oracle mode" in page and "Classifier accuracy" not in page
    z = figures(page)["qds_confusion"]["data"][0]["z"]
    assert all(v in (0, 1) for row in z for v in row if v is not None), "the diagonal only"


def test_a_middlebox_run_without_the_loop_has_the_per_type_part_only(tmp_path: Path) -> None:
    """FIFO on the middlebox: per-packet RTTs and by_type, but no loop records."""
    page, doc = run(tmp_path, "fifo", discipline="droptail")
    assert [r[0] for r in table_rows(page, "bytype")][:2] == ["video", "data"]
    figs = figures(page)
    assert "qds_rtt_ccdf" in figs
    assert not {"qds_flow_classes", "qds_class_load", "qds_confusion"} & set(figs)
    assert doc["summary"]["by_type"]["video"]["throughput_mbps"] > 0


def test_a_non_qds_run_has_no_qds_section(fake_native: Callable[..., Any], scenario: Scenario) -> None:
    ds = [digest_run(RunRecords.from_native(fake_native(traces=False, seed=0, run=0)), scenario)]
    page = html_report(scenario, ds, summarize_runs([d.summary for d in ds]))
    assert 'id="qds"' not in page and QDS_TITLES["rtt_ccdf"] not in page
    assert not any(name.startswith("qds_") for name in figures(page))


def sweep(tmp_path: Path, vary: str, fixed: str = "") -> tuple[str, dict[str, Any]]:
    """A 1-run sweep of 3-s runs of the QDS base scenario: its report.html and summary.json."""
    f = tmp_path / "sw.toml"
    f.write_text(f'[sweep]\nbase = "{BASE}"\nruns = 1\n[set]\n"scenario.duration_s" = 3.0\n{fixed}[vary]\n{vary}')
    out = tmp_path / "o"
    assert main(["sweep", str(f), "--out", str(out), "--quiet", "--jobs", "1"]) == 0
    return (out / "report.html").read_text(), json.loads((out / "summary.json").read_text())


def test_the_sweep_report_has_the_table_i_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page, doc = sweep(tmp_path, '"queue.discipline" = ["droptail", "qds"]\n')
    # The terminal: Table I under the comparison table, whose interactive columns (n/a
    # everywhere: no interactive messages) are left out.
    terminal = capsys.readouterr().out
    assert "video ≤QT" in terminal and "r_I150" not in terminal
    qds_line = next(line for line in terminal.splitlines() if line.startswith("qds ") and "%" in line)
    video_qt = doc["points"][1]["summary"]["by_type"]["video"]["share_within_qt"]
    assert f"{video_qt * 100:.1f}%" in qds_line
    # No empty figures of interactive delays.
    assert not any(name.startswith(("ccdf", "t_vs_x", "r_vs_x")) for name in figures(page))
    assert QDS_SWEEP_TITLES["table"] in page
    rows = table_rows(page, "table1")
    assert [r[0] for r in rows] == ["droptail", "qds"]
    for r, point in zip(rows, doc["points"]):
        bt = point["summary"]["by_type"]
        # Per type (video, then data): ≤ QT, ≤ 1.2·QT, RTT mean ± sd, throughput.
        for i, t in enumerate(("video", "data")):
            within, within12, rtt, throughput = r[1 + 4 * i : 5 + 4 * i]
            assert number(within) == pytest.approx(bt[t]["share_within_qt"] * 100, abs=0.05)
            assert number(within12) == pytest.approx(bt[t]["share_within_1_2qt"] * 100, abs=0.05)
            assert number(rtt) == pytest.approx(bt[t]["rtt_mean_ms"], abs=0.05)
            assert number(throughput) == pytest.approx(bt[t]["throughput_mbps"], abs=0.005)
    figs = figures(page)
    bars = [t for t in figs["qds_bars"]["data"] if t["yaxis"] == "y"]
    assert [t["name"] for t in bars] == ["droptail", "qds"] and bars[0]["x"] == ["video", "data"]
    assert bars[1]["y"][0] == pytest.approx(doc["points"][1]["summary"]["by_type"]["video"]["share_within_qt"] * 100)
    # The per-run RTT CCDFs: one line per discipline in each type's panel.
    ccdf = figs["qds_rtt_ccdf"]["data"]
    assert sorted((t["name"], t["xaxis"]) for t in ccdf) == [
        ("droptail", "x"),
        ("droptail", "x2"),
        ("qds", "x"),
        ("qds", "x2"),
    ]
    assert "qds_alpha_beta" not in figs


def test_the_sweep_report_shows_alpha_and_beta(tmp_path: Path) -> None:
    page, doc = sweep(tmp_path, '"qds.alpha" = [0.0, 0.5]\n"qds.beta" = [1.0, 2.0]\n', '"queue.discipline" = "qds"\n')
    figs = figures(page)
    assert QDS_SWEEP_TITLES["alpha_beta"] in page and "qds_bars" not in figs
    lines = figs["qds_alpha_beta"]["data"]
    # Two panels (video, data), one line per β, α on x.
    assert sorted((t["name"], t["xaxis"]) for t in lines) == [
        ("β = 1", "x"),
        ("β = 1", "x2"),
        ("β = 2", "x"),
        ("β = 2", "x2"),
    ]
    by_point = {p["name"]: p["summary"]["by_type"] for p in doc["points"]}
    video_b2 = next(t for t in lines if t["name"] == "β = 2" and t["xaxis"] == "x")
    assert video_b2["x"] == [0.0, 0.5]
    assert video_b2["y"][1] == pytest.approx(by_point["alpha=0.5,beta=2"]["video"]["share_within_qt"] * 100)
    assert not math.isnan(video_b2["y"][0])
