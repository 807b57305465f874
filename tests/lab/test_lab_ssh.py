"""OpenSSH local forwarding as the tunnel's peer in the lab (``mux.mode = "ssh"``,
thinwan.substrates.lab.sshpeer): sshd next to the pump, ``ssh -L`` in the middle
namespace. Needs root, the lab binaries and Debian's openssh-server/client."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.lab.conftest import small_grid
from thinwan.config.scenario import LabSection
from thinwan.substrates.lab.netns import list_netns, pid_cmdline
from thinwan.substrates.lab.sshpeer import SSHD_CANDIDATES
from thinwan.substrates.lab.tunnel import SSH_PORT, run_tunnel_once

pytestmark = pytest.mark.usefixtures("lab_env")


@pytest.fixture(scope="module", autouse=True)
def openssh() -> None:
    if shutil.which("ssh") is None or not any(os.access(p, os.X_OK) for p in SSHD_CANDIDATES):
        pytest.fail("ssh/sshd missing: run scripts/setup.sh as root (installs openssh-server/-client)")


def _snapshot(directory: Path) -> dict[str, float]:
    """Every file under ``directory`` with its modification time (absent: empty)."""
    if not directory.is_dir():
        return {}
    return {str(p): p.stat().st_mtime for p in directory.rglob("*") if p.is_file()}


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            line = pid_cmdline(int(entry.name))
            if text in line:
                found.append(f"{entry.name}: {line}")
    return found


def test_ssh_forwarding_delivers_every_message_and_leaves_nothing(tmp_path: Path) -> None:
    before = set(list_netns())
    home_ssh = Path(os.path.expanduser("~")) / ".ssh"
    untouched = {d: _snapshot(d) for d in (home_ssh, Path("/etc/ssh"))}
    scenario = small_grid(**{"mux.mode": "ssh"})
    raw = tmp_path / "raw"
    records = run_tunnel_once(scenario, LabSection(), 0, raw)

    # Every message arrived, byte-exact (the sink checks every byte and id).
    m, c = records.messages, records.connections
    assert len(m) > 10 and set(m.conn) == {0, 1, 2}
    assert m.t_read.notna().all()
    assert (c.bytes_delivered == c.bytes_written).all() and (c.bytes_written > 0).all()
    # Through sshd: the pump's peers are local (sshd next to it), and one SSH connection
    # to the run's sshd carried all three streams as channels.
    conns = json.loads((raw / "conns.json").read_text())["conns"]
    assert all(conn["remote"].startswith("198.18.1.1:") for conn in conns)
    sshd_log = (raw / "ssh" / "sshd.log").read_text()
    assert sshd_log.count("Accepted publickey") == 1, sshd_log
    assert f"port {SSH_PORT}" in sshd_log
    info = records.meta["lab"]["ssh"]
    assert info["version"].startswith("OpenSSH") and info["cipher"], info

    # Nothing left behind: namespaces, processes of this run, keys outside the run dir.
    assert set(list_netns()) == before
    assert _processes_mentioning(str(raw)) == []
    assert {d: _snapshot(d) for d in untouched} == untouched
    keys = {p.name for p in (raw / "ssh").iterdir() if "ed25519" in p.name}
    assert keys == {"host_ed25519", "host_ed25519.pub", "user_ed25519", "user_ed25519.pub"}
