"""``thinwan validate``'s agreement: relative differences, verdicts, the JSON, the option.

No lab and no simulator: two hand-made summaries (and fake-native records for the JSON
shape) stand in for both substrates. docs/lab.md "Agreement" defines what is checked.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from thinwan.analysis.agreement import (
    COUNTED,
    DEFAULT_TOLERANCES,
    JUDGED,
    METRICS,
    Tolerance,
    compare,
    parse_tolerance,
    rate_ratio_interval,
    rel_diff,
    validate_values,
)
from thinwan.analysis.digest import digest_run
from thinwan.analysis.metrics import BULK, INTERACTIVE, summarize_run, summarize_runs
from thinwan.cli import main, parser
from thinwan.cli.lab_cmds import EXIT_DISAGREEMENT, _validate_status
from thinwan.execute.labruns import agreement_document
from thinwan.execute.runs import RunResult
from thinwan.records.meta import dumps_json
from thinwan.report.agreement_page import agreement_page
from thinwan.report.text import validation_table

# Hand-made summaries: what each metric's rel. diff and verdict must be, worked out by hand.
SIM = {
    "utilisation": 0.50,  # lab 0.40: +25 % exactly, the edge of ±25 % → ok
    "r_I150": 0.04,  # lab 0.02: ×2 exactly, the edge of the factor → ok
    "r_I1000": 0.0010,  # lab 0: +∞, not within any factor
    "interactive_delay_p50_ms": 22.0,  # lab 22.0: 0
    "interactive_delay_p99_ms": 200.0,  # lab 100: +100 % → differs
    "timeouts_per_conn": 0.0,  # lab 0: both zero → 0, ok
    "retransmit_episodes_per_conn": 0.7499,  # lab 1.0: −25.01 % → differs (just past the edge)
    "fast_retransmits_per_conn": 0.5,  # lab 1.0: −50 %, shown without a verdict (the lab estimates it)
    "T_I150_s": math.inf,  # lab ∞: equal → 0, no verdict (no tolerance)
    "messages": 1000,
    "runs": 1,  # not a metric: never compared
}
LAB = {
    "utilisation": 0.40,
    "r_I150": 0.02,
    "r_I1000": 0.0,
    "interactive_delay_p50_ms": 22.0,
    "interactive_delay_p99_ms": 100.0,
    "timeouts_per_conn": 0.0,
    "retransmit_episodes_per_conn": 1.0,
    "fast_retransmits_per_conn": 1.0,
    "T_I150_s": math.inf,
    "messages": 800,
    "runs": 1,
    "qds_periods": 5.0,  # only the lab has it: not compared
}
EXPECTED = {
    "utilisation": (0.25, True),
    "r_I150": (1.0, True),
    "r_I1000": (math.inf, False),
    "interactive_delay_p50_ms": (0.0, True),
    "interactive_delay_p99_ms": (1.0, False),
    "timeouts_per_conn": (0.0, True),
    "retransmit_episodes_per_conn": (-0.2501, False),
    "fast_retransmits_per_conn": (-0.5, None),
    "T_I150_s": (0.0, None),
    "messages": (0.25, None),
}


def test_hand_made_summaries_give_the_hand_worked_differences_and_verdicts() -> None:
    rows = {r.metric: r for r in compare(SIM, LAB)}
    assert list(rows) == [k for k in METRICS if k in EXPECTED], "METRICS order, only metrics both sides have"
    for metric, (diff, ok) in EXPECTED.items():
        assert rows[metric].rel_diff == pytest.approx(diff), metric
        assert rows[metric].ok is ok, metric
        assert (rows[metric].sim, rows[metric].lab) == (float(SIM[metric]), float(LAB[metric]))


@pytest.mark.parametrize(
    ("sim", "lab", "expected"),
    [
        (0.0, 0.0, 0.0),  # lab = 0 and sim = 0: equal
        (3.0, 0.0, math.inf),  # lab = 0, sim > 0: no finite ratio
        (-3.0, 0.0, -math.inf),
        (0.0, 2.0, -1.0),  # sim = 0: −100 %
        (5.0, math.inf, -1.0),  # lab never delivered, sim did: the limit
        (math.inf, 5.0, math.inf),
        (math.inf, math.inf, 0.0),
        (math.nan, 1.0, math.nan),
        (1.0, math.nan, math.nan),
        (3.0, -2.0, 2.5),  # divided by |lab|: sim above lab reads positive, (3 − (−2))/2
    ],
)
def test_rel_diff_edge_cases(sim: float, lab: float, expected: float) -> None:
    got = rel_diff(sim, lab)
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("tolerance", "sim", "lab", "ok"),
    [
        (Tolerance("relative", 0.25), 1.25, 1.0, True),  # the edge is in
        (Tolerance("relative", 0.25), 0.75, 1.0, True),
        (Tolerance("relative", 0.25), 1.2501, 1.0, False),
        (Tolerance("relative", 0.25), 0.7499, 1.0, False),
        (Tolerance("relative", 0.25), 1.0, 0.8, True),  # +25 % after rounding: still the edge
        (Tolerance("relative", 0.25), 1e-9, 0.0, False),  # lab = 0: any sim ≠ 0 differs
        (Tolerance("relative", 0.0), 1.0, 1.0, True),
        (Tolerance("factor", 2.0), 2.0, 1.0, True),  # both edges of ×2 are in
        (Tolerance("factor", 2.0), 0.5, 1.0, True),
        (Tolerance("factor", 2.0), 2.001, 1.0, False),
        (Tolerance("factor", 2.0), 0.4999, 1.0, False),
        (Tolerance("factor", 2.0), 0.0, 0.0, True),
        (Tolerance("factor", 2.0), 0.0, 0.001, False),  # a zero on one side only
        (Tolerance("factor", 2.0), 0.001, 0.0, False),
        (Tolerance("factor", 2.0), -1.0, 1.0, False),  # opposite signs
        (Tolerance("factor", 2.0), math.inf, 1.0, False),
        (Tolerance("factor", 2.0), math.nan, 1.0, None),
        (Tolerance("relative", 0.25), 1.0, math.nan, None),
    ],
)
def test_tolerance_edges(tolerance: Tolerance, sim: float, lab: float, ok: bool | None) -> None:
    assert tolerance.holds(sim, lab) is ok


def test_default_tolerances_are_the_issue_targets() -> None:
    assert set(DEFAULT_TOLERANCES) == set(JUDGED)
    for k in ("r_I150", "r_I1000"):
        assert DEFAULT_TOLERANCES[k] == Tolerance("factor", 2.0)
    for k in set(JUDGED) - {"r_I150", "r_I1000"}:
        assert DEFAULT_TOLERANCES[k] == Tolerance("relative", 0.25)


def test_every_compared_metric_is_a_key_of_a_real_summary(records, scenario) -> None:
    summary = summarize_run(records, scenario)
    assert [k for k in METRICS if k not in summary] == []


# --- the option -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "metric", "tolerance"),
    [
        ("utilisation=10%", "utilisation", Tolerance("relative", 0.10)),
        ("r_I150=x3", "r_I150", Tolerance("factor", 3.0)),
        ("r_I150=×1.5", "r_I150", Tolerance("factor", 1.5)),
        ("delay_p99_ms=50%", "delay_p99_ms", Tolerance("relative", 0.5)),
        ("r_I1000=off", "r_I1000", None),
    ],
)
def test_parse_tolerance(text: str, metric: str, tolerance: Tolerance | None) -> None:
    assert parse_tolerance(text) == (metric, tolerance)
    if tolerance is not None:
        assert parse_tolerance(f"{metric}={tolerance.spec}") == (metric, tolerance), "spec round-trips"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("utilisation", "expected METRIC=25%"),
        ("utilisation=0.25", "expected METRIC=25%"),
        ("utilisation=-5%", "finite percentage ≥ 0"),
        ("r_I150=x0.5", "factor must be finite and ≥ 1"),
        ("r_I150=x1e", "is not a number"),
        ("r_I1500=x2", "unknown metric 'r_I1500'"),
    ],
)
def test_parse_tolerance_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_tolerance(text)


def test_option_overrides_one_default_and_keeps_the_rest() -> None:
    args = parser().parse_args(["validate", "x.toml", "--tolerance", "utilisation=10%", "--tolerance", "r_I1000=off"])
    assert args.tolerance == {
        **DEFAULT_TOLERANCES,
        "utilisation": Tolerance("relative", 0.10),
        "r_I1000": None,
    }
    assert parser().parse_args(["validate", "x.toml"]).tolerance is None  # the defaults


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tolerance", "utilisation=0.25"], "argument --tolerance: 'utilisation=0.25': expected METRIC=25%"),
        (["--tolerance", "nope=25%"], "unknown metric 'nope'"),
        (["--tolerance", "r_I150=x2", "--tolerance", "r_I150=x3"], "argument --tolerance: r_I150 given twice"),
    ],
)
def test_option_errors_are_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["validate", "x.toml", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("thinwan: error: ") and message in err and "Traceback" not in err


def test_help_shows_the_default_tolerances(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for k, t in DEFAULT_TOLERANCES.items():
        assert f"{k} {t.spec}" in out


def test_exit_status_is_zero_unless_asked_to_fail() -> None:
    doc = {"agreement": {r.metric: {"ok": r.ok} for r in compare(SIM, LAB)}}
    assert _validate_status(doc, fail_on_disagreement=False) == 0
    assert _validate_status(doc, fail_on_disagreement=True) == EXIT_DISAGREEMENT
    agreeing = {"agreement": {"utilisation": {"ok": True}, "messages": {"ok": None}}}
    assert _validate_status(agreeing, fail_on_disagreement=True) == 0


# --- combining runs, the document, the table, the page -----------------------------------


def delays(interactive_ms: list[float], bulk_ms: list[float]) -> pd.DataFrame:
    kinds = [INTERACTIVE] * len(interactive_ms) + [BULK] * len(bulk_ms)
    e2e = np.array(interactive_ms + bulk_ms, dtype=np.float32) / 1000.0
    return pd.DataFrame({"kind": kinds, "end_to_end": e2e})


def test_interactive_quantiles_pool_all_runs_messages() -> None:
    # Run 0: 100 interactive messages at 10 ms (and bulk ones, not counted); run 1: 100 at
    # 20 ms. Pooled (200): the median is 10 ms (F(10 ms) = 0.5), p99 20 ms; the means of
    # the per-run quantiles would be 15 and 15 ms.
    runs = [delays([10.0] * 100, [5000.0] * 10), delays([20.0] * 100, [])]
    summary = {"interactive_delay_p50_ms": 15.0, "interactive_delay_p99_ms": 15.0, "utilisation": 0.3, "runs": 2}
    values = validate_values(summary, runs)
    assert values["interactive_delay_p50_ms"] == pytest.approx(10.0)
    assert values["interactive_delay_p99_ms"] == pytest.approx(20.0)
    assert values["utilisation"] == 0.3, "other metrics stay the means over runs"
    assert values["runs"] == 2, "kept: a counted metric's events are its mean count × runs"
    # Two 1-s stalls in run 0 make its own p99 1 s (mean of p99s: 510 ms); pooled they are
    # 1 % of 200 and p99 stays 20 ms (F(20 ms) = 198/200) — a third stall moves it to 1 s.
    two = validate_values(summary, [delays([10.0] * 98 + [1000.0] * 2, []), delays([20.0] * 100, [])])
    three = validate_values(summary, [delays([10.0] * 97 + [1000.0] * 3, []), delays([20.0] * 100, [])])
    assert two["interactive_delay_p99_ms"] == pytest.approx(20.0)
    assert three["interactive_delay_p99_ms"] == pytest.approx(1000.0)


def test_validate_document_has_agreement_and_tolerance(records, scenario) -> None:
    digest = digest_run(records, scenario)
    result = RunResult(document={}, digests=[digest])
    summary = summarize_runs([digest.summary])
    lab_summary = {**summary, "timeouts_per_conn": summary["timeouts_per_conn"] * 2}
    doc = json.loads(dumps_json(agreement_document(summary, lab_summary, result, result, DEFAULT_TOLERANCES)))
    assert doc["tolerance"] == {k: t.spec for k, t in DEFAULT_TOLERANCES.items()}
    assert doc["tolerance"]["utilisation"] == "25%" and doc["tolerance"]["r_I150"] == "x2"
    agreement = doc["agreement"]
    for metric in JUDGED:
        counted = {"events", "ratio_interval", "undecided"} if metric in COUNTED else set()
        assert set(agreement[metric]) == {"sim", "lab", "rel_diff", "ok"} | counted, metric
    assert agreement["timeouts_per_conn"]["rel_diff"] == pytest.approx(-0.5)
    assert agreement["timeouts_per_conn"]["ok"] is False
    assert agreement["utilisation"] == {
        "sim": summary["utilisation"],
        "lab": summary["utilisation"],
        "rel_diff": 0.0,
        "ok": True,
    }
    assert agreement["messages"]["ok"] is None  # compared, not judged
    assert "runs" not in agreement


def test_table_and_page_show_tolerances_and_verdicts() -> None:
    rows = compare(SIM, LAB)
    doc = {
        "scenario": "fixture",
        "agreement": {r.metric: {"sim": r.sim, "lab": r.lab, "rel_diff": r.rel_diff, "ok": r.ok} for r in rows},
        "tolerance": {k: t.spec for k, t in DEFAULT_TOLERANCES.items()},
    }
    text = validation_table(doc, runs=1)
    assert "r_I150 ×2" in text and "utilisation ±25 %" in text, "tolerances in the header"
    line = {ln.split()[0]: ln for ln in text.splitlines() if ln.split() and ln.split()[0] in doc["agreement"]}
    assert line["utilisation"].endswith("ok") and "+25.0 %" in line["utilisation"]
    assert line["interactive_delay_p99_ms"].endswith("differs")
    assert "+∞" in line["r_I1000"] and line["r_I1000"].endswith("differs")
    assert line["messages"].endswith("—"), "no tolerance, no verdict"
    assert "agreement: 4 of 7 judged metrics within tolerance" in text
    html = agreement_page(doc, runs=1)
    assert html.count('<td class="ok">ok</td>') == 4
    assert html.count('<td class="differs">differs</td>') == 3


def test_metrics_measured_differently_get_no_verdict() -> None:
    rows = {r.metric: r for r in compare(SIM, LAB, not_compared=["interactive_delay_p99_ms"])}
    p99 = rows["interactive_delay_p99_ms"]
    assert (p99.ok, p99.tolerance, p99.rel_diff) == (None, None, 1.0), "listed, with its difference, unjudged"
    assert rows["utilisation"].ok is True
    doc = {
        "scenario": "fixture",
        "agreement": {
            r.metric: {"sim": r.sim, "lab": r.lab, "rel_diff": r.rel_diff, "ok": r.ok} for r in rows.values()
        },
        "tolerance": {k: t.spec for k, t in DEFAULT_TOLERANCES.items()},
        "not_compared": {"interactive_delay_p99_ms": "measured differently"},
    }
    text = validation_table(doc, runs=1)
    assert "agreement: 4 of 6 judged metrics" in text
    assert "¹ interactive_delay_p99_ms: measured differently" in text
    html = agreement_page(doc, runs=1)
    assert html.count('<td class="differs">') == 2 and "measured differently" in html


def test_tunnelled_scenarios_do_not_judge_the_lab_connection_counts() -> None:
    from thinwan.config.scenario import scenario_from_dict
    from thinwan.execute.labruns import not_compared

    base = {"topology": {"kind": "mux"}}
    # Never in the lab's records; estimated by the lab (judged: retransmit_episodes).
    always = {"link_loss_drops", "fast_retransmits_per_conn"}
    assert set(not_compared(scenario_from_dict(base))) == always, "direct: the lab's connections are the streams"
    tunnel = not_compared(scenario_from_dict({**base, "mux": {"mode": "mux", "trunks": 4}}))
    assert {"timeouts_per_conn", "retransmit_episodes_per_conn"} | always <= set(tunnel)
    assert set(not_compared(scenario_from_dict({}))) == always


# --- counted metrics: r_I150 and r_I1000 judged on their events ----------------------------


def test_rate_ratio_interval_by_hand() -> None:
    # One event, in the lab: the simulator's share p of one event is Beta(1, 1) = uniform
    # under Clopper–Pearson, so p ≤ 0.975 and the rate ratio ≤ 0.975/0.025 = 39 (equal counts
    # of messages); twice the simulator's messages halve it.
    assert rate_ratio_interval(0, 1000, 1, 1000) == (0.0, pytest.approx(39.0))
    assert rate_ratio_interval(0, 2000, 1, 1000)[1] == pytest.approx(19.5)
    assert rate_ratio_interval(1, 1000, 0, 1000) == (pytest.approx(1 / 39), math.inf)
    assert rate_ratio_interval(0, 10, 0, 10) == (0.0, math.inf)
    lo, hi = rate_ratio_interval(100, 10_000, 100, 10_000)
    assert lo < 1 < hi and lo == pytest.approx(1 / hi), "symmetric around equal rates"


def counted(sim_events: int, lab_events: int, messages: int = 10_000, runs: int = 2) -> dict:
    """r_I1000's agreement row for the given event counts over ``runs`` runs."""
    side = lambda k: {"r_I1000": k / (messages * runs), "interactive_messages": messages, "runs": runs}  # noqa: E731
    (row,) = [r for r in compare(side(sim_events), side(lab_events)) if r.metric == "r_I1000"]
    return {"ok": row.ok, "undecided": row.undecided, "events": row.events}


