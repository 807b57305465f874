"""The two JPEGs of the micro-benchmark, generated deterministically with Pillow.

The source's *red bitmap* is a 1.78 KB red JPEG and its *image* a 15.5 KB photograph, both
shown at 320×240. We draw our own: a plain red picture, and a synthetic landscape (sky
gradient, sun, hills, textured ground, seeded noise) that compresses like a photograph
(smooth areas and fine texture). For each, the JPEG quality is the one whose file comes
closest to the source's size; the sizes we got are returned and recorded with the results.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

__all__ = ["RED_TARGET_BYTES", "PHOTO_TARGET_BYTES", "BenchImages", "write_images"]

WIDTH, HEIGHT = 320, 240
# The source's "1.78 KB" and "15.5 KB", read as KiB (Windows of 2006 counted so).
RED_TARGET_BYTES = round(1.78 * 1024)
PHOTO_TARGET_BYTES = round(15.5 * 1024)


@dataclass(frozen=True)
class BenchImages:
    red: Path
    photo: Path
    red_bytes: int
    photo_bytes: int
    red_quality: int
    photo_quality: int

    def to_json(self) -> dict[str, object]:
        return {
            "red_bitmap": {"file": self.red.name, "bytes": self.red_bytes, "quality": self.red_quality},
            "image": {"file": self.photo.name, "bytes": self.photo_bytes, "quality": self.photo_quality},
            "size": [WIDTH, HEIGHT],
        }


def _red() -> Image.Image:
    return Image.new("RGB", (WIDTH, HEIGHT), (255, 0, 0))


def _photo(seed: int = 2006) -> Image.Image:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    img = np.zeros((HEIGHT, WIDTH, 3))
    # Sky: blue at the top fading to pale near the horizon.
    t = y / HEIGHT
    img[..., 0] = 90 + 140 * t
    img[..., 1] = 140 + 90 * t
    img[..., 2] = 230 - 20 * t
    # Sun with a soft halo.
    d = np.hypot(x - 250, y - 55)
    glow = np.clip(1.0 - d / 60.0, 0, 1) ** 2
    img += glow[..., None] * np.array([120.0, 100.0, 20.0])
    img[d < 18] = (255, 240, 190)
    # Two ranges of hills, then a field whose texture gets finer towards the horizon.
    far = 120 + 18 * np.sin(x / 37.0) + 9 * np.sin(x / 11.0 + 1.3)
    near = 160 + 22 * np.sin(x / 53.0 + 2.0) + 6 * np.sin(x / 7.0)
    img[y > far] = (70, 95, 120)
    ground = y > near
    shade = 0.6 + 0.4 * (y - near) / (HEIGHT - near + 1)
    img[ground, 0] = (60 + 50 * shade)[ground]
    img[ground, 1] = (110 + 60 * shade)[ground]
    img[ground, 2] = (40 + 20 * shade)[ground]
    # Texture: noise everywhere (strong on the ground, faint in the sky), then a slight blur
    # so it looks like a lens rather than static.
    noise = rng.normal(0, 1, (HEIGHT, WIDTH, 1))
    img += noise * np.where(ground, 22.0, np.where(y > far, 10.0, 3.0))[..., None]
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")
    return pil.filter(ImageFilter.GaussianBlur(0.7))


def _closest_jpeg(img: Image.Image, target: int) -> tuple[bytes, int]:
    # Standard Huffman tables and 4:2:0 chroma (Pillow's defaults, as most encoders write):
    # a plain red 320×240 picture then takes ~1.83 KB whatever the quality, as the source's.
    # Among the qualities within 2 % of the target size the highest wins (a plain red
    # picture is ~1.83 KB at any quality, and a low one would shift its colour).
    sizes = {}
    for q in range(5, 96):
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=q)
        sizes[q] = buf.getvalue()
    near = [q for q, data in sizes.items() if abs(len(data) - target) <= 0.02 * target]
    q = max(near) if near else min(sizes, key=lambda q: abs(len(sizes[q]) - target))
    return sizes[q], q


def write_images(directory: str | Path) -> BenchImages:
    """Write ``red.jpg`` and ``photo.jpg`` into ``directory``; returns their sizes."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    red, rq = _closest_jpeg(_red(), RED_TARGET_BYTES)
    photo, pq = _closest_jpeg(_photo(), PHOTO_TARGET_BYTES)
    (d / "red.jpg").write_bytes(red)
    (d / "photo.jpg").write_bytes(photo)
    return BenchImages(d / "red.jpg", d / "photo.jpg", len(red), len(photo), rq, pq)
