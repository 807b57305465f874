"""The ``lab`` and ``validate`` subcommands of ``thinwan``.

Each handler returns an exit status; user mistakes raise :class:`~thinwan.scenario.ScenarioError`
or :class:`~thinwan.lab.LabError`, which ``thinwan``'s main prints as ``thinwan: error: …``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..scenario import ScenarioError
from . import netns
from .netns import LabError
from .spec import JITTER_HELP, LabOptions, LabSpec, LinkSpec, TcpSettings, lab_spec, load_lab_scenario

__all__ = ["add_lab_subcommands", "add_validate_subcommand", "main"]

LAB_HELP = """Real Linux TCP and real applications across thinwan's user-space WAN emulator:
a server namespace and a client namespace joined by thinwan-link (rate, delay, jitter,
loss, queue). Needs root. See docs/lab.md."""


def add_lab_subcommands(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``lab`` (with up/exec/down/clean/status/run) to a subparsers object."""
    lab = subparsers.add_parser("lab", help="real Linux TCP across the WAN emulator (needs root)", description=LAB_HELP)
    cmds = lab.add_subparsers(dest="lab_command", metavar="LAB_COMMAND", required=True)

    up = cmds.add_parser("up", help="bring up namespaces + emulator and say how to reach them")
    up.add_argument("scenario", nargs="?", metavar="SCENARIO.toml", help="take link and TCP settings from a scenario")
    _link_options(up)
    up.add_argument("--json", action="store_true", help="print the lab's state as JSON")
    up.set_defaults(func=_cmd_up)

    ex = cmds.add_parser("exec", help="run a command in the server or client namespace")
    ex.add_argument("side", choices=["server", "client"], help="the namespace to run in")
    ex.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND…", help="the command and its arguments")
    ex.add_argument("--id", help="lab id (default: the only live lab)")
    ex.set_defaults(func=_cmd_exec)

    dn = cmds.add_parser("down", help="tear down a lab")
    dn.add_argument("id", nargs="?", help="lab id (default: the only live lab)")
    dn.set_defaults(func=_cmd_down)

    cl = cmds.add_parser("clean", help="remove leftovers of crashed labs")
    cl.add_argument("--all", action="store_true", help="also remove labs that are still running")
    cl.set_defaults(func=_cmd_clean)

    st = cmds.add_parser("status", help="list labs")
    st.add_argument("--json", action="store_true", help="print the labs as one JSON object")
    st.set_defaults(func=_cmd_status)

    rn = cmds.add_parser("run", help="run a scenario on the lab; same summary and report as 'thinwan run'")
    rn.add_argument(
        "scenario", metavar="SCENARIO.toml", help="scenario file (docs/scenario.md; [lab] keys: docs/lab.md)"
    )
    rn.add_argument("--runs", type=int, help="number of runs (overrides scenario.runs)")
    rn.add_argument("--seed", type=int, help="base seed (overrides scenario.seed)")
    rn.add_argument("--duration", type=float, metavar="S", help="override scenario.duration_s")
    rn.add_argument("--out", metavar="DIR", help="output directory (default: results/<name>-lab)")
    rn.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    rn.add_argument("--pcap", action="store_true", help="also write server.pcap / client.pcap per run")
    rn.add_argument("--no-report", action="store_true", help="do not write report.html")
    rn.add_argument("--quiet", action="store_true", help="no progress or log lines on stderr")
    rn.set_defaults(func=_cmd_run)
    return lab


