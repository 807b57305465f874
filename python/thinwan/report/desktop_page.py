"""Desktop benchmark output: terminal tables and the HTML report (bar chart per
operation, per-operation packet timelines, the client's screenshots)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..records.meta import short_revision
from ..records.schema import write_text_atomic
from .figures import PALETTE, PLOT_SCRIPT, finite, grid_layout, plotly_js, png_figure, script_json

__all__ = [
    "ops_table",
    "results_table",
    "delta_table",
    "timing_table",
    "env_tables_markdown",
    "table",
    "write_desktop_report",
    "desktop_html",
]


def table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """Aligned plain text: the first ``left`` columns left-aligned, the rest right."""
    allrows = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in allrows) for i in range(len(header))]

    def line(r: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    lines = [line(r) for r in allrows]
    lines.insert(1, "-" * max(len(x) for x in lines))
    return "\n".join(lines)


def _f(v: Any, spec: str = ".1f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return format(v, spec)


def ops_table(ops: pd.DataFrame, meta: Mapping[str, Any]) -> str:
    """``thinwan desktop analyze``'s table: one line per operation."""
    t0 = float(ops["t_start"].iloc[0]) if len(ops) else 0.0
    rows = [
        (
            str(r.op),
            f"{r.first_packet}–{r.last_packet}",
            f"{r.t_start - t0:.3f}",
            _f(r.latency_ms, ".2f"),
            _f(r.first_update_ms, ".2f"),
            str(r.bytes_s2c),
            str(r.bytes_c2s),
            f"{r.packets_s2c}/{r.packets_c2s}",
            str(r.round_trips),
            _f(r.gap_before_ms, ".0f"),
            "" if r.client_started else "server-started",
        )
        for r in ops.itertuples(index=False)
    ]
    head = (
        f"{meta['capture']} ({meta['format']}): {meta['packets_matched']} of {meta['packets_total']} packets are the "
        f"display's (port {meta['server_port']}), {meta['operations']} operations at a {meta['idle_ms']:g} ms idle gap"
    )
    body = table(
        (
            "op",
            "packets",
            "t (s)",
            "latency ms",
            "1st update ms",
            "bytes s→c",
            "bytes c→s",
            "pkts s→c/c→s",
            "round trips",
            "gap before ms",
            "",
        ),
        rows,
        left=2,
    )
    ok = ops["latency_ms"].dropna()
    tail = (
        f"latency: median {ok.median():.2f} ms, min {ok.min():.2f}, max {ok.max():.2f} ({len(ok)} operations)"
        if len(ok)
        else "no operation had an input and an update"
    )
    return f"{head}\n{body}\n{tail}"


def results_table(summary: pd.DataFrame) -> str:
    """Per platform × env × operation: median/min/max latency, bytes, round trips."""
    rows = [
        (
            r.platform,
            r.env,
            r.operation,
            _f(r.latency_ms_median),
            _f(r.latency_ms_min),
            _f(r.latency_ms_max),
            f"{r.bytes_s2c:.0f}",
            f"{r.bytes_c2s:.0f}",
            f"{r.round_trips:g}",
            str(r.n),
        )
        for r in summary.itertuples(index=False)
    ]
    return table(
        ("platform", "env", "operation", "median ms", "min ms", "max ms", "bytes s→c", "bytes c→s", "round trips", "n"),
        rows,
        left=3,
    )


def delta_table(delta: pd.DataFrame) -> str:
    """Environment − LAN latency, in ms and in configured RTTs."""
    rows = [
        (
            r.platform,
            r.env,
            r.operation,
            _f(r.lan_ms),
            _f(r.env_ms),
            _f(r.delta_ms),
            _f(r.delta_rtts, ".2f"),
        )
        for r in delta.itertuples(index=False)
    ]
    return table(("platform", "env", "operation", "LAN ms", "env ms", "env − LAN ms", "in RTTs"), rows, left=3)


# ---------------------------------------------------------------------------------------
# The HTML report


