"""A benchmark environment (config.desktop_bench.Env) → the lab that emulates it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...config.desktop_bench import Env
from ..lab.linkspec import LabSpec, LinkSpec, TcpSettings
from .settings import DesktopSettings

__all__ = ["env_lab_spec", "env_json", "env_settings"]


def env_lab_spec(env: Env, seed: int = 1) -> LabSpec:
    """Half the RTT each way, the same rate, jitter, loss and queue both ways; the TCP
    settings of both namespaces, with socket buffers clamped to ``window_bytes``
    (net.ipv4.tcp_rmem/tcp_wmem: initial and maximum) when it is set."""
    link = LinkSpec.symmetric(
        seed=seed,
        rate_bps=int(round(env.rate_mbit * 1e6)),
        delay_ms=env.rtt_ms / 2.0,
        jitter=env.jitter,
        loss=env.loss,
        queue_packets=env.queue_packets,
    )
    tcp = TcpSettings(congestion_control=env.congestion_control)
    if env.window_bytes is not None:
        tcp = replace(tcp, rmem_max=env.window_bytes, wmem_max=env.window_bytes)
    return LabSpec(link=link, tcp=tcp)


def env_json(env: Env, seed: int = 1) -> dict[str, Any]:
    """What the results record of an environment: its keys, the emulator's seed, its link
    (one direction; both are alike) and the sysctls that differ per environment."""
    spec = env_lab_spec(env, seed)
    sysctls = spec.tcp.sysctls()
    return {
        **env.to_json(),
        "seed": seed,
        "link": spec.link.fwd.to_json(),
        "tcp_rmem": sysctls["net.ipv4.tcp_rmem"],
        "tcp_wmem": sysctls["net.ipv4.tcp_wmem"],
    }


def env_settings(settings: DesktopSettings, env: Env) -> DesktopSettings:
    """The file's desktop settings with what ``env`` overrides (its idle watch and how
    long a platform may take to come up)."""
    return replace(
        settings,
        idle_s=settings.idle_s if env.idle_s is None else env.idle_s,
        ready_timeout_s=settings.ready_timeout_s if env.ready_timeout_s is None else env.ready_timeout_s,
    )
