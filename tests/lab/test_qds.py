"""``thinwan-qds`` against the real kernel: the HTB it programs over netlink read back
with ``tc``, its rates under load, and the downlink left exactly as it was after
SIGTERM and after kill -9 + restart. Each test brings up its own three-namespace chain
(thinwan.substrates.lab.htb_middlebox) and removes it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from thinwan.substrates.binaries import MissingBinary, find_binary
from thinwan.substrates.lab.htb_middlebox import (
    QdsDaemon,
    QdsSettings,
    ip_key,
    middlebox_chain,
    start_bulk_flow,
    tc_classes,
    tc_filters,
    tc_rate_bits,
)
from thinwan.substrates.lab.netns import LabError
from thinwan.substrates.lab.topology import CLIENT_ADDR, SERVER_ADDR

pytestmark = pytest.mark.usefixtures("lab_env")


@pytest.fixture(scope="module", autouse=True)
def qds_built() -> None:
    try:
        find_binary("thinwan-qds")
    except MissingBinary as e:
        pytest.fail(str(e))


def mbit(x: float) -> int:
    return round(x * 1e6)


def tc_state(chain, dev: str) -> str:
    """Everything tc shows on ``dev`` (qdiscs, classes, filters), counters left out."""
    return "\n".join(
        chain.run("middle", ["tc", what, "show", "dev", dev]).stdout for what in ("qdisc", "class", "filter")
    )


def wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_htb_from_netlink_matches_tc_and_holds_rates_under_load(tmp_path: Path) -> None:
    # Ten classes of distinct rates summing to the capacity (so no class has spare
    # capacity to borrow and each greedy flow gets exactly its class's rate).
    rates = (7.0, 4.0, 2.5, 2.0, 1.5, 1.0, 0.75, 0.5, 0.5, 0.25)
    settings = QdsSettings(
        capacity_mbps=20.0, static_rates_mbps=rates, static_ports={5001: 0, 5002: 1}, class_queue_packets=200
    )
    with middlebox_chain(tmp_path / "lab") as chain:
        dev = chain.tun["last_hop"]
        daemon = QdsDaemon(chain, settings)
        daemon.start()
        flows = [start_bulk_flow(chain, port, 16.0, tmp_path) for port in (5001, 5002)]
        filters = wait_for(lambda: len(tc_filters(chain, dev)) == 2 and tc_filters(chain, dev), 5.0, "two filters")

        classes = tc_classes(chain, dev)
        root = classes.pop("1:1")
        assert root["parent"] is None and root["rate"] == root["ceil"] == tc_rate_bits(mbit(20))
        assert set(classes) == {f"1:{0x10 + k:x}" for k in range(len(rates))}
        for k, r in enumerate(rates):
            c = classes[f"1:{0x10 + k:x}"]
            assert (c["parent"], c["rate"], c["ceil"]) == ("1:1", tc_rate_bits(mbit(r)), tc_rate_bits(mbit(20))), k
        qdisc = chain.run("middle", ["tc", "qdisc", "show", "dev", dev]).stdout
        assert "htb 1: root" in qdisc and f"default 0x{0x10 + len(rates) - 1:x}" in qdisc, qdisc
        for k in range(len(rates)):
            assert f"qdisc pfifo {0x10 + k:x}: parent 1:{0x10 + k:x} limit 200p" in qdisc, qdisc

        # One u32 node per flow: TCP, server → client addresses, server port, → its class.
        by_class = {f["flowid"]: f for f in filters}
        assert set(by_class) == {"1:10", "1:11"}
        for port, flowid in ((5001, "1:10"), (5002, "1:11")):
            keys = {off: (val, mask) for val, mask, off in by_class[flowid]["keys"]}
            assert keys[12] == (ip_key(SERVER_ADDR), "ffffffff")
            assert keys[16] == (ip_key(CLIENT_ADDR), "ffffffff")
            assert keys[8] == ("00060000", "00ff0000")
            assert keys[20][0][:4] == f"{port:04x}" and keys[20][1] == "ffffffff"

        # Under load, with spare capacity (8 idle classes): each busy class gets its rate
        # plus a share of the spare in proportion to its quantum (rate / r2q), as sch_htb
        # lends it (DRR among borrowers of one level and priority).
        spare = 20 - rates[0] - rates[1]
        want = [r + spare * r / (rates[0] + rates[1]) for r in rates[:2]]
        got = class_rates(chain, dev, 2)
        for k in (0, 1):
            assert abs(got[k] / mbit(want[k]) - 1) < 0.05, f"class {k}: {got[k] / 1e6:.3f} Mbit/s vs {want[k]:.3f}"
        stats = daemon.stop()
        assert stats is not None and stats["updates"] > 30 and stats["netlink_errors"] == 0
        assert stats["managed_packets"] > 1000

        # Without spare capacity (the busy classes' rates sum to it): each holds its rate.
        exact = QdsDaemon(
            chain,
            QdsSettings(capacity_mbps=20.0, static_rates_mbps=(14.0, 6.0), static_ports={5001: 0, 5002: 1}),
            name="exact",
        )
        exact.start()
        got = class_rates(chain, dev, 2)
        for k, r in enumerate((14.0, 6.0)):
            assert abs(got[k] / mbit(r) - 1) < 0.05, f"class {k}: {got[k] / 1e6:.3f} Mbit/s vs {r}"
        print("class rates under load, Mbit/s:", [round(g / 1e6, 3) for g in got])
        exact.stop()
        for pump, sink in flows:
            pump.wait(timeout=60)
            sink.wait(timeout=60)
        assert "htb" not in chain.run("middle", ["tc", "qdisc", "show", "dev", dev]).stdout


def class_rates(chain, dev: str, n: int, settle_s: float = 2.0, window_s: float = 4.0) -> list[float]:
    """Throughput (bit/s) of classes 0..n over ``window_s`` after ``settle_s``, from
    HTB's own byte counters."""
    time.sleep(settle_s)
    t0, b0 = time.monotonic(), tc_classes(chain, dev, stats=True)
    time.sleep(window_s)
    t1, b1 = time.monotonic(), tc_classes(chain, dev, stats=True)
    ids = [f"1:{0x10 + k:x}" for k in range(n)]
    return [(b1[c]["bytes"] - b0[c]["bytes"]) * 8 / (t1 - t0) for c in ids]


