#!/usr/bin/env python3
"""Accuracy and throughput of the thinwan-link emulator (needs root).

Measures, each on a fresh lab:

1. **delay error** at 10 and 100 Mbit/s, 20 ms: UDP probes (200 B, 500/s) whose one-way
   delay is compared with the configured delay + the probe's serialisation time.
   Two views: *app* = receiver's read − sender's write (includes both hosts' socket
   wake-ups), *emulator* = delivery − due time from the event log (the emulator's own
   scheduling error).
2. **TCP goodput**, one flow through 10 Mbit/s, 20 ms each way, a BDP buffer
   (50 kB), reno and cubic: application bytes read per second in the steady state.
3. **unshaped forwarding**: one TCP flow, no rate limit, no delay.
4. **spurious drops**: drops inside the emulator and TX drops of the TUN devices in
   runs that should have none.
5. **laws** (``stats``): do the measured jitter and loss follow the configured laws?
   One lab, UDP probes both ways (0.5 ms apart, jitter with ``reorder`` so samples are
   independent): server→client uniform ±10 % jitter and Gilbert–Elliott loss
   (p = 0.01, r = 0.25), client→server normal 5 % jitter and i.i.d. 2 % loss.
   Kolmogorov–Smirnov of each packet's link delay (delivery − end of serialisation,
   from the event log) against the configured law; the loss rate against a 99 %
   Wilson interval and P(loss | previous lost) against the same; GE burst and gap
   lengths against their geometric means 1/r and 1/p (99 % normal intervals).
6. **soak** (``--soak [SECONDS]``, 600 s without a value): UDP at 90 % of a
   100 Mbit/s link (1400-byte packets, 8036/s), 0.1 % configured loss, 1000-packet
   queue. Every missing probe must be an emulator drop logged with a reason, and
   there must be no drops but configured loss and queue overflow (event log read in
   chunks, so an hour-long log fits in memory); drops outside the emulator (sender
   errors, TUN queue, the receiver's UDP buffer, 16 MB here) are counted and fail it.

Usage: ``sudo .venv/bin/python -m bench.lab.bench_link [--json] [--quick] [--only stats,soak] [--soak [SECONDS]]``
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thinwan.records.evlog import DELIVER, DEQUEUE, DROP, EVENT_DTYPE, HEADER, REASONS, read_events
from thinwan.substrates.binaries import find_binary
from thinwan.substrates.lab.linkspec import DirLink, LabSpec, LinkSpec, TcpSettings
from thinwan.substrates.lab.topology import CLIENT_ADDR, SERVER_ADDR, Lab

NET = str(find_binary("thinwan-net"))


def tun_tx_dropped(lab: Lab) -> int:
    total = 0
    for side in ("server", "client"):
        out = lab.run(side, ["ip", "-s", "-j", "link", "show", lab.tun[side]]).stdout
        total += int(json.loads(out)[0]["stats64"]["tx"]["dropped"])
    return total


def delay_error(rate_bps: int, delay_ms: float, count: int, work: Path) -> dict[str, Any]:
    size = 200  # UDP payload; IP packet = 228 B
    spec = LabSpec(link=LinkSpec.symmetric(rate_bps=rate_bps, delay_ms=delay_ms), tcp=TcpSettings())
    with Lab(spec, workdir=work) as lab:
        recv = lab.popen(
            "client",
            [
                NET,
                "probe-recv",
                "--listen",
                f"{CLIENT_ADDR}:6000",
                "--count",
                str(count),
                "--timeout",
                "2s",
                "--out",
                str(work / "p.csv"),
            ],
            stdout=subprocess.PIPE,
        )
        assert recv.stdout is not None
        recv.stdout.readline()
        lab.run(
            "server",
            [
                NET,
                "probe-send",
                "--to",
                f"{CLIENT_ADDR}:6000",
                "--count",
                str(count),
                "--interval",
                "2ms",
                "--size",
                str(size),
            ],
            timeout=120,
        )
        recv.wait(timeout=30)
        tx_drops = tun_tx_dropped(lab)
    p = pd.read_csv(work / "p.csv")
    ser_ns = (size + 28) * 8 * 1e9 / rate_bps if rate_bps else 0.0
    app_err = (p.t_recv_ns - p.t_send_ns - delay_ms * 1e6 - ser_ns) / 1e3
    ev = read_events(work / "events.bin")
    d = ev[(ev.event == DELIVER) & (ev.dir == 0)]
    emu_err = (d.t_ns.astype(np.int64) - d.due_ns.astype(np.int64)) / 1e3
    return {
        "rate_mbps": rate_bps / 1e6,
        "delay_ms": delay_ms,
        "probes": count,
        "received": len(p),
        "app_err_us": _pcts(app_err),
        "emulator_err_us": _pcts(emu_err),
        "tun_tx_dropped": tx_drops,
    }


def tcp_goodput(
    rate_bps: int, delay_ms: float, queue_bytes: int, cc: str, seconds: float, work: Path
) -> dict[str, Any]:
    spec = LabSpec(
        link=LinkSpec.symmetric(
            rate_bps=rate_bps, delay_ms=delay_ms, queue_packets=0 if queue_bytes else 10000, queue_bytes=queue_bytes
        ),
        tcp=TcpSettings(congestion_control=cc, rmem_max=64 << 20, wmem_max=64 << 20),
    )
    with Lab(spec, workdir=work, events=bool(rate_bps)) as lab:
        sink = lab.popen(
            "client",
            [
                NET,
                "sink",
                "--listen",
                f"{CLIENT_ADDR}:5001",
                "--out",
                str(work / "sink.csv"),
                "--timeout-s",
                str(seconds + 30),
            ],
            stdout=subprocess.PIPE,
        )
        assert sink.stdout is not None
        sink.stdout.readline()
        lab.run(
            "server",
            [
                NET,
                "pump",
                "--connect",
                f"{CLIENT_ADDR}:5001",
                "--model",
                "bulk",
                "--duration-s",
                str(seconds),
                "--drain-s",
                "0.5",
                "--cc",
                cc,
                "--out",
                str(work / "pump.csv"),
                "--conns-out",
                str(work / "conns.json"),
            ],
            timeout=seconds + 60,
        )
        sink.wait(timeout=60)
        tx_drops = tun_tx_dropped(lab)
        stats = lab.down()
    r = pd.read_csv(work / "sink.csv")
    t = (r.t_read_ns - r.t_read_ns.min()) / 1e9
    lo, hi = min(2.0, seconds / 3), seconds - 0.2
    steady = r[(t > lo) & (t <= hi)]
    info = json.loads((work / "conns.json").read_text())["conns"][0]["tcp_info"]
    fwd = (stats or {}).get("fwd", {})
    return {
        "rate_mbps": rate_bps / 1e6,
        "delay_ms": delay_ms,
        "queue_bytes": queue_bytes,
        "cc": cc,
        "goodput_mbps": float(steady.bytes.sum() * 8 / (hi - lo) / 1e6),
        "retransmitted_bytes": info.get("bytes_retrans"),
        "emulator_drops_overflow": fwd.get("drops_overflow"),
        "emulator_malformed": fwd.get("malformed"),
        "tun_tx_dropped": tx_drops,
    }


def _pcts(x: pd.Series) -> dict[str, float]:
    q = np.percentile(x, [50, 90, 99, 99.9])
    return {
        "p50": round(float(q[0]), 1),
        "p90": round(float(q[1]), 1),
        "p99": round(float(q[2]), 1),
        "p99.9": round(float(q[3]), 1),
        "max": round(float(x.max()), 1),
        "min": round(float(x.min()), 1),
    }


# -- laws: jitter and loss against their configured distributions ----------------------

LOSS_IID = 0.02
GE_P, GE_R = 0.01, 0.25
DELAY_MS = 20.0
Z99 = 2.5758  # two-sided 99 % normal quantile


def law_check(count: int, work: Path) -> dict[str, Any]:
    """UDP probes both ways through one lab; each direction's laws checked from the event log."""
    fwd = DirLink(
        rate_bps=100_000_000, delay_ms=DELAY_MS, jitter="uniform:10%", reorder=True, ge=(GE_P, GE_R, 0.0, 1.0)
    )
    rev = DirLink(rate_bps=100_000_000, delay_ms=DELAY_MS, jitter="normal:5%", reorder=True, loss=LOSS_IID)
    spec = LabSpec(link=LinkSpec(fwd=fwd, rev=rev, seed=11), tcp=TcpSettings())
    with Lab(spec, workdir=work) as lab:
        recv = {
            "client": lab.popen(
                "client",
                [
                    NET,
                    "probe-recv",
                    "--listen",
                    f"{CLIENT_ADDR}:6000",
                    "--count",
                    str(count),
                    "--timeout",
                    "2s",
                    "--out",
                    str(work / "fwd.csv"),
                ],
                stdout=subprocess.PIPE,
            ),
            "server": lab.popen(
                "server",
                [
                    NET,
                    "probe-recv",
                    "--listen",
                    f"{SERVER_ADDR}:6000",
                    "--count",
                    str(count),
                    "--timeout",
                    "2s",
                    "--out",
                    str(work / "rev.csv"),
                ],
                stdout=subprocess.PIPE,
            ),
        }
        for r in recv.values():
            assert r.stdout is not None
            r.stdout.readline()
        send = [
            lab.popen(
                side,
                [NET, "probe-send", "--to", f"{to}:6000", "--count", str(count), "--interval", "0.5ms", "--size", "64"],
                stdout=subprocess.DEVNULL,
            )
            for side, to in (("server", CLIENT_ADDR), ("client", SERVER_ADDR))
        ]
        for p in send:
            p.wait(timeout=count * 0.0005 + 60)
        for r in recv.values():
            r.wait(timeout=30)
    ev = read_events(work / "events.bin")
    out: dict[str, Any] = {"probes": count}
    d = DELAY_MS * 1e-3
    for dirn, name, cdf in ((0, "fwd", _uniform_cdf(d * 0.9, d * 1.1)), (1, "rev", _normal_cdf(d, 0.05 * d))):
        e = ev[ev.dir == dirn]
        deq = e[e.event == DEQUEUE].set_index("pkt")["t_ns"].astype(np.int64)
        dl = e[e.event == DELIVER].set_index("pkt")
        link_delay = (dl["t_ns"].astype(np.int64) - deq.reindex(dl.index)) / 1e9  # measured: written − end of tx
        law_delay = (dl["due_ns"].astype(np.int64) - deq.reindex(dl.index)) / 1e9  # scheduled (the law itself)
        lost = e[(e.event == DROP) & e.reason.isin([3, 4])]["pkt"].to_numpy()
        trials = np.sort(deq.index.to_numpy())
        lost_mask = np.isin(trials, lost)
        res: dict[str, Any] = {
            "jitter": spec.link.fwd.jitter if dirn == 0 else spec.link.rev.jitter,
            "ks_measured": _ks(link_delay.to_numpy(), cdf),
            "ks_scheduled": _ks(law_delay.to_numpy(), cdf),
            "lateness_us_p50_p99": [
                round(float(x), 1) for x in np.percentile((link_delay - law_delay) * 1e6, [50, 99])
            ],
        }
        if dirn == 0:
            res["ge"] = _ge_check(lost_mask, GE_P, GE_R)
        else:
            res["iid"] = _iid_check(lost_mask, LOSS_IID)
        out[name] = res
    return out


