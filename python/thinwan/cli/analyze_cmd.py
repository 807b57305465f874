"""``thinwan analyze CAPTURE``: a pcap/pcapng capture → its TCP connections → the
thin-client model's statistics (gap rule, α, β, gaps, sizes, block lengths), passive
RTTs, retransmissions and reordering; records, an HTML report, or JSON (docs/analyze.md).

A bad capture (damaged, empty, no TCP, nothing on the port) raises ScenarioError: exit 2
with the message naming the file and the packet, no traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["add_analyze_subcommand"]

HELP = """Read a pcap or pcapng capture (Ethernet, raw IP, Linux cooked v1/v2, loopback), rebuild its TCP
connections and split each server's response packets into interactive and bulk flows by the gap rule
(Ogawa et al.: packets less than --gap-ms apart form one flow). Writes records (Parquet) and an HTML report
to --out, and prints the [traffic] point estimates; --json prints one JSON object instead. docs/analyze.md."""


def add_analyze_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``analyze`` to a subparsers object (imports nothing heavy)."""
    from . import int_at_least, port_number, positive_number

    a = subparsers.add_parser(
        "analyze",
        help="a capture's TCP connections → the thin-client model (gap rule, α, β, gaps, sizes), RTTs, retransmissions",
        description=HELP,
    )
    a.add_argument("capture", metavar="CAPTURE.pcap", help="pcap or pcapng file")
    who = a.add_mutually_exclusive_group()
    who.add_argument(
        "--server-port",
        type=port_number,
        metavar="N",
        help="TCP port of the servers: only connections on it, the end using it is the server "
        "(default: every TCP connection; the server is the end that answered the SYN, else the lower port)",
    )
    who.add_argument(
        "--filter",
        metavar="EXPR",
        help="keep packets matching a pcap-filter subset: [src|dst] host A, [src|dst] port N, [src|dst] net A/N, "
        "tcp, and/or/not, parentheses (docs/analyze.md)",
    )
    a.add_argument(
        "--gap-ms",
        type=positive_number("milliseconds"),
        metavar="MS",
        help="gap rule threshold (default: the scenario's queue.classifier_gap_ms default, 10^-2.2 s)",
    )
    a.add_argument("--out", metavar="DIR", help="results directory (default: results/analyze-<capture stem>/)")
    a.add_argument("--json", action="store_true", help="print one JSON object (flows, model, packets, version)")
    a.add_argument("--max-packets", type=int_at_least(1), metavar="N", help="read only the first N packets of the file")
    a.add_argument(
        "--idle-timeout-s",
        type=positive_number("seconds"),
        metavar="S",
        help="a connection idle this long ends; a later packet starts a new one (default: 10 minutes)",
    )
    a.add_argument("--no-report", action="store_true", help="write the records but not the HTML report")
    a.set_defaults(func=_cmd_analyze)
    return a


def _cmd_analyze(args: argparse.Namespace) -> int:
    from .. import __version__
    from ..analysis.capture_model import CaptureError, analyze, default_gap_ms, point_model, records_tables, summary
    from ..config.files import ScenarioError
    from ..records.meta import dumps_json, git_revision
    from ..records.schema import write_text_atomic
    from ..report.analyze_page import analyze_html, summary_text

    capture = Path(args.capture)
    gap_ms = default_gap_ms() if args.gap_ms is None else args.gap_ms
    t0 = time.perf_counter()
    try:
        res = analyze(
            capture,
            server_port=args.server_port,
            filter=args.filter,
            gap_ms=gap_ms,
            max_packets=args.max_packets,
            idle_timeout_s=args.idle_timeout_s,
            progress=sys.stderr.isatty(),
        )
    except CaptureError as e:
        msg = str(e)
        if msg.startswith("filter "):
            msg = f"--{msg}"
        raise ScenarioError(msg) from None
    wall = time.perf_counter() - t0
    model = point_model(res["pooled"])
    if args.server_port is not None:
        selection = f"TCP port {args.server_port}"
    elif args.filter:
        selection = f"filter '{args.filter}'"
    else:
        selection = "every TCP connection"
    meta = {
        "file": str(capture),
        "file_name": capture.name,
        "format": res["format"],
        "packets": res["packets"],
        "tcp": res["tcp"],
        "matched": res["matched"],
        "selection": selection,
        "server_port": args.server_port,
        "filter": args.filter,
        "gap_ms": gap_ms,
        "idle_timeout_s": res["idle_timeout_s"],
        "max_packets": args.max_packets,
        "connections": len(res["flows"]),
        "live_max": res["live_max"],
        "wall_s": wall,
        "version": __version__,
        "git_rev": git_revision(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": model,
        "summary": summary(res["pooled"]),
        "histogram_sums": {
            k: {f: h[f] for f in ("n", "sum", "sum_ln", "sum_ln2", "below_min")}
            for k, h in res["pooled"]["gaps"].items()
        },
    }
    out = Path(args.out) if args.out else Path("results") / f"analyze-{capture.stem}"
    out.mkdir(parents=True, exist_ok=True)
    for name, df in records_tables(res).items():
        df.to_parquet(out / f"{name}.parquet", index=False)
    write_text_atomic(out / "analysis.json", dumps_json(meta, indent=1) + "\n")
    if not args.no_report:
        write_text_atomic(out / "report.html", analyze_html(res, model, meta))
    if args.json:
        doc = {
            "flows": res["flows"],
            "model": model,
            "packets": {"total": res["packets"], "tcp": res["tcp"], "matched": res["matched"]},
            "file": str(capture),
            "format": res["format"],
            "gap_ms": gap_ms,
            "summary": meta["summary"],
            "out": str(out),
            "version": __version__,
        }
        print(dumps_json(doc))
        return 0
    print(summary_text(res, model, str(out)))
    return 0
