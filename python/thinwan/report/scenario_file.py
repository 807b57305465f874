"""The scenario file `thinwan fit` writes: a base scenario (the Ogawa large-buffer
dumbbell by default) whose ``[traffic]`` section is the fitted model.

The layout is that of ``scenarios/ogawa2011/*.toml``: a header saying what the file is
and how to run it, every key of every simulated section listed, each with a comment: a
fitted value says where it came from (capture, n, estimate, interval or goodness of
fit), any other value whether it is the documented default or the base scenario's.
"""

from __future__ import annotations

import json
import math
from typing import Any

from thinwan.config.scenario import Scenario

__all__ = ["scenario_toml", "fit_summary", "SECTIONS"]

# The sections the simulator reads for a dumbbell, in the order of the shipped files.
SECTIONS = ("scenario", "topology", "queue", "tcp", "traffic", "records")
COMMENT_COLUMN = 37
# [traffic] keys of the other models.
UNUSED_TRAFFIC = ("pcap_", "video_", "data_", "mix")


def _value(v: Any) -> str:
    """A TOML literal for a scenario value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"not a finite number: {v}")
        s = f"{v:.6g}"
        return s if any(c in s for c in ".e") else s + ".0"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def _line(key: str, value: Any, comment: str) -> str:
    text = f"{key} = {_value(value)}"
    return f"{text:<{COMMENT_COLUMN - 1}} # {comment}" if comment else text


def scenario_toml(base: Scenario, base_label: str, fitted: dict[str, Any], capture: dict[str, Any]) -> str:
    """The scenario file's text.

    ``fitted`` is :func:`thinwan.analysis.fit.fit_capture`'s result; ``capture`` says
    what was read: ``name`` (the file's name), ``packets``, ``matched``, ``flows``
    (connections), ``server_port``, ``filter``, ``gap_ms``, and ``file``: the name the
    scenario is written under (for the header's commands).
    """
    keys, notes = fitted["keys"], fitted["notes"]
    name = capture["name"]
    stem = name.rsplit(".", 1)[0]
    target = capture.get("file", f"fitted-{stem}.toml")
    defaults = Scenario()
    data = base.model_dump(mode="python")
    data["scenario"]["name"] = f"fitted-{stem}"
    data["scenario"]["description"] = f"{base.scenario.name or base_label} with [traffic] fitted to {name}"
    data["traffic"]["model"] = "thin-client"
    data["traffic"].update(keys)
    # The result must be a scenario the simulator accepts.
    Scenario.model_validate(data)

    select = (
        f"server port {capture['server_port']}"
        if capture.get("server_port") is not None
        else f"filter {capture['filter']!r}"
        if capture.get("filter")
        else "server = the side of each connection's SYN-ACK (else the lower port)"
    )
    head = [
        f"# Fitted by `thinwan fit` from the capture {name}:",
        f"#   {capture.get('packets', '?')} packets read, {capture.get('matched', '?')} TCP packets of "
        f"{capture.get('flows', '?')} connections used ({select}),",
        f"#   flows split by the gap rule at {capture['gap_ms']:g} ms (docs/model.md, 'Fitting a capture').",
        f"# Everything but [traffic] is {base_label}: the fitted sessions run over that network.",
        "#",
        f"# Run:  thinwan run {target}",
        f"# Check what the model loses against a replay of the capture:  thinwan validate-model {name} {target}",
        "#",
        '# Every key is listed. "fitted" marks a value estimated from the capture (with n, the',
        '# estimate and its interval or goodness of fit); "default" a value equal to the',
        f'# documented default (docs/scenario.md); "base" the value of {base_label}.',
    ]
    lines = head
    for section in SECTIONS:
        lines += ["", f"[{section}]"]
        for key, value in data[section].items():
            if section == "traffic" and key in keys:
                comment = f"fitted; {notes.get(key, '')}".rstrip("; ")
            elif section == "scenario" and key in ("name", "description"):
                comment = "label in results"
            else:
                is_default = getattr(defaults, section).model_dump(mode="python")[key] == value
                comment = "default" if is_default else "base"
                if section == "traffic" and key == "model":
                    comment = "the two-state source (Ogawa §1), with the fitted keys below"
                elif section == "traffic" and key.startswith(UNUSED_TRAFFIC):
                    comment += "; unused by the thin-client model"
            lines.append(_line(key, value, comment))
    return "\n".join(lines) + "\n"


def fit_summary(fitted: dict[str, Any], capture: dict[str, Any]) -> str:
    """What ``thinwan fit`` prints: the fitted keys, then the goodness of fit of each law."""
    keys, notes = fitted["keys"], fitted["notes"]
    tr = fitted["transitions"]
    lines = [
        f"{capture['name']}: {capture.get('flows', '?')} connections, gap rule {capture['gap_ms']:g} ms; "
        f"transitions I→I {tr['ii']}, I→B {tr['ib']}, B→I {tr['bi']}, B→B {tr['bb']}",
        "",
        "[traffic]",
    ]
    width = max(len(k) for k in keys)
    for k, v in keys.items():
        lines.append(f"  {k:<{width}} = {_value(v):<10} {notes.get(k, '')}")
    lines += ["", "gap laws (binned AIC; KS distance of the binned CDF; chi-square p):"]
    laws = ("lognormal", "exponential", "gamma", "weibull")
    lines.append(f"  {'':6} {'n':>8}  " + "  ".join(f"{w:>26}" for w in laws) + "  best")
    for t, g in [*fitted["gaps"].items(), ("intra", fitted["intra"])]:
        if not g["laws"]:
            lines.append(f"  {t.upper():6} {g['n']:>8}  {g.get('note', '')}")
            continue
        cells = [
            f"{g['laws'][w]['aic']:>12.1f} {g['laws'][w]['ks']:>6.3f} {g['laws'][w]['chi2_p']:>6.3f}" for w in laws
        ]
        lines.append(f"  {t.upper():6} {g['n']:>8}  " + "  ".join(f"{c:>26}" for c in cells) + f"  {g['best']}")
    for kind, s in fitted["sizes"].items():
        if s["n"]:
            lines.append(
                f"sizes {kind}: n {s['n']}, mean {s['mean']:.1f} B, sd {s['sd']:.1f}, range {s['min']}–{s['max']}; "
                f"uniform spread {s['uniform']['spread']:.3f} KS {s['uniform']['ks']:.3f}, "
                f"lognormal KS {s.get('lognormal', {}).get('ks', math.nan):.3f} → {s['best']}"
            )
    b = fitted["blocks"]
    tail = b["tail"]
    lines.append(
        f"blocks: n {b['n']}, c_B {b['mean']:.2f}, p99 {b['p99']}, max {b['max']}; "
        + (
            f"Pareto tail above {tail['kmin']} ({tail['n_tail']} blocks): shape {tail['shape']:.3f}, "
            f"95 % CI [{tail['ci95'][0]:.3f}, {tail['ci95'][1]:.3f}], KS {tail['ks']:.3f}"
            if "shape" in tail
            else tail["note"]
        )
    )
    a = fitted["activity"]
    lines.append(
        f"sessions: {a['used']} of {a['sessions']} used (≥ {a['min_session_s']:g} s, ≥ {a['min_session_flows']} flows); "
        + (
            f"σ of ln(activity) {a['sigma']:.3f} (observed {a['sigma_observed']:.3f}), "
            f"95 % CI [{a['ci95'][0]:.3f}, {a['ci95'][1]:.3f}]"
            if "sigma" in a
            else a["note"]
        )
    )
    return "\n".join(lines)
