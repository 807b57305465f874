"""The command line: error paths (no native code needed) and end-to-end runs (needs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import thinwan._native

import thinwan
from thinwan.cli import main
from thinwan.records.schema import TABLES, RunRecords

TINY = """
[scenario]
duration_s = 5.0
drain_s = 2.0
runs = 1

[topology]
pairs = 3
"""


def thinwan_module(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m thinwan ARGS`` as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "thinwan", *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def scenario_file(tmp_path: Path, text: str = TINY, name: str = "tiny.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- without the simulator ------------------------------------------------------------


def test_version_as_module() -> None:
    done = thinwan_module("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"thinwan {thinwan.__version__}"


def test_bad_key_exits_2_naming_the_key_without_traceback(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, "[tcp]\nmin_rto_ms = 0\n", name="bad.toml")
    done = thinwan_module("run", str(path))
    assert done.returncode == 2
    assert "thinwan: error:" in done.stderr
    assert "bad.toml: tcp.min_rto_ms:" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[tcp]\nsackk = true\n", "tcp.sackk: unknown key"),
        ("[queue]\nlimit_packets = 0\n", "queue.limit_packets:"),
        ("[tcp]\nmss = = 1\n", "invalid TOML"),
    ],
)
def test_scenario_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str) -> None:
    assert main(["run", str(scenario_file(tmp_path, text))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("thinwan: error: ") and expected in err


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml: no such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        (["--runs", "0"], "argument --runs: must be ≥ 1, got 0"),
        (["--runs", "two"], "argument --runs: expected an integer, got 'two'"),
        (["--seed", "-1"], "argument --seed: must be ≥ 0"),
        (["--jobs", "0"], "argument --jobs: must be ≥ 1"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_options_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], expected: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", str(scenario_file(tmp_path)), *option])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("thinwan: error: ") and expected in err


def test_no_command_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "thinwan: error:" in capsys.readouterr().err


# --- end to end, with the native simulator ----------------------------------------------


def test_run_json_writes_records_summary_and_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = thinwan_module("run", str(scenario_file(tmp_path)), "--runs", "2", "--json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # exactly one JSON object
    assert {"summary", "runs", "scenario", "seeds", "version", "out"} <= result.keys()
    assert result["scenario"] == "tiny"
    assert result["seeds"] == [1, 2]
    assert result["version"] == thinwan.__version__
    assert len(result["runs"]) == 2
    for key in ("r_I150", "r_I1000", "T_I150_s", "T_I1000_s", "timeouts_per_conn",
                "spurious_timeouts_per_conn", "fast_retransmits_per_conn", "utilisation",
                "utilisation_interactive"):  # fmt: skip
        assert key in result["summary"], key
    for k in range(2):
        run_dir = out / "runs" / f"run-{k}"
        for table in TABLES:
            assert (run_dir / f"{table}.parquet").is_file(), (k, table)
        meta = RunRecords.read(run_dir).meta
        assert (meta["run"], meta["seed"]) == (k, 1 + k)
        assert meta["git_rev"] and meta["version"] == thinwan.__version__
    assert json.loads((out / "summary.json").read_text())["seeds"] == [1, 2]
    assert "CCDF of end-to-end delay" in (out / "report.html").read_text()


def test_run_prints_table_and_report_path_in_default_out_dir(tmp_path: Path) -> None:
    done = thinwan_module("run", str(scenario_file(tmp_path)), "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "r_I150" in done.stdout
    assert "report: results/tiny/report.html" in done.stdout
    assert done.stderr == ""
    assert (tmp_path / "results" / "tiny" / "report.html").is_file()


def test_run_without_report_and_traces(tmp_path: Path) -> None:
    path = scenario_file(tmp_path, TINY + "\n[records]\ntraces = false\n")
    done = thinwan_module("run", str(path), "--no-report", "--json", "--out", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["runs"] == 1
    assert not (tmp_path / "o" / "report.html").exists()


# --- every --help, and what the CLI imports --------------------------------------------

HELP_COMMANDS = [
    [],
    ["run"],
    ["sweep"],
    ["anatomy"],
    ["validate"],
    ["mux"],
    ["lab"],
    ["lab", "up"],
    ["lab", "exec"],
    ["lab", "down"],
    ["lab", "clean"],
    ["lab", "status"],
    ["lab", "run"],
]
# Modules `thinwan --help` must not load (speed lives in bench/, not in a timed test).
HEAVY = (
    "pandas",
    "numpy",
    "pyarrow",
    "plotly",
    "jinja2",
    "dask",
    "distributed",
    "pydantic",
    "tqdm",
    "dpkt",
    "thinwan._native",
    "thinwan.substrates.lab.topology",
    "thinwan.substrates.lab.labrun",
    "thinwan.report.run_page",
    "thinwan.report.sweep_page",
    "thinwan.execute.runs",
    "thinwan.execute.sweeps",
)


@pytest.mark.parametrize("command", HELP_COMMANDS, ids=lambda c: " ".join(c) or "thinwan")
def test_every_help_answers(command: list[str]) -> None:
    done = thinwan_module(*command, "--help")
    assert done.returncode == 0, done.stderr
    assert "usage: thinwan" in done.stdout
    assert "Traceback" not in done.stderr and done.stderr == ""


def test_help_imports_nothing_heavy() -> None:
    probe = (
        "import sys\n"
        "from thinwan.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_lab_exec_takes_id_before_the_command() -> None:
    from thinwan.cli import parser
    from thinwan.cli.lab_cmds import exec_command

    for argv in (
        ["lab", "exec", "server", "--id", "tw-abcdef", "--", "ip", "-br", "addr"],
        ["lab", "exec", "--id", "tw-abcdef", "server", "--", "ip", "-br", "addr"],
        ["lab", "exec", "server", "--id=tw-abcdef", "ip", "-br", "addr"],
    ):
        args = parser().parse_args(argv)
        assert (args.side, *exec_command(args)) == ("server", "tw-abcdef", ["ip", "-br", "addr"]), argv
    args = parser().parse_args(["lab", "exec", "client", "--", "sh", "-c", "echo --id"])
    assert (args.side, *exec_command(args)) == ("client", None, ["sh", "-c", "echo --id"])


def test_lab_up_collects_link_options_unparsed_in_order() -> None:
    from thinwan.cli import parser

    args = parser().parse_args(
        ["lab", "up", "--delay", "20ms", "--reorder", "--jitter", "uniform:10%", "--cc", "cubic"]
    )
    assert args.link_args == ["--delay", "20ms", "--reorder", "--jitter", "uniform:10%"]
    assert args.cc == "cubic"


def test_lab_up_refuses_a_bad_link_option_before_creating_anything() -> None:
    done = thinwan_module("lab", "up", "--rate", "fast")
    assert done.returncode == 2
    assert done.stderr.startswith("thinwan: error: lab up: --rate:"), done.stderr
    assert "Traceback" not in done.stderr


def test_link_options_are_resolved_by_thinwan_link() -> None:
    from thinwan.substrates.lab.linkspec import LinkSpec, check_link_args

    link = check_link_args(LinkSpec.symmetric(), ["--rate", "10mbit", "--delay", "20ms", "--classifier", "gap:5ms"])
    for d in (link.fwd, link.rev):
        assert (d.rate_bps, d.delay_ms, d.priority_classifier, d.classifier_gap_ms) == (10_000_000, 20.0, "gap", 5.0)
