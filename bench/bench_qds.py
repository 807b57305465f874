"""Speed of QDS (issue 18 "Speed"), each figure beside a reference measured in the same run.

    .venv/bin/python -m bench.bench_qds [--dir /tmp] [--skip-netlink]

1. The flow monitor from a pcap (target ≥ 1 M packets/s): the core's monitor fed by
   thinwan-capture's reader and parser (``qds_pcap_bench``) on a synthetic 2-M-packet,
   1,000-flow, headers-only capture with timestamps, against ``tcpdump -r F -w /dev/null
   'tcp port 3389'`` (libpcap + BPF, no TCP state at all) reading the same file, warm,
   best of three each.
2. The monitor alone and one control period (target: monitor + classifier + controller
   on 1,000 flows with a 100-ms period < 5 % of a core at 100 k packets/s):
   ``qds_monitor_bench 1000 4000000``, as it prints.
3. One simulated QDS scenario (target < 2 s for 60 s at c = 20): ``thinwan run
   scenarios/qds/base.toml --runs 1`` simulation time (``meta.json`` ``wall_s``) and the
   whole command, against the same scenario with ``queue.discipline = "droptail"`` (no
   monitor, no control loop) in the same run.
4. A netlink update of all class rates (target < 5 ms): ``thinwan-qds --bench-updates 500``
   on the lab's middlebox chain with 10 classes and 0, 100 and 1,000 flow filters (root).

Prints one JSON object at the end and writes it to ``bench/results/qds.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "target" / "release" / "examples"


def _cargo_examples() -> None:
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "thinwan-capture", "--example", "qds_pcap_bench"],
        cwd=ROOT,
        check=True,
    )
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "thinwan-proto", "--example", "qds_monitor_bench"],
        cwd=ROOT,
        check=True,
    )


def _best_of(n: int, argv: list[str]) -> float:
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - t)
    return best


def pcap_monitor(workdir: Path) -> dict[str, object]:
    path = workdir / "qds-bench.pcap"
    subprocess.run([str(EXAMPLES / "qds_pcap_bench"), "--make", str(path)], check=True)
    out = subprocess.run(
        [str(EXAMPLES / "qds_pcap_bench"), str(path), "3389"], capture_output=True, text=True, check=True
    ).stdout
    m = re.search(r"(\d+) packets, (\d+) flows, (\d+) RTT samples: ([\d.]+) M packets/s", out)
    if not m:
        sys.exit(f"bench_qds: unexpected qds_pcap_bench output: {out!r}")
    packets, mpps = int(m[1]), float(m[4])
    row: dict[str, object] = {"packets": packets, "flows": int(m[2]), "rtt_samples": int(m[3]), "thinwan_mpps": mpps}
    if shutil.which("tcpdump"):
        s = _best_of(3, ["tcpdump", "-r", str(path), "-w", "/dev/null", "tcp port 3389"])
        row["tcpdump_mpps"] = packets / s / 1e6
        row["ratio_vs_tcpdump"] = mpps / row["tcpdump_mpps"]  # type: ignore[operator]
    path.unlink()
    return row


def monitor_alone() -> dict[str, object]:
    out = subprocess.run(
        [str(EXAMPLES / "qds_monitor_bench"), "1000", "4000000"], capture_output=True, text=True, check=True
    ).stdout
    return {"output": out.strip().splitlines()}


def sim_run(workdir: Path) -> dict[str, object]:
    thinwan = str(Path(sys.executable).with_name("thinwan"))
    base = ROOT / "scenarios" / "qds" / "base.toml"
    fifo = workdir / "fifo.toml"
    # The same scenario with a FIFO: no monitor, no control loop (the reference).
    fifo.write_text(f'inherits = "{base}"\n[scenario]\nname = "qds-base-fifo"\n[queue]\ndiscipline = "droptail"\n')
    row: dict[str, object] = {}
    for name, scen in (("qds", base), ("droptail", fifo)):
        out = workdir / f"out-{name}"
        t = time.perf_counter()
        subprocess.run(
            [thinwan, "run", str(scen), "--runs", "1", "--out", str(out), "--quiet", "--json"],
            stdout=subprocess.DEVNULL,
            check=True,
        )
        whole = time.perf_counter() - t
        meta = json.loads((out / "runs" / "run-0" / "meta.json").read_text())
        row[name] = {"sim_s": meta["wall_s"], "whole_s": whole}
    row["sim_ratio_qds_vs_droptail"] = row["qds"]["sim_s"] / row["droptail"]["sim_s"]  # type: ignore[index]
    return row


def netlink_updates(workdir: Path) -> dict[str, object]:
    from thinwan.substrates.binaries import find_binary
    from thinwan.substrates.lab.htb_middlebox import QdsDaemon, QdsSettings, middlebox_chain

    settings = QdsSettings(static_rates_mbps=tuple([2.0] * 10))
    res: dict[str, object] = {}
    with middlebox_chain(workdir / "lab") as chain:
        daemon = QdsDaemon(chain, settings)
        for flows in (0, 100, 1000):
            argv = [str(find_binary("thinwan-qds")), str(daemon.config), "--bench-updates", "500"]
            argv += ["--bench-flows", str(flows)]
            res[f"filters_{flows}"] = json.loads(chain.run("middle", argv, timeout=600).stdout)["update_us"]
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--skip-netlink", action="store_true", help="skip the HTB update latency (needs root)")
    args = ap.parse_args()
    _cargo_examples()
    result: dict[str, object] = {"load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        work = Path(d)
        result["pcap_monitor"] = pcap_monitor(work)
        print("pcap → monitor:", json.dumps(result["pcap_monitor"]), flush=True)
        result["monitor_alone"] = monitor_alone()
        print("monitor alone:", *result["monitor_alone"]["output"], sep="\n  ", flush=True)  # type: ignore[index]
        result["sim"] = sim_run(work)
        print("simulated 60-s QDS run:", json.dumps(result["sim"]), flush=True)
        if not args.skip_netlink:
            result["netlink_update_us"] = netlink_updates(work)
            print("netlink update, µs:", json.dumps(result["netlink_update_us"]), flush=True)
    result["load_after"] = os.getloadavg()
    out = ROOT / "bench" / "results" / "qds.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
