"""QDS in the simulator: the middlebox topology, video/data/mix traffic, the exact per-packet
RTTs and ``summary.by_type`` (docs/scenario.md, docs/records.md "packet_rtt")."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from thinwan.analysis.by_type import APP_NAMES, by_type, flatten_by_type, nest_by_type, summarize_by_type_runs
from thinwan.cli import main
from thinwan.config.scenario import ScenarioError, load_scenario, scenario_from_dict
from thinwan.substrates.sim import simulate

ROOT = Path(__file__).resolve().parent.parent
QDS = ROOT / "scenarios" / "qds"
SCENARIOS = ("base", "c20-2-14", "c10-2-2", "c20-4-4", "c30-6-6", "changing-mix")
SWEEPS = ("table1", "params", "capacity", "variant", "variant-changing", "variant-ecn", "variant-move")


# ----- configuration ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"traffic": {"model": "mix"}}, 'traffic.mix: traffic.model = "mix" needs flows'),
        (
            {"topology": {"pairs": 12}, "traffic": {"model": "mix", "mix": [["video", 3]]}},
            "traffic.mix: its counts add up to 3 flows but topology.pairs = 12",
        ),
        ({"traffic": {"model": "mix", "mix": [["bulk", 10]]}}, "traffic.mix.0.0: Input should be 'video'"),
        ({"traffic": {"model": "mix", "mix": [["video", "10"]]}}, "traffic.mix.0.1: Input should be a valid integer"),
        ({"traffic": {"video_fps": 0}}, "traffic.video_fps: Input should be greater than 0"),
        (
            {"topology": {"client_delay_min_ms": 8.0, "client_delay_max_ms": 6.0}},
            "topology.client_delay_max_ms: must be ≥ client_delay_min_ms (8.0)",
        ),
        ({"topology": {"kind": "middlebox", "servers": -1}}, "topology.servers:"),
        ({"qds": {"variant": "fastest"}}, "qds.variant: Input should be 'delay_only'"),
        ({"qds": {"classifier": "magic"}}, "qds.classifier: Input should be 'model' or 'oracle'"),
        ({"queue": {"qds_order": "edf"}}, "queue.qds_order: Input should be 'drr' or 'deadline'"),
        ({"queue": {"class_change": "carry"}}, "queue.class_change: Input should be 'leave' or 'move'"),
        (
            {"topology": {"kind": "middlebox", "bottleneck_rate_mbps": 10000.0}, "scenario": {"duration_s": 1e5}},
            "scenario.duration_s: 100000 s at topology.bottleneck_rate_mbps = 10000 means up to 8.33e+10 packet_rtt",
        ),
    ],
)
def test_bad_qds_keys_name_the_key(data: dict, expected: str) -> None:
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(data, source="x.toml")
    assert f"x.toml: {expected}" in str(e.value)


def test_the_scenarios_load_with_their_mixes() -> None:
    mixes = {stem: load_scenario(QDS / f"{stem}.toml").traffic.mix for stem in SCENARIOS}
    assert mixes["base"] == (("video", 3), ("data", 9))
    assert mixes["c20-2-14"] == (("video", 2), ("data", 14))
    for c, n in ((10, 2), (20, 4), (30, 6)):
        sc = load_scenario(QDS / f"c{c}-{n}-{n}.toml")
        demand = sum(k * (5.0 if m == "video" else 1.0) for m, k in sc.traffic.mix)
        assert demand == pytest.approx(1.2 * sc.topology.bottleneck_rate_mbps), "20 % overload"
    assert load_scenario(QDS / "changing-mix.toml").traffic.mix_change_s == 60.0
    from thinwan.config.sweepfile import load_sweep

    points = {stem: len(load_sweep(QDS / f"{stem}.toml").points) for stem in SWEEPS}
    assert points == {
        "table1": 8,
        "params": 54,
        "capacity": 12,
        "variant": 24,
        "variant-changing": 6,
        "variant-ecn": 32,
        "variant-move": 24,
    }


# ----- per-type metrics, by hand ------------------------------------------------------


def test_by_type_by_hand() -> None:
    # Video (code 2): RTTs 40, 55, 70 ms and one never acknowledged; data (3): 90, 130 ms;
    # a video packet sent after the 10-s window does not count.
    rows = pd.DataFrame(
        {
            "conn": [0, 0, 0, 0, 1, 1, 0],
            "app": [2, 2, 2, 2, 3, 3, 2],
            "t_tx": [1.0, 2.0, 3.0, 4.0, 1.0, 2.0, 10.5],
            "rtt": [0.040, 0.055, 0.070, math.nan, 0.090, 0.130, 0.001],
            "bytes": [1000, 1000, 1000, 1000, 500, 500, 1000],
            "retx": [0, 0, 1, 0, 0, 0, 0],
        }
    )
    t = by_type(rows, 10.0, {"video": 50.0, "data": 100.0})
    v, d = t["video"], t["data"]
    assert v["rtt_mean_ms"] == pytest.approx(55.0)
    assert v["rtt_sd_ms"] == pytest.approx(np.std([40, 55, 70]))
    assert v["share_within_qt"] == pytest.approx(1 / 4), "40 ms of 4 packets (the unacked one counts)"
    assert v["share_within_1_2qt"] == pytest.approx(2 / 4), "≤ 60 ms: 40 and 55"
    assert v["throughput_mbps"] == pytest.approx(3000 * 8 / 10 / 1e6), "acknowledged payload only"
    assert (v["packets"], v["unacked"], v["retransmitted"]) == (4, 1, 1)
    assert d["share_within_qt"] == pytest.approx(0.5) and d["share_within_1_2qt"] == pytest.approx(0.5)
    assert APP_NAMES[2] == "video" and APP_NAMES[3] == "data"
    # Flat sweep columns and back.
    rest, back = nest_by_type({"x": 1.0, **flatten_by_type(t)})
    assert rest == {"x": 1.0} and back == t
    over = summarize_by_type_runs([{"by_type": t}, {"by_type": {"video": {**v, "rtt_mean_ms": 65.0}}}])
    assert over["video"]["rtt_mean_ms"] == pytest.approx(60.0)
    assert over["video"]["rtt_mean_ms_runs_sd"] == pytest.approx(np.std([55.0, 65.0], ddof=1))
    assert over["data"]["runs"] == 1


# ----- simulated runs -----------------------------------------------------------------


def short(path: Path, **values: object):
    return load_scenario(path).with_values({"scenario.duration_s": 10.0, **values})


def test_a_middlebox_run_has_per_type_rtts_and_rates() -> None:
    sc = short(QDS / "base.toml", **{"queue.discipline": "droptail"})
    rec = simulate(sc, 0)
    p = rec.packet_rtt
    assert set(p["app"].unique()) == {2, 3}
    assert (p.loc[p["conn"] < 3, "app"] == 2).all(), "pairs 0-2 video"
    t = by_type(p, 10.0, {"video": 50.0, "data": 100.0})
    # FIFO at 20 % overload: the downlink is full and the data flows get what they ask for.
    total = t["video"]["throughput_mbps"] + t["data"]["throughput_mbps"]
    assert 19.0 < total <= 20.0
    assert 0.85 < t["data"]["throughput_mbps"] / 9.0 < 1.1
    # No RTT below the path's: 2 · (0.1 + 5) ms.
    assert p["rtt"].min() > 0.0102


def test_run_json_and_the_table_carry_by_type(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "s.toml"
    f.write_text(f'inherits = "{QDS / "c10-2-2.toml"}"\n[scenario]\nduration_s = 5.0\nruns = 2\n')
    assert main(["run", str(f), "--out", str(tmp_path / "o"), "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    bt = doc["summary"]["by_type"]
    assert set(bt) == {"video", "data"}
    for m in ("rtt_mean_ms", "rtt_sd_ms", "share_within_qt", "share_within_1_2qt", "throughput_mbps"):
        assert math.isfinite(bt["video"][m]) and f"{m}_runs_sd" in bt["video"]
    assert all("by_type" in r for r in doc["runs"])
    assert main(["run", str(f), "--out", str(tmp_path / "o2"), "--quiet"]) == 0
    table = capsys.readouterr().out
    assert "video: packets with RTT ≤ QT (50 ms)" in table and "data: throughput, Mbit/s" in table


def test_sweep_json_points_carry_by_type(tmp_path: Path) -> None:
    sweep = tmp_path / "sw.toml"
    sweep.write_text(
        f'[sweep]\nbase = "{QDS / "base.toml"}"\nruns = 2\n[set]\n"scenario.duration_s" = 4.0\n'
        '[vary.mix]\n"3:9" = {}\n"2:14" = { "topology.pairs" = 16, "traffic.mix" = [["video", 2], ["data", 14]] }\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "thinwan", "sweep", str(sweep), "--out", str(tmp_path / "o"), "--json", "--quiet"],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(out.stdout)
    assert [p["name"] for p in doc["points"]] == ["mix=3:9", "mix=2:14"]
    for p in doc["points"]:
        bt = p["summary"]["by_type"]
        assert set(bt) == {"video", "data"} and bt["video"]["runs"] == 2
        assert not any(k.startswith("by_type.") for k in p["summary"]), "nested, not flat"
    share = [p["summary"]["by_type"]["video"]["throughput_mbps"] for p in doc["points"]]
    assert share[0] > share[1], "3 video flows get more than 2"


def test_qds_summary_and_confusion_by_hand() -> None:
    from thinwan.analysis.qds import class_occupancy, confusion, summarize_qds

    # Two periods; flow 0 is video (0) classified right twice, flow 1 data (2) taken for
    # video once.
    flows = pd.DataFrame(
        {
            "t": [0.1, 0.1, 0.2, 0.2],
            "conn": [0, 1, 0, 1],
            "app_true": [0, 2, 0, 2],
            "app": [0, 0, 0, 2],
            "class": [1, 3, 2, 8],
        }
    )
    classes = pd.DataFrame({"t": [0.1, 0.1, 0.2, 0.2], "class": [0, 1, 0, 1]})
    s = summarize_qds(flows, classes)
    assert s["qds_classifier_accuracy"] == pytest.approx(0.75)
    assert s["qds_periods"] == 2
    assert s["qds_mean_class_video"] == pytest.approx(1.5) and s["qds_mean_class_data"] == pytest.approx(5.5)
    c = confusion(flows)
    assert c.loc["data", "video"] == 1 and c.loc["data", "data"] == 1 and c.loc["video", "video"] == 2
    occ = class_occupancy(flows)
    assert occ.loc[0.1, 1] == 1 and occ.loc[0.2, 8] == 1 and occ.loc[0.1, 8] == 0
    assert summarize_qds(flows.iloc[:0], classes) == {}


def test_the_qt_defaults_are_the_controllers() -> None:
    from thinwan import _native
    from thinwan.config.scenario import QdsSection

    # One table: the scenario's [qds] defaults (which the per-type metrics read) are the
    # controller's own (thinwan_proto::qds::controller::default_qt).
    assert QdsSection().qt_ms() == _native.qds_default_qt_ms()


def test_the_qds_section_is_the_cores_keys() -> None:
    from thinwan import _native
    from thinwan.config.scenario import QdsSection

    # One set of [qds] keys (thinwan_proto::qds::keys::QdsKeys, read by the simulator,
    # thinwan-link and thinwan-qds): every scenario key is a core key with the same
    # default; the core's others are the lab's oracle table (and the inline model, absent).
    core = json.loads(_native.qds_default_keys())
    section = QdsSection().model_dump()
    assert {k: core.get(k) for k in section} == section
    assert set(core) - set(section) == {"oracle", "oracle_default"}


def test_a_qds_run_records_its_classes_and_the_classifier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "s.toml"
    f.write_text(f'inherits = "{QDS / "base.toml"}"\n[scenario]\nduration_s = 5.0\nruns = 1\n')
    assert main(["run", str(f), "--out", str(tmp_path / "o"), "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    s = doc["summary"]
    assert 0.5 < s["qds_classifier_accuracy"] <= 1.0
    assert s["qds_mean_class_video"] < s["qds_mean_class_data"], "video has the smaller budget"
    flows = pd.read_parquet(tmp_path / "o" / "runs" / "run-0" / "qds_flows.parquet")
    classes = pd.read_parquet(tmp_path / "o" / "runs" / "run-0" / "qds_classes.parquet")
    assert set(flows["conn"]) == set(range(12)) and flows["f_size_mean"].notna().all()
    assert classes["t"].nunique() == 70, "every 100 ms of 5 s + 2 s drain"


def test_a_bad_model_file_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"qds.model_file: .*nope.json"):
        scenario_from_dict({"qds": {"model_file": str(tmp_path / "nope.json")}}, source="x.toml")
    bad = tmp_path / "m.json"
    bad.write_text('{"features": ["size"], "classes": []}')
    sc = short(QDS / "base.toml", **{"qds.model_file": str(bad)})
    with pytest.raises(ValueError, match=r"qds.model_file: .*m\.json: the model was trained on features"):
        simulate(sc, 0)


def test_the_deadline_order_is_refused_in_the_lab() -> None:
    """thinwan-link does not hand the queue the flows' slacks: the lab says so instead of
    running per-flow FIFO under the deadline order's name."""
    from thinwan.config.files import ScenarioError
    from thinwan.config.scenario import load_scenario
    from thinwan.substrates.lab.linkspec import lab_spec

    s = load_scenario(QDS / "base.toml")
    q = s.queue.model_copy(update={"discipline": "qds", "qds_order": "deadline"})
    with pytest.raises(ScenarioError, match='qds_order = "deadline" runs in the simulator only'):
        lab_spec(s.model_copy(update={"queue": q}))
    lab_spec(s.model_copy(update={"queue": s.queue.model_copy(update={"discipline": "qds"})}))


