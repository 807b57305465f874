"""The ``desktop`` subcommands of ``thinwan``: ``analyze`` (any capture), ``run`` (the
slow-motion benchmark), ``up``/``down`` (one platform for a user to look at).

Handlers return an exit status; a user's mistake (a bad capture, a bad benchmark file, an
unknown platform) raises ScenarioError (exit 2), a platform or lab failure exits 1.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

__all__ = ["add_desktop_subcommands"]

HELP = """Real remote desktops (TigerVNC, x11vnc, X11, xrdp) across the emulated WAN, and the
slow-motion latency benchmark measured from the client's packet capture (docs/desktop.md).
'analyze' works on any capture of any remote-display protocol and needs no root."""


def add_desktop_subcommands(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``desktop`` (analyze/run/up/down) to a subparsers object."""
    from ..config.desktop_defaults import DEFAULT_IDLE_MS
    from . import port_number, positive_number

    d = subparsers.add_parser("desktop", help="remote-desktop latency benchmark and capture analysis", description=HELP)
    cmds = d.add_subparsers(dest="desktop_command", metavar="DESKTOP_COMMAND", required=True)

    a = cmds.add_parser(
        "analyze",
        help="split a capture into operations at idle gaps: latency, bytes, round trips",
        description="Split the display traffic of a pcap/pcapng capture into operations at idle gaps and report "
        "each one's latency (last server→client − first client→server payload packet), bytes, packets and round "
        "trips. No protocol is decoded.",
    )
    a.add_argument("capture", metavar="CAPTURE.pcap", help="pcap or pcapng file")
    a.add_argument("--server-port", type=port_number, required=True, metavar="N", help="TCP port of the display server")
    a.add_argument("--server-addr", metavar="A", help="its address (default: any address with that port)")
    a.add_argument(
        "--port-at-client",
        action="store_true",
        help="the port listens on the user's side (plain X11: the X server is the display); packets to it are updates",
    )
    a.add_argument(
        "--idle-ms",
        type=positive_number("milliseconds"),
        default=DEFAULT_IDLE_MS,
        metavar="M",
        help=f"silence that ends an operation (default {DEFAULT_IDLE_MS:g} ms)",
    )
    a.add_argument("--parquet", metavar="FILE", help="also write the operations as Parquet (docs/desktop.md)")
    a.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    a.set_defaults(func=_cmd_analyze)
    add_run_up_down(cmds)
    return d


def _cmd_analyze(args: argparse.Namespace) -> int:
    from ..config.files import ScenarioError
    from ..report.desktop_page import ops_table
    from ..substrates.desktop.opsplit import CaptureError, split_capture

    if args.server_addr:
        import ipaddress

        try:
            ipaddress.ip_address(args.server_addr)
        except ValueError:
            raise ScenarioError(f"--server-addr: not an IP address: {args.server_addr!r}") from None
    try:
        res = split_capture(
            args.capture,
            args.server_port,
            addr=args.server_addr,
            port_at_client=args.port_at_client,
            idle_ms=args.idle_ms,
        )
    except CaptureError as e:
        raise ScenarioError(str(e)) from None
    if args.parquet:
        out = Path(args.parquet)
        out.parent.mkdir(parents=True, exist_ok=True)
        res.ops.to_parquet(out, index=False)
    if args.json:
        print(json.dumps({"meta": res.meta, "operations": _records(res.ops)}, allow_nan=False))
        return 0
    print(ops_table(res.ops, res.meta))
    return 0