def test_sigterm_and_kill9_restart_leave_the_downlink_as_it_was(tmp_path: Path) -> None:
    settings = QdsSettings(static_rates_mbps=(15.0, 5.0), static_ports={5001: 0})
    with middlebox_chain(tmp_path / "lab") as chain:
        dev = chain.tun["last_hop"]
        daemon = QdsDaemon(chain, settings)
        flows = [start_bulk_flow(chain, 5001, 30.0, tmp_path)]

        # 1. The kernel's default root (pfifo_fast on a TUN): SIGTERM puts it back.
        before = tc_state(chain, dev)
        assert "htb" not in before
        daemon.start()
        wait_for(lambda: tc_filters(chain, dev), 5.0, "a filter")
        assert daemon.state_file().exists()
        daemon.stop(signal.SIGTERM)
        assert tc_state(chain, dev) == before
        assert not daemon.state_file().exists()

        # 2. A tbf someone installed; kill -9 leaves HTB and the state file behind, the
        # restart restores first (and says so), and its SIGTERM leaves the tbf.
        chain.run(
            "middle",
            [
                "tc",
                "qdisc",
                "replace",
                "dev",
                dev,
                "root",
                "tbf",
                "rate",
                "50mbit",
                "burst",
                "32kb",
                "latency",
                "100ms",
            ],
        )
        before = tc_state(chain, dev)
        assert "tbf" in before
        daemon.start()
        wait_for(lambda: tc_filters(chain, dev), 5.0, "a filter")
        daemon.stop(signal.SIGKILL)
        assert "htb" in tc_state(chain, dev) and tc_filters(chain, dev)
        assert daemon.state_file().exists()
        daemon.start()
        assert "restored" in daemon.err_file.read_text()
        wait_for(lambda: tc_filters(chain, dev), 5.0, "a filter")
        stats = daemon.stop(signal.SIGTERM)
        assert stats is not None and stats["restored_at_start"] is True
        assert tc_state(chain, dev) == before
        assert not daemon.state_file().exists()

        # 3. What it cannot re-create (an HTB with a filter) it refuses, touching nothing.
        chain.run("middle", ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "5:", "htb", "default", "1"])
        chain.run(
            "middle", ["tc", "class", "add", "dev", dev, "parent", "5:", "classid", "5:1", "htb", "rate", "10mbit"]
        )
        match = ["u32", "match", "ip", "dport", "80", "0xffff", "flowid", "5:1"]
        chain.run("middle", ["tc", "filter", "add", "dev", dev, "parent", "5:", "protocol", "ip", "prio", "1", *match])
        before = tc_state(chain, dev)
        with pytest.raises(LabError, match="refusing to start: .*filters"):
            daemon.start()
        assert tc_state(chain, dev) == before
        assert not daemon.state_file().exists()
        for pump, sink in flows:
            pump.terminate()
            sink.terminate()


