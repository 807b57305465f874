"""``thinwan qds CONFIG.toml``: the QDS middlebox daemon.

The daemon is the Rust binary ``thinwan-qds`` (crates/qds; docs/qds-lab.md): it captures
the middlebox's TCP flows, decides each flow's class and the class rates every period,
and programs Linux HTB on the downlink over netlink, restoring the downlink's original
qdisc on exit. This command only finds the binary and hands over to it, so signals
(SIGTERM/SIGINT: restore and stop) and exit codes (2 = bad configuration, naming the
file and key; 1 = cannot run) are the daemon's own. Run it in the middlebox's network
namespace, e.g. ``ip netns exec NS thinwan qds qds.toml``.

``--lab`` runs it on a fresh three-namespace lab instead (servers ─ middlebox ─ clients,
docs/qds-lab.md): the config's ``downlink``/``uplink`` are replaced by the lab's
interfaces, and Ctrl-C stops the daemon and removes the lab.

``thinwan qds train`` and ``thinwan qds evaluate`` train the daemon's classifier on
labelled traffic (captures of real desktops, simulated runs) and measure any model on it
(docs/qds.md "Real captures"; ``thinwan qds train --help``). A configuration file named
``train`` or ``evaluate`` must be given as ``./train``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

__all__ = ["add_qds_subcommand"]


def add_qds_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``qds`` to the ``thinwan`` command."""
    p = subparsers.add_parser(
        "qds",
        help="QoE-driven middlebox scheduler daemon (real Linux HTB over netlink)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--lab", action="store_true", help="run on a fresh servers ─ middlebox ─ clients lab (root)")
    p.add_argument(
        "--client-delay-ms", type=float, default=5.0, help="--lab: one-way delay of the last hop (default 5)"
    )
    p.add_argument("--cc", default="cubic", help="--lab: TCP congestion control of the lab's hosts (default cubic)")
    p.add_argument(
        "config",
        help="daemon configuration (TOML; docs/qds-lab.md), or `train` / `evaluate` to train or measure the "
        "classifier on labelled captures (`thinwan qds train --help`)",
    )
    p.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        help="passed to thinwan-qds: --check, --restore, --stats FILE, --bench-updates N [--bench-flows F]",
    )
    p.set_defaults(func=_cmd_qds)
    return p


def _cmd_qds(args: argparse.Namespace) -> int:
    """Replace this process with the daemon (or train / evaluate the classifier)."""
    if args.config in _MODES:
        return _MODES[args.config](args.args)
    from ..substrates.binaries import find_binary

    binary = find_binary("thinwan-qds")
    if args.lab:
        from pathlib import Path

        from ..substrates.lab.htb_middlebox import run_on_lab

        return run_on_lab(Path(args.config), args.args, args.client_delay_ms, args.cc)
    os.execv(binary, [str(binary), args.config, *args.args])
    return 0  # not reached


_TRAIN_DOC = """Train the QDS classifier (the core's Model::train: Gaussian naive Bayes on the
flow monitor's features, docs/qds.md "2. The classifier") on labelled traffic and write
the model JSON that qds.model_file reads (simulator, thinwan-link and thinwan-qds alike).

Each capture is replayed through the middlebox's flow monitor (crates/capture/src/qds.rs):
one feature vector per (control period, flow with an RTT estimate) of the display
server's flows, every flow labelled with its capture's type. Sources: a training-set
TOML file (captures and simulated QDS runs; docs/qds.md "Real captures") and/or
--capture LABEL=FILE:PORT[:at-client] (repeatable)."""

_EVALUATE_DOC = """Measure a QDS classifier on labelled traffic: accuracy, recall per type and
the confusion matrix (rows: true type, columns: predicted), overall, per group (e.g.
platform) and per source. --model FILE (default: the shipped, simulator-trained model),
or --leave-one-out: for each group, train on the other groups (plus --train-also) and
test on it, so the number says how the classifier transfers to a platform it has not
seen."""


