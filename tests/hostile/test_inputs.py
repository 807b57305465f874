"""Every hostile input of issue 15 (Python side) as a test: each must end with a clear
error (exit 2 naming the file, key, flag or packet; never a traceback) or behave."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import dpkt
import pytest

from tests.captures import SERVER, tcp_frame
from thinwan.config.limits import MAX_SEED

from .helpers import REPO, TINY, assert_refused, needs_root, thinwan

NOT_UTF8 = b"\xff[scenario]\nduration_s = 1.0\n"


# 1. Files that are not UTF-8, in every command that reads a scenario or sweep file.
@pytest.mark.parametrize(
    "command",
    [["run"], ["sweep"], ["lab", "run"], ["lab", "up"], ["validate"], ["anatomy"]],
    ids=lambda c: " ".join(c),
)
def test_a_file_that_is_not_utf8_is_named(tmp_path: Path, command: list[str]) -> None:
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(NOT_UTF8)
    assert_refused(thinwan(*command, str(bad)), str(bad), "not UTF-8")


def test_an_inherited_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    (tmp_path / "base.toml").write_bytes(NOT_UTF8)
    child = tmp_path / "child.toml"
    child.write_text('inherits = "base.toml"\n')
    assert_refused(thinwan("run", str(child), "--check"), "base.toml", "not UTF-8")


# 2. Seeds beyond u64: in the file, through seed + runs, and on the command line.
@pytest.mark.parametrize(
    "seed, runs", [(MAX_SEED + 1, 1), (MAX_SEED, 2), (-1, 1)], ids=["2^64", "last-run-wraps", "negative"]
)
def test_a_seed_out_of_u64_is_refused_at_load(tmp_path: Path, seed: int, runs: int) -> None:
    f = tmp_path / "seed.toml"
    f.write_text(TINY.replace("runs = 1", f"runs = {runs}\nseed = {seed}"))
    assert_refused(thinwan("run", str(f), "--out", str(tmp_path / "out")), str(f), "scenario.seed")
    assert not (tmp_path / "out").exists()


def test_the_largest_seed_runs(tmp_path: Path) -> None:
    f = tmp_path / "seed.toml"
    f.write_text(TINY.replace("runs = 1", f"runs = 1\nseed = {MAX_SEED}"))
    done = thinwan("run", str(f), "--out", str(tmp_path / "out"), "--json", "--no-report", "--quiet")
    assert done.returncode == 0, done.stderr
    assert f'"seeds": [{MAX_SEED}]' in done.stdout


@pytest.mark.parametrize("command", [["run"], ["lab", "run"], ["validate"]], ids=lambda c: " ".join(c))
def test_a_seed_option_out_of_u64_is_refused(tmp_path: Path, command: list[str]) -> None:
    f = tmp_path / "tiny.toml"
    f.write_text(TINY)
    assert_refused(thinwan(*command, str(f), "--seed", "99999999999999999999999"), "--seed")


# 3. What a scenario may ask for: hard bounds, and memory.
@pytest.mark.parametrize(
    "section, key, value",
    [
        ("scenario", "duration_s", "1e12"),
        ("scenario", "drain_s", "1e300"),
        ("topology", "pairs", "10000000"),
        ("scenario", "runs", "100000000"),
    ],
)
def test_bounds_name_the_key(tmp_path: Path, section: str, key: str, value: str) -> None:
    f = tmp_path / "big.toml"
    f.write_text(f"[{section}]\n{key} = {value}\n")
    assert_refused(thinwan("run", str(f), "--check"), str(f), f"{section}.{key}")


def test_more_messages_than_records_can_hold_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "rows.toml"
    f.write_text("[scenario]\nduration_s = 1e6\n[topology]\npairs = 1000\n")
    assert_refused(thinwan("run", str(f), "--check"), str(f), "scenario.duration_s", "topology.pairs", "messages")


def test_a_run_that_cannot_fit_in_memory_is_refused_before_it_starts(tmp_path: Path) -> None:
    # 1 pair for 10^7 s: ~86 M messages and 2 G queue-trace rows, far beyond any CI host.
    f = tmp_path / "huge.toml"
    f.write_text("[scenario]\nduration_s = 1e7\n[topology]\npairs = 1\n")
    done = thinwan("run", str(f), "--out", str(tmp_path / "out"), timeout=60)
    assert_refused(done, "huge", "of memory", "is available (MemAvailable)", "records.traces")
    assert not (tmp_path / "out").exists()


def test_memory_estimate_follows_the_measured_table() -> None:
    from thinwan.config.scenario import estimate_run, load_scenario

    base = load_scenario(REPO / "scenarios/ogawa2011/large-buffer.toml")
    e = estimate_run(base)
    # Measured: 258,540 writes and a 235 MB peak (docs/limits.md); the estimate is within 15 %.
    assert abs(e.messages - 258_540) / 258_540 < 0.02
    assert 235e6 <= e.bytes <= 1.15 * 235e6


# 9/10. lab up's link options: the error names the flag (thinwan-link's own parser).
@pytest.mark.parametrize("flag, value", [("--ge", "a,b"), ("--classifier", "gap:abc")])
def test_a_bad_link_option_names_its_flag(flag: str, value: str) -> None:
    needs_root()
    done = thinwan("lab", "up", flag, value)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert flag in done.stderr, done.stderr
    assert "--delay" not in done.stderr or flag == "--delay", done.stderr
    thinwan("lab", "clean")


# 11/12. [lab] keys validated at load.
@pytest.mark.parametrize("key, value", [("port", "70000"), ("port", "0"), ("notsent_lowat", "-1")])
def test_lab_keys_are_validated_at_load(tmp_path: Path, key: str, value: str) -> None:
    f = tmp_path / "lab.toml"
    f.write_text(TINY + f"\n[lab]\n{key} = {value}\n")
    assert_refused(thinwan("run", str(f), "--check"), str(f), f"lab.{key}")
    assert_refused(thinwan("lab", "run", str(f), "--out", str(tmp_path / "out")), str(f), f"lab.{key}")
    assert not (tmp_path / "out").exists()


# 13. The lab refuses more connections than its pump and sink can serve.
def test_the_lab_refuses_more_pairs_than_it_has_threads_for(tmp_path: Path) -> None:
    needs_root()
    f = tmp_path / "many.toml"
    f.write_text("[scenario]\nduration_s = 1.0\n[topology]\npairs = 1000000\n")
    done = thinwan("lab", "run", str(f), "--out", str(tmp_path / "out"), timeout=60)
    assert_refused(done, "topology.pairs", "at most", "connection")
    assert not (tmp_path / "out").exists()


def test_lab_capacity_names_its_reason() -> None:
    from thinwan.substrates.lab.labrun import lab_capacity

    most, reason = lab_capacity()
    assert 0 < most <= 28_232 and reason


# 14/15. Damaged captures: the packet is named, nothing is replayed in part.
def _capture(path: Path, flows: int = 4, packets: int = 40) -> bytes:
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        for i in range(packets):
            client = (f"10.0.0.{2 + i % flows}", 40000 + i % flows)
            frame = tcp_frame(SERVER, client[0], 7777, client[1], 1000 + 100 * (i // flows), b"a" * 100)
            w.writepkt(frame, ts=1.7e9 + i * 0.01)
    return path.read_bytes()


def _pcap_scenario(tmp_path: Path, capture: str) -> Path:
    f = tmp_path / "replay.toml"
    f.write_text(
        '[scenario]\nduration_s = 2.0\n[topology]\nkind = "mux"\npairs = 4\n'
        f'[traffic]\nmodel = "pcap"\npcap_file = "{capture}"\n'
    )
    return f


def test_a_truncated_capture_names_the_damaged_packet(tmp_path: Path) -> None:
    data = _capture(tmp_path / "full.pcap")
    (tmp_path / "cut.pcap").write_bytes(data[: len(data) // 2 + 7])
    done = thinwan("run", str(_pcap_scenario(tmp_path, "cut.pcap")), "--out", str(tmp_path / "out"))
    assert_refused(done, "cut.pcap", "traffic.pcap_file", "packet 20", "truncated")


def test_a_corrupt_record_header_names_the_packet_not_a_flow_count(tmp_path: Path) -> None:
    data = bytearray(_capture(tmp_path / "full.pcap"))
    record = (len(data) - 24) // 40  # 40 records of one size after the 24-byte file header
    third = 24 + 2 * record
    data[third + 8 : third + 12] = struct.pack("<I", 0x7FFFFFFF)  # incl_len
    (tmp_path / "bad.pcap").write_bytes(bytes(data))
    done = thinwan("run", str(_pcap_scenario(tmp_path, "bad.pcap")), "--check")
    assert_refused(done, "bad.pcap", "packet 3", "2,147,483,647")
    assert "flow(s)" not in done.stderr


def test_an_intact_capture_still_replays(tmp_path: Path) -> None:
    _capture(tmp_path / "full.pcap")
    done = thinwan("run", str(_pcap_scenario(tmp_path, "full.pcap")), "--check")
    assert done.returncode == 0, done.stderr


# 20. anatomy --out: exactly the path it prints.
@pytest.mark.parametrize("given", ["picture", "picture.html", "a-directory"])
def test_anatomy_writes_exactly_the_path_it_prints(tmp_path: Path, given: str) -> None:
    f = tmp_path / "small.toml"
    f.write_text(
        f'inherits = "{REPO / "scenarios/ogawa2011/small-buffer.toml"}"\n'
        "[scenario]\nduration_s = 30.0\nruns = 1\n[topology]\npairs = 20\n"
    )
    if given == "a-directory":
        (tmp_path / given).mkdir()
    done = thinwan("anatomy", str(f), "--out", given, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    printed = done.stderr.strip().splitlines()[-1].removeprefix("picture: ")
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".toml"]
    assert [p.relative_to(tmp_path) for p in written] == [Path(printed)]
    if given != "a-directory":
        assert printed == given


# Also seen: which commands need root.
def test_lab_status_says_it_needs_root_when_it_does() -> None:
    if os.geteuid() == 0:
        pytest.skip("run as root")
    assert_refused(thinwan("lab", "status"), "root", status=1)
