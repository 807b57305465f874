"""The latency micro-benchmark application (Lai and Nieh 2006, "Benchmarks"; docs/sources.md).

A 320×240 window, placed at a fixed position on the remote desktop, with five operations,
each started by one input a user gives:

=============  ===========  =========================================================
operation      input        what it draws
=============  ===========  =========================================================
``letter``     key ``a``    one 12-pt capital A (the next one along a line of As)
``scroll``     key ``Next`` the 58-line, 450-word text (14 lines visible) down a page
``fill``       click        the whole area red
``red_bitmap`` click        the red JPEG (``red.jpg``, ~1.78 KB) at 320×240
``image``      click        the photographic JPEG (``photo.jpg``, ~15.5 KB) at 320×240
=============  ===========  =========================================================

A click does what the current *mode* says; keys F1–F5 select the mode of ``letter``,
``scroll``, ``fill``, ``red_bitmap``, ``image`` and reset the area to that operation's
starting state (blank white, or the text at its top), so every measured input starts
from the same picture. Those set-up keys are ordinary inputs too (they cross the WAN),
which is why the driver pauses after them before the measured input.

The program redraws only on input and is otherwise idle: no timers, no blinking cursor,
no animation — so the platform's traffic falls idle between operations (slow motion).

It runs under Debian's ``/usr/bin/python3`` with ``python3-tk`` and ``python3-pil`` /
``python3-pil.imagetk`` and imports nothing of thinwan, so a desktop session of another
user (xrdp's test user) can start it from a copy in a temporary directory. Each handled
input is logged (wall-clock time, what was drawn) to ``--log``; ``ready`` is logged once
the window is mapped.
"""

from __future__ import annotations

import argparse
import sys
import time
import tkinter as tk

OPERATIONS = ("letter", "scroll", "fill", "red_bitmap", "image")
MODE_KEYS = {"F1": "letter", "F2": "scroll", "F3": "fill", "F4": "red_bitmap", "F5": "image"}
WIDTH, HEIGHT = 320, 240
FONT_FAMILY = "DejaVu Sans"
FONT_POINTS = 12
VISIBLE_LINES = 14
# Points are pixels at 72 dpi: with Tk's scaling fixed at 1 pixel per point the 12-pt font
# is 12 px on every X server whatever DPI it claims, and 14 lines of it (17 px apart with
# 3 px spacing) fill the 240-px area as the source's text box did.
TK_SCALING = 1.0
LINE_SPACING_PX = 3


