"""The web benchmark's pages (Lai and Nieh 2006, "Benchmarks": 54 pages of text and
graphics loaded twice), generated deterministically from a seed.

The source used a fixed set of real pages we do not have, so we generate our own with
the same mix: plain text, text with figures, tables, galleries and pages with one large
photograph. Pages are kinds in a fixed cycle of nine (so 54 pages are six of each cycle):

=============  =====================================================================
kind           content
=============  =====================================================================
``text``       6–10 paragraphs of prose (~1–2 KB of words)
``figure``     prose around one 480×300 diagram (PNG: boxes, arrows, labels)
``gallery``    four 240×180 photographs (JPEG) with captions
``table``      a 30-row, 6-column table of numbers and words
``chart``      a 640×360 bar chart (PNG) and a paragraph
``photo``      one 800×600 photograph (JPEG), the heaviest page
``long``       20–30 paragraphs with headings (the page is taller than the window)
``mixed``      prose, a 320×240 photograph and a small table
``list``       nested lists and a 480×120 banner (PNG)
=============  =====================================================================

"Photographs" are synthetic landscapes of smooth multi-scale noise, so they compress like
photographs (large JPEGs with fine texture); diagrams and charts are flat colours, so
they compress like drawings. Every page has a click handler that loads the next page
(the last page's next is the first, so the second pass reloads the same URLs from the
browser's cache). The driver clicks at the client; the click crosses the WAN in the
platform's own protocol. Sizes are returned per page and written with the results.
"""

from __future__ import annotations

import hashlib
import html
import io
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

__all__ = ["N_PAGES", "KINDS", "PageInfo", "Site", "write_site", "page_name"]

N_PAGES = 54  # the source's page count
KINDS = ("text", "figure", "gallery", "table", "chart", "photo", "long", "mixed", "list")
START_PAGE = "start.html"  # a blank page the browser opens on; its click loads page 1
JPEG_QUALITY = 80

_WORDS = (
    "network latency window packet client server remote desktop screen update pixel frame "
    "display user input key click scroll image text page browser video round trip delay "
    "bandwidth queue router link path loss retransmission timer cache protocol session "
    "office report meeting budget project figure table chart result measure sample value "
    "the a of and to in is for on with as by at from that this which it be are was were "
    "has have more less each every many some most first last next new old small large "
    "quickly slowly often never always usually before after between across over under "
    "people team city river mountain garden market station library museum harbour school"
).split()


def page_name(i: int) -> str:
    """File name of page ``i`` (1-based)."""
    return f"p{i:02d}.html"


@dataclass(frozen=True)
class PageInfo:
    """One generated page: its kind and the bytes a browser fetches for it."""

    name: str
    kind: str
    html_bytes: int
    images: tuple[tuple[str, int], ...]  # (file, bytes)

    @property
    def total_bytes(self) -> int:
        return self.html_bytes + sum(b for _, b in self.images)


@dataclass
class Site:
    """The generated pages, in load order, and a digest of every file written."""

    directory: Path
    pages: list[PageInfo] = field(default_factory=list)
    sha256: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "pages": len(self.pages),
            "sha256": self.sha256,
            "bytes_total": sum(p.total_bytes for p in self.pages),
            "per_page": [
                {"name": p.name, "kind": p.kind, "html_bytes": p.html_bytes, "total_bytes": p.total_bytes}
                for p in self.pages
            ],
        }


# --- images ---------------------------------------------------------------------------


