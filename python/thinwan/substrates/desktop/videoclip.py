"""The video benchmark's clip and player (Lai and Nieh 2006, "Benchmarks": a 34.75-s,
834-frame, 352×240, 24 fps clip, played at 24 fps and again at 1 fps).

The source's clip is not available, so ffmpeg renders ours: a zoom into the Mandelbrot
set (``mandelbrot`` test source), where every frame differs from the last over the whole
picture and has fine detail, as a camera pan does — a worst case for a remote display,
unlike a test card whose frames differ only in small areas. MPEG-4 part 2 at a fixed
quantiser (cheap to decode, so the server's CPU, not the decoder, limits nothing), with
ffmpeg's bit-exact flags so the same settings give the same file.

mpv plays it on the remote desktop at the clip's own size (the source's window), paused
on the first frame until a click — the driver's input at the client, which crosses the
WAN — starts it; it stays on the last frame afterwards, so closing the window does not
count as video. The slowed-down reference plays ``ref_frames`` frames at ``ref_fps``:
834 frames at 1 fps would take 14 minutes, and data per frame is what the formula needs.

**Frame marks**: the bottom-left strip of every frame carries its number as a barcode —
a white and a black guard block, then ``MARK_BITS`` blocks, white for a 1 bit (least
significant first), each ``MARK_BLOCK`` pixels square on the codec's 16-pixel macroblock
grid so a lossy codec keeps them black or white. The client's screen watcher reads the
number of the frame each picture shows, so "frames displayed" counts frames, not the
partial pictures a frame drawn in pieces leaves on the way (screenwatch.py).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Clip",
    "ClipError",
    "write_clip",
    "mpv_argv",
    "CLIP_FRAMES",
    "CLIP_FPS",
    "CLIP_SIZE",
    "MARK_BITS",
    "MARK_BLOCK",
    "CLIP_RECIPE",
]

CLIP_FRAMES = 834
CLIP_FPS = 24
CLIP_SIZE = (352, 240)
# Frame marks (module docstring): 10 bits number up to 1,023 frames.
MARK_BITS = 10
MARK_BLOCK = 16
# What the clip's pixels depend on beyond its settings (a finished video cell of another
# recipe is run again: execute.desktop_runs._cell_key).
CLIP_RECIPE = "mandelbrot-mpeg4-q4+marks10"
# The player's key/mouse bindings: only a left click does anything (starts playback).
MPV_INPUT = "MBTN_LEFT cycle pause\n"


class ClipError(RuntimeError):
    """ffmpeg is missing or failed."""


@dataclass(frozen=True)
class Clip:
    path: Path
    frames: int
    fps: float
    size: tuple[int, int]
    bytes: int
    sha256: str

    @property
    def seconds(self) -> float:
        return self.frames / self.fps

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.path.name,
            "frames": self.frames,
            "fps": self.fps,
            "size": list(self.size),
            "seconds": self.seconds,
            "bytes": self.bytes,
            "sha256": self.sha256,
        }


def write_clip(
    directory: str | Path, frames: int = CLIP_FRAMES, fps: int = CLIP_FPS, size: tuple[int, int] = CLIP_SIZE
) -> Clip:
    """Render the clip into ``directory`` (``clip.mkv``) with ffmpeg."""
    if shutil.which("ffmpeg") is None:
        raise ClipError(
            "ffmpeg is not installed (the video benchmark renders its clip with it; run the set-up as root)"
        )
    w, h = size
    if frames > 2**MARK_BITS:
        raise ClipError(f"{frames} frames do not fit the clip's {MARK_BITS}-bit frame marks (at most {2**MARK_BITS})")
    if h < MARK_BLOCK or w < (2 + MARK_BITS) * MARK_BLOCK:
        raise ClipError(f"a {w}×{h} clip has no room for its frame marks ({(2 + MARK_BITS) * MARK_BLOCK}×{MARK_BLOCK})")
    out = Path(directory) / "clip.mkv"
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [
        "ffmpeg", "-v", "error", "-y", "-nostdin",
        "-f", "lavfi", "-i", f"mandelbrot=size={w}x{h}:rate={fps}:start_scale=3:end_scale=0.3",
        "-vf", mark_filter(h),
        "-frames:v", str(frames), "-c:v", "mpeg4", "-q:v", "4",
        "-fflags", "+bitexact", "-flags:v", "+bitexact", "-map_metadata", "-1", str(out),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise ClipError(f"ffmpeg failed rendering the clip: {done.stderr.strip()[-500:]}")
    data = out.read_bytes()
    return Clip(out, frames, float(fps), (w, h), len(data), hashlib.sha256(data).hexdigest())


def mark_filter(height: int) -> str:
    """ffmpeg's filter chain drawing each frame's number (``n``, from 0) as the barcode
    of the module docstring along the bottom of a ``height``-pixel clip."""
    b, y = MARK_BLOCK, height - MARK_BLOCK
    box = f"drawbox=y={y}:h={b}:t=fill"
    parts = [f"{box}:x=0:w={(2 + MARK_BITS) * b}:color=black", f"{box}:x=0:w={b}:color=white"]
    parts += [
        f"{box}:x={(2 + k) * b}:w={b}:color=white:enable='eq(mod(floor(n/{2**k}),2),1)'" for k in range(MARK_BITS)
    ]
    return ",".join(parts)


def mpv_argv(clip: Clip, x: int, y: int, input_conf: Path, speed: float = 1.0, frames: int | None = None) -> list[str]:
    """mpv showing ``clip`` at (x, y) on the display, paused until a click; ``speed`` < 1
    slows it down (1/24 plays a 24 fps clip at 1 fps), ``frames`` stops after that many."""
    w, h = clip.size
    argv = [
        "mpv", "--no-config", "--no-audio", "--really-quiet", "--vo=x11", "--hwdec=no",
        f"--geometry={w}x{h}+{x}+{y}", "--no-border", "--osc=no", "--osd-level=0",
        "--pause", "--keep-open=yes", "--cursor-autohide=no",
        "--input-default-bindings=no", f"--input-conf={input_conf}", f"--speed={speed:.9g}",
    ]  # fmt: skip
    if frames is not None:
        argv.append(f"--frames={frames}")
    return [*argv, str(clip.path)]