def timing_table(client_timing: Mapping[str, Any]) -> str:
    """The client-timing self-check (``checks.client_timing``): per platform/env whose
    timing decided (``source``: ``rfb``, the RFB client's receive time of the last
    update, or ``screen``, when the client's screen first showed the final picture), how
    many inputs agree within 5 % or 1 ms, the spread of client − analyser, the worst
    input. An ``rfb`` row is followed by the same run's screen comparison, for reference."""
    rows = []

    def row(key: str, t: Mapping[str, Any], source: str) -> tuple[str, ...]:
        if not t.get("timed"):
            return (key, source, "0", "–", "–", "–", "–", t.get("note", ""))
        w = t["worst"]
        # Documents written before the RFB source existed name the client's time screen_ms.
        client = w.get("client_ms", w.get("screen_ms"))
        return (
            key,
            source,
            f"{t['agree']}/{t['inputs']}",
            _f(t["diff_ms_median"], ".2f"),
            _f(t["diff_ms_min"], ".2f"),
            _f(t["diff_ms_max"], ".2f"),
            f"{w['operation']} #{w['repeat']}: {w['latency_ms']:.1f} vs {client:.1f} ms",
            "pass" if t["pass"] else "FAIL",
        )

    for key, t in client_timing.items():
        source = t.get("source", "screen")
        rows.append(row(key, t, source))
        if source != "screen" and "screen" in t:
            rows.append(row("", t["screen"], "(screen)"))
    return table(
        ("platform/env", "source", "agree", "median ms", "min ms", "max ms", "worst (analyser vs client)", ""),
        rows,
        left=2,
    )


def env_tables_markdown(
    summary: pd.DataFrame, rtt_ms: Mapping[str, float], envs: Sequence[str], bytes_envs: Sequence[str] = ("lan", "wan")
) -> str:
    """docs/desktop.md's tables: per platform × operation, the median latency in every
    environment (and for a delayed one, its excess over ``lan`` in its RTTs), then the
    median round trips (client→server → server→client turns) in every environment and
    the median server→client kilobytes in ``bytes_envs``."""
    bytes_envs = [e for e in bytes_envs if e in envs]
    idx = summary.set_index(["platform", "operation", "env"])
    keys = list(dict.fromkeys(zip(summary["platform"], summary["operation"])))

    def cell(key: tuple[str, str], env: str, col: str) -> Any:
        k = (*key, env)
        return idx.loc[k, col] if k in idx.index else None

    lat_rows, turn_rows = [], []
    for key in keys:
        lan = cell(key, "lan", "latency_ms_median")
        cells = []
        for env in envs:
            v = cell(key, env, "latency_ms_median")
            rtt = rtt_ms.get(env, 0.0)
            extra = f" ({(v - lan) / rtt:.2f})" if v is not None and lan is not None and rtt > 0 else ""
            cells.append(f"{_f(v)}{extra}")
        lat_rows.append([*key, *cells])
        turns = [_f(cell(key, env, "round_trips"), "g") for env in envs]
        kb = [_f(None if (b := cell(key, env, "bytes_s2c")) is None else b / 1000, ".1f") for env in bytes_envs]
        turn_rows.append([*key, *turns, *kb])

    def md(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
        out = [
            "| " + " | ".join(header) + " |",
            "|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|",
        ]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out)

    return (
        md(["platform", "op", *envs], lat_rows)
        + "\n\n"
        + md(["platform", "op", *[f"turns {e}" for e in envs], *[f"KB s→c {e}" for e in bytes_envs]], turn_rows)
    )


def write_desktop_report(out: Path, doc: Mapping[str, Any], inputs: pd.DataFrame) -> Path:
    """``out/report.html``: tables, a bar chart per operation, per-operation packet
    timelines, the client's screenshots. Self-contained (plotly.js and the pictures are
    embedded)."""
    return write_text_atomic(out / "report.html", desktop_html(out, doc, inputs))


def _repeats(operations: Sequence[str], repeat: int) -> str:
    """ ", N repetitions each" when the run has latency operations (web and video run their
    pages and plays once per cell, so the count would mislead there)."""
    return f", {repeat} repetitions of each latency operation" if set(operations) - {"web", "video"} else ""