def _uniform_cdf(lo: float, hi: float) -> Any:
    return lambda x: np.clip((x - lo) / (hi - lo), 0.0, 1.0)


def _normal_cdf(mu: float, sigma: float) -> Any:
    erf = np.vectorize(math.erf)
    return lambda x: 0.5 * (1.0 + erf((np.asarray(x) - mu) / (sigma * math.sqrt(2.0))))


def _ks(x: np.ndarray, cdf: Any) -> dict[str, Any]:
    """One-sample Kolmogorov–Smirnov test (asymptotic Kolmogorov p-value; n ≥ 1000 here)."""
    x = np.sort(x[np.isfinite(x)])
    n = len(x)
    f = cdf(x)
    dn = float(max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n)))
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * dn  # Stephens' small-n correction
    p = 2.0 * sum((-1) ** (k - 1) * math.exp(-2.0 * k * k * lam * lam) for k in range(1, 101))
    p = min(max(p, 0.0), 1.0)
    return {"n": n, "D": round(dn, 5), "p": round(p, 4), "pass": p > 0.01}


def _wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    ph = k / n
    den = 1 + Z99 * Z99 / n
    mid = (ph + Z99 * Z99 / (2 * n)) / den
    half = Z99 * math.sqrt(ph * (1 - ph) / n + Z99 * Z99 / (4 * n * n)) / den
    return (mid - half, mid + half)


