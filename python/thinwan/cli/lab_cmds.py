"""The ``lab`` and ``validate`` subcommands of ``thinwan``.

Each handler returns an exit status; user mistakes raise
:class:`~thinwan.config.files.ScenarioError` or
:class:`~thinwan.substrates.lab.netns.LabError`, which ``thinwan``'s main prints as
``thinwan: error: …``. ``lab up``'s link options are ``thinwan-link``'s own: they are
handed to it unparsed (``thinwan-link --check`` resolves them first).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["add_lab_subcommands", "add_validate_subcommand"]

LAB_HELP = """Real Linux TCP and real applications across thinwan's user-space WAN emulator:
a server namespace and a client namespace joined by thinwan-link (rate, delay, jitter,
loss, queue). Needs root. See docs/lab.md."""


def add_lab_subcommands(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``lab`` (with up/exec/down/clean/status/run) to a subparsers object."""
    from . import int_at_least, positive_float, seed_value

    lab = subparsers.add_parser("lab", help="real Linux TCP across the WAN emulator (needs root)", description=LAB_HELP)
    cmds = lab.add_subparsers(dest="lab_command", metavar="LAB_COMMAND", required=True)

    up = cmds.add_parser("up", help="bring up namespaces + emulator and say how to reach them")
    up.add_argument("scenario", nargs="?", metavar="SCENARIO.toml", help="take link and TCP settings from a scenario")
    _link_options(up)
    up.add_argument("--json", action="store_true", help="print the lab's state as JSON")
    up.set_defaults(func=_cmd_up)

    ex = cmds.add_parser("exec", help="run a command in the server or client namespace")
    ex.add_argument("side", choices=["server", "client"], help="the namespace to run in")
    ex.add_argument("--id", help="lab id (default: the only live lab)")
    # REMAINDER takes everything after the side, `--id ID` included when it comes there:
    # exec_command() takes it back out.
    ex.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND…", help="the command and its arguments")
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
    rn.add_argument("--runs", type=int_at_least(1), help="number of runs (overrides scenario.runs)")
    rn.add_argument("--seed", type=seed_value, help="base seed (overrides scenario.seed)")
    rn.add_argument("--duration", type=positive_float, metavar="S", help="override scenario.duration_s")
    rn.add_argument("--out", metavar="DIR", help="output directory (default: results/<name>-lab)")
    rn.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    rn.add_argument("--pcap", action="store_true", help="also write server.pcap / client.pcap per run")
    rn.add_argument("--no-report", action="store_true", help="do not write report.html")
    rn.add_argument("--quiet", action="store_true", help="no progress or log lines on stderr")
    rn.set_defaults(func=_cmd_run)
    return lab


def add_validate_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``validate SCENARIO.toml``: simulator and lab side by side."""
    from . import int_at_least, positive_float, seed_value

    v = subparsers.add_parser("validate", help="run a scenario in the simulator and the lab, side by side (needs root)")
    v.add_argument("scenario", metavar="SCENARIO.toml", help="scenario file, run unchanged on both substrates")
    v.add_argument("--runs", type=int_at_least(1), help="runs on each substrate (overrides scenario.runs)")
    v.add_argument("--seed", type=seed_value, help="base seed (overrides scenario.seed)")
    v.add_argument("--duration", type=positive_float, metavar="S", help="override scenario.duration_s")
    v.add_argument("--out", metavar="DIR", help="output directory (default: results/<name>-validate)")
    v.add_argument(
        "--tolerance",
        action=_ToleranceAction,
        metavar="METRIC=SPEC",
        help="the agreement verdict's tolerance for one metric: 25%% (relative), x2 (a factor) or off; "
        "repeatable (defaults: " + _default_tolerances() + ")",
    )
    v.add_argument(
        "--fail-on-disagreement",
        action="store_true",
        help=f"exit with status {EXIT_DISAGREEMENT} when a judged metric is outside its tolerance "
        "(default: 0, a disagreement is a finding)",
    )
    v.add_argument(
        "--json", action="store_true", help="print one JSON object (both summaries, agreement, tolerance) on stdout"
    )
    v.add_argument("--quiet", action="store_true", help="no progress or log lines on stderr")
    v.set_defaults(func=_cmd_validate, tolerance=None)
    return v


# validate's exit status with --fail-on-disagreement when a judged metric differs (1 is a
# failed run, 2 a usage error: thinwan.cli).
EXIT_DISAGREEMENT = 3


class _ToleranceAction(argparse.Action):
    """``--tolerance METRIC=SPEC``, parsed once into the verdicts' tolerances (the
    defaults with each given one replaced); a metric given twice is an error."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, value: Any, option: str | None = None) -> None:
        from ..analysis.agreement import DEFAULT_TOLERANCES, parse_tolerance

        try:
            metric, tolerance = parse_tolerance(str(value))
        except ValueError as e:
            raise argparse.ArgumentError(self, str(e)) from None
        given = getattr(namespace, "_tolerance_given", set())
        if metric in given:
            raise argparse.ArgumentError(self, f"{metric} given twice")
        given.add(metric)
        namespace._tolerance_given = given
        current = getattr(namespace, self.dest) or dict(DEFAULT_TOLERANCES)
        setattr(namespace, self.dest, {**current, metric: tolerance})