def add_validate_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``validate SCENARIO.toml``: simulator and lab side by side."""
    v = subparsers.add_parser("validate", help="run a scenario in the simulator and the lab, side by side (needs root)")
    v.add_argument("scenario", metavar="SCENARIO.toml", help="scenario file, run unchanged on both substrates")
    v.add_argument("--runs", type=int, help="runs on each substrate (overrides scenario.runs)")
    v.add_argument("--seed", type=int, help="base seed (overrides scenario.seed)")
    v.add_argument("--duration", type=float, metavar="S", help="override scenario.duration_s")
    v.add_argument("--out", metavar="DIR", help="output directory (default: results/<name>-validate)")
    v.add_argument("--json", action="store_true", help="print one JSON object (both summaries) on stdout")
    v.add_argument("--quiet", action="store_true", help="no progress or log lines on stderr")
    v.set_defaults(func=_cmd_validate)
    return v


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m thinwan.lab.cli lab …`` / ``… validate …``: these commands on their own."""
    parser = argparse.ArgumentParser(prog="thinwan")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_lab_subcommands(sub)
    add_validate_subcommand(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (ScenarioError, LabError) as e:
        for line in str(e).splitlines():
            print(f"thinwan: error: {line}", file=sys.stderr)
        return 2 if isinstance(e, ScenarioError) else 1
    except KeyboardInterrupt:
        print("thinwan: error: interrupted", file=sys.stderr)
        return 130


# ---------------------------------------------------------------------------------------


def _link_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("link (both directions unless noted; override the scenario)")
    g.add_argument("--rate", help="e.g. 10mbit (0 = unshaped)")
    g.add_argument("--delay", help="one-way delay, e.g. 20ms")
    g.add_argument("--jitter", help=JITTER_HELP)
    g.add_argument("--reorder", action="store_true", help="let jitter reorder packets")
    g.add_argument("--loss", type=float, help="i.i.d. loss probability, server→client")
    g.add_argument("--loss-rev", type=float, help="i.i.d. loss probability, client→server")
    g.add_argument("--ge", help="Gilbert–Elliott loss server→client: P,R[,LOSS_GOOD,LOSS_BAD]")
    g.add_argument("--queue-packets", type=int, help="queue limit, packets (0 = none)")
    g.add_argument("--queue-bytes", type=int, help="queue limit, bytes (0 = none)")
    g.add_argument("--queue", choices=["droptail", "priority"], help="queue discipline")
    g.add_argument(
        "--classifier",
        metavar="label|gap[:MS]",
        help="priority classifier: label (IP DSCP ≠ 0 is interactive) or gap with its threshold (default 6.31 ms)",
    )
    g.add_argument("--cc", help="congestion control in both namespaces (default reno)")
    g.add_argument("--seed", type=int, help="seed of loss and jitter")
    g.add_argument("--pcap", action="store_true", help="capture both sides to pcap")
    g.add_argument("--no-events", action="store_true", help="no per-packet event log")


def _spec_from_args(args: argparse.Namespace) -> tuple[LabSpec, LabOptions]:
    from dataclasses import replace

    if args.scenario:
        scenario, opts = load_lab_scenario(args.scenario)
        spec = lab_spec(scenario, opts)
    else:
        opts = LabOptions()
        spec = LabSpec(link=LinkSpec.symmetric(), tcp=TcpSettings(), notes=())
    fwd, rev = spec.link.fwd, spec.link.rev
    changes: dict[str, Any] = {}
    if args.rate is not None:
        changes["rate_bps"] = _parse_rate(args.rate)
    if args.delay is not None:
        changes["delay_ms"] = _parse_ms(args.delay)
    if args.jitter is not None:
        changes["jitter"] = args.jitter
    if args.reorder:
        changes["reorder"] = True
    if args.queue_packets is not None:
        changes["queue_packets"] = args.queue_packets
    if args.queue_bytes is not None:
        changes["queue_bytes"] = args.queue_bytes
    if args.queue is not None:
        changes["discipline"] = args.queue
    if args.classifier is not None:
        kind, _, gap = args.classifier.partition(":")
        if kind not in ("label", "gap") or (gap and kind != "gap"):
            raise ScenarioError("--classifier: expected label, gap or gap:MS")
        changes["priority_classifier"] = kind
        if gap:
            changes["classifier_gap_ms"] = _parse_ms(gap)
    fwd, rev = replace(fwd, **changes), replace(rev, **changes)
    if args.loss is not None:
        fwd = replace(fwd, loss=args.loss)
    if args.loss_rev is not None:
        rev = replace(rev, loss=args.loss_rev)
    if args.ge:
        v = [float(x) for x in args.ge.split(",")]
        if len(v) not in (2, 4):
            raise ScenarioError("--ge: expected P,R or P,R,LOSS_GOOD,LOSS_BAD")
        v += [0.0, 1.0] if len(v) == 2 else []
        fwd = replace(fwd, ge=(v[0], v[1], v[2], v[3]))
    link = LinkSpec(fwd=fwd, rev=rev, seed=args.seed if args.seed is not None else spec.link.seed)
    tcp = replace(spec.tcp, congestion_control=args.cc) if args.cc else spec.tcp
    return LabSpec(link=link, tcp=tcp, notes=spec.notes), opts


def _cmd_up(args: argparse.Namespace) -> int:
    from .topology import Lab

    spec, opts = _spec_from_args(args)
    lab = Lab(spec, events=not args.no_events, pcap=args.pcap or opts.pcap)
    try:
        lab.up(detach=True)
    except BaseException:
        lab.down()
        raise
    if args.json:
        print(json.dumps(netns.read_state(lab.id)))
    else:
        print(lab.describe())
        for n in lab.notes:
            print(f"  note: {n}")
    return 0


def _cmd_exec(args: argparse.Namespace) -> int:
    from .topology import current_lab

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise LabError("lab exec: give a command after --")
    st = current_lab(args.id)
    ns = st["netns"][args.side]
    os.execvp("ip", ["ip", "netns", "exec", ns, *command])
    return 0  # not reached


def _cmd_down(args: argparse.Namespace) -> int:
    from .topology import down

    for r in down(args.id):
        print(f"removed {r}")
    return 0


def _cmd_clean(args: argparse.Namespace) -> int:
    netns.require_root()
    removed = netns.clean(force=args.all)
    for r in removed:
        print(f"removed {r}")
    if not removed:
        print("nothing to clean")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    netns.require_root()
    labs = netns.list_labs()
    if args.json:
        print(json.dumps(labs))
        return 0
    if not labs:
        print("no labs")
    for s in labs:
        print(
            f"{s['id']}  {'up' if s['alive'] else 'dead (thinwan lab clean removes it)'}  owner pid {s.get('owner_pid')}  {s.get('workdir', '')}"
        )
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from .run import print_result, run_lab_scenario

    scenario, opts = load_lab_scenario(args.scenario)
    scenario = _overrides(scenario, args)
    if args.pcap:
        from dataclasses import replace

        opts = replace(opts, pcap=True)
    out = Path(args.out) if args.out else Path("results") / f"{scenario.name}-lab"
    document = run_lab_scenario(scenario, opts, out, progress=not args.quiet, report=not args.no_report)
    print_result(document, scenario, args.json, out, report=not args.no_report)
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from .run import validate

    scenario, opts = load_lab_scenario(args.scenario)
    scenario = _overrides(scenario, args)
    out = Path(args.out) if args.out else Path("results") / f"{scenario.name}-validate"
    validate(scenario, opts, out, as_json=args.json, progress=not args.quiet)
    return 0


def _overrides(scenario: Any, args: argparse.Namespace) -> Any:
    scenario = scenario.with_overrides(runs=args.runs, seed=args.seed)
    if args.duration is not None:
        scenario = scenario.with_values({"scenario.duration_s": args.duration})
    return scenario


def _parse_rate(text: str) -> int:
    t = text.strip().lower()
    if t in ("0", "inf", "unlimited"):
        return 0
    units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3, "bit": 1.0, "g": 1e9, "m": 1e6, "k": 1e3}
    for u, mult in units.items():
        if t.endswith(u):
            try:
                return int(round(float(t[: -len(u)]) * mult))
            except ValueError:
                break
    try:
        return int(round(float(t)))
    except ValueError:
        raise ScenarioError(f"--rate: bad rate {text!r} (try 10mbit)") from None


def _parse_ms(text: str) -> float:
    t = text.strip().lower()
    for u, mult in (("ms", 1.0), ("us", 1e-3), ("s", 1e3)):
        if t.endswith(u):
            try:
                return float(t[: -len(u)]) * mult
            except ValueError:
                break
    try:
        return float(t)
    except ValueError:
        raise ScenarioError(f"--delay: bad duration {text!r} (try 20ms)") from None


if __name__ == "__main__":
    sys.exit(main())