def test_class_change_reaches_thinwan_link() -> None:
    """thinwan-link runs the core's class scheduler and its QDS loop reassigns flows with
    the same ``assign``, so ``queue.class_change`` travels to it like every other queue key
    (checked by ``thinwan-link --check`` itself: no namespaces, no root)."""
    from thinwan.substrates.lab.linkspec import check_link_args, lab_spec

    s = load_scenario(QDS / "base.toml")
    for change in ("leave", "move"):
        q = s.queue.model_copy(update={"class_change": change})
        link = lab_spec(s.model_copy(update={"queue": q})).link
        assert (link.fwd.class_change, link.rev.discipline) == (change, "droptail")  # rev: the ACKs' FIFO
        assert link.fwd.to_json()["queue"]["class_change"] == change
        resolved = check_link_args(link, [])
        assert (resolved.fwd, resolved.rev) == (link.fwd, link.rev)


def test_an_ecn_run_keeps_its_ce_marks_in_the_summary() -> None:
    # A lab sweep deletes its raw logs: the marks must be in each run's summary.
    from thinwan.analysis.metrics import summarize_run

    ecn = short(QDS / "base.toml", **{"queue.discipline": "fq_codel", "tcp.ecn": True, "queue.ecn": True})
    marks = summarize_run(simulate(ecn, 0), ecn)["bottleneck_marks_ce"]
    assert marks > 0
    plain = short(QDS / "base.toml", **{"queue.discipline": "fq_codel"})
    assert "bottleneck_marks_ce" not in summarize_run(simulate(plain, 0), plain)