def text_lines(n_lines: int = 58, n_words: int = 450, seed: int = 16) -> list[str]:
    """The scroll text: ``n_lines`` lines holding ``n_words`` short words in all,
    deterministic (a linear congruential generator, so no library version changes it)."""
    words = (
        "the of and to in is it you that he was for on are with as his they be at one have "
        "this from or had by word but what some we can out other were all there when up use "
        "your how said an each she which do their time if will way about many then them write "
        "would like so these her long make thing see him two has look more day could go come "
        "did number sound no most people my over know water than call first who may down side"
    ).split()
    state = seed
    per_line = [n_words // n_lines + (1 if i < n_words % n_lines else 0) for i in range(n_lines)]
    lines = []
    for count in per_line:
        line = []
        for _ in range(count):
            state = (state * 1103515245 + 12345) % 2**31
            line.append(words[state % len(words)])
        lines.append(" ".join(line))
    return lines


class BenchApp:
    def __init__(self, root: tk.Tk, red: str, photo: str, log: str, x: int, y: int) -> None:
        self.root = root
        self.red_path = red
        self.photo_path = photo
        self.log = open(log, "a", buffering=1) if log else sys.stdout  # noqa: SIM115 (lives as long as the app)
        self.mode = "letter"
        self.letters = 0
        root.tk.call("tk", "scaling", TK_SCALING)
        root.title("thinwan-deskapp")
        root.geometry(f"{WIDTH}x{HEIGHT}+{x}+{y}")
        root.resizable(False, False)
        root.configure(bg="white", cursor="left_ptr")
        font = (FONT_FAMILY, FONT_POINTS)
        self.font = font
        self.canvas = tk.Canvas(root, width=WIDTH, height=HEIGHT, bg="white", highlightthickness=0, bd=0)
        self.text = tk.Text(
            root,
            font=font,
            wrap="none",
            height=VISIBLE_LINES,
            spacing1=LINE_SPACING_PX,
            bd=0,
            highlightthickness=0,
            padx=4,
            pady=0,
            bg="white",
            fg="black",
            insertofftime=0,  # never blink (a blinking cursor is traffic every 0.5 s)
            insertwidth=0,
            takefocus=0,
            exportselection=False,
            cursor="left_ptr",
        )
        # One photo image for both JPEGs, made once and kept on the canvas (hidden when not
        # shown): Tk allocates a photo's colour table when an instance of it is first
        # displayed — on a TrueColor visual 256 XAllocColor requests, each a round trip to
        # the X server — and frees it with the last instance. A fresh PhotoImage per click
        # would pay those 256 round trips on every click (13 s over a 50 ms RTT for plain
        # remote X), which no real image viewer does; new pixels are pasted in instead.
        from PIL import ImageTk

        self.photo = ImageTk.PhotoImage("RGB", (WIDTH, HEIGHT))
        self.photo_item = self.canvas.create_image(0, 0, image=self.photo, anchor="nw", state="hidden")
        # Likewise the colours: Tk frees a colour with the last item using it and allocates it
        # again (XAllocColor, a round trip) for the next one; two hidden items keep red and
        # black allocated for the life of the program.
        for colour in ("#ff0000", "black"):
            self.canvas.create_rectangle(0, 0, 1, 1, fill=colour, outline=colour, state="hidden")
        self.text.insert("1.0", "\n".join(text_lines()))
        self.text.configure(state="disabled")
        self.show_canvas()
        # bind_all: the keys work wherever the X server delivers them in this window.
        root.bind_all("<Key>", self.on_key)
        root.bind_all("<Button-1>", self.on_click)

    def note(self, what: str) -> None:
        self.log.write(f"{time.time():.6f} {self.mode} {what}\n")
        self.log.flush()

    def show_canvas(self) -> None:
        self.text.place_forget()
        self.canvas.place(x=0, y=0, width=WIDTH, height=HEIGHT)

    def show_text(self) -> None:
        self.canvas.place_forget()
        self.text.place(x=0, y=0, width=WIDTH, height=HEIGHT)

    def clear(self) -> None:
        """White area: delete what was drawn, hide the photo (kept, see __init__)."""
        self.canvas.delete("drawn")
        self.canvas.itemconfigure(self.photo_item, state="hidden")

    def reset(self, mode: str) -> None:
        self.mode = mode
        self.clear()
        self.letters = 0
        if mode == "scroll":
            self.text.yview_moveto(0.0)
            self.show_text()
        else:
            self.show_canvas()

    def on_key(self, event: tk.Event) -> None:
        key = event.keysym
        if key in MODE_KEYS:
            self.reset(MODE_KEYS[key])
            self.note(f"reset {key}")
        elif key in ("a", "A") and self.mode == "letter":
            # The next A along the line; a full line starts over (cleared) at the left.
            per_row = (WIDTH - 8) // 12
            if self.letters and self.letters % per_row == 0:
                self.clear()
            k = self.letters % per_row
            self.canvas.create_text(8 + 12 * k, 8, text="A", font=self.font, anchor="nw", fill="black", tags="drawn")
            self.letters += 1
            self.note(f"letter {self.letters}")
        elif key in ("Next", "space") and self.mode == "scroll":
            if self.text.yview()[1] >= 1.0:
                self.text.yview_moveto(0.0)  # at the end: back to the top (also a full page)
            else:
                self.text.yview_scroll(1, "pages")
            self.note(f"scroll {self.text.yview()[0]:.3f}")
        else:
            self.note(f"ignored key {key}")

    def on_click(self, event: tk.Event) -> None:
        if self.mode == "fill":
            self.clear()
            self.canvas.create_rectangle(0, 0, WIDTH, HEIGHT, fill="#ff0000", outline="#ff0000", tags="drawn")
        elif self.mode in ("red_bitmap", "image"):
            # Decoded on the click, as a viewer of a picture would; Pillow takes ~2 ms here.
            from PIL import Image

            path = self.red_path if self.mode == "red_bitmap" else self.photo_path
            with Image.open(path) as im:
                self.photo.paste(im.convert("RGB"))
            self.clear()
            self.canvas.itemconfigure(self.photo_item, state="normal")
        else:
            self.note(f"ignored click at {event.x},{event.y}")
            return
        self.note(f"click {event.x},{event.y}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--red", required=True, help="the red JPEG")
    ap.add_argument("--photo", required=True, help="the photographic JPEG")
    ap.add_argument("--log", default="", help="append handled inputs here (default: stdout)")
    ap.add_argument("--x", type=int, default=0)
    ap.add_argument("--y", type=int, default=0)
    args = ap.parse_args(argv)
    root = tk.Tk()
    app = BenchApp(root, args.red, args.photo, args.log, args.x, args.y)
    root.wait_visibility(root)
    root.focus_force()
    app.note("ready")
    root.mainloop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
