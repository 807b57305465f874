"""Issue 19's round trip: simulate with known traffic parameters, write the server-side
pcap (`[records] pcap = "server"`), fit it with `thinwan fit`, and find the parameters
again: α and β within 10 %, the four gap means within 10 %, c_B within 15 %; also the
sizes, the session-activity σ, the block-length tail, and that the fitted scenario runs
(`thinwan validate-model` on the same capture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomllib

from thinwan.cli import main
from thinwan.config.scenario import scenario_from_dict
from thinwan.execute.runs import run_scenario
from thinwan.substrates.sim import native_available

pytestmark = pytest.mark.skipif(not native_available(), reason="native simulator not built")

# The simulator's data sender port in its pcaps (crates/sim/src/world/pcap.rs).
SERVER_PORT = 5900
TRUTH = {
    "p_interactive_to_bulk": 0.12,
    "p_bulk_to_interactive": 0.35,
    "gap_ii_s": 0.30,
    "gap_ib_s": 0.20,
    "gap_bi_s": 0.25,
    "gap_bb_s": 0.12,
    "gap_lognormal_sigma": 1.0,
    "interactive_bytes_mean": 150.0,
    "bulk_bytes_mean": 900.0,
    "size_spread": 0.4,
    "bulk_packets_mean": 8.0,
    "bulk_pareto_shape": 1.6,
    "intra_bulk_gap_ms": 0.4,
    "session_activity": "lognormal",
    "session_activity_sigma": 0.5,
}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, Path]:
    tmp = tmp_path_factory.mktemp("roundtrip")
    # 200 sessions of 150 s on an uncongested network (100 Mbit/s everywhere, a large
    # buffer, an initial window of 100 segments so blocks are not split by waiting for
    # ACKs): what leaves the servers is what the sources wrote. Many sessions because
    # with unlike sessions the pooled gap means move with the sample mean of their
    # activity (standard error 0.53/√sessions: 4 % here, 8 % with 40).
    sc = scenario_from_dict(
        {
            "scenario": {"name": "roundtrip", "duration_s": 150.0, "drain_s": 2.0, "seed": 11},
            "topology": {"pairs": 200, "bottleneck_rate_mbps": 100.0},
            "queue": {"limit_bytes": 10_000_000},
            "tcp": {"initial_cwnd_segments": 100},
            "traffic": TRUTH,
            "records": {"traces": False, "pcap": "server"},
        }
    )
    run_scenario(sc, tmp / "sim", progress=False)
    pcap = tmp / "sim" / "runs" / "run-0" / "server.pcap"
    out = tmp / "fitted.toml"
    argv = ["fit", str(pcap), "--server-port", str(SERVER_PORT), "--out", str(out), "--json"]
    return argv, pcap, out


def run_fit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_fit_recovers_the_simulated_parameters(fitted: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    argv, _pcap, out = fitted
    doc = run_fit(argv, capsys)
    k = doc["keys"]
    for key in ("p_interactive_to_bulk", "p_bulk_to_interactive", "gap_ii_s", "gap_ib_s", "gap_bi_s", "gap_bb_s"):
        assert k[key] == pytest.approx(TRUTH[key], rel=0.10), key
    assert k["bulk_packets_mean"] == pytest.approx(TRUTH["bulk_packets_mean"], rel=0.15)
    for key in ("interactive_bytes_mean", "bulk_bytes_mean"):
        assert k[key] == pytest.approx(TRUTH[key], rel=0.03), key
    assert k["size_spread"] == pytest.approx(TRUTH["size_spread"], abs=0.05)
    # Lognormal gaps are told from exponential ones, and σ of the sessions' activity
    # is found again (200 sessions: its standard error is ≈ 0.025).
    assert k["gap_distribution"] == "lognormal"
    assert k["session_activity"] == "lognormal"
    assert k["session_activity_sigma"] == pytest.approx(TRUTH["session_activity_sigma"], abs=0.06)
    for t in ("ii", "ib", "bb"):
        assert k[f"gap_lognormal_sigma_{t}"] == pytest.approx(TRUTH["gap_lognormal_sigma"], abs=0.15), t
    # The heavy tail: the simulated shape inside the fitted interval, or close to it
    # (the cap at bulk_packets_max and blocks merged by the gap rule bend the tail a
    # little: measured 1.568, interval [1.549, 1.587], for 1.6).
    tail = doc["blocks"]["tail"]
    lo, hi = tail["ci95"]
    assert lo - 0.1 < TRUTH["bulk_pareto_shape"] < hi + 0.1, tail
    # The file is a scenario the simulator accepts, holding what was printed.
    data = tomllib.loads(out.read_text())
    assert data["traffic"]["p_interactive_to_bulk"] == pytest.approx(k["p_interactive_to_bulk"], rel=1e-5)
    scenario_from_dict(data)


def test_fitted_scenario_validates_against_its_capture(
    fitted: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, pcap, out = fitted
    run_fit(argv, capsys)
    status = main(
        [
            "validate-model",
            str(pcap),
            str(out),
            "--server-port",
            str(SERVER_PORT),
            "--duration",
            "20",
            "--pairs",
            "10",
            "--runs",
            "1",
            "--out",
            str(tmp_path / "val"),
            "--json",
            "--quiet",
        ]
    )
    assert status == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["replay"]["pairs"] == doc["model"]["pairs"] == 10
    # A simulated capture replayed: its gap-rule labels are the simulator's, so the
    # replay's interactive share is close to the model's (p_I ≈ 0.74 of flows).
    share = {
        kind: doc[kind]["runs"][0]["interactive_messages"] / doc[kind]["runs"][0]["messages"]
        for kind in ("replay", "model")
    }
    assert share["replay"] == pytest.approx(share["model"], abs=0.1), share