def _default_tolerances() -> str:
    from ..analysis.agreement import DEFAULT_TOLERANCES

    # argparse %-formats help strings.
    return ", ".join(f"{k} {t.spec}" for k, t in DEFAULT_TOLERANCES.items()).replace("%", "%%")


# ---------------------------------------------------------------------------------------


def _link_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "link (thinwan-link's own options, handed to it as given: see thinwan-link --help; they override the scenario)"
    )
    for flag, metavar, text in (
        ("--rate", "RATE", "e.g. 10mbit (0 = unshaped)"),
        ("--delay", "DELAY", "one-way delay, e.g. 20ms"),
        ("--jitter", "JITTER", "none | uniform:10%% | uniform:2ms | normal:1ms"),
        ("--loss", "P", "i.i.d. loss probability, both directions"),
        ("--ge", "P,R[,LG,LB]", "Gilbert–Elliott loss"),
        ("--queue-packets", "N", "queue limit, packets (0 = none)"),
        ("--queue-bytes", "N", "queue limit, bytes (0 = none)"),
        (
            "--queue",
            "DISCIPLINE",
            "queue discipline: droptail | priority | fq_codel | classes | qds (classes and qds need --rate; "
            "their keys and FQ-CoDel's come from the scenario; qds runs on server→client only, the ACK "
            "direction stays droptail)",
        ),
        ("--classifier", "label|gap[:MS]", "priority classifier: label (IP DSCP ≠ 0) or gap with its threshold"),
        ("--seed", "N", "seed of loss and jitter"),
    ):
        g.add_argument(flag, metavar=metavar, help=text, dest="link_args", action=_LinkOption)
    g.add_argument("--reorder", nargs=0, help="let jitter reorder packets", dest="link_args", action=_LinkOption)
    g.add_argument("--cc", help="congestion control in both namespaces (default reno)")
    g.add_argument("--pcap", action="store_true", help="capture both sides to pcap")
    g.add_argument("--no-events", action="store_true", help="no per-packet event log")


class _LinkOption(argparse.Action):
    """Collects a link option, unparsed and in order, for ``thinwan-link``."""

    def __call__(
        self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: str | None = None
    ) -> None:
        args = list(getattr(namespace, self.dest, None) or [])
        args.append(str(option_string))
        if isinstance(values, str):
            args.append(values)
        setattr(namespace, self.dest, args)


def _lab_spec(args: argparse.Namespace) -> Any:
    """The lab of ``args``: the scenario's (or the defaults), its link options resolved
    by ``thinwan-link --check`` before anything is created."""
    from dataclasses import replace

    from ..config.files import ScenarioError
    from ..config.scenario import load_scenario
    from ..substrates.lab.linkspec import LabSpec, LinkCheckError, LinkSpec, TcpSettings, check_link_args, lab_spec

    scenario = load_scenario(args.scenario) if args.scenario else None
    spec = lab_spec(scenario) if scenario else LabSpec(link=LinkSpec.symmetric(), tcp=TcpSettings(), notes=())
    if args.link_args:
        try:
            spec = replace(spec, link=check_link_args(spec.link, args.link_args))
        except LinkCheckError as e:
            raise ScenarioError(f"lab up: {e}") from None
    if args.cc:
        spec = replace(spec, tcp=replace(spec.tcp, congestion_control=args.cc))
    pcap = args.pcap or (scenario is not None and scenario.lab.pcap)
    return spec, pcap


def _cmd_up(args: argparse.Namespace) -> int:
    from ..substrates.lab import netns
    from ..substrates.lab.topology import Lab

    spec, pcap = _lab_spec(args)
    lab = Lab(spec, events=not args.no_events, pcap=pcap)
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
    from ..substrates.lab.netns import LabError
    from ..substrates.lab.topology import current_lab

    lab_id, command = exec_command(args)
    if not command:
        raise LabError("lab exec: give a command after --")
    st = current_lab(lab_id)
    ns = st["netns"][args.side]
    os.execvp("ip", ["ip", "netns", "exec", ns, *command])
    return 0  # not reached