def _records(df: Any) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts (NaN → null)."""
    rows = []
    for r in df.to_dict("records"):
        rows.append({k: (None if isinstance(v, float) and math.isnan(v) else _plain(v)) for k, v in r.items()})
    return rows


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return v


def add_run_up_down(cmds: Any) -> None:
    """``desktop run``, ``up``, ``down`` (and the hidden holder behind ``up``)."""
    from ..config.desktop_defaults import DEFAULT_REPEAT

    r = cmds.add_parser(
        "run",
        help="the slow-motion latency benchmark: platforms × environments × operations (needs root)",
        description="Run every platform of BENCH.toml in every environment, each operation in slow motion, and "
        "report latency, bytes and round trips from the client's capture (docs/desktop.md).",
    )
    r.add_argument("bench", metavar="BENCH.toml", help="benchmark file (e.g. scenarios/laineh2006/latency.toml)")
    r.add_argument("--platform", metavar="P,…", help="only these platforms (tigervnc, x11vnc, x11, xrdp)")
    r.add_argument("--env", metavar="E,…", help="only these environments (built-in or the file's)")
    r.add_argument(
        "--repeat",
        type=_int_at_least_1,
        metavar="N",
        help=f"repetitions per operation (default: the file's, else {DEFAULT_REPEAT})",
    )
    r.add_argument(
        "--pages",
        type=_page_range,
        metavar="A-B",
        help="the web benchmark on its pages A to B only, each pass (default: all of the file's); "
        "a slow cell's pages can so run in slices, each into its own --out",
    )
    r.add_argument("--out", metavar="DIR", help="output directory (default: results/<benchmark name>)")
    r.add_argument(
        "--client-timing",
        choices=["fail", "report"],
        help="an input whose analyser latency and client-screen timing disagree (5 %% or 1 ms) fails the run "
        "(fail), or is only recorded in checks.client_timing (report); default: the file's, else fail",
    )
    r.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    r.add_argument("--no-report", action="store_true", help="do not write report.html")
    r.add_argument("--quiet", action="store_true", help="no progress or log lines on stderr")
    r.set_defaults(func=_cmd_run)

    u = cmds.add_parser("up", help="bring one platform up across the WAN until 'thinwan desktop down' (needs root)")
    u.add_argument("platform", choices=["tigervnc", "x11vnc", "x11", "xrdp"], help="the platform")
    u.add_argument("--env", default="wan", metavar="E", help="a built-in environment (default wan)")
    u.add_argument("--bench", metavar="BENCH.toml", help="take the environment (and desktop settings) from this file")
    u.add_argument("--json", action="store_true", help="print the desktop's state as JSON")
    u.set_defaults(func=_cmd_up)

    dn = cmds.add_parser("down", help="tear down desktops brought up with 'thinwan desktop up' (and their leftovers)")
    dn.add_argument("id", nargs="?", help="desktop id (default: all)")
    dn.set_defaults(func=_cmd_down)

    h = cmds.add_parser("_hold")  # the process behind `up` (not for users)
    h.add_argument("platform")
    h.add_argument("--env", required=True)
    h.add_argument("--bench")
    h.add_argument("--state", required=True)
    h.set_defaults(func=_cmd_hold)


def _int_at_least_1(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be ≥ 1, got {v}")
    return v


def _page_range(text: str) -> tuple[int, int]:
    first, sep, last = text.partition("-")
    try:
        a, b = int(first), int(last if sep else first)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A-B (page numbers, e.g. 9-22), got {text!r}") from None
    if not 1 <= a <= b:
        raise argparse.ArgumentTypeError(f"expected 1 ≤ A ≤ B, got {text!r}")
    return a, b


def _names(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def _cmd_run(args: argparse.Namespace) -> int:
    import sys

    from ..analysis.desktop_ops import summarize, wan_minus_lan
    from ..config.desktop_bench import load_bench
    from ..execute.desktop_runs import run_bench
    from ..records.meta import dumps_json
    from ..report.desktop_page import delta_table, results_table, write_desktop_report
    from ..substrates.lab import netns

    bench = load_bench(args.bench).select(
        _names(args.platform), _names(args.env), args.repeat, args.client_timing, args.pages
    )
    netns.require_root()
    out = Path(args.out) if args.out else Path("results") / bench.name

    def log(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr)

    result = run_bench(bench, out, progress=not args.quiet, log=log)
    if not args.no_report:
        write_desktop_report(out, result.document, result.inputs)
    if args.json:
        print(dumps_json(result.document))
    else:
        for name, v in result.document["platforms"].items():
            print(f"{name}: {v}")
        if len(result.inputs):
            s = summarize(result.inputs)
            print()
            print(results_table(s))
            if "lan" in bench.envs and len(bench.envs) > 1:
                print()
                print(delta_table(wan_minus_lan(s, {n: e.rtt_ms for n, e in bench.envs.items()})))
        print()
        print(f"report: {out / 'report.html'}" if not args.no_report else f"results: {out}")
    for f in result.failures:
        print(f"thinwan: run failed: {f}", file=sys.stderr)
    return 1 if result.failures else 0


def _env(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    from ..config.desktop_bench import BUILTIN_ENVS, load_bench
    from ..config.files import ScenarioError

    if args.bench:
        bench = load_bench(args.bench)
        if args.env not in bench.known_envs:
            raise ScenarioError(f"--env: unknown environment {args.env!r} (known: {', '.join(bench.known_envs)})")
        return bench.known_envs[args.env], bench.desktop
    if args.env not in BUILTIN_ENVS:
        raise ScenarioError(f"--env: unknown environment {args.env!r} (built-in: {', '.join(BUILTIN_ENVS)})")
    return BUILTIN_ENVS[args.env], {}


def _cmd_up(args: argparse.Namespace) -> int:
    from ..execute.desktop_hold import start_holder

    _env(args)  # a bad --env or --bench fails here, before anything starts
    state = start_holder(args.platform, args.env, args.bench)
    if args.json:
        print(json.dumps(state))
    else:
        print(state["describe"])
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    from ..execute.desktop_hold import down

    removed = down(args.id)
    for r in removed:
        print(f"removed {r}")
    if not removed:
        print("no desktop is up")
    return 0


def _cmd_hold(args: argparse.Namespace) -> int:
    from ..execute.desktop_hold import hold

    env, desktop = _env(args)
    return hold(args.platform, args.env, env, desktop, Path(args.state))
