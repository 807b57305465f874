"""The tables and one-run figures of scenarios/qds/README.md, from what the code measures now.

    for f in table1 capacity variant params variant-changing variant-ecn variant-move; do
        .venv/bin/thinwan sweep scenarios/qds/$f.toml --json --out /tmp/qds/$f --quiet > /tmp/qds/$f.json
    done
    .venv/bin/python -m bench.qds_tables /tmp/qds            # the README's four tables (markdown)
    .venv/bin/python -m bench.qds_tables /tmp/qds --diag     # + the seed-1 runs of "Why data flows lose"

Tables: every per-type figure is the sweep summary's ``by_type`` (means over the 10 runs,
docs/scenario.md "Per-type metrics"); RTOs and spurious RTOs per connection are the
summary's ``timeouts_per_conn`` / ``spurious_timeouts_per_conn``. The "any" rows of the
parameter table are checked to be the same at every α and β before one is printed.

The goal table (issue 18 "Beyond the source": video at least QDS's share within QT, data
at least FIFO's) puts FIFO and FQ-CoDel (table1, capacity) next to the variant sweep's
QDS, QDS-demand and deadline-order points at the same settings and seeds; the changing
mix comes from variant-changing. With DIR/variant-ecn.json (optional) also the ECN tables:
every point of variant-ecn.toml, and video / data within QT with and without ECN; with
DIR/variant-move.json as well, the class-change tables: every point of variant-move.toml
(QDS, QDS-demand, QDS-demand + ECN with ``queue.class_change`` "leave" / "move"), and video /
data within QT against the goal (FIFO's data share from variant-ecn).

``--diag`` runs scenarios/qds/base.toml (c = 20, [3:9]) once with seed 1 as QDS with the
classifier, QDS with the oracle, FIFO, FQ-CoDel, QDS-demand, the deadline order, and
FQ-CoDel and QDS-demand with ECN (`tcp.ecn`, `queue.ecn`), and QDS, QDS-demand and
QDS-demand + ECN with ``queue.class_change = "move"`` (into
DIR/diag) and prints, from the records: the first transmissions that reach their client
below a byte of their connection that arrived earlier (out-of-order arrivals: the
scheduler's reordering; from the packet log of every connection); where each type's late packets come from (the
packet's own bytes retransmitted; held behind a repaired hole, i.e. covered by the same
cumulative ACK as a row with retransmitted bytes; else queueing); the data connections' RTOs, spurious RTOs and fast retransmits; all connections' fast retransmits and ECN window
reductions and the bottleneck's CE marks; data written and
delivered (Mbit/s over the 60 s); the bottleneck's overflow drops; of the data packets
beyond 100 ms (as ``by_type`` counts them), the share carrying retransmitted bytes and the
others' median RTT; the classifier's share right per (period, flow) row and its confusion;
the summed rate of the classes holding only (truly) data flows against those flows'
measured rates (mean over periods); how often and how far flows change class.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DISCIPLINES = [("droptail", "FIFO"), ("fq_codel", "FQ-CoDel"), ("qds", "QDS"), ("qds-demand", "QDS-demand")]
SETTINGS = [
    ("c20 [3:9]", "table1", "mix=3:9,discipline={}"),
    ("c20 [2:14]", "table1", "mix=2:14,discipline={}"),
    ("c10 [2:2]", "capacity", "setting=c10-2:2,discipline={}"),
    ("c20 [4:4]", "capacity", "setting=c20-4:4,discipline={}"),
    ("c30 [6:6]", "capacity", "setting=c30-6:6,discipline={}"),
]
VARIANTS = [
    ("bandwidth_aware", "bandwidth-aware (QDS)"),
    ("bandwidth_aware-codel", "bandwidth-aware + class CoDel"),
    ("demand_first-rates", "demand-first rates only"),
    ("demand_first-codel", "demand-first + class CoDel (QDS-demand)"),
    ("deadline", "deadline order"),
    ("deadline-codel", "deadline order + CoDel on lateness"),
]
# The variant sweep's settings: (label, its mix key, where FIFO and FQ-CoDel are).
VARIANT_SETTINGS = [
    ("c20 [3:9]", "3:9", "table1", "mix=3:9,discipline={}"),
    ("c20 [2:14]", "2:14", "table1", "mix=2:14,discipline={}"),
    ("c10 [2:2]", "c10-2:2", "capacity", "setting=c10-2:2,discipline={}"),
    ("c20 [4:4]", "c20-4:4", "capacity", "setting=c20-4:4,discipline={}"),
]
GOAL_COLUMNS = ["bandwidth_aware", "demand_first-codel", "deadline", "deadline-codel"]
CHANGING = [
    ("droptail", "FIFO"),
    ("fq_codel", "FQ-CoDel"),
    ("qds", "QDS"),
    ("qds-demand", "QDS-demand"),
    ("qds-deadline", "deadline order"),
    ("qds-deadline-codel", "deadline order + CoDel on lateness"),
]
# variant-ecn.toml's columns: (discipline, ecn) → column name.
ECN_COLUMNS = [
    ("droptail", "off", "FIFO"),
    ("fq_codel", "off", "FQ-CoDel"),
    ("fq_codel", "on", "FQ-CoDel + ECN"),
    ("qds", "off", "QDS"),
    ("qds-demand", "off", "QDS-demand"),
    ("qds-demand", "on", "QDS-demand + ECN"),
]
# variant-move.toml's disciplines and the class_change values.
MOVE_DISCIPLINES = [("qds", "QDS"), ("qds-demand", "QDS-demand"), ("qds-demand-ecn", "QDS-demand + ECN")]
CLASS_CHANGES = ("leave", "move")
ALPHAS = (0.0, 0.2, 0.5)
BETAS = (0.5, 1.0, 2.0)


def load(path: Path) -> dict[str, dict[str, Any]]:
    """Point name → summary of one ``thinwan sweep --json`` output."""
    return {p["name"]: p["summary"] for p in json.loads(path.read_text())["points"]}


def pct(v: float) -> str:
    return f"{100 * v:.1f} %"


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def main_table(sweeps: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    out = []
    for setting, sweep, pattern in SETTINGS:
        for key, name in DISCIPLINES:
            s = sweeps[sweep][pattern.format(key)]
            cells = [setting, name]
            for t in ("video", "data"):
                b = s["by_type"][t]
                cells += [
                    f"{b['rtt_mean_ms']:.1f} ± {b['rtt_sd_ms']:.1f}",
                    pct(b["share_within_qt"]),
                    pct(b["share_within_1_2qt"]),
                    f"{b['throughput_mbps']:.2f}",
                ]
            cells += [f"{s['timeouts_per_conn']:.1f}", f"{s['spurious_timeouts_per_conn']:.1f}"]
            out.append(row(cells))
    return out


def findings_table(sweeps: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    out = []
    for setting, sweep, pattern in SETTINGS:
        cells = [setting]
        for key, _ in DISCIPLINES:
            b = sweeps[sweep][pattern.format(key)]["by_type"]
            cells.append(f"{100 * b['video']['share_within_qt']:.1f} / {pct(b['data']['share_within_qt'])}")
        out.append(row(cells))
    return out


def variant_table(v: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    for setting, mix, _, _ in VARIANT_SETTINGS:
        for key, name in VARIANTS:
            s = v[f"mix={mix},variant={key}"]
            b = s["by_type"]
            out.append(
                row(
                    [
                        setting,
                        name,
                        pct(b["video"]["share_within_qt"]),
                        f"{b['video']['throughput_mbps']:.2f}",
                        pct(b["data"]["share_within_qt"]),
                        f"{b['data']['throughput_mbps']:.2f}",
                        f"{s['timeouts_per_conn']:.1f}",
                        f"{s['spurious_timeouts_per_conn']:.1f}",
                    ]
                )
            )
    return out


def goal_table(sweeps: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Video / data within QT: FIFO, FQ-CoDel, then the variant sweep's columns."""
    out = []
    for setting, mix, sweep, pattern in VARIANT_SETTINGS:
        points = [sweeps[sweep][pattern.format(d)] for d in ("droptail", "fq_codel")]
        points += [sweeps["variant"][f"mix={mix},variant={k}"] for k in GOAL_COLUMNS]
        cells = [setting]
        for s in points:
            b = s["by_type"]
            cells.append(f"{100 * b['video']['share_within_qt']:.1f} / {pct(b['data']['share_within_qt'])}")
        out.append(row(cells))
    return out