def exec_command(args: argparse.Namespace) -> tuple[str | None, list[str]]:
    """``lab exec``'s lab id and command: ``--id ID`` may come before the side or after
    it (where REMAINDER swallowed it); the command starts after ``--`` or at the first
    word that is not ``--id``."""
    lab_id, rest = args.id, list(args.command)
    while rest and (rest[0] == "--id" or rest[0].startswith("--id=")):
        if rest[0] == "--id":
            lab_id, rest = (rest[1] if len(rest) > 1 else None), rest[2:]
        else:
            lab_id, rest = rest[0].removeprefix("--id="), rest[1:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    return lab_id, rest


def _cmd_down(args: argparse.Namespace) -> int:
    from ..substrates.lab.topology import down

    for r in down(args.id):
        print(f"removed {r}")
    return 0


def _cmd_clean(args: argparse.Namespace) -> int:
    from ..substrates.lab import netns

    netns.require_root()
    removed = netns.clean(force=args.all)
    for r in removed:
        print(f"removed {r}")
    if not removed:
        print("nothing to clean")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from ..substrates.lab import netns

    netns.require_root()
    labs = netns.list_labs()
    if args.json:
        print(json.dumps(labs))
        return 0
    if not labs:
        print("no labs")
    for s in labs:
        state = "up" if s["alive"] else "dead (thinwan lab clean removes it)"
        print(f"{s['id']}  {state}  owner pid {s.get('owner_pid')}  {s.get('workdir', '')}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from ..execute.labruns import run_lab_scenario
    from ..records.meta import dumps_json
    from ..report.text import summary_table

    scenario = _scenario(args)
    if args.pcap:
        scenario = scenario.with_values({"lab.pcap": True})
    out = Path(args.out) if args.out else Path("results") / f"{scenario.name}-lab"
    result = run_lab_scenario(
        scenario, out, progress=not args.quiet, finish=None if args.no_report else _report(scenario)
    )
    document = result.document
    if args.json:
        print(dumps_json(document))
        return 0
    seeds = document["seeds"]
    print(f"{scenario.name} (lab): {len(seeds)} run(s), seeds {seeds[0]}–{seeds[-1]}")
    print(summary_table(document["summary"], scenario))
    print()
    print(f"report: {out / 'report.html'}" if not args.no_report else f"results: {out}")
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from ..analysis.agreement import DEFAULT_TOLERANCES
    from ..execute.labruns import validate
    from ..records.meta import dumps_json
    from ..report.agreement_page import write_agreement_page
    from ..report.text import validation_table

    scenario = _scenario(args)
    out = Path(args.out) if args.out else Path("results") / f"{scenario.name}-validate"
    runs = scenario.scenario.runs
    doc, sim, lab = validate(
        scenario,
        out,
        progress=not args.quiet,
        finish=_report(scenario),
        tolerances=args.tolerance if args.tolerance is not None else DEFAULT_TOLERANCES,
        page=lambda stage, d: write_agreement_page(stage, d, runs),
    )
    status = _validate_status(doc, args.fail_on_disagreement)
    if args.json:
        print(dumps_json(doc))
        return status
    print(validation_table(doc, runs))
    if "by_type" in doc:
        print("\nper application type (sim | lab):")
        metrics = ("rtt_mean_ms", "rtt_sd_ms", "share_within_qt", "share_within_1_2qt", "throughput_mbps")
        print(f"  {'type':<12}" + "".join(f"{m:>26}" for m in metrics))
        for t, row in doc["by_type"].items():
            cells = "".join(f"{row[m]['sim']:>12.3f} | {row[m]['lab']:<11.3f}" for m in metrics if m in row)
            print(f"  {t:<12}{cells}")
    print(f"\nreports: {out / 'report.html'} (agreement)  {out / 'sim' / 'report.html'}  {out / 'lab' / 'report.html'}")
    return status


def _validate_status(doc: dict[str, Any], fail_on_disagreement: bool) -> int:
    """0 when the comparison ran; :data:`EXIT_DISAGREEMENT` with ``--fail-on-disagreement``
    when a judged metric is outside its tolerance."""
    differs = any(a["ok"] is False for a in doc["agreement"].values())
    return EXIT_DISAGREEMENT if fail_on_disagreement and differs else 0


def _report(scenario: Any) -> Any:
    """A ``finish`` hook: the run report, written before the results are swapped in."""
    from ..report.run_page import write_run_report

    return lambda directory, result: write_run_report(
        directory, scenario, result.digests, result.document["summary"], result.document.get("sim")
    )


def _scenario(args: argparse.Namespace) -> Any:
    from ..config.scenario import load_scenario

    scenario = load_scenario(args.scenario).with_overrides(runs=args.runs, seed=args.seed)
    if args.duration is not None:
        scenario = scenario.with_values({"scenario.duration_s": args.duration})
    return scenario