def _iid_check(lost: np.ndarray, p: float) -> dict[str, Any]:
    n, k = len(lost), int(lost.sum())
    lo, hi = _wilson(k, n)
    after = lost[1:][lost[:-1]]  # outcomes right after a loss: i.i.d. means P = p again
    lo2, hi2 = _wilson(int(after.sum()), len(after))
    return {
        "trials": n,
        "lost": k,
        "rate": round(k / n, 5),
        "ci99": [round(lo, 5), round(hi, 5)],
        "pass_rate": lo <= p <= hi,
        "p_loss_after_loss": round(float(after.mean()), 4) if len(after) else None,
        "ci99_after": [round(lo2, 4), round(hi2, 4)],
        "pass_independence": lo2 <= p <= hi2,
        "pass": lo <= p <= hi and lo2 <= p <= hi2,
    }


def _runs(mask: np.ndarray, value: bool) -> np.ndarray:
    """Lengths of maximal runs of ``value`` in ``mask`` (the first and last, possibly cut, are dropped)."""
    m = np.concatenate([[0], (mask == value).astype(np.int8), [0]])
    d = np.diff(m)
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    lengths = ends - starts
    return lengths[1:-1] if len(lengths) > 2 else lengths[:0]


def _ge_check(lost: np.ndarray, p: float, r: float) -> dict[str, Any]:
    """Loss bursts (time in Bad, loss_bad = 1, loss_good = 0) are Geometric(r), mean 1/r;
    gaps between them Geometric(p), mean 1/p."""
    res: dict[str, Any] = {
        "trials": len(lost),
        "lost": int(lost.sum()),
        "rate": round(float(lost.mean()), 5),
        "stationary_rate": round(p / (p + r), 5),
    }
    ok = True
    for name, runs, q in (("burst", _runs(lost, True), r), ("gap", _runs(lost, False), p)):
        mean, sd = 1 / q, math.sqrt(1 - q) / q
        half = Z99 * sd / math.sqrt(max(len(runs), 1))
        got = float(runs.mean()) if len(runs) else math.nan
        passed = bool(len(runs) >= 30 and abs(got - mean) <= half)
        ok &= passed
        res[name] = {
            "n": len(runs),
            "mean": round(got, 3),
            "expected": round(mean, 3),
            "ci99": [round(mean - half, 3), round(mean + half, 3)],
            "pass": passed,
        }
    res["pass"] = ok
    return res