def _rows_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    from . import Parser, positive_number

    p = Parser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "sets", nargs="*", metavar="SET", help="training set(s) (TOML: [[capture]] and [[sim]] entries; docs/qds.md)"
    )
    p.add_argument(
        "--capture",
        action="append",
        default=[],
        metavar="LABEL=FILE:PORT[:at-client]",
        help="a capture of one type (video, audio, data, interactive); PORT: the display server's TCP port; "
        ":at-client: the listener is the user's display (plain X11). Repeatable; its group is the file path",
    )
    p.add_argument(
        "--captures-root",
        default=None,
        metavar="DIR",
        help="where the sets' relative capture files are (overrides each set's captures_root; e.g. the "
        "--out directory of your desktop runs)",
    )
    p.add_argument(
        "--warmup-s",
        type=float,
        default=2.0,
        help="leave out rows of the first S seconds of each capture or run (windows filling; default 2)",
    )
    p.add_argument(
        "--include-idle",
        action="store_true",
        help="keep rows of flows that sent no payload toward the client in the feature window (default: left out)",
    )
    p.add_argument(
        "--period-ms", type=positive_number("ms"), default=None, help="control period (default: qds.period_ms's, 100)"
    )
    p.add_argument(
        "--rate-window-ms",
        type=positive_number("ms"),
        default=None,
        help="the monitor's rate and feature window (default: qds.rate_window_ms's, 1000)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    return p


def _cmd_train(argv: list[str]) -> int:
    from pathlib import Path

    p = _rows_parser("thinwan qds train", _TRAIN_DOC)
    p.add_argument("--out", required=True, help="where to write the model (JSON)")
    args = p.parse_args(argv)
    from ..execute import qds_train as qt

    rows = qt.rows_of(_sources(args), _row_options(args))
    model = qt.train_model(rows)
    Path(args.out).write_text(model + "\n", encoding="utf-8")
    # The model's fit on its own training rows (not a test: see evaluate --leave-one-out).
    report = qt.evaluate(rows, qt.predict(rows, model))
    report = {"model": args.out, "on_training_rows": report}
    _print(report, args.json, f"wrote {args.out}; on its own training rows:")
    return 0


def _cmd_evaluate(argv: list[str]) -> int:
    p = _rows_parser("thinwan qds evaluate", _EVALUATE_DOC)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--model", default=None, help="model JSON to evaluate (default: the shipped model)")
    how.add_argument(
        "--leave-one-out",
        action="store_true",
        help="per group: train on the other groups (and --train-also), test on this one",
    )
    p.add_argument(
        "--train-also",
        default=None,
        metavar="SET",
        help="--leave-one-out: a training set whose rows every fold also trains on (e.g. simulated runs)",
    )
    args = p.parse_args(argv)
    from pathlib import Path

    from ..execute import qds_train as qt

    if args.train_also and not args.leave_one_out:
        raise qt.TrainSetError("--train-also goes with --leave-one-out")

    opts = _row_options(args)
    rows = qt.rows_of(_sources(args), opts)
    if rows.empty:
        raise qt.TrainSetError("no row to evaluate on (every source was shorter than the warm-up, or idle)")
    if args.leave_one_out:
        extra = (
            qt.rows_of(qt.read_train_set(Path(args.train_also), _root(args)).sources, opts) if args.train_also else None
        )
        report = qt.leave_one_out(rows, extra)
        report = {"model": "leave-one-out", "train_also": args.train_also, **report}
        title = "leave one group out" + (f" (every fold also trains on {args.train_also})" if args.train_also else "")
    else:
        model = qt.read_model(Path(args.model) if args.model else None)
        report = {"model": args.model or "shipped", **qt.evaluate(rows, qt.predict(rows, model))}
        title = f"model {args.model or 'shipped (crates/proto/data/qds-classifier.json)'}"
    _print(report, args.json, title)
    return 0


_MODES = {"train": _cmd_train, "evaluate": _cmd_evaluate}


def _root(args: argparse.Namespace) -> Any:
    from pathlib import Path

    return Path(args.captures_root) if args.captures_root else None


def _sources(args: argparse.Namespace) -> list[Any]:
    from pathlib import Path

    from ..execute import qds_train as qt

    sources: list[Any] = []
    for s in args.sets:
        sources += qt.read_train_set(Path(s), _root(args)).sources
    sources += [qt.parse_capture_arg(c) for c in args.capture]
    if not sources:
        raise qt.TrainSetError("give a training set file or at least one --capture")
    return sources


def _row_options(args: argparse.Namespace) -> Any:
    import math

    from ..execute import qds_train as qt

    if not (math.isfinite(args.warmup_s) and args.warmup_s >= 0):
        raise qt.TrainSetError(f"--warmup-s must be ≥ 0, got {args.warmup_s}")
    return qt.RowOptions(
        warmup_s=args.warmup_s,
        include_idle=args.include_idle,
        period_ms=args.period_ms,
        rate_window_ms=args.rate_window_ms,
    )


def _print(report: dict[str, Any], as_json: bool, title: str) -> None:
    import json

    if as_json:
        print(json.dumps(report, indent=1))
        return
    from ..analysis.qds import CONTROLLER_TYPES

    body = report.get("on_training_rows", report)
    print(title)
    _table(body, CONTROLLER_TYPES)
    for name, part in body["by_group"].items():
        print(f"\ngroup {name}:")
        _table(part, CONTROLLER_TYPES)


def _table(r: dict[str, Any], types: tuple[str, ...]) -> None:
    acc = r["accuracy"]
    print(f"  rows {r['rows']}, accuracy {acc:.3f}" if acc is not None else f"  rows {r['rows']}")
    present = [t for t in types if any(r["confusion"][t].values()) or any(r["confusion"][u][t] for u in types)]
    print("  true \\ predicted " + "".join(f"{t:>12}" for t in present) + "      recall")
    for t in present:
        rec = r["recall"][t]
        cells = "".join(f"{r['confusion'][t][u]:>12}" for u in present)
        print(f"  {t:<17}{cells}  {'' if rec is None else f'{rec:10.3f}'}")