def _photo(w: int, h: int, rng: np.random.Generator) -> Image.Image:
    """A landscape-like picture: a sky gradient over ground of multi-scale noise."""
    img = np.zeros((h, w, 3))
    y = np.arange(h, dtype=np.float64)[:, None] / h
    horizon = 0.35 + 0.2 * rng.random()
    sky = np.array([90.0, 150.0, 230.0]) + rng.normal(0, 15, 3)
    ground = np.array([70.0, 110.0, 50.0]) + rng.normal(0, 20, 3)
    top = y < horizon
    img[:] = np.where(top[..., None], sky * (0.7 + 0.5 * y[..., None]), ground)
    # Noise at four scales, upsampled: coarse shapes plus fine texture, as in a photograph.
    texture = np.zeros((h, w))
    for scale, amp in ((64, 40.0), (16, 20.0), (4, 10.0), (1, 6.0)):
        small = rng.normal(0, 1, (h // scale + 2, w // scale + 2))
        up = np.asarray(Image.fromarray(small.astype(np.float32), "F").resize((w + scale, h + scale), Image.BILINEAR))
        texture += amp * up[:h, :w]
    weight = np.where(top, 0.25, 1.0)
    img += (texture * weight)[..., None] * np.array([1.0, 0.9, 0.7])
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")
    return pil.filter(ImageFilter.GaussianBlur(0.6))


def _diagram(w: int, h: int, rng: random.Random) -> Image.Image:
    """Boxes joined by arrows, with labels: flat colours, like a drawing."""
    im = Image.new("RGB", (w, h), (250, 250, 245))
    d = ImageDraw.Draw(im)
    n = rng.randint(3, 6)
    boxes = []
    for k in range(n):
        x = 20 + k * (w - 40) // n
        yy = rng.randint(20, h - 80)
        boxes.append((x, yy, x + (w - 60) // n, yy + 50))
    for a, b in zip(boxes, boxes[1:], strict=False):
        d.line((a[2], (a[1] + a[3]) // 2, b[0], (b[1] + b[3]) // 2), fill=(40, 40, 40), width=2)
    for k, box in enumerate(boxes):
        colour = tuple(rng.randint(120, 230) for _ in range(3))
        d.rectangle(box, fill=colour, outline=(20, 20, 20), width=2)
        d.text((box[0] + 6, box[1] + 18), rng.choice(_WORDS).upper() + f" {k + 1}", fill=(0, 0, 0))
    return im


def _chart(w: int, h: int, rng: random.Random) -> Image.Image:
    im = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(im)
    bars = rng.randint(8, 16)
    bw = (w - 60) // bars
    d.line((40, h - 30, w - 10, h - 30), fill="black", width=2)
    d.line((40, 10, 40, h - 30), fill="black", width=2)
    for k in range(bars):
        top = rng.randint(20, h - 50)
        d.rectangle((44 + k * bw, top, 40 + (k + 1) * bw - 4, h - 31), fill=(50, 90 + 8 * k % 160, 200))
        d.text((44 + k * bw, h - 25), str(k + 1), fill="black")
    return im


def _banner(w: int, h: int, rng: random.Random) -> Image.Image:
    im = Image.new("RGB", (w, h))
    d = ImageDraw.Draw(im)
    a, b = (rng.randint(0, 255) for _ in range(2))
    for x in range(w):
        d.line((x, 0, x, h), fill=(a, (b + x // 4) % 256, 255 - x * 255 // w))
    d.text((16, h // 2 - 6), " ".join(rng.choice(_WORDS) for _ in range(4)).upper(), fill="white")
    return im


def _encode(img: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    if fmt == "JPEG":
        img.save(buf, "JPEG", quality=JPEG_QUALITY)
    else:
        img.save(buf, "PNG", optimize=True)
    return buf.getvalue()


# --- text -----------------------------------------------------------------------------


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 16))]
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random) -> str:
    return "<p>" + " ".join(_sentence(rng) for _ in range(rng.randint(3, 7))) + "</p>"


def _table(rng: random.Random, rows: int, cols: int) -> str:
    head = "".join(f"<th>{html.escape(rng.choice(_WORDS))}</th>" for _ in range(cols))
    body = []
    for r in range(rows):
        cells = [f"<td>{rng.choice(_WORDS)}</td>"] + [f"<td>{rng.randint(0, 99999):,}</td>" for _ in range(cols - 1)]
        body.append(f"<tr class='r{r % 2}'>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


# --- pages ----------------------------------------------------------------------------

_STYLE = (
    "body{margin:0;padding:16px 28px;font:15px/1.45 'DejaVu Sans',sans-serif;background:#fff;color:#222}"
    "h1{font-size:24px;margin:4px 0 12px}h2{font-size:18px}img{display:block;margin:10px 0}"
    "table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 8px}"
    "tr.r1{background:#eef}figure{display:inline-block;margin:6px}"
)
# Load the next page on a click anywhere (the driver's input) or on the key "n". Opened
# as ``start.html#auto-K`` (and clicked) the pages instead run by themselves, each loading the next as
# soon as it has loaded and been painted once (two animation frames: the first runs before
# the page's first paint, the second after it), K passes, then ask the server for ``/done`` (the run without
# pauses that checks slow motion does not change the work). Every page also tells the
# server (beacons, local to the server side) when a click reached it (``/clicked/<page>``)
# and when it has loaded (``/loaded/<page>``): the driver clicks again only if a click did
# not arrive, and then waits for the load before the slow-motion pause.
_NAV = (
    "<script>var NEXT='%s',LAST=%s,START=%s,ME=location.pathname.split('/').pop();"
    "function go(h){location.href=NEXT+h}"
    "addEventListener('load',function(){navigator.sendBeacon('/loaded/'+ME)});"
    "function input(){navigator.sendBeacon('/clicked/'+ME);go(START?location.hash:'')}"
    "document.addEventListener('click',input);"
    "document.addEventListener('keydown',function(e){if(e.key==='n')input()});"
    "var m=location.hash.match(/^#auto-(\\d+)$/);"
    "if(m&&!START)addEventListener('load',function(){var k=+m[1]-(LAST?1:0);"
    "requestAnimationFrame(function(){requestAnimationFrame(function(){"
    "if(k>0)go('#auto-'+k);else fetch('/done')})})});</script>"
)
DONE_PATH = "/done"
LOADED_PREFIX = "/loaded/"
CLICKED_PREFIX = "/clicked/"


def is_beacon(path: str) -> bool:
    """Is ``path`` one of the pages' reports to the driver, not a fetch of the site?"""
    return path.startswith((LOADED_PREFIX, CLICKED_PREFIX))


def _html(title: str, body: str, next_page: str, last: bool = False, start: bool = False) -> bytes:
    nav = _NAV % (next_page, "true" if last else "false", "true" if start else "false")
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<link rel='icon' href='data:,'>"  # no favicon request
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}{nav}</body></html>"
    ).encode()


def _page_body(kind: str, rng: random.Random, nprng: np.random.Generator, img: Callable[..., str]) -> str:
    """The body of one page; ``img(image, fmt, w, h)`` stores an image and returns its tag."""
    p = lambda n: "".join(_paragraph(rng) for _ in range(n))  # noqa: E731
    if kind == "text":
        return p(rng.randint(6, 10))
    if kind == "figure":
        return p(2) + img(_diagram(480, 300, rng), "PNG") + p(3)
    if kind == "gallery":
        figs = [
            f"<figure>{img(_photo(240, 180, nprng), 'JPEG')}<figcaption>{_sentence(rng)}</figcaption></figure>"
            for _ in range(4)
        ]
        return p(1) + "".join(figs)
    if kind == "table":
        return p(1) + _table(rng, 30, 6)
    if kind == "chart":
        return img(_chart(640, 360, rng), "PNG") + p(1)
    if kind == "photo":
        return img(_photo(800, 600, nprng), "JPEG") + p(1)
    if kind == "long":
        return "".join(f"<h2>{_sentence(rng)[:-1]}</h2>" + p(rng.randint(3, 5)) for _ in range(6))
    if kind == "mixed":
        return p(2) + img(_photo(320, 240, nprng), "JPEG") + p(1) + _table(rng, 8, 4)
    if kind == "list":
        items = "".join(
            f"<li>{_sentence(rng)}<ul>" + "".join(f"<li>{_sentence(rng)}</li>" for _ in range(3)) + "</ul></li>"
            for _ in range(6)
        )
        return img(_banner(480, 120, rng), "PNG") + f"<ul>{items}</ul>"
    raise ValueError(f"unknown page kind {kind!r}")


def write_site(directory: str | Path, pages: int = N_PAGES, seed: int = 2006, first: int = 1) -> Site:
    """Write ``pages`` pages from page ``first`` (``p01.html`` …, their images under
    ``img/``) and the start page into ``directory``; the same ``pages``, ``seed`` and
    ``first`` give the same bytes. A page's content depends only on ``seed`` and its
    number, so pages 9–22 alone are the same pages as within all 54 (only the last one's
    link back to the first differs)."""
    if pages < 1:
        raise ValueError(f"pages: {pages} (need at least one page)")
    if first < 1:
        raise ValueError(f"first: {first} (pages are numbered from 1)")
    last = first + pages - 1
    d = Path(directory)
    (d / "img").mkdir(parents=True, exist_ok=True)
    site = Site(d)
    digest = hashlib.sha256()

    def put(rel: str, data: bytes) -> None:
        (d / rel).write_bytes(data)
        digest.update(rel.encode() + b"\0" + data)

    put(START_PAGE, _html("Ready", "<p>Click to start.</p>", page_name(first), start=True))
    for i in range(first, last + 1):
        kind = KINDS[(i - 1) % len(KINDS)]
        rng = random.Random(seed * 1000 + i)
        nprng = np.random.default_rng(seed * 1000 + i)
        images: list[tuple[str, int]] = []

        def img(im: Image.Image, fmt: str, _i: int = i, _images: list[tuple[str, int]] = images) -> str:
            name = f"img/p{_i:02d}-{len(_images) + 1}.{'jpg' if fmt == 'JPEG' else 'png'}"
            data = _encode(im, fmt)
            put(name, data)
            _images.append((name, len(data)))
            return f"<img src='{name}' width='{im.width}' height='{im.height}' alt=''>"

        body = _page_body(kind, rng, nprng, img)
        nxt = page_name(i + 1 if i < last else first)
        data = _html(f"Page {i}: {kind}", body, nxt, last=i == last)
        put(page_name(i), data)
        site.pages.append(PageInfo(page_name(i), kind, len(data), tuple(images)))
    site.sha256 = digest.hexdigest()
    return site
