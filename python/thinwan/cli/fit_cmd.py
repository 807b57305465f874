"""``thinwan fit CAPTURE`` and ``thinwan validate-model CAPTURE SCENARIO.toml``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_fit_subcommands"]

FIT_DESCRIPTION = """Fit the thin-client model to a capture and write a scenario.

Reads CAPTURE (pcap or pcapng), splits each TCP connection's response packets into
interactive and bulk flows by the gap rule (as `thinwan analyze` does), fits per
transition a gap law (lognormal, exponential, gamma, Weibull; AIC, KS distance and
chi-square of each), the interactive and bulk size laws, the block-length distribution
with a Pareto tail (shape by MLE, 95 % profile-likelihood interval), the intra-block gap
and the spread of activity across sessions, and writes a scenario whose [traffic] is
the fitted model, every fitted value commented with where it came from
(docs/model.md, "Fitting a capture")."""

VALIDATE_DESCRIPTION = """How much does the fitted model lose against the capture itself?

Runs the dumbbell of SCENARIO.toml twice with the same topology, duration and seeds: once
replaying the capture's sessions (traffic.model = "pcap": every server writes what the
capture's server wrote, when it wrote it) and once with the scenario's [traffic] model,
and writes a page with the interactive delay CCDFs side by side and r_I150 / r_I1000 of
both. Both runs label messages by the gap rule (a write less than --gap-ms after the
previous one of its connection joins its flow; flows of one write are interactive), so
the replay and the model are measured alike (docs/model.md, "Fitting a capture")."""


def add_fit_subcommands(commands: Any) -> None:
    """Add ``fit`` and ``validate-model`` to the ``thinwan`` command."""
    from . import int_at_least, port_number, positive_number

    p = commands.add_parser(
        "fit",
        help="fit the thin-client model to a capture, write a scenario",
        description=FIT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("capture", metavar="CAPTURE.pcap", help="pcap or pcapng capture")
    _capture_options(p, positive_number)
    p.add_argument(
        "--out",
        metavar="SCENARIO.toml",
        help="scenario file to write (default: fitted-<capture name>.toml in the current directory)",
    )
    p.add_argument(
        "--base",
        metavar="SCENARIO.toml",
        help="scenario whose sections other than [traffic] the fitted file keeps "
        "(default: scenarios/ogawa2011/large-buffer.toml of this checkout)",
    )
    p.add_argument(
        "--min-session-s",
        type=positive_number("seconds"),
        default=30.0,
        metavar="S",
        help="sessions (connections) shorter than this do not enter the activity spread (default 30)",
    )
    p.add_argument(
        "--min-session-flows",
        type=int_at_least(2),
        default=20,
        metavar="N",
        help="nor do sessions of fewer flows (default 20)",
    )
    p.add_argument("--max-packets", type=int_at_least(1), metavar="N", help="read only the first N packets")
    p.add_argument("--json", action="store_true", help="print one JSON object (keys, notes, every fit) on stdout")
    p.set_defaults(func=_cmd_fit)

    v = commands.add_parser(
        "validate-model",
        help="replay a capture and run its fitted model on the same network; compare delays",
        description=VALIDATE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument("capture", metavar="CAPTURE.pcap", help="the capture the scenario was fitted to")
    v.add_argument("scenario", metavar="SCENARIO.toml", help="a scenario with a thin-client [traffic] (thinwan fit's)")
    v.add_argument(
        "--server-port",
        type=port_number,
        metavar="N",
        help="the replay's servers are the sides with this port (default: the side that sent a flow's first payload)",
    )
    v.add_argument(
        "--gap-ms",
        type=positive_number("milliseconds"),
        metavar="MS",
        help="gap rule threshold for labelling messages (default: the scenario's queue.classifier_gap_ms)",
    )
    v.add_argument(
        "--pairs",
        type=int_at_least(1),
        metavar="N",
        help="pairs in both runs (default: the capture's connections, at most the scenario's topology.pairs)",
    )
    v.add_argument(
        "--duration",
        type=positive_number("seconds"),
        metavar="S",
        help="seconds of traffic (default: the capture's span, at most the scenario's duration_s)",
    )
    v.add_argument("--runs", type=int_at_least(1), help="runs of each (default: the scenario's)")
    v.add_argument(
        "--out", metavar="DIR", help="output directory (default: results/validate-<scenario name>); replaced"
    )
    v.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    v.add_argument("--quiet", action="store_true", help="no progress on stderr")
    v.set_defaults(func=_cmd_validate)


def _capture_options(p: argparse.ArgumentParser, positive_number: Any) -> None:
    side = p.add_mutually_exclusive_group()
    from . import port_number

    side.add_argument(
        "--server-port",
        type=port_number,
        metavar="N",
        help="the server is the side with this TCP port (default: the side that sent the SYN-ACK, else the lower port)",
    )
    side.add_argument("--filter", metavar="EXPR", help="only connections matching this filter (as thinwan analyze)")
    p.add_argument(
        "--gap-ms",
        type=positive_number("milliseconds"),
        metavar="MS",
        help="gap rule threshold: response packets closer than this share a flow "
        "(default: queue.classifier_gap_ms's default, 6.31)",
    )


def _default_base() -> Path:
    import thinwan

    return Path(thinwan.__file__).resolve().parents[2] / "scenarios" / "ogawa2011" / "large-buffer.toml"


def _analyze(capture: str, server_port: int | None, filt: str | None, gap_ms: float, max_packets: int | None) -> dict:
    """The capture's pooled statistics (the `thinwan analyze` driver); a capture that
    cannot be read is a usage error naming the file and the packet."""
    from ..analysis.capture_model import CaptureError, analyze
    from ..config.files import ScenarioError

    if not Path(capture).is_file():
        raise ScenarioError(f"{capture}: no such file")
    try:
        return analyze(capture, server_port=server_port, filter=filt, gap_ms=gap_ms, max_packets=max_packets)
    except CaptureError as e:
        raise ScenarioError(str(e)) from None


def _cmd_fit(args: argparse.Namespace) -> int:
    """Analyze, fit, write the scenario, print a summary."""
    from ..analysis.capture_model import default_gap_ms
    from ..analysis.fit import FitError, FitOptions, fit_capture
    from ..config.files import ScenarioError
    from ..config.scenario import load_scenario
    from ..records.meta import dumps_json
    from ..records.schema import write_text_atomic
    from ..report.scenario_file import fit_summary, scenario_toml

    gap_ms = args.gap_ms if args.gap_ms is not None else default_gap_ms()
    base_path = Path(args.base) if args.base else _default_base()
    if not base_path.is_file():
        raise ScenarioError(f"{base_path}: no such base scenario (give one with --base)")
    base = load_scenario(base_path)
    result = _analyze(args.capture, args.server_port, args.filter, gap_ms, args.max_packets)
    name = Path(args.capture).name
    try:
        fitted = fit_capture(result["pooled"], FitOptions(args.min_session_s, args.min_session_flows))
    except FitError as e:
        raise ScenarioError(f"{args.capture}: {e}") from None
    capture = {
        "name": name,
        "packets": result.get("packets"),
        "matched": result.get("matched"),
        "flows": len(result.get("flows", [])),
        "server_port": args.server_port,
        "filter": args.filter,
        "gap_ms": gap_ms,
    }
    out = Path(args.out) if args.out else Path(f"fitted-{name.rsplit('.', 1)[0]}.toml")
    capture["file"] = out.name
    try:
        text = scenario_toml(base, _shown(base_path), fitted, capture)
    except ValueError as e:  # pydantic's ValidationError among them
        raise ScenarioError(f"{args.capture}: the fitted values do not make a valid scenario: {e}") from None
    write_text_atomic(out, text)
    if args.json:
        print(dumps_json({"capture": capture, "out": str(out), **fitted}))
        return 0
    print(fit_summary(fitted, capture))
    print()
    print(f"scenario: {out}")
    return 0


def _cmd_validate(args: argparse.Namespace) -> int:
    """Replay the capture and run the model on the same network; compare."""
    from ..config.files import ScenarioError
    from ..config.scenario import load_scenario
    from ..execute.validate_model import validate_model
    from ..records.meta import dumps_json
    from ..report.run_page import write_run_report
    from ..report.validate_page import validate_summary, write_validate_page

    if not Path(args.capture).is_file():
        raise ScenarioError(f"{args.capture}: no such file")
    scenario = load_scenario(args.scenario)
    if scenario.traffic.model != "thin-client":
        raise ScenarioError(f'{args.scenario}: traffic.model is "{scenario.traffic.model}", not "thin-client"')
    gap_ms = args.gap_ms if args.gap_ms is not None else scenario.queue.classifier_gap_ms
    out = Path(args.out) if args.out else Path("results") / f"validate-{scenario.name}"
    v = validate_model(
        args.capture,
        scenario,
        out,
        server_port=args.server_port or 0,
        gap_ms=gap_ms,
        pairs=args.pairs,
        duration_s=args.duration,
        runs=args.runs,
        progress=not args.quiet,
        report=lambda d, sc, r: write_run_report(d, sc, r.digests, r.document["summary"]),
    )
    page = write_validate_page(out, v)
    if args.json:
        print(dumps_json({**v.document(), "report": str(page)}))
        return 0
    print(validate_summary(v))
    print(f"\nreport: {page}", file=sys.stderr)
    return 0


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (the written
    scenario's comments then name the base as a checkout does, not as one machine)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