def test_netlink_update_latency(tmp_path: Path) -> None:
    """All class rates of 10 classes (and 100 flow filters, a tenth moving each time)
    rewritten in one netlink batch: well under the 5 ms target."""
    settings = QdsSettings(static_rates_mbps=tuple([2.0] * 10))
    with middlebox_chain(tmp_path / "lab") as chain:
        daemon = QdsDaemon(chain, settings)
        before = tc_state(chain, chain.tun["last_hop"])
        results = {}
        for flows in (0, 100):
            argv = [
                str(find_binary("thinwan-qds")),
                str(daemon.config),
                "--bench-updates",
                "500",
                "--bench-flows",
                str(flows),
            ]
            out = chain.run("middle", argv, timeout=120).stdout
            results[flows] = json.loads(out)["update_us"]
        print("netlink update latency, µs (10 classes; 0 and 100 filters):", json.dumps(results))
        for q in results.values():
            assert q["count"] == 500 and q["p50"] < 5000
        assert tc_state(chain, chain.tun["last_hop"]) == before


BASE = 'downlink = "x-l"\nuplink = "x-w"\ncontroller = "qds"\ncapacity_mbps = 20\n[servers]\nnets = ["198.18.1.0/24"]\n[qds]\n'
BAD = {
    "capacity_mbps:": BASE.replace("capacity_mbps = 20", "capacity_mbps = -5"),
    "qds.variant:": BASE + 'variant = "fastest"\n',
    "alpah": BASE + "alpah = 0.3\n",
    "servers.nets": BASE.replace("198.18.1.0/24", "198.18.1.1/24"),
}


@pytest.mark.parametrize("key", list(BAD))
def test_bad_config_is_a_clear_error(tmp_path: Path, key: str) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(BAD[key])
    for argv in ([str(find_binary("thinwan-qds")), str(cfg)], [sys.executable, "-m", "thinwan", "qds", str(cfg)]):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert done.returncode == 2, done
        assert done.stderr.startswith(f"thinwan-qds: {cfg}: ") and key in done.stderr, done.stderr
        assert "panicked" not in done.stderr and "Traceback" not in done.stderr


