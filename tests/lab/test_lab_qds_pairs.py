"""The lab's pairs (docs/lab.md "Pairs"): the pump binds pair i to server port 20000 + i,
so thinwan-link gives each client the delay the core draws for it (the simulator's, same
seed) and the QDS oracle each flow its true type from the same traffic model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.lab.conftest import lab_run_cli
from thinwan.analysis.qds import CONTROLLER_TYPES
from thinwan.records.schema import RunRecords

pytestmark = pytest.mark.usefixtures("lab_env")

SCENARIO = """
[scenario]
name = "lab-pairs"
duration_s = {duration}
drain_s = 1.0
seed = 3

[topology]
kind = "middlebox"
pairs = 4
access_rate_mbps = 1000.0
access_delay_ms = 0.1
bottleneck_rate_mbps = {rate}
bottleneck_delay_ms = 0.0

[queue]
discipline = "{discipline}"
limit_packets = 100

[qds]
classifier = "oracle"

[tcp]
delayed_ack = false

[traffic]
model = "mix"
mix = [["video", 1], ["data", 3]]
mix_change_s = {change}
"""

CHANGE_S = 3.0


def lab_run(tmp_path: Path, **values: object) -> RunRecords:
    scn = tmp_path / "s.toml"
    scn.write_text(SCENARIO.format(**values))
    out = tmp_path / "out"
    done = lab_run_cli(scn, out, "--runs", "1")
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)
    return RunRecords.read(out / "runs" / "run-0")


def test_the_oracle_names_each_flows_true_type_as_the_mix_rotates(tmp_path: Path) -> None:
    # c = 8 Mbit/s: one video (5) and three data flows (1 each), 8 Mbit/s offered; the
    # video moves to another pair every 3 s (pair i runs position (i + k) mod 4 in phase k).
    rec = lab_run(tmp_path, duration=9.0, rate=8.0, discipline="qds", change=CHANGE_S)
    flows = rec.qds_flows
    assert not flows.empty
    phase = np.floor(flows["t"].to_numpy() / CHANGE_S).astype(int)
    video = CONTROLLER_TYPES.index("video")
    expected = np.where((flows["conn"].to_numpy() + phase) % 4 == 0, video, CONTROLLER_TYPES.index("data"))
    # thinwan-link starts the phases at the first SYN, ~0.2 s before the pump's t0: only
    # periods clear of a change are compared.
    since = flows["t"].to_numpy() % CHANGE_S
    clear = (since > 0.5) & (since < CHANGE_S - 0.5) & (flows["t"].to_numpy() < 9.0)
    used = flows["app"].to_numpy()
    assert clear.sum() > 100
    assert (used[clear] == expected[clear]).all(), flows[clear & (used != expected)].head()
    # Pairs 0, 3 and 2 carried video in phases 0, 1 and 2 (pair 1's turn comes at 9 s),
    # and data in the others.
    for conn in (0, 3, 2):
        assert set(used[clear & (flows["conn"].to_numpy() == conn)]) == {video, CONTROLLER_TYPES.index("data")}
    # And the controller acted on the labels: the video flow (QT 50 ms) sits in more
    # urgent classes than the data flows (QT 100 ms).
    cls = flows["class"].to_numpy(dtype=float)
    assert cls[clear & (used == video)].mean() < cls[clear & (used != video)].mean()


def test_each_client_gets_the_delay_the_simulator_draws_for_it(tmp_path: Path) -> None:
    # An uncongested 100-Mbit/s downlink: each flow's shortest RTT is its path's, 2 · (the
    # servers' 0.1 ms + its client's delay) plus ~0.1 ms of serialisation.
    rec = lab_run(tmp_path, duration=4.0, rate=100.0, discipline="droptail", change=0.0)
    mb = rec.meta["lab"]["middlebox"]
    delays = np.asarray(mb["client_delays_ms"])
    from thinwan import _native
    from thinwan.config.scenario import load_scenario

    scenario = load_scenario(tmp_path / "s.toml")
    assert list(delays) == list(_native.client_delays_ms(scenario.to_native_json(), 0))
    assert delays.max() - delays.min() > 1.0, "the draws must differ for this test to tell"
    rtt_min_ms = rec.packet_rtt.groupby("conn")["rtt"].min().sort_index().to_numpy() * 1e3
    path_ms = 2 * (0.1 + delays)
    assert np.all(rtt_min_ms >= path_ms), (rtt_min_ms, path_ms)
    assert np.all(rtt_min_ms - path_ms < 1.0), (rtt_min_ms, path_ms)


def test_the_lab_spec_hands_thinwan_link_the_pairs_and_bad_ones_are_named() -> None:
    """What ``lab run`` gives thinwan-link for a middlebox scenario (no namespaces needed):
    the pump's port base, the core's delay draws and, under QDS, the traffic model;
    ``thinwan-link --check`` accepts it and names a bad ``pairs`` key."""
    from dataclasses import replace

    from thinwan import _native
    from thinwan.config.scenario import scenario_from_dict
    from thinwan.substrates.lab.labrun import pump_argv
    from thinwan.substrates.lab.linkspec import PAIR_PORT_BASE, LinkCheckError, check_link_args, lab_spec

    s = scenario_from_dict(
        {
            "topology": {
                "kind": "middlebox",
                "pairs": 5,
                "bottleneck_rate_mbps": 10.0,
                "bottleneck_delay_ms": 0.0,
                "access_delay_ms": 0.1,
            },
            "queue": {"discipline": "qds"},
            "qds": {"classifier": "oracle"},
            "traffic": {"model": "mix", "mix": [["video", 1], ["data", 4]], "mix_change_s": 20.0},
        }
    )
    spec = lab_spec(s, run=2)
    pairs = spec.link.pairs
    assert pairs is not None and (pairs["server_port_base"], pairs["count"]) == (PAIR_PORT_BASE, 5)
    assert pairs["client_delays_ms"] == list(_native.client_delays_ms(s.to_native_json(), 2))
    assert pairs["traffic"]["model"] == "mix" and pairs["traffic"]["mix_change_s"] == 20.0
    assert spec.link.fwd.delay_ms == 0.1, "the clients' delays go per pair, not into the link's"
    argv = pump_argv(s, s.lab, 2, Path("/tmp"), ["--connect", "198.18.2.1:5001"])
    assert argv[argv.index("--local-port-base") + 1] == str(PAIR_PORT_BASE)
    resolved = check_link_args(spec.link, [])
    assert resolved.pairs is not None
    assert {k: resolved.pairs[k] for k in ("server_port_base", "count", "client_delays_ms")} == {
        k: pairs[k] for k in ("server_port_base", "count", "client_delays_ms")
    }
    assert resolved.pairs["traffic"]["model"] == "mix"
    bad = replace(spec.link, pairs={**pairs, "client_delays_ms": [5.0, 6.0]})
    with pytest.raises(LinkCheckError, match=r"pairs\.client_delays_ms: 2 delays for 5 pairs"):
        check_link_args(bad, [])