def ecn_tables(e: dict[str, dict[str, Any]]) -> list[str]:
    """variant-ecn.toml: every point (per type within QT and Mbit/s, data RTT, RTOs,
    bottleneck drops per run), then the goal table; a cell is bold where video ≥ QDS's
    share and data ≥ FIFO's at that setting."""
    out = [
        row(
            [
                "setting",
                "discipline",
                "ECN",
                "video ≤ QT",
                "video Mbit/s",
                "data ≤ QT",
                "data Mbit/s",
                "data RTT",
                "RTOs",
                "drops/run",
            ]
        ),
        row(["---"] * 10),
    ]
    for setting, mix, _, _ in VARIANT_SETTINGS:
        for key, name in DISCIPLINES:
            for ecn in ("off", "on"):
                s = e[f"mix={mix},discipline={key},ecn={ecn}"]
                v, d = s["by_type"]["video"], s["by_type"]["data"]
                out.append(
                    row(
                        [
                            setting,
                            name,
                            ecn,
                            pct(v["share_within_qt"]),
                            f"{v['throughput_mbps']:.2f}",
                            pct(d["share_within_qt"]),
                            f"{d['throughput_mbps']:.2f}",
                            f"{d['rtt_mean_ms']:.1f} ± {d['rtt_sd_ms']:.1f}",
                            f"{s['timeouts_per_conn']:.1f}",
                            f"{s['bottleneck_drops']:.0f}",
                        ]
                    )
                )
    out += ["", row(["setting"] + [c for _, _, c in ECN_COLUMNS]), row(["---"] * (len(ECN_COLUMNS) + 1))]
    for setting, mix, _, _ in VARIANT_SETTINGS:
        shares = lambda k, ecn, mix=mix: e[f"mix={mix},discipline={k},ecn={ecn}"]["by_type"]  # noqa: E731
        qds_video = shares("qds", "off")["video"]["share_within_qt"]
        fifo_data = shares("droptail", "off")["data"]["share_within_qt"]
        cells = [setting]
        for key, ecn, _ in ECN_COLUMNS:
            b = shares(key, ecn)
            cell = f"{100 * b['video']['share_within_qt']:.1f} / {pct(b['data']['share_within_qt'])}"
            goal = b["video"]["share_within_qt"] >= qds_video and b["data"]["share_within_qt"] >= fifo_data
            cells.append(f"**{cell}**" if goal and key != "qds" else cell)
        out.append(row(cells))
    return out


