"""OpenSSH local port forwarding as a peer of the tunnel (``mux.mode = "ssh"``).

What users deploy instead of a thin-stream tunnel: ``ssh -N -L LISTEN:TARGET`` — one SSH
connection (RFC 4254 §7.2 ``direct-tcpip`` channels, one per forwarded TCP connection,
all multiplexed over one transport, RFC 4253) from the client side to an ``sshd`` next
to the servers. In the chain (:mod:`.chain`) it takes the tunnel's places: ``sshd`` in
the server namespace (where the tunnel's core runs), ``ssh -L`` in the middle namespace
(where the edge runs), so the SSH connection crosses the WAN as the trunk does and the
sink connects to the middle namespace as it does for the tunnel.

Each run generates its own keys (``ssh-keygen -t ed25519``) and configs in its own
directory and starts its own ``sshd -D -e -f <run config>``: the machine's sshd config,
host keys and ``~/.ssh`` are never read or written (``ssh -F none`` with every option on
the command line; ``sshd`` reads only the file given). The user key may only forward to
the one target (``authorized_keys`` options ``restrict,port-forwarding,permitopen``).
Cipher, MACs and key exchange are OpenSSH's defaults, as users get them; the run's meta
records the version and the negotiated cipher.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .netns import LabError

__all__ = ["SshFiles", "prepare", "sshd_argv", "ssh_argv", "ssh_version", "negotiated_cipher", "wait_listening"]

# sshd runs as root and then needs its privilege-separation directory; Debian's service
# creates it at start (compiled in: /run/sshd), we do the same when it is missing.
PRIVSEP_DIR = Path("/run/sshd")
SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")
SETUP_HINT = "install Debian's openssh-server and openssh-client (scripts/setup.sh as root)"


@dataclass(frozen=True)
class SshFiles:
    """Keys and configs of one run, all inside ``dir``."""

    dir: Path
    host: str  # sshd's address and port
    port: int
    user: str

    @property
    def sshd_config(self) -> Path:
        return self.dir / "sshd_config"

    @property
    def user_key(self) -> Path:
        return self.dir / "user_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def ssh_log(self) -> Path:
        return self.dir / "ssh.log"

    @property
    def sshd_log(self) -> Path:
        return self.dir / "sshd.log"


def prepare(directory: Path, host: str, port: int, target: str) -> SshFiles:
    """Generate a host key and a user key in ``directory`` (created, mode 0700) and write
    an ``sshd_config`` for ``host:port`` whose only allowed forward is ``target``
    (``ADDR:PORT``), the ``authorized_keys`` and the client's ``known_hosts``."""
    sshd_binary()  # fail before anything is written
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    keygen = _tool("ssh-keygen")
    for name, comment in (("host_ed25519", "thinwan-sshd"), ("user_ed25519", "thinwan-ssh")):
        key = directory / name
        for old in (key, key.with_suffix(".pub")):
            old.unlink(missing_ok=True)
        done = subprocess.run(
            [keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if done.returncode != 0:
            raise LabError(f"ssh-keygen failed: {done.stderr.strip()}")
    files = SshFiles(directory, host, port, pwd.getpwuid(os.getuid()).pw_name)
    host_pub = (directory / "host_ed25519.pub").read_text().split()
    user_pub = (directory / "user_ed25519.pub").read_text().strip()
    # RFC 4254 §7.2 direct-tcpip to `target` only; no shell, pty, agent or X11.
    (directory / "authorized_keys").write_text(f'restrict,port-forwarding,permitopen="{target}" {user_pub}\n')
    files.known_hosts.write_text(f"[{host}]:{port} {host_pub[0]} {host_pub[1]}\n")
    files.sshd_config.write_text(_sshd_config(directory, host, port, target))
    return files


def sshd_argv(files: SshFiles) -> list[str]:
    """``sshd`` in the foreground (``-D``), logging to stderr (``-e``), this run's config
    only (``-f``). As root it needs :data:`PRIVSEP_DIR`, created here when missing."""
    if os.geteuid() == 0 and not PRIVSEP_DIR.is_dir():
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    return [sshd_binary(), "-D", "-e", "-f", str(files.sshd_config)]


def ssh_argv(files: SshFiles, forwards: list[tuple[str, int, str, int]]) -> list[str]:
    """``ssh -N`` with one ``-L LISTEN_ADDR:LISTEN_PORT:TO_ADDR:TO_PORT`` per forward: one
    SSH connection to this run's sshd, no remote command, no config file (``-F none``),
    this run's key and known host only. ``-v`` logs the negotiated algorithms."""
    argv = [
        _tool("ssh"),
        "-F",
        "none",
        "-N",
        "-v",
        "-E",
        str(files.ssh_log),
        "-p",
        str(files.port),
        "-i",
        str(files.user_key),
        "-l",
        files.user,
    ]
    options = {
        "IdentitiesOnly": "yes",
        "IdentityAgent": "none",
        "BatchMode": "yes",
        "StrictHostKeyChecking": "yes",
        "UserKnownHostsFile": str(files.known_hosts),
        "GlobalKnownHostsFile": "/dev/null",
        "UpdateHostKeys": "no",
        "ExitOnForwardFailure": "yes",
        "ControlMaster": "no",
        "ControlPath": "none",
    }
    for key, value in options.items():
        argv += ["-o", f"{key}={value}"]
    for listen, lport, to, tport in forwards:
        argv += ["-L", f"{listen}:{lport}:{to}:{tport}"]
    return [*argv, files.host]


def ssh_version() -> str:
    """``ssh -V`` (e.g. ``OpenSSH_9.2p1 Debian-2+deb12u6, OpenSSL 3.0.17 1 Jul 2025``)."""
    done = subprocess.run([_tool("ssh"), "-V"], capture_output=True, text=True, timeout=10)
    return (done.stderr or done.stdout).strip()


def negotiated_cipher(ssh_log: Path) -> str | None:
    """The client → server cipher from ``ssh -v``'s ``kex: client->server cipher: …`` line."""
    try:
        text = ssh_log.read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"kex: client->server cipher: (\S+)", text)
    return m.group(1) if m else None


def wait_listening(pid: int, addr: str, port: int, timeout: float, proc: subprocess.Popen[Any], what: str) -> None:
    """Wait until a TCP socket listens on ``addr:port`` in process ``pid``'s network
    namespace (``/proc/PID/net/tcp`` shows that namespace's sockets), so no probe
    connection is needed (a probe through a forward would reach the target)."""
    want = (ipaddress.IPv4Address(addr), port)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError(f"{what} exited (status {proc.returncode}) before listening on {addr}:{port}")
        if want in _listeners(pid):
            return
        time.sleep(0.05)
    raise LabError(f"{what} not listening on {addr}:{port} within {timeout:g} s")


def sshd_binary() -> str:
    """Absolute path of ``sshd`` (it re-executes itself and refuses a relative path)."""
    for candidate in (shutil.which("sshd"), *SSHD_CANDIDATES):
        if candidate and os.access(candidate, os.X_OK):
            return str(Path(candidate).resolve())
    raise LabError(f"sshd not found: {SETUP_HINT}")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise LabError(f"{name} not found: {SETUP_HINT}")
    return path


def _listeners(pid: int) -> set[tuple[ipaddress.IPv4Address, int]]:
    """(address, port) of every listening IPv4 TCP socket in ``pid``'s namespace."""
    try:
        lines = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return set()
    found = set()
    for line in lines:
        fields = line.split()
        if len(fields) < 4 or fields[3] != "0A":  # TCP_LISTEN
            continue
        ip, port = fields[1].split(":")
        found.add((ipaddress.IPv4Address(int(ip, 16).to_bytes(4, "little")), int(port, 16)))
    return found


def _sshd_config(directory: Path, host: str, port: int, target: str) -> str:
    return f"""# sshd of one thinwan run (docs/mux.md "OpenSSH as a peer"); no other file is read.
ListenAddress {host}:{port}
HostKey "{directory / "host_ed25519"}"
PidFile none
AuthorizedKeysFile "{directory / "authorized_keys"}"
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
# The run directory may lie under /tmp (mode 1777), which StrictModes refuses.
StrictModes no
AllowTcpForwarding local
PermitOpen {target}
AllowAgentForwarding no
AllowStreamLocalForwarding no
X11Forwarding no
PermitTTY no
PermitTunnel no
UseDNS no
LogLevel VERBOSE
"""
