"""One-at-a-time sensitivity (issue 21 item 6): the ranking on hand-made summary tables,
the sensitivity sweep file, the ``[report] sensitivity`` key, and the report section."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from thinwan.analysis.sensitivity import (
    Choice,
    choice_effect,
    choices_of,
    competition_ranks,
    group_ranking,
    paired_se,
    sensitivity_ranking,
)
from thinwan.config.sweepfile import SweepError, load_sweep
from thinwan.execute.sweeps import run_sweep
from thinwan.report.sensitivity_page import sensitivity_context, sensitivity_text
from thinwan.report.sweep_page import html_comparison

REPO = Path(__file__).resolve().parents[1]
SENSITIVITY = REPO / "scenarios" / "ogawa2011" / "sensitivity.toml"


def summary(r150: float | None, r1000: float | None = 0.0, timeouts: float | None = 1.0) -> dict[str, Any]:
    means = {"r_I150": r150, "r_I1000": r1000, "timeouts_per_conn": timeouts}
    return {**means, "min": dict(means), "max": dict(means), "runs": 1}


# ---------------------------------------------------------------------------------------
# The ranking


def test_competition_ranks_share_ties_and_skip_missing() -> None:
    assert competition_ranks([0.1, 0.3, 0.3, None, 0.0]) == [3, 1, 1, None, 4]
    assert competition_ranks([]) == []


def test_choices_group_bundles_by_the_keys_they_set() -> None:
    labels = ["base", "a=1", "b=1", "a=2", "ab"]
    overrides = [{}, {"t.a": 1}, {"t.b": 1}, {"t.a": 2}, {"t.a": 3, "t.b": 3}]
    base, choices = choices_of(labels, overrides)
    assert base == "base"
    assert choices == [Choice(("t.a",), ("a=1", "a=2")), Choice(("t.b",), ("b=1",)), Choice(("t.a", "t.b"), ("ab",))]
    assert choices[2].name == "t.a + t.b"
    with pytest.raises(ValueError, match="exactly one empty bundle"):
        choices_of(["x", "y"], [{"t.a": 1}, {"t.a": 2}])
    with pytest.raises(ValueError, match="found: x, y"):
        choices_of(["x", "y"], [{}, {}])


def test_effect_is_the_largest_move_signed_absolute_and_relative() -> None:
    e = choice_effect(0.10, {"lo": 0.07, "hi": 0.15}, ["lo", "hi"])
    assert e["at"] == "hi"
    assert e["delta"] == pytest.approx(0.05) and e["abs_delta"] == pytest.approx(0.05)
    assert e["rel_delta"] == pytest.approx(0.5)
    assert e["deltas"]["lo"] == pytest.approx(-0.03)
    down = choice_effect(0.10, {"lo": 0.02, "hi": 0.15}, ["lo", "hi"])
    assert down["at"] == "lo" and down["delta"] == pytest.approx(-0.08) and down["rel_delta"] == pytest.approx(-0.8)
    # A zero base: relative Δ is undefined unless nothing moved.
    assert choice_effect(0.0, {"v": 0.01}, ["v"])["rel_delta"] is None
    assert choice_effect(0.0, {"v": 0.0}, ["v"])["rel_delta"] == 0.0
    # Missing values (no runs, null, NaN, ∞) are skipped; all missing → no effect.
    e = choice_effect(0.1, {"a": None, "b": math.nan, "c": 0.3, "d": math.inf}, ["a", "b", "c", "d"])
    assert e["at"] == "c" and e["deltas"]["a"] is None and e["deltas"]["b"] is None and e["deltas"]["d"] is None
    assert choice_effect(0.1, {}, ["a"])["delta"] is None
    assert choice_effect(None, {"a": 0.2}, ["a"])["delta"] is None


def test_ranking_orders_known_deltas_with_ties_and_missing_values() -> None:
    # r_I150 Δ: a 0.05, b 0.20 (through its second value), c 0.05 (tie with a), d missing.
    # timeouts Δ: a 3.0, b 0.5, c 0.0, d 1.0.
    labels = ["base", "a=1", "b=1", "b=2", "c=1", "d=1"]
    overrides = [{}, {"k.a": 1}, {"k.b": 1}, {"k.b": 2}, {"k.c": 1}, {"k.d": 1}]
    base_label, choices = choices_of(labels, overrides)
    summaries = {
        "base": summary(0.10, 0.0, 2.0),
        "a=1": summary(0.15, 0.0, 5.0),
        "b=1": summary(0.12, 0.0, 2.5),
        "b=2": summary(0.30, 0.01, 2.5),
        "c=1": summary(0.05, 0.0, 2.0),
        "d=1": summary(None, None, 3.0),
    }
    g = group_ranking(summaries, base_label, choices)
    by_name = {row["choice"]: row for row in g["choices"]}
    r150 = {n: row["metrics"]["r_I150"]["rank"] for n, row in by_name.items()}
    assert r150 == {"k.b": 1, "k.a": 2, "k.c": 2, "k.d": None}
    assert by_name["k.b"]["metrics"]["r_I150"]["at"] == "b=2"
    assert by_name["k.c"]["metrics"]["r_I150"]["delta"] == pytest.approx(-0.05)
    # r_I1000's base is 0: b moves it (relative n/a), the others tie at Δ = 0.
    r1000 = {n: row["metrics"]["r_I1000"]["rank"] for n, row in by_name.items()}
    assert r1000 == {"k.b": 1, "k.a": 2, "k.c": 2, "k.d": None}
    assert by_name["k.b"]["metrics"]["r_I1000"]["rel_delta"] is None
    timeouts = {n: row["metrics"]["timeouts_per_conn"]["rank"] for n, row in by_name.items()}
    assert timeouts == {"k.a": 1, "k.d": 2, "k.b": 3, "k.c": 4}
    # Mean ranks: a (2+2+1)/3, b (1+1+3)/3, c (2+2+4)/3, d (4+4+2)/3; missing counts as last (4).
    assert [row["choice"] for row in g["choices"]] == ["k.a", "k.b", "k.c", "k.d"]
    assert [row["rank"] for row in g["choices"]] == [1, 1, 3, 4]  # a and b tie: file order
    assert g["base"]["r_I150"] == {"mean": 0.10, "min": 0.10, "max": 0.10}


def test_a_point_without_results_leaves_its_choice_unranked() -> None:
    base_label, choices = choices_of(["base", "x=1"], [{}, {"k.x": 1}])
    g = group_ranking({"base": summary(0.1)}, base_label, choices)
    assert all(e["rank"] is None and e["delta"] is None for e in g["choices"][0]["metrics"].values())
    # Without a base every Δ is missing too.
    g = group_ranking({"x=1": summary(0.2)}, base_label, choices)
    assert g["choices"][0]["metrics"]["r_I150"]["delta"] is None


def test_standard_error_of_delta_from_paired_runs() -> None:
    # Differences 1, 1, 2: sd √(1/3), se √(1/3)/√3 = 1/3.
    assert paired_se([1.0, 2.0, 3.0], [2.0, 3.0, 5.0]) == pytest.approx(1 / 3)
    # A run missing on either side leaves its pair out; fewer than 2 pairs: no se.
    assert paired_se([1.0, None, 3.0], [2.0, 5.0, 4.0]) == 0.0
    assert paired_se([1.0, math.nan], [2.0, 3.0]) is None
    assert paired_se([], []) is None
    # The same shift in every run is no noise; a mean shift smaller than the scatter is.
    points = [
        {"id": "b", "params": {"v": "base"}, "summary": summary(0.10)},
        {"id": "x", "params": {"v": "x=1"}, "summary": summary(0.12)},
        {"id": "y", "params": {"v": "y=1"}, "summary": summary(0.11)},
    ]
    runs = {
        "b": {"r_I150": [0.09, 0.10, 0.11]},
        "x": {"r_I150": [0.11, 0.12, 0.13]},
        "y": {"r_I150": [0.05, 0.15, 0.13]},
    }
    sens = sensitivity_ranking(points, "v", ["base", "x=1", "y=1"], [{}, {"k.x": 1}, {"k.y": 1}], runs=runs)
    rows = {row["choice"]: row["metrics"]["r_I150"] for row in sens["groups"][0]["choices"]}
    assert rows["k.x"]["se"] == pytest.approx(0.0, abs=1e-12) and rows["k.x"]["noise"] is False
    assert rows["k.y"]["se"] > 0.01 and rows["k.y"]["noise"] is True
    # Without per-run values there is no se and no verdict.
    assert rows["k.x"]["rank"] == 1
    plain = sensitivity_ranking(points, "v", ["base", "x=1", "y=1"], [{}, {"k.x": 1}, {"k.y": 1}])
    assert plain["groups"][0]["choices"][0]["metrics"]["r_I150"]["se"] is None
    assert plain["groups"][0]["choices"][0]["metrics"]["r_I150"]["noise"] is None


def test_groups_come_from_the_other_axes() -> None:
    points = [
        {"params": {"buffer": buf, "variant": v}, "summary": summary(r)}
        for buf, base_r in (("small", 0.2), ("large", 0.01))
        for v, r in (("base", base_r), ("x=1", base_r * 2))
    ]
    sens = sensitivity_ranking(points, "variant", ["base", "x=1"], [{}, {"k.x": 1}])
    assert [g["params"] for g in sens["groups"]] == [{"buffer": "small"}, {"buffer": "large"}]
    assert sens["groups"][0]["choices"][0]["metrics"]["r_I150"]["delta"] == pytest.approx(0.2)
    assert sens["groups"][1]["choices"][0]["metrics"]["r_I150"]["rel_delta"] == pytest.approx(1.0)
    assert sens["choices"] == {"k.x": {"keys": ["k.x"], "labels": ["x=1"]}}


# ---------------------------------------------------------------------------------------
# The sweep file


def test_the_sensitivity_sweep_varies_one_choice_at_a_time() -> None:
    sweep = load_sweep(SENSITIVITY)
    assert sweep.sensitivity_axis == "variant"
    variant = sweep.axis("variant")
    assert [a.name for a in sweep.axes] == ["buffer", "variant"]
    assert len(sweep.points) == 2 * len(variant.labels) == 58
    base_label, choices = choices_of(variant.labels, variant.overrides)
    assert base_label == "base"
    assert len(choices) == 13
    # Every [ours] key of the base scenarios is one of the choices.
    ours = {
        line.split("=")[0].strip()
        for line in (REPO / "scenarios" / "ogawa2011" / "large-buffer.toml").read_text().splitlines()
        if "[ours]" in line and "=" in line
    }
    varied = {k.partition(".")[2] for c in choices for k in c.keys}
    assert ours and ours <= varied
    # Each point differs from its buffer's base point in exactly the keys of one choice:
    # one key, except the per-session heterogeneity (the mode and its σ).
    bases = {p.params["buffer"]: p for p in sweep.points if p.params["variant"] == "base"}
    for p in sweep.points:
        base = bases[p.params["buffer"]].scenario.model_dump()
        here = p.scenario.model_dump()
        differ = {
            f"{section}.{key}"
            for section in here
            if section != "scenario"
            for key in here[section]
            if here[section][key] != base[section][key]
        }
        label = p.params["variant"]
        if label == "base":
            assert differ == set()
        elif label.startswith("activity="):
            assert differ == {"traffic.session_activity", "traffic.session_activity_sigma"} or differ == {
                "traffic.session_activity"
            }
        elif label.startswith("profile="):
            # The whole [tcp] at once: the profile's keys (the source's three application
            # settings kept), nothing outside [tcp].
            assert "tcp.profile" in differ and all(k.startswith("tcp.") for k in differ), (p.name, differ)
        else:
            assert len(differ) == 1, (p.name, differ)


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ('sensitivity = "nope"', "report.sensitivity: 'nope' is not a named axis (named axes: delay, v)"),
        ('sensitivity = "topology.bottleneck_delay_ms"', "is not a named axis"),
        ("sensitivity = 3", "report.sensitivity"),
    ],
)
def test_a_bad_sensitivity_key_names_it(tmp_path: Path, report: str, expected: str) -> None:
    path = _mini(tmp_path, extra_report=report)
    with pytest.raises(SweepError, match=re.escape(expected)):
        load_sweep(path)


def test_a_sensitivity_axis_needs_exactly_one_base_bundle(tmp_path: Path) -> None:
    path = _mini(tmp_path, bundles='"a=1" = { "tcp.min_rto_ms" = 100.0 }\n"a=2" = { "tcp.min_rto_ms" = 300.0 }\n')
    with pytest.raises(SweepError, match=r"report\.sensitivity: axis v needs exactly one empty bundle .*found: none"):
        load_sweep(path)
    path = _mini(tmp_path, bundles='a = {}\nb = {}\n"c=1" = { "tcp.min_rto_ms" = 100.0 }\n')
    with pytest.raises(SweepError, match=r"found: a, b"):
        load_sweep(path)


# ---------------------------------------------------------------------------------------
# The report and --json


def test_the_report_ranks_and_draws_a_tornado(tmp_path: Path) -> None:
    sweep = load_sweep(_mini(tmp_path))
    result = run_sweep(sweep, tmp_path / "out", jobs=1, progress=False)
    sens = result.document["sensitivity"]
    assert sens["axis"] == "v" and sens["base"] == "base"
    assert [g["params"] for g in sens["groups"]] == [{"delay": "short"}, {"delay": "long"}]
    assert {row["choice"] for row in sens["groups"][0]["choices"]} == {"tcp.min_rto_ms", "traffic.size_spread"}
    page = html_comparison(sweep, result.frame, result.document)
    assert "Sensitivity: which results hang on which choice" in page
    for metric in ("r_I150", "r_I1000", "timeouts_per_conn"):
        assert f'id="fig-sens_{metric}"' in page
    assert "<code>tcp.min_rto_ms</code>" in page
    # The run's per-run values give every effect a standard error (2 runs per point).
    effect = sens["groups"][0]["choices"][0]["metrics"]["timeouts_per_conn"]
    assert effect["se"] is not None and effect["noise"] in (True, False)
    text = sensitivity_text(result.document)
    assert "delay=long" in text and "tcp.min_rto_ms" in text


def test_the_section_shows_known_numbers() -> None:
    points = [
        {"params": {"variant": "base"}, "summary": summary(0.10, 0.0, 2.0)},
        {"params": {"variant": "x=1"}, "summary": summary(0.25, 0.0, 2.0)},
    ]
    doc = {"sensitivity": sensitivity_ranking(points, "variant", ["base", "x=1"], [{}, {"k.x": 1}])}
    ctx = sensitivity_context(doc)
    assert ctx["present"] and set(ctx["figures"]) == {"sens_r_I150", "sens_r_I1000", "sens_timeouts_per_conn"}
    assert "+15 pp" in ctx["html"] and "(+150 %)" in ctx["html"]
    bars = ctx["figures"]["sens_r_I150"]["data"][0]
    assert bars["y"] == ["k.x"] and bars["base"] == [0.0] and bars["x"] == [pytest.approx(15.0)]
    assert sensitivity_context({})["present"] is False
    assert sensitivity_text({}) == ""


def _mini(tmp_path: Path, extra_report: str = 'sensitivity = "v"', bundles: str | None = None) -> Path:
    (tmp_path / "base.toml").write_text(
        "[scenario]\nduration_s = 2.0\ndrain_s = 1.0\nruns = 1\n[topology]\npairs = 3\n"
        "[queue]\nlimit_bytes = 25000\nlimit_packets = 0\n"
    )
    if bundles is None:
        bundles = (
            "base = {}\n"
            '"rto=100" = { "tcp.min_rto_ms" = 100.0 }\n'
            '"rto=1000" = { "tcp.min_rto_ms" = 1000.0 }\n'
            '"spread=0" = { "traffic.size_spread" = 0.0 }\n'
        )
    path = tmp_path / "sens.toml"
    path.write_text(
        '[sweep]\nname = "sens"\nbase = "base.toml"\nruns = 2\n'
        "[vary.delay]\n"
        'short = { "topology.bottleneck_delay_ms" = 10.0 }\n'
        'long = { "topology.bottleneck_delay_ms" = 50.0 }\n'
        f"[vary.v]\n{bundles}"
        f"[report]\n{extra_report}\n"
    )
    return path