def move_tables(m: dict[str, dict[str, Any]], e: dict[str, dict[str, Any]]) -> list[str]:
    """variant-move.toml: every point (as :func:`ecn_tables`, plus fast retransmits per
    connection), then video / data within QT per discipline and class_change; a cell is
    bold where video ≥ QDS's share (class_change "leave", the source's) and data ≥
    FIFO's (variant-ecn, same settings and seeds)."""
    head = ["setting", "discipline", "class_change", "video ≤ QT", "video Mbit/s", "data ≤ QT", "data Mbit/s"]
    head += ["data RTT", "RTOs", "fast retransmits", "drops/run"]
    out = [row(head), row(["---"] * len(head))]
    for setting, mix, _, _ in VARIANT_SETTINGS:
        for key, name in MOVE_DISCIPLINES:
            for change in CLASS_CHANGES:
                s = m[f"mix={mix},discipline={key},class_change={change}"]
                v, d = s["by_type"]["video"], s["by_type"]["data"]
                cells = [setting, name, change, pct(v["share_within_qt"]), f"{v['throughput_mbps']:.2f}"]
                cells += [pct(d["share_within_qt"]), f"{d['throughput_mbps']:.2f}"]
                cells += [f"{d['rtt_mean_ms']:.1f} ± {d['rtt_sd_ms']:.1f}", f"{s['timeouts_per_conn']:.1f}"]
                cells += [f"{s['fast_retransmits_per_conn']:.1f}", f"{s['bottleneck_drops']:.0f}"]
                out.append(row(cells))
    columns = [(k, c, f"{name} {c}") for k, name in MOVE_DISCIPLINES for c in CLASS_CHANGES]
    out += ["", row(["setting"] + [c for _, _, c in columns]), row(["---"] * (len(columns) + 1))]
    for setting, mix, _, _ in VARIANT_SETTINGS:
        qds_video = m[f"mix={mix},discipline=qds,class_change=leave"]["by_type"]["video"]["share_within_qt"]
        fifo_data = e[f"mix={mix},discipline=droptail,ecn=off"]["by_type"]["data"]["share_within_qt"]
        cells = [setting]
        for key, change, _ in columns:
            b = m[f"mix={mix},discipline={key},class_change={change}"]["by_type"]
            cell = f"{100 * b['video']['share_within_qt']:.1f} / {pct(b['data']['share_within_qt'])}"
            goal = b["video"]["share_within_qt"] >= qds_video and b["data"]["share_within_qt"] >= fifo_data
            cells.append(f"**{cell}**" if goal and (key, change) != ("qds", "leave") else cell)
        out.append(row(cells))
    return out


