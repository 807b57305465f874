"""Reports build from synthetic records, with and without traces."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from thinwan.analysis.digest import digest_run
from thinwan.analysis.metrics import summarize_runs
from thinwan.config.scenario import Scenario
from thinwan.records.schema import RunRecords
from thinwan.report.run_page import FIGURE_TITLES, html_report
from thinwan.report.text import summary_table


def digests(fake_native: Callable[..., Any], scenario: Scenario, traces: bool, runs: int = 2) -> list:
    return [
        digest_run(RunRecords.from_native(fake_native(traces=traces, seed=k, run=k)), scenario) for k in range(runs)
    ]


def figures(html: str) -> dict[str, Any]:
    """The Plotly specs the page hands to plotly.js (which it embeds)."""
    assert "Plotly.newPlot" in html and len(html) > 3_000_000  # plotly.js is inline
    return json.loads(re.search(r"const FIGURES = (.*);\n", html).group(1))


def test_digest_keeps_only_what_the_report_needs(records: RunRecords, scenario: Scenario) -> None:
    d = digest_run(records, scenario)
    assert (d.worst_conn, d.worst_conn_timeouts) == (2, 4)  # fake: timeouts = 2 · conn
    assert set(d.conn_trace["conn"]) == {2}
    assert set(d.queue_trace["port"]) == {"bottleneck"}
    assert len(d.delays) == len(records.messages)
    assert d.delays["end_to_end"].dtype == "float32"
    assert d.summary["r_I150"] == d.summary["r_I150"]  # a number, not nan


def test_html_report_with_traces(fake_native: Callable[..., Any], scenario: Scenario) -> None:
    ds = digests(fake_native, scenario, traces=True)
    html = html_report(scenario, ds, summarize_runs([d.summary for d in ds]))
    for title in FIGURE_TITLES.values():
        assert title in html
    assert "No queue trace" not in html and "No TCP trace" not in html
    figs = figures(html)
    assert set(figs) == {"end_to_end", "components", "queue", "conn"}
    for name, fig in figs.items():
        assert f'id="fig-{name}"' in html
        assert fig["data"] and all(len(t["x"]) == len(t["y"]) > 0 for t in fig["data"])
    # CCDFs: interactive and bulk on log axes, thresholds as dashed lines.
    assert {t["name"] for t in figs["end_to_end"]["data"]} == {"interactive", "bulk"}
    assert figs["end_to_end"]["layout"]["xaxis"]["type"] == "log"
    assert len(figs["end_to_end"]["layout"]["shapes"]) == 2
    # Six component panels (five components + all interactive components together).
    assert len([k for k in figs["components"]["layout"] if k.startswith("xaxis")]) == 6
    assert "[tcp]" in html  # the scenario, re-runnable as TOML
    assert "&#34;seed&#34;: 2" in html  # per-run metadata (JSON, HTML-escaped)


def test_html_report_without_traces_says_so(fake_native: Callable[..., Any], scenario: Scenario) -> None:
    ds = digests(fake_native, scenario, traces=False)
    html = html_report(scenario, ds, summarize_runs([d.summary for d in ds]))
    assert "No queue trace in these records" in html
    assert "No TCP trace for connection 2" in html
    assert set(figures(html)) == {"end_to_end", "components"}  # the two CCDF figures


def test_html_report_escapes_scenario_text(fake_native: Callable[..., Any], scenario: Scenario) -> None:
    scenario = scenario.with_values({"scenario.description": "<script>x</script>"})
    ds = digests(fake_native, scenario, traces=False, runs=1)
    html = html_report(scenario, ds, summarize_runs([d.summary for d in ds]))
    assert "<script>x</script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html


def test_summary_table_is_aligned_and_shows_ranges(scenario: Scenario) -> None:
    runs = [
        {"r_I150": 0.10, "r_I1000": 0.0, "T_I150_s": 2.5, "T_I1000_s": math.inf, "utilisation": 0.5},
        {"r_I150": 0.20, "r_I1000": 0.0, "T_I150_s": 1.5, "T_I1000_s": math.inf, "utilisation": 0.7},
    ]
    text = summary_table(summarize_runs(runs), scenario)
    lines = text.splitlines()
    assert "2 runs" in lines[0]
    assert set(lines[1]) == {"-"}
    row = next(line for line in lines if line.startswith("r_I150"))
    assert "> 130 ms" in row and "15 %" in row and "10 % – 20 %" in row
    assert "∞ – ∞" in next(line for line in lines if line.startswith("T_I1000"))
    # Mean column right-aligned: every row's mean ends in the same column.
    ends = {line.index("  ", len("T_I1000 (mean time between violations)")) for line in lines[2:]}
    assert len(ends) == 1