# -- soak: 90 % of 100 Mbit/s for a long time ---------------------------------------------

SOAK_RATE = 100_000_000
SOAK_IP = 1400
SOAK_LOSS = 0.001


def soak(seconds: float, work: Path) -> dict[str, Any]:
    """UDP at 90 % load: every drop must be accounted for by a logged reason."""
    payload = SOAK_IP - 28
    interval_us = SOAK_IP * 8 / (0.9 * SOAK_RATE) * 1e6
    count = int(seconds * 1e6 / interval_us)
    link = LinkSpec(
        fwd=DirLink(rate_bps=SOAK_RATE, delay_ms=10.0, queue_packets=1000, loss=SOAK_LOSS),
        rev=DirLink(rate_bps=SOAK_RATE, delay_ms=10.0, queue_packets=1000),
        seed=5,
    )
    spec = LabSpec(link=link, tcp=TcpSettings())
    with Lab(spec, workdir=work) as lab:
        udp_before = _udp_errors(lab)
        recv = lab.popen(
            "client",
            [
                NET,
                "probe-recv",
                "--listen",
                f"{CLIENT_ADDR}:6000",
                "--count",
                str(count),
                "--timeout",
                "3s",
                "--rcvbuf",
                str(16 << 20),
                "--out",
                str(work / "soak.csv"),
            ],
            stdout=subprocess.PIPE,
        )
        assert recv.stdout is not None
        recv.stdout.readline()
        done = lab.run(
            "server",
            [
                NET,
                "probe-send",
                "--to",
                f"{CLIENT_ADDR}:6000",
                "--count",
                str(count),
                "--interval",
                f"{interval_us:.3f}us",
                "--size",
                str(payload),
            ],
            timeout=seconds * 1.5 + 60,
        )
        sender = json.loads(done.stdout.strip().splitlines()[-1])
        recv.wait(timeout=60)
        tun = tun_tx_dropped(lab)
        udp_after = _udp_errors(lab)
        stats = lab.down()
    got = pd.read_csv(work / "soak.csv", usecols=["seq"])["seq"].to_numpy()
    missing = np.setdiff1d(np.arange(count), got)
    scan = _scan_soak(work / "events.bin")
    drop_ids = scan.pop("fwd_drop_ids")
    # The server namespace sends nothing else towards the client, so the emulator's
    # fwd packet number is the probe's sequence number.
    unexplained = np.setdiff1d(missing, drop_ids)
    by_reason = scan["drops_by_reason"]
    allowed = {"loss", "overflow"}
    unexpected = {k: v for k, v in by_reason.items() if k not in allowed and v}
    lo, hi = _wilson(by_reason.get("loss", 0), int(scan["fwd_dequeued"]))
    res = {
        "seconds": seconds,
        "load": 0.9,
        "rate_mbps": SOAK_RATE / 1e6,
        "ip_bytes": SOAK_IP,
        "probes": count,
        "sender": sender,
        "received": int(len(got)),
        "missing": int(len(missing)),
        "drops_by_reason": by_reason,
        "missing_not_logged": int(len(unexplained)),
        "unexpected_drops": unexpected,
        "tun_tx_dropped": tun,
        "udp_rcvbuf_errors": udp_after - udp_before,
        "loss_rate": round(by_reason.get("loss", 0) / max(scan["fwd_dequeued"], 1), 6),
        "loss_ci99": [round(lo, 6), round(hi, 6)],
        "delivered_mbps": scan["fwd_mbps"],
        "lateness_us": scan["lateness_us"],
        "max_queue_packets": (stats or {}).get("fwd", {}).get("max_queue_packets"),
    }
    res["pass"] = bool(
        res["missing_not_logged"] == 0
        and not unexpected
        and tun == 0
        and sender["send_errors"] == 0
        and res["udp_rcvbuf_errors"] == 0
        and lo <= SOAK_LOSS <= hi
    )
    return res