def desktop_html(out: Path, doc: Mapping[str, Any], inputs: pd.DataFrame) -> str:
    from ..analysis.desktop_ops import summarize, wan_minus_lan
    from .desktop_media_page import media_sections

    figs: dict[str, Any] = {}
    parts = [
        f"<h1>thinwan desktop: {html.escape(str(doc['benchmark']))}</h1>",
        f"<p>{len(doc['results'])} platform × environment × operation results{_repeats(doc['operations'], doc['repeat'])}, "
        f"idle gap {doc['idle_ms']:g} ms; thinwan {html.escape(str(doc['version']))} ({html.escape(short_revision(str(doc['git'])))}), "
        f"{html.escape(str(doc['created']))}.</p>",
        "<h2>Platforms</h2><ul>"
        + "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(str(v))}</li>" for k, v in doc["platforms"].items())
        + "</ul>",
        "<h2>Environments</h2><ul>"
        + "".join(
            f"<li><b>{html.escape(k)}</b>: RTT {e['rtt_ms']:g} ms, rate {e['rate_mbit']:g} Mbit/s, loss {e['loss']:g}, "
            f"window {e['window_bytes'] or 'autotuned'}, {html.escape(e['congestion_control'])}</li>"
            for k, e in doc["envs"].items()
        )
        + "</ul>",
    ]
    timing = doc.get("checks", {}).get("client_timing")
    if timing:
        parts.append(
            "<h2>Client timing</h2><p>The analyser's latency against the client's own timing (docs/desktop.md, "
            "Self-checks): <i>rfb</i>, on the VNC platforms, when an RFB client that draws nothing had received the "
            "operation's last update (a timing pass of its own); <i>screen</i> when the client's screen first showed "
            "the operation's final picture (shown for reference under an rfb row). Inputs within 5 % or 1 ms, "
            f"client − analyser. Mode: {html.escape(str(doc['checks'].get('client_timing_mode', 'fail')))}.</p>"
            f"<pre>{html.escape(timing_table(timing))}</pre>"
        )
    if doc.get("failures"):
        parts.append("<h2>Failures</h2><ul>" + "".join(f"<li>{html.escape(f)}</li>" for f in doc["failures"]) + "</ul>")
    if len(inputs):
        s = summarize(inputs)
        parts.append(f"<h2>Latency</h2><pre>{html.escape(results_table(s))}</pre>")
        if "lan" in doc["envs"] and len(doc["envs"]) > 1:
            d = wan_minus_lan(s, {k: e["rtt_ms"] for k, e in doc["envs"].items()})
            parts.append(f"<h3>Environment − LAN</h3><pre>{html.escape(delta_table(d))}</pre>")
        fig = bar_figure(s, doc["operations"], list(doc["envs"]))
        if fig:
            figs["bars"] = fig
            parts.append('<h2>Median latency per operation</h2><div class="plot" id="fig-bars"></div>')
        parts.append(
            "<h2>Packet timelines</h2><p>One input per panel (the repetition closest to the median): IP bytes of every "
            "packet against the time since the input's first packet; server→client up, client→server down. Each "
            "client→server → server→client turn is a round trip.</p>"
        )
        for op in doc["operations"]:
            fig = timeline_figure(out, inputs, op)
            if fig:
                figs[f"tl-{op}"] = fig
                parts.append(f'<div class="plot" style="height: {fig["layout"]["height"]}px" id="fig-tl-{op}"></div>')
        parts.append("<h2>The client's screen after each operation</h2>")
        parts.append(screenshots_html(out, inputs, doc))
    media_parts, media_figs = media_sections(out, doc)
    parts += media_parts
    figs |= media_figs
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f"<title>thinwan desktop: {html.escape(str(doc['benchmark']))}</title>\n"
        "<style>body { font-family: system-ui, sans-serif; max-width: 1300px; margin: 2em auto; padding: 0 1em; }"
        " pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; } .plot { width: 100%; height: 420px; }"
        " figure { display: inline-block; margin: 0.3em; text-align: center; }"
        " figcaption { font-size: 0.8em; }</style></head>\n<body>\n"
        + "\n".join(parts)
        + f"\n<script>{plotly_js()}</script>\n"
        f"<script>\nconst FIGURES = {script_json(figs)};\n{PLOT_SCRIPT}</script>\n"
        "</body></html>\n"
    )


def bar_figure(summary: pd.DataFrame, ops: Sequence[str], envs: Sequence[str]) -> dict[str, Any] | None:
    """Median latency, one panel per operation: platforms side by side, one bar per
    environment, min–max as error bars."""
    ops = [op for op in ops if (summary["operation"] == op).any()]
    if not ops:
        return None
    layout = grid_layout("Median latency (ms; whiskers: min–max)", 1, len(ops), gap_x=0.05)
    layout["barmode"] = "group"
    layout["height"] = 420
    data = []
    for k, op in enumerate(ops, start=1):
        s = summary[summary["operation"] == op]
        platforms = list(dict.fromkeys(s["platform"]))
        suffix = "" if k == 1 else str(k)
        for i, env in enumerate(envs):
            e = s[s["env"] == env].set_index("platform").reindex(platforms)
            med = e["latency_ms_median"]
            data.append(
                {
                    "type": "bar",
                    "name": env,
                    "legendgroup": env,
                    "showlegend": k == 1,
                    "x": platforms,
                    "y": finite(med),
                    "marker": {"color": PALETTE[i % len(PALETTE)]},
                    "error_y": {
                        "type": "data",
                        "symmetric": False,
                        "array": finite(e["latency_ms_max"] - med),
                        "arrayminus": finite(med - e["latency_ms_min"]),
                        "thickness": 1,
                    },
                    "hovertemplate": "%{x} " + env + ": %{y:.1f} ms<extra></extra>",
                    "xaxis": f"x{suffix}",
                    "yaxis": f"y{suffix}",
                }
            )
        layout["annotations"].append(
            {
                "text": f"<b>{op}</b>",
                "xref": f"x{suffix} domain",
                "yref": f"y{suffix} domain",
                "x": 0.5,
                "y": 1.0,
                "yanchor": "bottom",
                "showarrow": False,
            }
        )
        layout[f"yaxis{suffix}"]["rangemode"] = "tozero"
    layout["yaxis"]["title"] = {"text": "latency (ms)"}
    return {"data": data, "layout": layout}


