"""Metrics on hand-built tables whose answers are worked out in the comments."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from thinwan.analysis.metrics import (
    BULK,
    COMPONENTS,
    DELAY_QUANTILES,
    INTERACTIVE,
    ccdf,
    delay_quantiles_ms,
    mean_violation_interval_s,
    message_delays,
    per_connection_means,
    summarize_run,
    summarize_runs,
    thresholds_s,
    utilisation,
    violation_ratio,
)
from thinwan.config.scenario import TrafficSection, scenario_from_dict
from thinwan.records.schema import RunRecords, empty_table, table_from_columns

NAN = math.nan
COLUMNS = ["kind", "t_write", "t_first_tx", "t_tx", "t_enq", "t_deq", "t_arrive", "t_read"]
# Five messages, duration 10 s. Delays in the comment: e2e = server + retx + router +
# client + propagation.
ROWS = [
    # interactive, clean: 121 ms = 10 + 0 + 88 + 0 + 23
    (INTERACTIVE, 1.000, 1.010, 1.010, 1.012, 1.100, 1.121, 1.121),
    # interactive, retransmitted after 500 ms, waited 79 ms for an earlier hole: 700 ms
    (INTERACTIVE, 2.000, 2.000, 2.500, 2.502, 2.600, 2.621, 2.700),
    # bulk: 1.5 s = 1000 + 0 + 400 + 50 + 50
    (BULK, 3.000, 4.000, 4.000, 4.001, 4.401, 4.450, 4.500),
    # interactive, written inside the window and never read: counts as ∞
    (INTERACTIVE, 5.000, 5.000, NAN, NAN, NAN, NAN, NAN),
    # interactive, written after the sources stopped and never read: ignored
    (INTERACTIVE, 11.000, NAN, NAN, NAN, NAN, NAN, NAN),
]


def messages() -> pd.DataFrame:
    frame = pd.DataFrame(ROWS, columns=COLUMNS)
    frame["kind"] = frame["kind"].astype("uint8")
    return frame


def test_decomposition_matches_hand_values_and_sums_to_end_to_end() -> None:
    d = message_delays(messages(), duration_s=10.0)
    expected = {
        "end_to_end": [0.121, 0.700, 1.500],
        "server": [0.010, 0.000, 1.000],
        "retransmission": [0.000, 0.500, 0.000],
        "router": [0.088, 0.098, 0.400],
        "client": [0.000, 0.079, 0.050],
        "propagation": [0.023, 0.023, 0.050],
    }
    for column, values in expected.items():
        np.testing.assert_allclose(d[column].iloc[:3], values, atol=1e-12, err_msg=column)
    np.testing.assert_allclose(d[list(COMPONENTS)].iloc[:3].sum(axis=1), d["end_to_end"].iloc[:3])


def test_undelivered_messages_are_infinite_inside_the_window_only() -> None:
    d = message_delays(messages(), duration_s=10.0)
    assert d["end_to_end"].iloc[3] == math.inf
    assert math.isnan(d["end_to_end"].iloc[4])
    assert d[list(COMPONENTS)].iloc[3:].isna().all().all()


def test_violation_ratio_counts_undelivered_as_exceeding() -> None:
    d = message_delays(messages(), duration_s=10.0)
    # Interactive messages that count: 121 ms, 700 ms, ∞ (the fifth is outside the window).
    assert violation_ratio(d, 0.130) == pytest.approx(2 / 3)
    assert violation_ratio(d, 0.980) == pytest.approx(1 / 3)
    assert violation_ratio(d, 0.100) == pytest.approx(1.0)
    assert math.isnan(violation_ratio(d.loc[d["kind"] == BULK], 0.130))


def test_thresholds_subtract_the_wan_delay() -> None:
    assert thresholds_s(scenario_from_dict({})) == pytest.approx((0.130, 0.980))
    assert thresholds_s(scenario_from_dict({"topology": {"bottleneck_delay_ms": 70}})) == pytest.approx((0.080, 0.930))


def test_mean_violation_interval_matches_hand_computation() -> None:
    # Defaults: α = 0.09, β = 0.42, gaps 0.27/0.22/0.24/0.11 s, c_B = 7.4.
    # p_I = 0.42/0.51 = 0.8235294118, p_B = 0.09/0.51 = 0.1764705882
    # (1−α)t_II + α t_IB            = 0.91·0.27 + 0.09·0.22            = 0.2655
    # β p_B t_BI + (1−β) p_B t_BB   = 0.1764705882·(0.1008 + 0.0638)   = 0.0290470588
    # divided by c_B p_I            = 0.0290470588 / 6.0941176471      = 0.0047664093
    # T = 0.2702664093 / r; with r = 0.01: 27.02664093 s
    assert mean_violation_interval_s(TrafficSection(), 0.01) == pytest.approx(27.02664093, rel=1e-9)


def test_mean_violation_interval_edge_cases() -> None:
    assert mean_violation_interval_s(TrafficSection(), 0.0) == math.inf
    assert math.isnan(mean_violation_interval_s(TrafficSection(), NAN))
    # β = 0: the source never comes back to interactive flows.
    assert mean_violation_interval_s(TrafficSection(p_bulk_to_interactive=0.0), 0.1) == math.inf


def test_ccdf_counts_strictly_greater() -> None:
    x, p = ccdf([2.0, 1.0, 3.0, 2.0])
    np.testing.assert_array_equal(x, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(p, [0.75, 0.25, 0.0])


def test_ccdf_keeps_inf_in_the_total_and_drops_nan() -> None:
    x, p = ccdf([1.0, math.inf, NAN, 2.0])
    np.testing.assert_array_equal(x, [1.0, 2.0, math.inf])
    np.testing.assert_allclose(p, [2 / 3, 1 / 3, 0.0])
    x, p = ccdf([])
    assert x.size == p.size == 0


def ports(port: str = "bottleneck") -> pd.DataFrame:
    # 10 Mbit/s for 10 s = 12.5 MB of capacity.
    return table_from_columns(
        "ports",
        {
            "port": np.array([port], dtype=object),
            "rate_bps": [10e6],
            "window_s": [10.0],
            "bytes_tx": [6_250_000],
            "bytes_tx_interactive": [1_250_000],
            "packets_tx": [5000],
            "drops_overflow": [3],
            "max_queue_bytes": [25_000],
        },
    )


def test_utilisation_of_the_bottleneck() -> None:
    assert utilisation(ports()) == pytest.approx((0.5, 0.1))
    assert all(math.isnan(u) for u in utilisation(ports("elsewhere")))


def connections() -> pd.DataFrame:
    columns = {c: [0, 0] for c in empty_table("connections").columns}
    columns |= {"conn": [0, 1], "timeouts": [3, 0], "spurious_timeouts": [1, 0], "fast_retransmits": [2, 5]}
    columns |= {"retransmit_episodes": [6, 5], "writes_waited": [4, 0], "writes_blocked": [1, 0]}
    return table_from_columns("connections", columns)


def test_per_connection_means() -> None:
    assert per_connection_means(connections()) == {
        "timeouts_per_conn": 1.5,
        "spurious_timeouts_per_conn": 0.5,
        "fast_retransmits_per_conn": 3.5,
        "retransmit_episodes_per_conn": 5.5,
        "writes_waited_per_conn": 2.0,
        "writes_blocked_per_conn": 0.5,
    }


def test_summarize_run_on_hand_built_records() -> None:
    frame = messages()
    for column, dtype in (("conn", "uint32"), ("pair", "uint32"), ("bytes", "uint32"), ("retx", "uint16")):
        frame[column] = pd.Series([0] * len(frame), dtype=dtype)
    records = RunRecords(messages=frame, connections=connections(), ports=ports())
    summary = summarize_run(records, scenario_from_dict({"scenario": {"duration_s": 10.0}}))
    assert summary["r_I150"] == pytest.approx(2 / 3)
    assert summary["r_I1000"] == pytest.approx(1 / 3)
    assert summary["T_I150_s"] == pytest.approx(0.2702664093 * 3 / 2)
    assert summary["T_I1000_s"] == pytest.approx(0.2702664093 * 3)
    assert summary["utilisation"] == pytest.approx(0.5)
    assert summary["utilisation_interactive"] == pytest.approx(0.1)
    assert summary["timeouts_per_conn"] == 1.5
    assert (summary["messages"], summary["interactive_messages"], summary["undelivered"]) == (5, 3, 1)
    assert summary["interactive_delay_p50_ms"] == pytest.approx(700.0)
    assert summary["interactive_delay_p99_ms"] == math.inf
    assert summary["bottleneck_drops"] == 3
    # Box plot of all messages (any kind) in the window: 121, 700, 1500 ms and one lost (∞).
    assert summary["delay_min_ms"] == pytest.approx(121.0)
    assert summary["delay_q1_ms"] == pytest.approx(121.0)
    assert summary["delay_median_ms"] == pytest.approx(700.0)
    assert summary["delay_q3_ms"] == pytest.approx(1500.0)
    assert summary["delay_max_ms"] == summary["delay_p99_ms"] == summary["delay_p999_ms"] == math.inf
    assert summary["link_loss_drops"] == 0


def test_delay_quantiles_of_all_messages() -> None:
    e2e = np.arange(1, 1001) / 1000.0  # 1 ms … 1000 ms
    kinds = np.where(np.arange(1000) % 2 == 0, INTERACTIVE, BULK)
    q = delay_quantiles_ms(pd.DataFrame({"kind": kinds, "end_to_end": e2e}))
    assert set(q) == set(DELAY_QUANTILES)
    assert q == pytest.approx({
        "delay_min_ms": 1.0, "delay_q1_ms": 250.0, "delay_median_ms": 500.0, "delay_q3_ms": 750.0,
        "delay_max_ms": 1000.0, "delay_p99_ms": 990.0, "delay_p999_ms": 999.0,
    })  # fmt: skip
    assert all(math.isnan(v) for v in delay_quantiles_ms(pd.DataFrame({"kind": [], "end_to_end": []})).values())


def test_summarize_runs_means_and_ranges_ignoring_nan() -> None:
    runs = [
        {"r_I150": 0.1, "T_I150_s": 10.0, "messages": 100},
        {"r_I150": 0.3, "T_I150_s": math.inf, "messages": 300},
        {"r_I150": NAN, "T_I150_s": NAN, "messages": 200},
    ]
    s = summarize_runs(runs)
    assert s["runs"] == 3
    assert s["r_I150"] == pytest.approx(0.2)
    assert s["min"]["r_I150"] == pytest.approx(0.1) and s["max"]["r_I150"] == pytest.approx(0.3)
    assert s["T_I150_s"] == math.inf and s["max"]["T_I150_s"] == math.inf
    assert s["messages"] == pytest.approx(200.0)
    assert math.isnan(summarize_runs([{"r_I150": NAN}])["r_I150"])


def test_summarize_run_on_fake_simulator_output(records: RunRecords, scenario) -> None:
    summary = summarize_run(records, scenario)
    required = {
        "r_I150", "r_I1000", "T_I150_s", "T_I1000_s", "timeouts_per_conn",
        "spurious_timeouts_per_conn", "fast_retransmits_per_conn", "utilisation",
        "utilisation_interactive",
    }  # fmt: skip
    assert required <= summary.keys()
    assert 0 < summary["r_I150"] < 1
    assert summary["r_I1000"] <= summary["r_I150"]
