"""Scenario → thinwan-link configuration for the queue keys and ``[qds]``, checked by
``thinwan-link --check`` itself (no namespaces, no root: the binary is enough)."""

from __future__ import annotations

import pytest

from thinwan.config.scenario import scenario_from_dict
from thinwan.substrates.lab.linkspec import DirLink, LinkCheckError, LinkSpec, check_link_args, lab_spec


def scenario(queue: dict) -> object:
    return scenario_from_dict({"topology": {"bottleneck_rate_mbps": 8.0}, "queue": queue})


def test_non_default_fq_codel_keys_survive_thinwan_links_check() -> None:
    spec = lab_spec(
        scenario({"discipline": "fq_codel", "limit_bytes": 90000, "fq_codel_target_ms": 2.5, "fq_codel_flows": 16})
    )
    fwd, rev = spec.link.fwd, spec.link.rev
    assert (fwd.discipline, fwd.fq_codel_target_ms, fwd.fq_codel_flows, fwd.queue_bytes) == ("fq_codel", 2.5, 16, 90000)
    assert (rev.discipline, rev.queue_bytes, rev.queue_packets) == ("droptail", 90000, fwd.queue_packets)
    # thinwan-link reads every key back as given.
    assert check_link_args(spec.link, []) == spec.link


def test_a_classes_scenario_reaches_thinwan_link() -> None:
    spec = lab_spec(
        scenario(
            {
                "discipline": "classes",
                "class_rate_shares": [0.3, 0.7],
                "class_ceil_shares": [0.5, 1.0],
                "class_interactive": 0,
                "class_flows": [[3], []],
                "class_quantum_bytes": 3000,
            }
        )
    )
    resolved = check_link_args(spec.link, [])
    assert resolved == spec.link
    assert resolved.fwd.class_rate_shares == (0.3, 0.7) and resolved.fwd.class_flows == ((3,), ())


def test_qds_keys_reach_thinwan_link_and_bad_ones_are_named() -> None:
    fwd = DirLink(rate_bps=8_000_000, discipline="qds")
    qds = {"classifier": "oracle", "alpha": 0.5, "oracle": [{"app": "video", "client_port": 6001}]}
    resolved = check_link_args(LinkSpec(fwd=fwd, rev=DirLink(rate_bps=8_000_000), qds=qds), [])
    assert resolved.qds is not None
    assert (resolved.qds["alpha"], resolved.qds["oracle"], resolved.qds["period_ms"]) == (
        0.5,
        qds["oracle"],
        100.0,
    )
    with pytest.raises(LinkCheckError, match=r"qds\.alpha"):
        check_link_args(LinkSpec(fwd=fwd, qds={**qds, "alpha": -1}), [])
    # Without the qds discipline the resolved config's qds object is dropped.
    assert check_link_args(LinkSpec(), []).qds is None


def test_the_variants_class_codel_and_the_shipped_model_reach_thinwan_link() -> None:
    """QDS-demand's CoDel inside classes travels like every other queue key, and a
    ``[qds]`` with ``classifier = "model"`` and no model file runs on the core's shipped
    classifier in thinwan-link, as in the simulator."""
    s = scenario_from_dict(
        {
            "topology": {"bottleneck_rate_mbps": 8.0},
            "queue": {"discipline": "qds", "class_codel": True},
            "qds": {"classifier": "model", "variant": "demand_first"},
        }
    )
    spec = lab_spec(s)
    assert spec.link.fwd.class_codel is True and spec.link.qds is not None
    assert "model" not in spec.link.qds
    resolved = check_link_args(spec.link, [])
    assert resolved.fwd.class_codel is True
    assert resolved.qds is not None and resolved.qds["variant"] == "demand_first"


def test_queue_ecn_reaches_thinwan_link_and_turns_on_linux_ecn() -> None:
    """``queue.ecn`` marks in thinwan-link's CoDel (data direction only, as the
    simulator's ACK direction is a plain FIFO), and the end namespaces speak ECN
    (``net.ipv4.tcp_ecn = 1``) unless ``[lab] ecn`` says otherwise."""
    spec = lab_spec(scenario({"discipline": "fq_codel", "ecn": True}))
    assert (spec.link.fwd.ecn, spec.link.rev.ecn) == (True, False)
    assert spec.link.to_json()["fwd"]["queue"]["ecn"] is True
    assert check_link_args(spec.link, []) == spec.link
    assert spec.tcp.ecn and spec.tcp.sysctls()["net.ipv4.tcp_ecn"] == "1"
    assert any("queue.ecn without tcp.ecn" in n for n in spec.notes)


def test_linux_ecn_follows_the_scenario_unless_lab_ecn_is_set() -> None:
    def linux_ecn(d: dict) -> str:
        s = scenario_from_dict({"topology": {"bottleneck_rate_mbps": 8.0}, **d})
        return lab_spec(s).tcp.sysctls()["net.ipv4.tcp_ecn"]

    fq = {"discipline": "fq_codel"}
    assert linux_ecn({"queue": fq}) == "0"
    assert linux_ecn({"queue": fq, "tcp": {"ecn": True}}) == "1"
    assert linux_ecn({"queue": {**fq, "ecn": True}, "tcp": {"ecn": True}}) == "1"
    assert linux_ecn({"queue": fq, "lab": {"ecn": True}}) == "1"
    assert linux_ecn({"queue": fq, "tcp": {"ecn": True}, "lab": {"ecn": False}}) == "0"
    assert linux_ecn({"queue": {**fq, "ecn": True}, "lab": {"ecn": True}}) == "1"


def test_queue_ecn_with_lab_ecn_false_is_refused_naming_both_keys() -> None:
    from thinwan.config.scenario import ScenarioError

    s = scenario_from_dict(
        {
            "topology": {"bottleneck_rate_mbps": 8.0},
            "queue": {"discipline": "fq_codel", "ecn": True},
            "lab": {"ecn": False},
        }
    )
    with pytest.raises(ScenarioError, match=r"queue\.ecn = true and \[lab\] ecn = false disagree"):
        lab_spec(s)