def timeline_figure(out: Path, inputs: pd.DataFrame, op: str) -> dict[str, Any] | None:
    """Packets of one input of ``op`` per platform (rows) × environment (columns)."""
    rows = inputs[(inputs["operation"] == op) & inputs["latency_ms"].notna()]
    if not len(rows):
        return None
    platforms = list(dict.fromkeys(rows["platform"]))
    envs = list(dict.fromkeys(rows["env"]))
    layout = grid_layout(
        f"{op}: packets of one input (bytes; server→client up, client→server down)", len(platforms), len(envs)
    )
    data: list[dict[str, Any]] = []
    annotations = list(layout.get("annotations", []))
    for pi, p in enumerate(platforms):
        for ei, env in enumerate(envs):
            k = pi * len(envs) + ei + 1
            sub = rows[(rows["platform"] == p) & (rows["env"] == env)]
            if not len(sub):
                continue
            med = sub["latency_ms"].median()
            r = sub.iloc[int((sub["latency_ms"] - med).abs().to_numpy().argmin())]
            path = out / p / env / "packets.parquet"
            if not path.exists():
                continue
            pk = pd.read_parquet(path)
            pk = pk[(pk["number"] >= r["first_packet"]) & (pk["number"] <= r["last_packet"])]
            t = (pk["t"] - r["t_input"]) * 1e3
            suffix = "" if k == 1 else str(k)
            for s2c, name, color in ((True, "server→client", PALETTE[0]), (False, "client→server", PALETTE[3])):
                sel = pk["s2c"] == s2c
                xs, ys = _stems(t[sel].to_numpy(), (pk["ip_len"][sel] * (1 if s2c else -1)).to_numpy())
                data.append(
                    {
                        "type": "scatter",
                        "mode": "lines",
                        "name": name,
                        "legendgroup": name,
                        "showlegend": k == 1,
                        "x": xs,
                        "y": ys,
                        "line": {"color": color, "width": 1.5},
                        "xaxis": f"x{suffix}",
                        "yaxis": f"y{suffix}",
                    }
                )
            annotations.append(
                {
                    "text": f"{p} · {env}: {r['latency_ms']:.1f} ms, {int(r['round_trips'])} RT",
                    "xref": f"x{suffix} domain",
                    "yref": f"y{suffix} domain",
                    "x": 0.5,
                    "y": 1.0,
                    "yanchor": "bottom",
                    "showarrow": False,
                    "font": {"size": 11},
                }
            )
            layout[f"xaxis{suffix}"]["title"] = {"text": "ms since the input"} if pi == len(platforms) - 1 else {}
    layout["annotations"] = annotations
    layout["height"] = max(320, 210 * len(platforms))
    return {"data": data, "layout": layout}


def _stems(x: Any, y: Any) -> tuple[list[float | None], list[float | None]]:
    xs: list[float | None] = []
    ys: list[float | None] = []
    for a, b in zip(x, y):
        xs += [float(a), float(a), None]
        ys += [0.0, float(b), None]
    return xs, ys


def screenshots_html(out: Path, inputs: pd.DataFrame, doc: Mapping[str, Any]) -> str:
    """The application's area of each saved screenshot, embedded as PNG."""
    d = doc.get("desktop", {})
    box = (64, 64, 64 + 320, 64 + 240) if d.get("width", 1024) >= 64 + 320 else None
    figs = []
    for p, env in dict.fromkeys(zip(inputs["platform"], inputs["env"])):
        for op in doc["operations"]:
            path = out / p / env / f"{op}.png"
            if path.exists():
                figs.append(png_figure(path, f"{p} · {env} · {op}", box))
    return "<div>" + "".join(figs) + "</div>"