def test_few_events_are_undecided_not_infinitely_apart() -> None:
    assert counted(1, 0) == {"ok": None, "undecided": True, "events": (1, 0)}, "1 vs 0: '+∞' by the ratio"
    assert counted(7, 2)["undecided"], "×3.5 by the ratio, but 9 events cannot say it"
    assert counted(100, 100) == {"ok": True, "undecided": False, "events": (100, 100)}
    assert counted(200, 10) == {"ok": False, "undecided": False, "events": (200, 10)}
    assert counted(0, 0)["ok"] is True, "no event on either side agrees"
    # Without the message counts the point verdict stands.
    (row,) = [r for r in compare({"r_I1000": 0.001}, {"r_I1000": 0.0}) if r.metric == "r_I1000"]
    assert row.ok is False and row.events is None


def test_the_table_says_undecided_with_the_counts() -> None:
    side = lambda k: {"r_I1000": k / 1000, "interactive_messages": 1000, "runs": 1}  # noqa: E731
    from thinwan.analysis.agreement import agreement_json

    doc = {"scenario": "s", "agreement": agreement_json(compare(side(3), side(0))), "tolerance": {"r_I1000": "x2"}}
    text = validation_table(doc, 1)
    assert "undecided (3 / 0 events)" in text and "1 undecided (too few events" in text
    assert doc["agreement"]["r_I1000"]["ok"] is None and doc["agreement"]["r_I1000"]["undecided"] is True
    assert 'class="undecided"' in agreement_page(doc, 1)
