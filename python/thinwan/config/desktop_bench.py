"""The desktop benchmark file (``thinwan desktop run BENCH.toml``; docs/desktop.md lists
every key): which platforms, in which environments, which operations, how often, and the
environments themselves — the built-in ones of the source (Lai and Nieh 2006) plus any the
file adds. Validated on load; a bad key fails naming the file and the key.

::

    [benchmark]
    platforms = ["tigervnc", "x11vnc", "x11", "xrdp"]
    envs = ["lan", "wan"]
    repeat = 10

    [env.satellite]            # a user's environment
    rtt_ms = 600
    rate_mbit = 10
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .desktop_defaults import DEFAULT_IDLE_MS, DEFAULT_REPEAT, IDLE_S, MAX_WAIT_S, OPERATIONS, PAUSE_S
from .files import ScenarioError, read_toml

__all__ = [
    "Bench",
    "Env",
    "BUILTIN_ENVS",
    "PLATFORM_NAMES",
    "WebSettings",
    "VideoSettings",
    "load_bench",
    "bench_from_data",
]

PLATFORM_NAMES = ("tigervnc", "x11vnc", "x11", "xrdp")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Env(_Strict):
    """One emulated path (both directions alike). ``window_bytes`` clamps every socket's
    receive and send buffer (net.ipv4.tcp_rmem/tcp_wmem maxima) in both namespaces."""

    rtt_ms: float = Field(0.0, ge=0)  # round-trip delay of the emulator (half each way)
    rate_mbit: float = Field(0.0, ge=0)  # 0 = unshaped
    jitter: str = "none"  # thinwan-link's: none | uniform:10% | uniform:2ms | normal:1ms
    loss: float = Field(0.0, ge=0, le=1)  # i.i.d. random loss, each direction
    queue_packets: int = Field(1000, ge=0)
    window_bytes: int | None = Field(None, ge=4096)  # None: Linux's autotuning (up to 6 MB)
    congestion_control: str = "cubic"  # Linux's default
    # The slow-motion idle watch in this environment (DesktopSettings.idle_s; None: the
    # file's [desktop] idle_s). A lossy path needs it longer than a retransmission
    # timeout's silence, or the pause ends inside an update.
    idle_s: float | None = Field(None, gt=0)
    # How long a platform may take to come up in this environment (DesktopSettings.
    # ready_timeout_s; None: the file's [desktop] ready_timeout_s). Plain X's Tk start-up
    # waits on hundreds of X replies, each a round trip that a lossy path can stretch to a
    # retransmission timeout.
    ready_timeout_s: float | None = Field(None, gt=0)
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump()


# The source's environments (spec "Environments of the source"). Its WAN: ~66 ms RTT,
# ~45 Mbit/s, loss < 0.05 % (we emulate none: one random loss in a run of ten shows as an
# outlier, and the loss environments cover loss); its LAN: 100 Mbit/s, ~0 RTT.
_WAN = {"rtt_ms": 66.0, "rate_mbit": 45.0}
BUILTIN_ENVS: dict[str, Env] = {
    "lan": Env(rate_mbit=100.0, description="100 Mbit/s, no emulated delay"),
    "wan": Env(**_WAN, description="the source's cross-country path: 66 ms RTT, 45 Mbit/s"),
    "wan-small-window": Env(
        **_WAN, window_bytes=16384, description="wan with 16 KB socket buffers (the source's default window)"
    ),
    "wan-1mb": Env(**_WAN, window_bytes=1 << 20, description="wan with 1 MB socket buffers"),
    "wan-loss-1": Env(**_WAN, loss=0.01, description="wan with 1 % random loss each way"),
    # 10 % each way: two losses in a row (1 %) put 0.8 s of backed-off retransmission
    # timeouts (266 + 532 ms at 66 ms RTT) inside an update, so the pause watches for 2 s;
    # and start-up gets 120 s (plain X's Tk did not map its window within 30 s).
    "wan-loss-10": Env(
        **_WAN, loss=0.10, idle_s=2.0, ready_timeout_s=120.0, description="wan with 10 % random loss each way"
    ),
}


class _BenchmarkSection(_Strict):
    name: str = ""
    description: str = ""
    platforms: list[Literal["tigervnc", "x11vnc", "x11", "xrdp"]] = Field(
        default_factory=lambda: list(PLATFORM_NAMES), min_length=1
    )
    envs: list[str] = Field(default_factory=lambda: ["lan", "wan"], min_length=1)
    operations: list[Literal["letter", "scroll", "fill", "red_bitmap", "image", "web", "video"]] = Field(
        default_factory=lambda: list(OPERATIONS), min_length=1
    )
    repeat: int = Field(DEFAULT_REPEAT, ge=1)
    idle_ms: float = Field(DEFAULT_IDLE_MS, gt=0)
    seed: int = 1  # of the emulator's loss streams (the k-th env of `envs` uses seed + k)
    # The client-timing self-check (docs/desktop.md "Self-checks"): "fail" fails the run
    # when the analyser and the client's screen disagree on an input; "report" only
    # records the agreement in checks.client_timing.
    client_timing: Literal["fail", "report"] = "fail"


class _DesktopSection(_Strict):
    """DesktopSettings (docs/desktop.md "API")."""

    width: int = Field(1024, ge=320)
    height: int = Field(768, ge=240)
    depth: Literal[8, 16, 24] = 24
    pause_s: float = Field(PAUSE_S, gt=0)
    idle_s: float = Field(IDLE_S, gt=0)
    max_wait_s: float = Field(MAX_WAIT_S, gt=0)
    verify: bool = True
    ready_timeout_s: float = Field(30.0, gt=0)


class WebSettings(_Strict):
    """The web benchmark (operation ``web``; docs/desktop.md "Web and video")."""

    pages: int = Field(54, ge=1, le=999)  # the source's 54
    # The number of the first page: a slow cell (plain X over 10 % loss: ~2 minutes a
    # page) can run its pages in slices, each in its own lab (`--pages` of desktop run).
    first_page: int = Field(1, ge=1, le=999)
    passes: int = Field(2, ge=1, le=10)  # the second and later load from the browser's cache
    seed: int = 2006  # of the generated pages
    # Also run the pages without pauses (each page loads the next as soon as it has
    # loaded) on this platform, and compare the total data with the slow-motion run's
    # (the source's check that slow motion does not change the work). "" = never.
    # xrdp: it sends as much without pauses as with them, and its totals repeat within
    # 3 % run to run; plain X's differ by up to 10 % between two slow-motion runs
    # (whole-window repaints as Chromium times them), more than the 5 % the check asks
    # (docs/desktop-media.md "Slow motion vs no pauses").
    method_check: str = "xrdp"
    # ... in these environments only: on a slow or lossy WAN a run without pauses takes
    # longer than max_run_s (x11 behind a 64-KiB window did), and LAN and WAN suffice to
    # show whether slow motion changes the work.
    method_check_envs: list[str] = Field(default_factory=lambda: ["lan", "wan"])
    max_run_s: float = Field(600.0, gt=0)  # the run without pauses must end within this


class VideoSettings(_Strict):
    """The video benchmark (operation ``video``; docs/desktop.md "Web and video")."""

    frames: int = Field(834, ge=2)  # the source's clip: 834 frames at 24 fps = 34.75 s
    fps: int = Field(24, ge=1, le=120)
    width: int = Field(352, ge=16)
    height: int = Field(240, ge=16)
    ref_fps: float = Field(1.0, gt=0)  # the reference play: slow enough to deliver every frame…
    ref_frames: int = Field(120, ge=2)  # …over this many frames (all 834 at 1 fps: 14 min)
    frame_gap_ms: float = Field(0.0, ge=0)  # screen-watch gap between frames; 0 = half a frame time


class _File(_Strict):
    benchmark: _BenchmarkSection = Field(default_factory=_BenchmarkSection)
    desktop: _DesktopSection = Field(default_factory=_DesktopSection)
    web: WebSettings = Field(default_factory=WebSettings)
    video: VideoSettings = Field(default_factory=VideoSettings)
    env: dict[str, Env] = Field(default_factory=dict)


@dataclass(frozen=True)
class Bench:
    """A validated benchmark file."""

    name: str
    description: str
    platforms: tuple[str, ...]
    envs: dict[str, Env]  # the ones to run, in order
    operations: tuple[str, ...]
    repeat: int
    idle_ms: float
    seed: int
    client_timing: str  # "fail" | "report"
    desktop: dict[str, Any]  # DesktopSettings keyword arguments
    source: str
    known_envs: dict[str, Env]  # built-ins and the file's own: what --env may name
    web: WebSettings = WebSettings()
    video: VideoSettings = VideoSettings()
    file_envs: tuple[str, ...] = ()  # benchmark.envs as the file lists them

    def env_seed(self, env: str) -> int:
        """The emulator's seed in ``env``: ``seed`` + the environment's place in the file's
        list (then among the others it may name), so choosing a subset with ``--env`` runs
        each environment exactly as the whole matrix does."""
        order = list(dict.fromkeys([*self.file_envs, *self.known_envs]))
        return self.seed + order.index(env)

    def select(
        self,
        platforms: list[str] | None = None,
        envs: list[str] | None = None,
        repeat: int | None = None,
        client_timing: str | None = None,
        pages: tuple[int, int] | None = None,
    ) -> Bench:
        """The same benchmark narrowed to ``platforms``/``envs`` (command-line choices, any
        environment the file or the built-ins define) and to the web pages ``pages``
        (first, last: a slice of the file's), with ``repeat`` and ``client_timing``
        ("fail" or "report")."""
        from dataclasses import replace

        known = self.known_envs
        out = self
        if platforms:
            bad = [p for p in platforms if p not in PLATFORM_NAMES]
            if bad:
                raise ScenarioError(
                    f"--platform: unknown platform(s) {', '.join(bad)} (known: {', '.join(PLATFORM_NAMES)})"
                )
            out = replace(out, platforms=tuple(platforms))
        if envs:
            bad = [e for e in envs if e not in known]
            if bad:
                raise ScenarioError(f"--env: unknown environment(s) {', '.join(bad)} (known: {', '.join(known)})")
            out = replace(out, envs={e: known[e] for e in envs})
        if repeat is not None:
            out = replace(out, repeat=repeat)
        if client_timing is not None:
            if client_timing not in ("fail", "report"):
                raise ScenarioError(f"--client-timing: expected fail or report, got {client_timing!r}")
            out = replace(out, client_timing=client_timing)
        if pages is not None:
            if "web" not in self.operations:
                raise ScenarioError(f"--pages: {self.source} runs no web benchmark (benchmark.operations)")
            first, last = pages
            have = (self.web.first_page, self.web.first_page + self.web.pages - 1)
            if not have[0] <= first <= last <= have[1]:
                raise ScenarioError(
                    f"--pages: {first}-{last} is not within the file's web pages {have[0]}-{have[1]}"
                    f" ({self.source}: web.first_page, web.pages)"
                )
            web = self.web.model_copy(update={"first_page": first, "pages": last - first + 1})
            out = replace(out, web=web)
        return out


def load_bench(path: str | Path) -> Bench:
    """Read and validate a benchmark file; errors name the file and the key."""
    path = Path(path)
    return bench_from_data(read_toml(path, what="a benchmark file"), str(path))


def bench_from_data(data: dict[str, Any], where: str = "<benchmark>") -> Bench:
    try:
        f = _File.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            key = ".".join(map(str, err["loc"]))
            problem = {"extra_forbidden": "unknown key", "missing": "missing key"}.get(err["type"], err["msg"])
            lines.append(f"{where}: {key}: {problem}")
        raise ScenarioError("\n".join(lines)) from None
    clash = sorted(set(f.env) & set(BUILTIN_ENVS))
    if clash:
        raise ScenarioError(f"{where}: env.{clash[0]}: a built-in environment; give yours another name")
    known = {**BUILTIN_ENVS, **f.env}
    for i, e in enumerate(f.benchmark.envs):
        if e not in known:
            raise ScenarioError(f"{where}: benchmark.envs.{i}: unknown environment {e!r} (known: {', '.join(known)})")
    for name, env in f.env.items():
        _check_jitter(env.jitter, f"{where}: env.{name}.jitter")
    if f.web.method_check and f.web.method_check not in PLATFORM_NAMES:
        raise ScenarioError(
            f"{where}: web.method_check: unknown platform {f.web.method_check!r} (known: {', '.join(PLATFORM_NAMES)})"
        )
    for i, e in enumerate(f.web.method_check_envs):
        if e not in known:
            raise ScenarioError(
                f"{where}: web.method_check_envs.{i}: unknown environment {e!r} (known: {', '.join(known)})"
            )
    if f.video.width > f.desktop.width or f.video.height > f.desktop.height:
        raise ScenarioError(f"{where}: video.width/height: the clip does not fit on the desktop")
    b = f.benchmark
    return Bench(
        name=b.name or Path(where).stem,
        description=b.description,
        platforms=tuple(dict.fromkeys(b.platforms)),
        envs={e: known[e] for e in dict.fromkeys(b.envs)},
        operations=tuple(dict.fromkeys(b.operations)),
        repeat=b.repeat,
        idle_ms=b.idle_ms,
        seed=b.seed,
        client_timing=b.client_timing,
        desktop=f.desktop.model_dump(),
        source=where,
        known_envs=known,
        web=f.web,
        video=f.video,
        file_envs=tuple(dict.fromkeys(b.envs)),
    )


def _check_jitter(text: str, where: str) -> None:
    import re

    if not re.fullmatch(r"none|(uniform|normal):\d+(\.\d+)?(%|ms)", text):
        raise ScenarioError(f"{where}: expected none, uniform:<n>% , uniform:<n>ms or normal:<n>ms, got {text!r}")