def changing_table(c: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    for key, name in CHANGING:
        s = c[f"discipline={key}"]
        b = s["by_type"]
        out.append(
            row(
                [
                    name,
                    pct(b["video"]["share_within_qt"]),
                    pct(b["video"]["share_within_1_2qt"]),
                    f"{b['video']['throughput_mbps']:.2f}",
                    pct(b["data"]["share_within_qt"]),
                    pct(b["data"]["share_within_1_2qt"]),
                    f"{b['data']['throughput_mbps']:.2f}",
                    f"{s['timeouts_per_conn']:.1f}",
                ]
            )
        )
    return out


def params_table(p: dict[str, dict[str, Any]]) -> list[str]:
    def shares(variant: str, a: float, b: float) -> tuple[float, float, float, float]:
        m, o = (p[f"variant={variant},alpha={a:g},beta={b:g},classifier={c}"]["by_type"] for c in ("model", "oracle"))
        return (
            m["video"]["share_within_qt"],
            o["video"]["share_within_qt"],
            m["data"]["share_within_qt"],
            o["data"]["share_within_qt"],
        )

    def cells(name: str, a: str, b: str, v: tuple[float, float, float, float]) -> str:
        return row([name, a, b, f"{100 * v[0]:.1f} / {pct(v[1])}", f"{100 * v[2]:.1f} / {pct(v[3])}"])

    def any_rows(variant: str, name: str) -> list[str]:
        """One row if no α and β matter; one per group of α when only α does (β "any")."""
        by_alpha = {a: {shares(variant, a, b) for b in BETAS} for a in ALPHAS}
        if any(len(v) != 1 for v in by_alpha.values()):
            sys.exit(f"qds_tables: {variant} differs across β; no 'any' row")
        groups: dict[tuple[float, float, float, float], list[float]] = {}
        for a, v in by_alpha.items():
            groups.setdefault(next(iter(v)), []).append(a)
        if len(groups) == 1:
            return [cells(name, "any", "any", next(iter(groups)))]
        return [cells(name, ", ".join(f"{a:g}" for a in alphas), "any", v) for v, alphas in groups.items()]

    return [
        *any_rows("delay_only", "delay-only"),
        *(cells("bandwidth-aware", f"{a:g}", f"{b:g}", shares("bandwidth_aware", a, b)) for a in ALPHAS for b in BETAS),
        *any_rows("demand_first", "demand-first + class CoDel"),
    ]


def scenario_variant(base: str, subs: list[tuple[str, str]]) -> str:
    """base.toml with each ``pattern → replacement`` applied exactly once (it fails loudly
    when the file changed shape) and the model path made absolute."""
    for pattern, replacement in subs:
        base, n = re.subn(pattern, replacement, base, count=1, flags=re.MULTILINE)
        if n != 1:
            sys.exit(f"qds_tables: scenarios/qds/base.toml has no line matching {pattern!r}")
    return base


# tcp.ecn and queue.ecn on (variant-ecn.toml's "on").
ECN_SUBS = [(r"^\[tcp\]", "[tcp]\necn = true"), (r"^\[queue\]", "[queue]\necn = true")]
# A reassigned flow's queued packets move with it (variant-move.toml's "move").
MOVE_SUBS = [(r"^\[queue\]", '[queue]\nclass_change = "move"')]


def diag(out: Path) -> None:
    import pandas as pd

    base = (ROOT / "scenarios/qds/base.toml").read_text()
    common = [(r'^model_file = "\.\./\.\./', f'model_file = "{ROOT}/'), (r"^runs = 10", "runs = 1")]
    # Every connection's packets in the packet log (recording only: the run is the same).
    common += [(r"^\[records\]", "[records]\npacket_log_conns = " + str(list(range(12))))]
    demand = [
        (r'^variant = "bandwidth_aware"', 'variant = "demand_first"'),
        (r"^limit_packets = 100", "limit_packets = 100\nclass_codel = true"),
    ]
    runs = {
        "qds": [],
        "oracle": [(r'^classifier = "model"', 'classifier = "oracle"')],
        "fifo": [(r'^discipline = "qds"', 'discipline = "droptail"')],
        "fq_codel": [(r'^discipline = "qds"', 'discipline = "fq_codel"')],
        "qds-demand": [
            (r'^variant = "bandwidth_aware"', 'variant = "demand_first"'),
            (r"^limit_packets = 100", "limit_packets = 100\nclass_codel = true"),
        ],
        "deadline": [(r"^limit_packets = 100", 'limit_packets = 100\nqds_order = "deadline"')],
        "fq_codel-ecn": [(r'^discipline = "qds"', 'discipline = "fq_codel"'), *ECN_SUBS],
        "qds-demand-ecn": [*demand, *ECN_SUBS],
        "qds-move": MOVE_SUBS,
        "qds-demand-move": [*demand, *MOVE_SUBS],
        "qds-demand-ecn-move": [*demand, *ECN_SUBS, *MOVE_SUBS],
    }
    out.mkdir(parents=True, exist_ok=True)
    thinwan = ROOT / ".venv/bin/thinwan"
    for name, subs in runs.items():
        toml = out / f"{name}.toml"
        toml.write_text(scenario_variant(base, common + subs))
        cmd = [str(thinwan), "run", str(toml), "--runs", "1", "--seed", "1", "--out", str(out / name)]
        subprocess.run([*cmd, "--quiet", "--no-report"], check=True, stdout=subprocess.DEVNULL)
    duration = 60.0
    for name in runs:
        rec = out / name / "runs" / "run-0"
        conns = pd.read_parquet(rec / "connections.parquet")
        pkts = pd.read_parquet(rec / "packet_rtt.parquet")
        pkts = pkts[pkts.t_tx < duration]  # by_type's window
        kind = pkts.groupby("conn")["app"].first()  # packet_rtt codes: 2 video, 3 data
        conns["app"] = conns["conn"].map(kind)
        data, video = conns[conns.app == 3], conns[conns.app == 2]
        ports = pd.read_parquet(rec / "ports.parquet")
        overflow = int(ports.loc[ports.port == "bottleneck", "drops_overflow"].iloc[0])
        mbps = lambda b: b.sum() * 8 / duration / 1e6  # noqa: E731
        print(f"\n== {name} (c20 [3:9], seed 1)")
        print(
            f"data connections: {len(data)}, RTOs {data.timeouts.sum()}, spurious {data.spurious_timeouts.sum()},"
            f" fast retransmits {data.fast_retransmits.sum()}; bottleneck overflow drops {overflow}"
        )
        marks = int(ports.loc[ports.port == "bottleneck", "marks_ce"].iloc[0])
        print(
            f"fast retransmits video + data {video.fast_retransmits.sum() + data.fast_retransmits.sum()},"
            f" ECN reductions {video.ecn_reductions.sum() + data.ecn_reductions.sum()}; bottleneck CE marks {marks};"
            f" out-of-order first transmissions {out_of_order(pd.read_parquet(rec / 'packet_log.parquet'))}"
        )
        print(
            f"data written {mbps(data.bytes_written):.2f}, delivered {mbps(data.bytes_delivered):.2f} Mbit/s;"
            f" video written {mbps(video.bytes_written):.2f}, delivered {mbps(video.bytes_delivered):.2f}"
        )
        dp = pkts[pkts.app == 3]
        late = dp[~(dp.rtt <= 0.1)]  # unacknowledged packets count as late, as in by_type
        print(
            f"data packets beyond 100 ms: {100 * len(late) / len(dp):.1f} %, of them with retransmitted bytes"
            f" {100 * (late.retx > 0).mean():.0f} %, the others' median RTT"
            f" {1e3 * late.loc[late.retx == 0, 'rtt'].median():.0f} ms"
        )
        for code, label, qt in ((2, "video", 0.05), (3, "data", 0.1)):
            print(late_sources(pkts[pkts.app == code], label, qt))
        flows_path = rec / "qds_flows.parquet"
        flows = pd.read_parquet(flows_path) if flows_path.exists() else pd.DataFrame()
        if flows.empty:
            continue
        classes = pd.read_parquet(rec / "qds_classes.parquet")
        # qds_flows codes (AppType): 0 video, 2 data
        vid, dat = flows.app_true == 0, flows.app_true == 2
        print(
            f"classifier right in {100 * (flows.app == flows.app_true).mean():.1f} % of (period, flow) rows;"
            f" video rows taken for data {100 * (vid & (flows.app == 2)).sum() / vid.sum():.1f} %,"
            f" data rows taken for video {100 * (dat & (flows.app == 0)).sum() / dat.sum():.1f} %"
        )
        for label, rows in (("video", vid), ("data ", dat)):
            share = flows.loc[rows, "class"].value_counts(normalize=True).sort_index()
            print(f"class shares (c_1 = 0) {label}", {int(k): round(float(v), 2) for k, v in share.items()})
        print(
            f"mean measured rate: video {flows.loc[vid, 'rate_bps'].mean() / 1e6:.2f}, data {flows.loc[dat, 'rate_bps'].mean() / 1e6:.2f} Mbit/s"
        )
        per_class = (
            flows.assign(is_data=dat)
            .groupby(["t", "class"])
            .agg(n=("conn", "size"), n_data=("is_data", "sum"), flows_bps=("rate_bps", "sum"))
            .reset_index()
        )
        only = per_class[per_class.n == per_class.n_data].merge(classes[["t", "class", "rate_bps"]], on=["t", "class"])
        per_t = only.groupby("t")[["flows_bps", "rate_bps"]].sum()
        all_data = flows[dat].groupby("t").rate_bps.sum()
        print(
            f"classes holding only data flows: rate {per_t.rate_bps.mean() / 1e6:.2f} Mbit/s, their flows measured"
            f" {per_t.flows_bps.mean() / 1e6:.2f} (mean over {len(per_t)} periods); all data flows measured"
            f" {all_data.mean() / 1e6:.2f}"
        )
        f = flows.sort_values(["conn", "t"]).copy()
        f["prev"] = f.groupby("conn")["class"].shift()
        f["dt"] = f.groupby("conn")["t"].diff()
        steps = f[f.prev.notna() & ((f.dt - 0.1).abs() < 1e-6)].copy()
        steps["moved"] = (steps["class"].astype(int) - steps.prev.astype(int)).abs()
        for code, label in ((0, "video"), (2, "data")):
            s = steps[steps.app_true == code]
            per_change = s.loc[s.moved > 0, "moved"].mean()
            print(
                f"{label}: changes class in {100 * (s.moved > 0).mean():.0f} % of periods, by"
                f" {s.moved.mean():.2f} classes per period ({per_change if not math.isnan(per_change) else 0:.2f} per change)"
            )


def out_of_order(log: Any) -> int:
    """First transmissions that arrive at their client (packet_log event 2) below a byte of
    their connection that arrived earlier: what the network reordered."""
    arrivals = log[log.event == 2]
    top = (arrivals.seq + arrivals.len).groupby(arrivals.conn).cummax()
    earlier = top.groupby(arrivals.conn).shift().fillna(0)
    return int(((arrivals.retx == 0) & (arrivals.seq < earlier)).sum())


def late_sources(p: Any, label: str, qt: float) -> str:
    """Where the packets of one type beyond ``qt`` come from, as shares of all its packets:
    own bytes retransmitted; held behind a repaired hole (the same covering ACK as a row
    with retransmitted bytes); the rest, queueing (with their median RTT)."""
    import numpy as np

    ack = (p.t_tx + p.rtt).round(9)
    repaired = set(zip(p.conn[p.retx > 0], ack[p.retx > 0], strict=True))
    behind = np.array([(c, a) in repaired for c, a in zip(p.conn, ack, strict=True)]) & (p.retx.to_numpy() == 0)
    late = ~(p.rtt <= qt).to_numpy()  # unacknowledged rows count as late, as in by_type
    own = late & (p.retx.to_numpy() > 0)
    hole = late & behind
    queueing = late & ~own & ~hole
    n = len(p)
    return (
        f"{label} beyond QT: {100 * late.sum() / n:.1f} % of {n} packets: own bytes retransmitted"
        f" {100 * own.sum() / n:.1f}, behind a repaired hole {100 * hole.sum() / n:.1f}, queueing"
        f" {100 * queueing.sum() / n:.1f} (median RTT {1e3 * p.rtt[queueing].median():.0f} ms)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "dir",
        type=Path,
        help="directory with table1.json, capacity.json, variant.json, params.json, variant-changing.json",
    )
    ap.add_argument("--diag", action="store_true", help="also run the seed-1 diagnostics (into DIR/diag)")
    args = ap.parse_args()
    sweeps = {}
    for name in ("table1", "capacity", "variant", "params", "variant-changing"):
        path = args.dir / f"{name}.json"
        try:
            sweeps[name] = load(path)
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"qds_tables: {path}: not a `thinwan sweep --json` output ({e})")
    ecn_path = args.dir / "variant-ecn.json"
    ecn = [("ECN: marks instead of drops (variant-ecn)", ecn_tables(load(ecn_path)))] if ecn_path.exists() else []
    move_path = args.dir / "variant-move.json"
    if move_path.exists() and ecn_path.exists():
        ecn.append(
            ("A reassigned flow's queue: left or moved (variant-move)", move_tables(load(move_path), load(ecn_path)))
        )
    for title, lines in (
        ("Measured (table1 + capacity)", main_table(sweeps)),
        ("findings.md (video / data within QT)", findings_table(sweeps)),
        ("The variant, piece by piece", variant_table(sweeps["variant"])),
        ("The issue's goal (video / data within QT)", goal_table(sweeps)),
        ("The changing mix", changing_table(sweeps["variant-changing"])),
        ("Parameters", params_table(sweeps["params"])),
        *ecn,
    ):
        print(f"\n## {title}\n")
        print("\n".join(lines))
    if args.diag:
        diag(args.dir / "diag")


if __name__ == "__main__":
    main()