def test_missing_interface_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        'downlink = "nosuch-l"\nuplink = "nosuch-w"\ncapacity_mbps = 20\ncontroller = "static"\n'
        f'state_dir = "{tmp_path}"\n[servers]\nnets = ["198.18.1.0/24"]\n[static]\nrates_mbps = [10, 10]\n'
    )
    done = subprocess.run([str(find_binary("thinwan-qds")), str(cfg)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert done.stderr.startswith('thinwan-qds: downlink: no interface "nosuch-l"'), done.stderr


def test_qds_controller_on_live_flows(tmp_path: Path) -> None:
    """controller = "qds" with the oracle table: the monitor times both flows, the
    controller places them, HTB gets their filters, and the metrics say so."""
    settings = QdsSettings(
        capacity_mbps=20.0, controller="qds", oracle_ports={5001: "video", 5002: "data"}, metrics="127.0.0.1:9464"
    )
    with middlebox_chain(tmp_path / "lab", client_delay_ms=5.0) as chain:
        dev = chain.tun["last_hop"]
        daemon = QdsDaemon(chain, settings)
        daemon.start()
        flows = [start_bulk_flow(chain, port, 6.0, tmp_path) for port in (5001, 5002)]
        time.sleep(4.0)
        # Flows move between classes as their RTTs change: compare the metrics with the
        # filters only when the filters did not change around the scrape.
        for _ in range(20):
            before = sorted(f["flowid"] for f in tc_filters(chain, dev))
            metrics = scrape(chain, "127.0.0.1:9464")
            filters = tc_filters(chain, dev)
            if sorted(f["flowid"] for f in filters) == before:
                break
        classes = tc_classes(chain, dev)
        assert len(classes) == 11  # the root class and m = 10 budget classes
        assert metrics['thinwan_qds_flows_by_type{type="video"}'] == 1
        assert metrics['thinwan_qds_flows_by_type{type="data"}'] == 1
        per_class = {k: v for k, v in metrics.items() if k.startswith("thinwan_qds_flows{")}
        assert sum(per_class.values()) == 2
        # Each flow's filter points at the class the metrics count it in.
        assert len(filters) == 2
        for f in filters:
            k = int(f["flowid"].split(":")[1], 16) - 0x10
            assert per_class[f'thinwan_qds_flows{{class="{k}"}}'] >= 1, (f, per_class)
        # RTT estimates: at least the two client-side delays (2 × 5 ms), from both flows.
        n, total = metrics["thinwan_qds_flow_rtt_seconds_count"], metrics["thinwan_qds_flow_rtt_seconds_sum"]
        assert n > 20 and total / n > 0.010, (n, total)
        assert metrics["thinwan_qds_netlink_errors_total"] == 0
        stats = daemon.stop()
        assert stats is not None and stats["peak_flows"] == 2 and stats["netlink_errors"] == 0
        # The flow log: every period, both flows with their type; the client half is the
        # emulated last hop (2 × 5 ms) plus what the packet waited in HTB, never less.
        log = pd.read_csv(daemon.flows_file)
        assert set(log.server_port) == {5001, 5002}
        assert dict(zip(log.server_port, log.app)) == {5001: "video", 5002: "data"}
        timed = log.client_half_ms.dropna()
        assert len(timed) > 20 and timed.min() >= 10.0, timed.describe()
        # … and the classifier's features (training data from real Linux TCP): a bulk
        # flow's packets toward the client are mostly full-size.
        assert "size_mean" in log.columns and log.size_mean.dropna().iloc[-1] > 1000, log.columns
        print("qds controller, 2 bulk flows:", json.dumps(stats))
        for pump, sink in flows:
            pump.wait(timeout=60)
            sink.wait(timeout=60)
        assert "htb" not in chain.run("middle", ["tc", "qdisc", "show", "dev", dev]).stdout


def scrape(chain, addr: str) -> dict[str, float]:
    """The daemon's metrics, fetched inside the middle namespace: sample name → value."""
    code = f"import urllib.request; print(urllib.request.urlopen('http://{addr}/metrics', timeout=5).read().decode())"
    text = chain.run("middle", [sys.executable, "-c", code]).stdout
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out
