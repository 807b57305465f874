"""One run of a ``topology.kind = "mux"`` scenario on the three-namespace chain.

``mux.mode = "direct"``: one TCP connection per stream, pump (server namespace) → sink
(client namespace) across the WAN and the last hop. ``mux.mode = "mux"``: the real
tunnel daemons — ``thinwan-mux core`` next to the pump, ``thinwan-mux edge`` in the
middle namespace with ``mux.trunks`` trunk connections — and the sink opening its
connections to the edge, which the core connects to the listening pump. The daemons'
configs (TOML, PSK auth with a fresh random key) are written per run into the raw
directory, with their logs. ``mux.mode = "ssh"``: OpenSSH in the daemons' places
(:mod:`.sshpeer`) — ``sshd`` next to the pump, ``ssh -N -L`` in the middle namespace,
one SSH connection across the WAN carrying every stream as a channel; keys, configs and
logs in the raw directory's ``ssh/``. ``mux.mode = "yamux"``: ``thinwan-yamux-peer core``
next to the pump and ``thinwan-yamux-peer edge`` in the middle, one yamux-multiplexed
TCP connection across the WAN (logs ``yamux-core.err``, ``yamux-edge.err``).

The records are those of docs/records.md, built by :func:`thinwan.analysis.lab_join.lab_records`
from the pump and sink logs (per-message delay = server write → client read, the same in
every mode) and the WAN emulator's event log. Per-hop times (``t_tx``, ``t_enq``, …) are
those of the WAN link in direct mode; in the other modes a message travels inside a
trunk (the SSH or yamux connection), so they are unknown (NaN), and the connection stats
are those of the local pump ↔ core (sshd, yamux core) sockets, not of the trunks.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from ...analysis.lab_join import lab_records
from ...analysis.metrics import ROLE_SHED
from ...config.scenario import LabSection, Scenario
from ...records.evlog import read_events
from ...records.schema import RunRecords
from ..binaries import find_binary
from . import sshpeer
from .chain import EDGE_ADDR, Chain
from .labrun import STUCK_S, lab_meta, pump_argv, read_logs, run_limit_s, sink_argv, wait_exit, wait_line, write_traffic
from .linkspec import lab_spec, last_hop_link
from .netns import LabError
from .topology import CLIENT_ADDR, SERVER_ADDR

__all__ = ["run_tunnel_once", "TRUNK_PORT", "SSH_PORT", "YAMUX_PORT"]

TRUNK_PORT = 7400
SSH_PORT = 7422  # the run's sshd, next to the pump
YAMUX_PORT = 7401  # the yamux peer's core, next to the pump
TARGET = "game"  # the core's name for the pump; the edge forwards to it by name
DAEMON_READY_S = 20.0


def run_tunnel_once(scenario: Scenario, opts: LabSection, run: int, raw: Path) -> RunRecords:
    """Run ``run`` of the mux-topology ``scenario`` on a fresh chain; raw logs go to ``raw``."""
    if scenario.topology.kind != "mux":
        raise LabError(f'{scenario.name}: topology.kind = {scenario.topology.kind!r}: the chain runs "mux" scenarios')
    if raw.exists():
        shutil.rmtree(raw)
    raw.mkdir(parents=True)
    spec = lab_spec(scenario, run, opts)
    notes = list(spec.notes)
    mode = scenario.mux.mode
    tunnel = mode != "direct"  # the pump listens, the sink connects to the middle
    if tunnel:
        notes.append(
            f"{mode}: per-hop times and connection stats of tunnelled messages are unknown (they travel in trunks)"
        )
    ssh: sshpeer.SshFiles | None = None
    peer_procs: list[subprocess.Popen[Any]] = []  # ssh or yamux peer, client side first
    write_traffic(scenario, raw)
    started = time.monotonic()
    port = f"{opts.port}"
    with Chain(spec.link, last_hop_link(scenario, run), spec.tcp, workdir=raw, notes=tuple(notes)) as chain:
        if tunnel:
            pump = chain.popen(
                "server",
                pump_argv(scenario, opts, run, raw, ["--listen", f"{SERVER_ADDR}:{port}"]),
                stdout=subprocess.PIPE,
                stderr=open(raw / "pump.err", "wb"),
            )  # noqa: SIM115
            wait_line(pump, b'"ready":true', 10.0, "pump")
            if mode == "ssh":
                ssh, peer_procs = _start_ssh(chain, opts, raw)
            elif mode == "yamux":
                peer_procs = _start_yamux(chain, opts, raw)
            else:
                _start_daemons(chain, scenario, opts, raw)
            sink = chain.popen(
                "client",
                sink_argv(scenario, raw, ["--connect", f"{EDGE_ADDR}:{port}"]),
                stdout=subprocess.DEVNULL,
                stderr=open(raw / "sink.err", "wb"),
            )  # noqa: SIM115
        else:
            sink = chain.popen(
                "client",
                sink_argv(scenario, raw, ["--listen", f"0.0.0.0:{port}"]),
                stdout=subprocess.PIPE,
                stderr=open(raw / "sink.err", "wb"),
            )  # noqa: SIM115
            wait_line(sink, b'"ready":true', 10.0, "sink")
            pump = chain.popen(
                "server",
                pump_argv(scenario, opts, run, raw, ["--connect", f"{CLIENT_ADDR}:{port}"]),
                stdout=subprocess.DEVNULL,
                stderr=open(raw / "pump.err", "wb"),
            )  # noqa: SIM115
        wait_exit(pump, run_limit_s(scenario), "pump", raw / "pump.err")
        wait_exit(sink, STUCK_S, "sink", raw / "sink.err")
        # The client side first: its connection ends, and with it the server side's session.
        _stop(peer_procs)
        if not chain.emulator_alive():
            raise LabError(f"thinwan-link died during the run: {_tail(raw / 'wan.err')} {_tail(raw / 'lasthop.err')}")
        stats = chain.down()
        notes = list(chain.notes)
    events = read_events(raw / "wan-events.bin")
    links = {
        "link": spec.link.to_json(),
        "link_stats": stats.get("wan"),
        "last_hop": {"link": last_hop_link(scenario, run).to_json(), "link_stats": stats.get("lasthop")},
    }
    if ssh is not None:
        links["ssh"] = {
            "version": sshpeer.ssh_version(),
            "cipher": sshpeer.negotiated_cipher(ssh.ssh_log),
            "connections": 1,
            "sshd": f"{SERVER_ADDR}:{SSH_PORT}",
        }
    elif mode == "yamux":
        links["yamux"] = {"implementation": "thinwan-yamux-peer (yamux crate, no TLS)", "connections": 1}
    elif tunnel:
        edge = _log_events(raw / "edge.log")
        links["mux"] = {
            "trunks": scenario.mux.trunks,
            "lanes_up": sorted({e["lane"] for e in edge if e.get("message") == "trunk lane up"}),
            # Every trunk connection after the first of each lane is a reconnect (then a resume).
            "reconnects": sum(e.get("message") == "trunk connected" for e in edge) - scenario.mux.trunks,
            "streams_reset": sum(e.get("message") == "stream reset" for e in edge),
            # Adaptive lanes: each side's session reports every 5 s (docs/mux.md "Adaptive
            # lanes"); each side places its own sending streams, the core the server's data.
            "lane_reports": {
                role: [_lane_report(e) for e in events if e.get("message") == "lane report"]
                for role, events in (("edge", edge), ("core", _log_events(raw / "core.log")))
            },
        }
    meta = lab_meta(scenario, opts, run, raw, started, len(events), spec.tcp, notes, links)
    pump, sink, conns = read_logs(raw)
    records = lab_records(
        scenario,
        events,
        pump,
        sink,
        conns,
        spec.link.to_json(),
        stats.get("wan"),
        meta,
    )
    if tunnel and scenario.mux.shed:
        # A shed stream reached the pump from the edge across the WAN, not from the core
        # next to it: role 5, as the simulator marks it (summary `streams_shed`).
        local = {c["conn"] for c in conns["conns"] if str(c.get("remote", "")).startswith(f"{SERVER_ADDR}:")}
        records.connections.loc[~records.connections["conn"].isin(local), "role"] = ROLE_SHED
    return records


def _start_ssh(chain: Chain, opts: LabSection, raw: Path) -> tuple[sshpeer.SshFiles, list[subprocess.Popen[Any]]]:
    """``sshd`` next to the pump, ``ssh -N -L EDGE:port:SERVER:port`` in the middle (the
    tunnel's core and edge placement); back when the forward listens, with the files
    and the two processes, client first."""
    target = f"{SERVER_ADDR}:{opts.port}"
    files = sshpeer.prepare(raw / "ssh", SERVER_ADDR, SSH_PORT, target)
    log = open(files.sshd_log, "wb")  # noqa: SIM115 (owned by the child)
    sshd = chain.popen("server", sshpeer.sshd_argv(files), stdout=subprocess.DEVNULL, stderr=log)
    log.close()
    try:
        sshpeer.wait_listening(sshd.pid, SERVER_ADDR, SSH_PORT, DAEMON_READY_S, sshd, "sshd")
    except LabError as e:
        raise LabError(f"{e}: {_tail(files.sshd_log)}") from None
    ssh = chain.popen(
        "middle",
        sshpeer.ssh_argv(files, [(EDGE_ADDR, opts.port, SERVER_ADDR, opts.port)]),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        sshpeer.wait_listening(ssh.pid, EDGE_ADDR, opts.port, DAEMON_READY_S, ssh, "ssh -L")
    except LabError as e:
        raise LabError(f"{e}: {_tail(files.ssh_log)} | sshd: {_tail(files.sshd_log)}") from None
    return files, [ssh, sshd]


def _start_yamux(chain: Chain, opts: LabSection, raw: Path) -> list[subprocess.Popen[Any]]:
    """``thinwan-yamux-peer core`` next to the pump, ``edge`` in the middle (the tunnel's
    placement); back when the edge's forward listens (it listens once its connection to
    the core is up), with the two processes, edge first."""
    binary = str(find_binary("thinwan-yamux-peer"))
    procs = []
    for role, side, argv, listens in (
        ("core", "server", ["--listen", f"{SERVER_ADDR}:{YAMUX_PORT}", "--target", f"{TARGET}={SERVER_ADDR}:{opts.port}"],
         (SERVER_ADDR, YAMUX_PORT)),
        ("edge", "middle", ["--connect", f"{SERVER_ADDR}:{YAMUX_PORT}", "--forward", f"{TARGET}={EDGE_ADDR}:{opts.port}"],
         (EDGE_ADDR, opts.port)),
    ):  # fmt: skip
        err = raw / f"yamux-{role}.err"
        log = open(err, "wb")  # noqa: SIM115 (owned by the child)
        p = chain.popen(side, [binary, role, *argv], stdout=subprocess.DEVNULL, stderr=log)
        log.close()
        procs.insert(0, p)
        try:
            sshpeer.wait_listening(p.pid, *listens, DAEMON_READY_S, p, f"thinwan-yamux-peer {role}")
        except LabError as e:
            raise LabError(f"{e}: {_tail(err)}") from None
    return procs


def _stop(procs: list[subprocess.Popen[Any]]) -> None:
    """Stop ``procs`` in order (``ssh`` then ``sshd``, the yamux edge then core); the
    chain's teardown kills whatever of sshd's per-connection children (each in its own
    session) is still in a namespace."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
        try:
            p.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _start_daemons(chain: Chain, scenario: Scenario, opts: LabSection, raw: Path) -> None:
    """Core next to the pump, edge in the middle; back when every trunk lane is up."""
    binary = find_binary("thinwan-mux")
    psk = raw / "psk.txt"
    psk.write_text(secrets.token_hex(24) + "\n")
    psk.chmod(0o600)
    core, edge = daemon_configs(scenario, opts)
    (raw / "core.toml").write_text(core)
    (raw / "edge.toml").write_text(edge)
    mux = scenario.mux
    for role, side in (("core", "server"), ("edge", "middle")):
        log = open(raw / f"{role}.log", "wb")  # noqa: SIM115 (owned by the child)
        chain.popen(
            side, [str(binary), role, "--config", str(raw / f"{role}.toml")], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        _wait_ready(chain, raw / f"{role}.log", role, mux.trunks)


def daemon_configs(scenario: Scenario, opts: LabSection) -> tuple[str, str]:
    """The core's and the edge's TOML for ``scenario`` (PSK in ``psk.txt`` beside them)."""
    mux = scenario.mux
    trunk = f"notsent_lowat = {mux.notsent_lowat_bytes}\n"
    if mux.bulk_limit:
        trunk += "bulk_limit = true\n"
    if mux.thin_linear_timeouts:
        trunk += "thin_linear_timeouts = true\n"
    if mux.rto_min_ms is not None:
        trunk += f"rto_min_ms = {mux.rto_min_ms}\n"
    # The edge decides the lanes (docs/mux.md "Adaptive lanes"): `trunks` at start, up to
    # `max_lanes`; the core follows the edge's Hello.
    # A scenario's unset `lane_rule` is the backlog rule (so sweeps from before the key
    # keep their meaning), the daemons' default is the held rule: always write it.
    lanes = ""
    if mux.lanes == "adaptive":
        lanes = f'lanes = "adaptive"\nmax_connections = {mux.max_lanes}\nlane_rule = "{mux.lane_rule or "backlog"}"\n'
    limits = f"[limits]\nmax_frame_payload = {mux.frame_payload_bytes}\n"
    # mux.shed: the edge connects a shed client to the pump itself, across the same WAN
    # (the simulator's role-5 connection; docs/mux.md "Shedding").
    shed = f'shed = {{ direct = "{SERVER_ADDR}:{opts.port}", slack_ms = {mux.shed_slack_ms:g} }}\n' if mux.shed else ""
    core = (
        f'[trunk]\nlisten = "{SERVER_ADDR}:{TRUNK_PORT}"\n{trunk}\n[auth]\npsk_file = "psk.txt"\n\n{limits}\n'
        f'[log]\nformat = "json"\n\n[[target]]\nname = "{TARGET}"\nconnect = "{SERVER_ADDR}:{opts.port}"\n'
    )
    edge = (
        f'[trunk]\nconnect = "{SERVER_ADDR}:{TRUNK_PORT}"\nconnections = {mux.trunks}\n{lanes}{trunk}\n'
        f'[auth]\npsk_file = "psk.txt"\n\n{limits}\n[log]\nformat = "json"\n\n'
        f'[[forward]]\nname = "{TARGET}"\nlisten = "{EDGE_ADDR}:{opts.port}"\n{shed}'
    )
    return core, edge


def _wait_ready(chain: Chain, log: Path, role: str, trunks: int) -> None:
    """The core listens; the edge has every lane up."""
    deadline = time.monotonic() + DAEMON_READY_S
    while time.monotonic() < deadline:
        events = _log_events(log)
        if role == "core" and any(e.get("message") == "core listening" for e in events):
            return
        if role == "edge" and len({e["lane"] for e in events if e.get("message") == "trunk lane up"}) >= trunks:
            return
        if not chain.processes_alive():
            break
        time.sleep(0.05)
    raise LabError(f"thinwan-mux {role} not ready within {DAEMON_READY_S:g} s: {_tail(log)}")


def _log_events(path: Path) -> list[dict[str, Any]]:
    """The ``fields`` of each JSON log line of a daemon (``[log] format = "json"``)."""
    events = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            events.append(json.loads(line)["fields"])
        except (ValueError, KeyError, TypeError):
            continue  # a line still being written, or not a log record
    return events


def _lane_report(e: dict[str, Any]) -> dict[str, Any]:
    """One ``lane report`` log record: lanes wanted, streams on each, moves so far."""
    streams = [int(n) for n in str(e.get("streams", "")).split(",") if n]
    keys = ("wanted", "moves", "move_giveups", "lanes_opened", "lanes_closed")
    return {"streams": streams, **{k: int(e.get(k, 0)) for k in keys}}


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""