def _udp_errors(lab: Lab) -> int:
    """UDP receive-buffer errors in the client namespace (/proc/net/snmp)."""
    lines = [
        ln.split() for ln in lab.run("client", ["cat", "/proc/net/snmp"]).stdout.splitlines() if ln.startswith("Udp:")
    ]
    row = dict(zip(lines[0][1:], lines[1][1:]))
    return int(row.get("RcvbufErrors", 0))


def _scan_soak(path: Path, chunk: int = 1 << 20) -> dict[str, Any]:
    """Drops by reason, fwd drop packet numbers, delivered rate and emulator lateness,
    reading the event log ``chunk`` records at a time."""
    n = (path.stat().st_size - HEADER) // EVENT_DTYPE.itemsize
    reasons = np.zeros(256, dtype=np.int64)
    drop_ids, late_hist = [], np.zeros(10_001, dtype=np.int64)  # µs, last bin = ≥ 10 ms
    deq = 0
    first = last = None
    delivered_bytes = 0
    for start in range(0, n, chunk):
        e = np.fromfile(
            path, dtype=EVENT_DTYPE, count=min(chunk, n - start), offset=HEADER + start * EVENT_DTYPE.itemsize
        )
        drops = e[e["event"] == DROP]
        reasons += np.bincount(drops["reason"], minlength=256)
        drop_ids.append(drops["pkt"][drops["dir"] == 0])
        fwd = e[e["dir"] == 0]
        deq += int((fwd["event"] == DEQUEUE).sum())
        dl = fwd[fwd["event"] == DELIVER]
        if len(dl):
            late = (dl["t_ns"].astype(np.int64) - dl["due_ns"].astype(np.int64)) // 1000
            late_hist += np.bincount(np.clip(late, 0, 10_000), minlength=10_001)
            first = int(dl["t_ns"][0]) if first is None else first
            last = int(dl["t_ns"][-1])
            delivered_bytes += int(dl["ip_len"].astype(np.int64).sum())
    cum = np.cumsum(late_hist) / max(late_hist.sum(), 1)
    pct = {f"p{q:g}": int(np.searchsorted(cum, q / 100)) for q in (50, 99, 99.9, 99.99)}
    pct["max"] = int(np.flatnonzero(late_hist)[-1]) if late_hist.any() else 0
    return {
        "drops_by_reason": {REASONS[i]: int(c) for i, c in enumerate(reasons) if c and i in REASONS},
        "fwd_drop_ids": np.concatenate(drop_ids) if drop_ids else np.array([], dtype=np.uint64),
        "fwd_dequeued": deq,
        "fwd_mbps": round(delivered_bytes * 8 / ((last - first) / 1e9) / 1e6, 2)
        if first and last and last > first
        else None,
        "lateness_us": pct,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="fewer probes, shorter transfers (< 60 s in all)")
    ap.add_argument("--only", help="comma-separated parts: delay,goodput,unshaped,stats,soak (default: all but soak)")
    ap.add_argument(
        "--soak",
        nargs="?",
        type=float,
        const=600.0,
        metavar="SECONDS",
        help="also run the 90 %% load soak (600 s without a value)",
    )
    args = ap.parse_args()
    parts = set(args.only.split(",")) if args.only else {"delay", "goodput", "unshaped", "stats"}
    if args.soak is not None:
        parts.add("soak")
    unknown = parts - {"delay", "goodput", "unshaped", "stats", "soak"}
    if unknown:
        ap.error(f"--only: unknown parts {sorted(unknown)}")
    probes, seconds, law_probes = (1000, 4.0, 10_000) if args.quick else (5000, 15.0, 60_000)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tw-bench-") as tmp:
        base = Path(tmp)
        if "delay" in parts:
            results["delay"] = [
                delay_error(rate, 20.0, probes, base / f"d{k}") for k, rate in enumerate((10_000_000, 100_000_000))
            ]
        if "goodput" in parts:
            results["goodput"] = [
                tcp_goodput(10_000_000, 20.0, 50_000, cc, seconds * 2, base / f"g{k}")
                for k, cc in enumerate(("reno", "cubic"))
            ]
        if "unshaped" in parts:
            results["unshaped"] = tcp_goodput(0, 0.0, 0, "cubic", seconds, base / "u")
        if "stats" in parts:
            results["stats"] = law_check(law_probes, base / "s")
        if "soak" in parts:
            results["soak"] = soak(args.soak if args.soak is not None else (20.0 if args.quick else 600.0), base / "k")
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        _print(results)
    checks = (
        [results.get("soak", {}).get("pass", True)]
        + [
            results["stats"][d][k]["pass"]
            for d, k in (("fwd", "ks_measured"), ("fwd", "ge"), ("rev", "ks_measured"), ("rev", "iid"))
        ]
        if "stats" in results
        else [results.get("soak", {}).get("pass", True)]
    )
    return 0 if all(checks) else 1


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _print(results: dict[str, Any]) -> None:
    if "delay" in results:
        print("delay error vs configured (µs)            p50     p90     p99   p99.9     max")
        for d in results["delay"]:
            for view in ("app", "emulator"):
                e = d[f"{view}_err_us"]
                print(
                    f"  {d['rate_mbps']:>5g} Mbit/s 20 ms, {view:<9}     {e['p50']:>7} {e['p90']:>7} {e['p99']:>7} {e['p99.9']:>7} {e['max']:>7}"
                )
            print(f"      probes lost: {d['probes'] - d['received']}, TUN tx drops: {d['tun_tx_dropped']}")
    for g in results.get("goodput", []):
        print(
            f"TCP {g['cc']:<5} 10 Mbit/s 20 ms, BDP buffer: {g['goodput_mbps']:.2f} Mbit/s goodput "
            f"(retransmitted {g['retransmitted_bytes']} B, queue drops {g['emulator_drops_overflow']}, TUN drops {g['tun_tx_dropped']})"
        )
    if "unshaped" in results:
        u = results["unshaped"]
        print(
            f"unshaped, one TCP flow: {u['goodput_mbps']:.0f} Mbit/s goodput (emulator drops {u['emulator_drops_overflow']}, TUN drops {u['tun_tx_dropped']})"
        )
    if "stats" in results:
        st = results["stats"]
        print(f"laws ({st['probes']} probes each way, 0.5 ms apart; KS p > 0.01 and 99 % intervals pass)")
        for name in ("fwd", "rev"):
            r = st[name]
            for view in ("ks_measured", "ks_scheduled"):
                k = r[view]
                print(
                    f"  {name} jitter {r['jitter']:<12} KS {view[3:]:<9} n={k['n']:<6} D={k['D']:<8} p={k['p']:<7} {_verdict(k['pass'])}"
                )
            print(f"      emulator lateness p50/p99: {r['lateness_us_p50_p99'][0]} / {r['lateness_us_p50_p99'][1]} µs")
        i = st["rev"]["iid"]
        print(
            f"  rev i.i.d. loss {LOSS_IID}: {i['lost']}/{i['trials']} = {i['rate']} (99 % CI {i['ci99'][0]}–{i['ci99'][1]}) {_verdict(i['pass_rate'])}; "
            f"P(loss | loss) = {i['p_loss_after_loss']} (CI {i['ci99_after'][0]}–{i['ci99_after'][1]}) {_verdict(i['pass_independence'])}"
        )
        g = st["fwd"]["ge"]
        print(f"  fwd GE p={GE_P} r={GE_R}: loss {g['rate']} (stationary {g['stationary_rate']})")
        for part in ("burst", "gap"):
            b = g[part]
            print(
                f"      {part} length mean {b['mean']} vs {b['expected']} (99 % CI {b['ci99'][0]}–{b['ci99'][1]}, n={b['n']}) {_verdict(b['pass'])}"
            )
    if "soak" in results:
        k = results["soak"]
        print(
            f"soak {k['seconds']:g} s at 90 % of {k['rate_mbps']:g} Mbit/s ({k['probes']} × {k['ip_bytes']} B, delivered {k['delivered_mbps']} Mbit/s): "
            f"{_verdict(k['pass'])}"
        )
        print(
            f"  sent {k['sender']['sent']} (send errors {k['sender']['send_errors']}), received {k['received']}, missing {k['missing']}, "
            f"of which not logged by the emulator: {k['missing_not_logged']}"
        )
        print(
            f"  drops by reason: {k['drops_by_reason'] or 'none'}; unexpected: {k['unexpected_drops'] or 'none'}; "
            f"TUN tx drops {k['tun_tx_dropped']}; UDP rcvbuf errors {k['udp_rcvbuf_errors']}"
        )
        print(
            f"  configured loss {SOAK_LOSS}: measured {k['loss_rate']} (99 % CI {k['loss_ci99'][0]}–{k['loss_ci99'][1]}); "
            f"max queue {k['max_queue_packets']} packets; emulator lateness µs {k['lateness_us']}"
        )


if __name__ == "__main__":
    sys.exit(main())
