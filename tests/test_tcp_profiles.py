"""``tcp.profile`` (docs/scenario.md "Profiles"): each profile's resolved ``[tcp]`` keys
against a committed snapshot, precedence of explicit keys, errors, the docs table and the
profile's name in results. Regenerate the snapshot after a deliberate change with

    THINWAN_REGEN=1 .venv/bin/python -m pytest tests/test_tcp_profiles.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from thinwan.config import tcp_profiles
from thinwan.config.scenario import Scenario, ScenarioError, TcpSection, load_scenario, scenario_from_dict

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = Path(__file__).resolve().parent / "data" / "tcp-profiles.json"
DOCS = ROOT / "docs" / "scenario.md"


def resolved(profile: str) -> dict:
    return scenario_from_dict({"tcp": {"profile": profile}}).tcp.model_dump(mode="json")


def test_each_profile_resolves_to_its_snapshot() -> None:
    have = {name: resolved(name) for name in tcp_profiles.PROFILES}
    if os.environ.get("THINWAN_REGEN") == "1":
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(have, indent=1) + "\n")
    assert SNAPSHOT.is_file(), f"{SNAPSHOT} is missing; create it with THINWAN_REGEN=1 pytest {Path(__file__).name}"
    want = json.loads(SNAPSHOT.read_text())
    assert have == want, f"a profile changed; if on purpose: THINWAN_REGEN=1 pytest tests/{Path(__file__).name}"


def test_rfc_is_the_documented_defaults_and_the_default() -> None:
    assert resolved("rfc") == Scenario().tcp.model_dump(mode="json")
    assert Scenario().tcp.profile == "rfc"
    assert tcp_profiles.PROFILES["rfc"] == {}


def test_the_key_accepts_exactly_the_profiles_and_they_set_only_tcp_keys() -> None:
    assert typing.get_args(TcpSection.model_fields["profile"].annotation) == tuple(tcp_profiles.PROFILES)
    for name, table in tcp_profiles.PROFILES.items():
        assert set(table) <= set(TcpSection.model_fields) - {"profile"}, name
        assert all(source for _, source in table.values()), name
        # Every value is what TcpSection would accept on its own.
        assert resolved(name) == {**resolved("rfc"), **tcp_profiles.profile_values(name), "profile": name}


def test_profiles_differ_from_the_defaults_where_documented() -> None:
    linux, ns2 = resolved("linux"), resolved("ns2-fulltcp")
    assert (linux["mss"], linux["header_bytes"], linux["rto_formula"]) == (1448, 52, "linux")
    assert (linux["sack"], linux["rack_tlp"], linux["max_rto_ms"]) == (True, True, 120000.0)
    assert (ns2["mss"], ns2["initial_cwnd_segments"], ns2["initial_rto_ms"]) == (536, 2, 3000.0)
    assert (ns2["clock_granularity_ms"], ns2["delayed_ack_ms"], ns2["rwnd_bytes"]) == (10.0, 100.0, 20 * 536)
    assert (ns2["recovery"], ns2["sack"]) == ("reno", False)


# --- precedence ---------------------------------------------------------------------------


def test_a_key_the_file_sets_wins_over_the_profile(tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    path.write_text('[tcp]\nprofile = "linux"\nmss = 1000\nnagle = false\n')
    tcp = load_scenario(path).tcp
    assert (tcp.mss, tcp.nagle) == (1000, False)
    assert (tcp.header_bytes, tcp.rto_formula) == (52, "linux")  # from the profile
    assert tcp.model_fields_set == {"profile", "mss", "nagle"}


def test_a_profile_in_a_child_file_restarts_tcp_from_it(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_text("[scenario]\nruns = 3\n[tcp]\nmin_rto_ms = 300.0\nmss = 1000\n")
    (tmp_path / "child.toml").write_text('inherits = "base.toml"\n[tcp]\nprofile = "ns2-fulltcp"\nmss = 800\n')
    (tmp_path / "plain.toml").write_text('inherits = "base.toml"\n[tcp]\nsack = false\n')
    child = load_scenario(tmp_path / "child.toml")
    # The base's [tcp] keys are dropped (min_rto_ms is ns-2's again), the child's own apply,
    # the base's other sections stay.
    assert child.tcp.model_dump(mode="json") == {**resolved("ns2-fulltcp"), "mss": 800}
    assert child.scenario.runs == 3
    # Without a profile the child merges key by key, as before.
    plain = load_scenario(tmp_path / "plain.toml").tcp
    assert (plain.min_rto_ms, plain.mss, plain.sack, plain.profile) == (300.0, 1000, False, "rfc")
    # A child without a profile keeps its parent's profile and keys.
    (tmp_path / "grandchild.toml").write_text('inherits = "child.toml"\n[tcp]\nnagle = false\n')
    grandchild = load_scenario(tmp_path / "grandchild.toml").tcp
    assert grandchild.model_dump(mode="json") == {**resolved("ns2-fulltcp"), "mss": 800, "nagle": False}


def test_overrides_win_and_a_new_profile_restarts_tcp() -> None:
    base = scenario_from_dict({"tcp": {"profile": "linux", "mss": 1000}})
    # An override of a key wins over the profile and keeps the scenario's own keys.
    over = base.with_values({"tcp.header_bytes": 40}).tcp
    assert (over.profile, over.header_bytes, over.mss, over.rto_formula) == ("linux", 40, 1000, "linux")
    # An override of the profile starts [tcp] afresh from it, with the keys set alongside.
    ns2 = base.with_values({"tcp.profile": "ns2-fulltcp"}).tcp
    assert ns2.model_dump(mode="json") == resolved("ns2-fulltcp")
    ns2_mss = base.with_values({"tcp.profile": "ns2-fulltcp", "tcp.mss": 1000}).tcp
    assert ns2_mss.model_dump(mode="json") == {**resolved("ns2-fulltcp"), "mss": 1000}
    assert base.with_values({"tcp.profile": "rfc"}).tcp == Scenario().tcp
    # Nothing else moves: --runs/--seed or another section keep [tcp] as it was.
    assert base.with_overrides(runs=3).tcp == base.tcp
    assert base.with_values({"queue.limit_packets": 10}).tcp == base.tcp


def test_a_profile_sweep_applies_each_profile_over_the_base(tmp_path: Path) -> None:
    from thinwan.config.sweepfile import load_sweep

    (tmp_path / "base.toml").write_text("[scenario]\nduration_s = 1.0\n[tcp]\ndelayed_ack = false\n")
    (tmp_path / "sweep.toml").write_text(
        '[sweep]\nname = "p"\nbase = "base.toml"\n[set]\n"tcp.nagle" = false\n'
        '[vary]\n"tcp.profile" = ["rfc", "linux", "ns2-fulltcp"]\n'
    )
    points = {p.params["tcp.profile"]: p.scenario for p in load_sweep(tmp_path / "sweep.toml").points}
    assert set(points) == set(tcp_profiles.PROFILES)
    for name, scenario in points.items():
        # The base's delayed_ack = false is dropped with the new profile; [set] applies.
        assert scenario.tcp.model_dump(mode="json") == {**resolved(name), "nagle": False}, name
        assert scenario.scenario.duration_s == 1.0


# --- errors -------------------------------------------------------------------------------


def test_an_unknown_profile_names_the_key_and_the_valid_ones(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[tcp]\nprofile = "bsd"\n')
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert str(e.value) == f"{path}: tcp.profile: Input should be 'rfc', 'linux' or 'ns2-fulltcp'"


@pytest.mark.parametrize("value", [1, ["linux"], True])
def test_a_profile_that_is_not_a_string_is_refused(value: object) -> None:
    with pytest.raises(ScenarioError, match=r"^x\.toml: tcp\.profile: "):
        scenario_from_dict({"tcp": {"profile": value}}, source="x.toml")


def test_a_file_key_that_contradicts_the_profile_says_how_to_fix_it() -> None:
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict({"tcp": {"profile": "linux", "sack": False}}, source="x.toml")
    for key in ("rack_tlp", "dsack", "prr"):
        assert f'tcp.{key}: needs tcp.sack = true (tcp.profile = "linux" turns it on' in str(e.value)
    off = {"rack_tlp": False, "dsack": False, "prr": False, "rack_reo_wnd": "static", "tlp_timer": "rfc"}
    ok = scenario_from_dict({"tcp": {"profile": "linux", "sack": False, **off}})
    assert (ok.tcp.sack, ok.tcp.rack_tlp, ok.tcp.header_bytes) == (False, False, 52)
    # Keys that hang on other keys than sack say the same.
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict({"tcp": {"profile": "linux", "congestion_control": "reno"}}, source="x.toml")
    assert 'tcp.hystart: needs tcp.congestion_control = "cubic" (tcp.profile = "linux" turns it on' in str(e.value)
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict({"tcp": {"profile": "linux", "rack_tlp": False}}, source="x.toml")
    assert 'tcp.tlp_timer: "linux" needs tcp.rack_tlp = true (tcp.profile = "linux" turns it on' in str(e.value)


def test_bad_cli_profile_exits_2_without_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[tcp]\nprofile = "linus"\n')
    done = subprocess.run([sys.executable, "-m", "thinwan", "run", str(path)], capture_output=True, text=True)
    assert done.returncode == 2
    assert "bad.toml: tcp.profile: Input should be 'rfc', 'linux' or 'ns2-fulltcp'" in done.stderr
    assert "Traceback" not in done.stderr


# --- documentation ------------------------------------------------------------------------


def _docs_table(profile: str) -> dict[str, str]:
    """The key → value column of docs/scenario.md's table of ``profile``."""
    text = DOCS.read_text()
    start = text.index(f"<!-- profile table: {profile} -->")
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        m = re.fullmatch(r"`([a-z_]+)`", cells[0])
        if m:
            rows[m.group(1)] = cells[1].strip("`")
    return rows


@pytest.mark.parametrize("profile", ["linux", "ns2-fulltcp"])
def test_the_docs_table_lists_every_key_of_the_profile_with_its_value(profile: str) -> None:
    want = {k: json.dumps(v) for k, v in tcp_profiles.profile_values(profile).items()}
    assert _docs_table(profile) == want


# --- results ------------------------------------------------------------------------------


def test_run_json_and_meta_carry_the_profile_and_its_resolved_keys(tmp_path: Path) -> None:
    from thinwan.records.schema import RunRecords

    path = tmp_path / "tiny.toml"
    path.write_text('[scenario]\nduration_s = 2.0\ndrain_s = 1.0\n[topology]\npairs = 2\n[tcp]\nprofile = "linux"\n')
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "thinwan", "run", str(path), "--json", "--no-report", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    want = resolved("linux")
    assert json.loads(done.stdout)["config"]["tcp"] == want
    assert RunRecords.read(out / "runs" / "run-0").meta["config"]["tcp"] == want
    assert 'profile = "linux"' in (out / "scenario.toml").read_text()
