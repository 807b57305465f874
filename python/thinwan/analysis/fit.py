"""Fit the thin-client source's laws to a capture's pooled gap-rule statistics.

Input: the ``pooled`` dict of ``thinwan.analysis.capture_model.analyze`` (histograms with exact
sums, /work/fit-api.md and docs/model.md "Fitting a capture"); the point estimates under
the scenario's ``[traffic]`` key names come from :func:`capture_model.point_model`. This
module adds what a point estimate cannot say: which law each quantity follows, how well
(goodness of fit), the block-length tail with a confidence interval, and how much the
sessions differ. No I/O: the CLI reads the capture, the report stage writes the file.

Methods (docs/model.md "Fitting a capture" gives the formulas and sources):
- gaps per transition and the intra-block gap: lognormal by its exact MLE from the sums
  of ln and ln² (μ = mean of ln g, σ² = variance of ln g), exponential by its MLE (mean =
  sum / n), gamma and Weibull by binned MLE on the log-spaced histogram; each scored by
  the binned log-likelihood (AIC), the KS distance of the binned CDFs, and a chi-square
  over bins merged until each expects ≥ 5;
- sizes: the source's uniform mean·(1 ± spread) with the spread matched to the standard
  deviation (spread = √3·sd/mean) against a lognormal MLE, by KS distance;
- block length: the source's law ⌈X⌉, X Pareto(x_m, s), has P(L ≥ k) = (x_m/(k−1))^s for
  k − 1 ≥ x_m; s by exact discrete MLE over blocks of length ≥ k_min, k_min chosen to
  minimise the KS distance of the fitted tail (Clauset, Shalizi & Newman 2009, §3.3),
  95 % interval by profile likelihood;
- per-session activity: σ of ln(flows per second) over sessions at least
  ``min_session_s`` long with ``min_session_flows`` flows, less the counting noise
  (≈ CV²/flows of each session, CV of the pooled start-to-start gap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize, stats

from thinwan.analysis.capture_model import point_model

__all__ = [
    "FitError",
    "FitOptions",
    "TRANSITIONS",
    "fit_capture",
    "fit_gaps",
    "fit_sizes",
    "fit_block_tail",
    "fit_activity",
]

TRANSITIONS = ("ii", "ib", "bi", "bb")
# Laws the simulator has (traffic.gap_distribution); the others are reported only.
SIM_GAP_LAWS = ("lognormal", "exponential")
GAP_LAWS = ("lognormal", "exponential", "gamma", "weibull")
# Fewer observations than this: no law is fitted (the mean alone is reported).
MIN_FIT_N = 10
# The block-length tail needs at least this many blocks above k_min (Clauset et al.
# advise ≥ 50 for a usable power-law MLE).
MIN_TAIL_N = 50
CHI2_MIN_EXPECTED = 5.0


class FitError(ValueError):
    """The pooled statistics cannot be fitted (too few flows, no blocks, ...)."""


@dataclass(frozen=True)
class FitOptions:
    """Choices of the fit that a user may change (``thinwan fit`` options)."""

    # Sessions shorter than this, or with fewer flows, do not enter the activity σ.
    min_session_s: float = 30.0
    min_session_flows: int = 20


# ---------------------------------------------------------------------------------------
# Histograms


def _binned(h: dict[str, Any], edges: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """(edges, counts) with the edges covering every count: a histogram of one count per
    interval between edges, or with an underflow and an overflow bin around them."""
    counts = np.asarray(h["counts"], dtype=float)
    e = np.asarray(edges, dtype=float)
    if len(counts) == len(e) - 1:
        return e, counts
    if len(counts) == len(e) + 1:
        return np.concatenate(([0.0], e, [np.inf])), counts
    raise FitError(f"histogram of {len(counts)} bins does not match {len(e)} bin edges")


def _ln_moments(h: dict[str, Any]) -> tuple[int, float, float, float]:
    """(n, mean, μ of ln, σ of ln) from the exact sums."""
    n = int(h["n"])
    if n == 0:
        return 0, math.nan, math.nan, math.nan
    mean = h["sum"] / n
    mu = h["sum_ln"] / n
    var = max(h["sum_ln2"] / n - mu * mu, 0.0)
    return n, mean, mu, math.sqrt(var)


def _cdf(law: str, params: tuple[float, ...], x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    with np.errstate(all="ignore"):
        if law == "lognormal":
            mu, sigma = params
            return stats.norm.cdf((np.log(np.maximum(x, 1e-300)) - mu) / sigma) * (x > 0)
        if law == "exponential":
            (mean,) = params
            return np.where(x > 0, -np.expm1(-np.maximum(x, 0) / mean), 0.0)
        if law == "gamma":
            k, scale = params
            return stats.gamma.cdf(x, k, scale=scale)
        if law == "weibull":
            k, scale = params
            return stats.weibull_min.cdf(x, k, scale=scale)
    raise ValueError(law)


def _binned_ll(law: str, params: tuple[float, ...], edges: np.ndarray, counts: np.ndarray) -> float:
    p = np.diff(_cdf(law, params, edges))
    used = counts > 0
    return float(np.sum(counts[used] * np.log(np.maximum(p[used], 1e-300))))


def _gof(law: str, params: tuple[float, ...], edges: np.ndarray, counts: np.ndarray, k: int) -> dict[str, float]:
    """KS distance of the binned CDFs, binned AIC and chi-square (bins merged until each
    expects ≥ 5)."""
    n = counts.sum()
    f = _cdf(law, params, edges)
    emp = np.concatenate(([0.0], np.cumsum(counts))) / n
    ks = float(np.max(np.abs(emp - (f - f[0]))))
    ll = _binned_ll(law, params, edges, counts)
    expected = np.diff(f) * n
    obs_m, exp_m, o, e = [], [], 0.0, 0.0
    for oi, ei in zip(counts, expected, strict=True):
        o, e = o + oi, e + ei
        if e >= CHI2_MIN_EXPECTED:
            obs_m.append(o)
            exp_m.append(e)
            o = e = 0.0
    if obs_m:
        obs_m[-1] += o
        exp_m[-1] += e
    obs_a, exp_a = np.array(obs_m), np.array(exp_m)
    chi2 = float(np.sum((obs_a - exp_a) ** 2 / np.maximum(exp_a, 1e-300)))
    dof = max(len(obs_a) - 1 - k, 1)
    return {
        "ks": ks,
        "aic": 2 * k - 2 * ll,
        "log_likelihood": ll,
        "chi2": chi2,
        "chi2_dof": dof,
        "chi2_p": float(stats.chi2.sf(chi2, dof)),
    }


def _binned_mle(law: str, start: tuple[float, float], edges: np.ndarray, counts: np.ndarray) -> tuple[float, float]:
    """Two-parameter (shape, scale) binned MLE, optimised over their logs."""

    def nll(x: np.ndarray) -> float:
        return -_binned_ll(law, (math.exp(x[0]), math.exp(x[1])), edges, counts)

    x0 = np.log(np.asarray(start))
    res = optimize.minimize(nll, x0, method="Nelder-Mead", options={"xatol": 1e-6, "fatol": 1e-6, "maxiter": 2000})
    return math.exp(res.x[0]), math.exp(res.x[1])


def fit_gaps(h: dict[str, Any], edges: list[float]) -> dict[str, Any]:
    """Every candidate law of one gap histogram (seconds), with its goodness of fit.

    ``best`` is the law of lowest AIC; ``best_simulated`` the lowest among the laws the
    simulator has (``traffic.gap_distribution``)."""
    n, mean, mu, sigma = _ln_moments(h)
    out: dict[str, Any] = {"n": n, "mean_s": mean, "laws": {}}
    if n < MIN_FIT_N:
        out["note"] = f"fewer than {MIN_FIT_N} gaps: no law fitted"
        return out
    e, c = _binned(h, edges)
    if sigma == 0:
        out["note"] = "every gap equal: no law fitted"
        return out
    laws: dict[str, dict[str, Any]] = {
        "lognormal": {"mu": mu, "sigma": sigma, "params": (mu, sigma)},
        "exponential": {"mean_s": mean, "params": (mean,)},
    }
    # Gamma and Weibull from moment-ish starting points (shape from the spread of ln g).
    k0 = max(0.05, min(20.0, 1.0 / sigma**2))
    k_g, s_g = _binned_mle("gamma", (k0, mean / k0), e, c)
    laws["gamma"] = {"shape": k_g, "scale_s": s_g, "params": (k_g, s_g)}
    k_w0 = max(0.05, min(20.0, 1.28 / sigma))  # sd of ln of a Weibull is π/(√6 k)
    k_w, s_w = _binned_mle("weibull", (k_w0, mean), e, c)
    laws["weibull"] = {"shape": k_w, "scale_s": s_w, "params": (k_w, s_w)}
    for law, d in laws.items():
        params = d.pop("params")
        d.update(_gof(law, params, e, c, len(params)))
    out["laws"] = laws
    out["best"] = min(laws, key=lambda w: laws[w]["aic"])
    out["best_simulated"] = min(SIM_GAP_LAWS, key=lambda w: laws[w]["aic"])
    return out


# ---------------------------------------------------------------------------------------
# Sizes


def fit_sizes(counts: list[int] | np.ndarray) -> dict[str, Any]:
    """The source's uniform law (spread from the sd) and a lognormal, against the
    per-byte histogram, by KS distance."""
    c = np.asarray(counts, dtype=float)
    n = c.sum()
    if n == 0:
        return {"n": 0, "note": "no packets"}
    x = np.arange(len(c), dtype=float)
    mean = float((c * x).sum() / n)
    sd = float(math.sqrt(max((c * (x - mean) ** 2).sum() / n, 0.0)))
    cum = np.cumsum(c) / n
    nz = np.nonzero(c)[0]
    q = lambda p: int(np.searchsorted(cum, p))  # noqa: E731
    out: dict[str, Any] = {
        "n": int(n),
        "mean": mean,
        "sd": sd,
        "min": int(nz[0]),
        "max": int(nz[-1]),
        "p1": q(0.01),
        "median": q(0.5),
        "p99": q(0.99),
    }
    spread = math.sqrt(3.0) * sd / mean if mean > 0 else 0.0
    # The source rounds a uniform on [lo, hi] to whole bytes: CDF at k + ½.
    lo, hi = mean * (1 - spread), mean * (1 + spread)
    if hi > lo:
        f_uni = np.clip((x + 0.5 - lo) / (hi - lo), 0.0, 1.0)
    else:
        f_uni = (x + 0.5 >= mean).astype(float)
    out["uniform"] = {"spread": spread, "ks": float(np.max(np.abs(cum - f_uni)))}
    pos = c[1:]
    if pos.sum() > 0:
        lx = np.log(x[1:])
        m = float((pos * lx).sum() / pos.sum())
        s = float(math.sqrt(max((pos * (lx - m) ** 2).sum() / pos.sum(), 1e-12)))
        f_ln = np.concatenate(([0.0], stats.norm.cdf((np.log(x[1:] + 0.5) - m) / s)))
        out["lognormal"] = {"mu": m, "sigma": s, "ks": float(np.max(np.abs(cum - f_ln)))}
    out["best"] = min(("uniform", "lognormal"), key=lambda w: out.get(w, {"ks": math.inf})["ks"])
    return out


# ---------------------------------------------------------------------------------------
# Block lengths


def _block_counts(b: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, counts), sorted, overflow list included."""
    agg: dict[int, int] = {}
    for k, v in b.get("counts", {}).items():
        if int(v):
            agg[int(k)] = agg.get(int(k), 0) + int(v)
    for k in b.get("overflow", []):
        agg[int(k)] = agg.get(int(k), 0) + 1
    ks = np.array(sorted(agg), dtype=float)
    return ks, np.array([agg[int(k)] for k in ks], dtype=float)


def _tail_ll(s: float, k: np.ndarray, n: np.ndarray, kmin: int) -> float:
    """log-likelihood of shape s for blocks of length ≥ kmin under P(L ≥ k) ∝ (k−1)^−s:
    P(L = k | L ≥ kmin) = ((k−1)^−s − k^−s) / (kmin−1)^−s."""
    p = (k - 1.0) ** -s - k**-s
    return float(np.sum(n * np.log(np.maximum(p, 1e-300))) + n.sum() * s * math.log(kmin - 1.0))


def _tail_mle(k: np.ndarray, n: np.ndarray, kmin: int) -> tuple[float, float]:
    """(ŝ, ℓ(ŝ)) for the blocks ≥ kmin."""
    res = optimize.minimize_scalar(lambda s: -_tail_ll(s, k, n, kmin), bounds=(0.05, 20.0), method="bounded")
    return float(res.x), -float(res.fun)


def _tail_ks(s: float, k: np.ndarray, n: np.ndarray, kmin: int) -> float:
    """KS distance between the empirical and fitted survival functions above kmin."""
    surv_emp = 1.0 - np.concatenate(([0.0], np.cumsum(n)[:-1])) / n.sum()  # P(L ≥ k)
    surv_fit = ((k - 1.0) / (kmin - 1.0)) ** -s
    return float(np.max(np.abs(surv_emp - surv_fit)))


def fit_block_tail(b: dict[str, Any]) -> dict[str, Any]:
    """c_B, the length distribution's summary and its Pareto tail (see the module doc)."""
    k, n = _block_counts(b)
    total = n.sum()
    if total == 0:
        raise FitError("no bulk blocks in the capture: the block length cannot be fitted")
    out: dict[str, Any] = {
        "n": int(total),
        "mean": float((k * n).sum() / total),
        "max": int(k[-1]),
        "p99": int(k[np.searchsorted(np.cumsum(n) / total, 0.99)]),
    }
    # Candidate thresholds: every observed length ≥ 3 with MIN_TAIL_N blocks at or above.
    above = total - np.concatenate(([0.0], np.cumsum(n)[:-1]))
    cands = [int(kk) for kk, a in zip(k, above, strict=True) if kk >= 3 and a >= MIN_TAIL_N]
    if not cands:
        out["tail"] = {"note": f"fewer than {MIN_TAIL_N} blocks of length ≥ 3: no tail fitted"}
        return out
    best: tuple[float, int, float, float] | None = None
    for kmin in cands:
        sel = k >= kmin
        s, ll = _tail_mle(k[sel], n[sel], kmin)
        ks = _tail_ks(s, k[sel], n[sel], kmin)
        if best is None or ks < best[0]:
            best = (ks, kmin, s, ll)
    assert best is not None
    ks, kmin, s, ll = best
    sel = k >= kmin
    # Profile-likelihood 95 % interval: 2(ℓ̂ − ℓ(s)) ≤ χ²₁(0.95).
    crit = stats.chi2.ppf(0.95, 1) / 2

    def f(x: float) -> float:
        return ll - _tail_ll(x, k[sel], n[sel], kmin) - crit

    lo = optimize.brentq(f, 0.01, s) if f(0.01) > 0 else 0.01
    hi = optimize.brentq(f, s, 50.0) if f(50.0) > 0 else math.inf
    out["tail"] = {
        "kmin": kmin,
        "n_tail": int(n[sel].sum()),
        "shape": s,
        "ci95": [lo, hi],
        "ks": ks,
        "rule": "k_min minimises the KS distance of the fitted tail (Clauset et al. 2009 §3.3), "
        f"over lengths ≥ 3 with ≥ {MIN_TAIL_N} blocks at or above",
    }
    return out


# ---------------------------------------------------------------------------------------
# Sessions


def _gap_cv2(gaps: dict[str, Any], edges: list[float]) -> float:
    """CV² of the pooled start-to-start gap (the four transitions), second moment from
    the histograms' geometric bin centres (bins are 12 % wide)."""
    n = s1 = s2 = 0.0
    for t in TRANSITIONS:
        h = gaps.get(t)
        if not h or not h["n"]:
            continue
        e, c = _binned(h, edges)
        lo, hi = e[:-1], e[1:]
        centre = np.where(np.isfinite(hi) & (lo > 0), np.sqrt(lo * np.where(np.isfinite(hi), hi, 1.0)), hi)
        centre = np.where(np.isfinite(centre), centre, lo)
        n += h["n"]
        s1 += h["sum"]
        s2 += float((c * centre**2).sum())
    if n == 0 or s1 == 0:
        return 0.0
    m = s1 / n
    return max(s2 / n / (m * m) - 1.0, 0.0)


def fit_activity(sessions: list[dict[str, Any]], cv2: float, opts: FitOptions) -> dict[str, Any]:
    """σ of ln(flows per second) across sessions, less the counting noise."""
    used = [s for s in sessions if s["duration_s"] >= opts.min_session_s and s["flows"] >= opts.min_session_flows]
    out: dict[str, Any] = {
        "sessions": len(sessions),
        "used": len(used),
        "min_session_s": opts.min_session_s,
        "min_session_flows": opts.min_session_flows,
    }
    if len(used) < 5:
        out["note"] = "fewer than 5 sessions long enough: activity not estimated (identical)"
        return out
    rate = np.array([s["flows"] / s["duration_s"] for s in used])
    flows = np.array([s["flows"] for s in used], dtype=float)
    ln = np.log(rate)
    var_obs = float(np.var(ln, ddof=1))
    noise = float(np.mean(cv2 / flows))
    m = len(used)
    # Interval for the observed variance (normal ln a): (m−1)s²/χ², then less the noise.
    lo_v = (m - 1) * var_obs / stats.chi2.ppf(0.975, m - 1) - noise
    hi_v = (m - 1) * var_obs / stats.chi2.ppf(0.025, m - 1) - noise
    out.update(
        {
            "activity_median_per_s": float(np.median(rate)),
            "sigma_observed": math.sqrt(var_obs),
            "counting_noise_var": noise,
            "sigma": math.sqrt(max(var_obs - noise, 0.0)),
            "ci95": [math.sqrt(max(lo_v, 0.0)), math.sqrt(max(hi_v, 0.0))],
        }
    )
    return out


# ---------------------------------------------------------------------------------------
# The whole fit


def fit_capture(pooled: dict[str, Any], opts: FitOptions | None = None) -> dict[str, Any]:
    """Every fit, and the ``[traffic]`` keys they give (``keys``), each with a note of
    where it came from (``notes``: key → text for the scenario file's comment)."""
    opts = opts or FitOptions()
    edges = pooled["bin_edges_s"]
    tr = {t: int(pooled["transitions"].get(t, 0)) for t in TRANSITIONS}
    if tr["ii"] + tr["ib"] == 0 or tr["bi"] + tr["bb"] == 0:
        raise FitError(
            "the capture has no transition out of an interactive flow or none out of a bulk "
            f"flow (I→I {tr['ii']}, I→B {tr['ib']}, B→I {tr['bi']}, B→B {tr['bb']}): "
            "α and β cannot be estimated; check --server-port and --gap-ms"
        )
    blocks = fit_block_tail(pooled["block_lengths"])
    point = point_model(pooled)
    gaps = {t: fit_gaps(pooled["gaps"][t], edges) for t in TRANSITIONS}
    intra = fit_gaps(pooled["gaps"]["intra"], edges)
    sizes = {kind: fit_sizes(pooled["sizes"][kind]) for kind in ("interactive", "bulk")}
    activity = fit_activity(pooled.get("sessions", []), _gap_cv2(pooled["gaps"], edges), opts)

    keys: dict[str, Any] = {}
    notes: dict[str, str] = {}
    alpha, beta = point["p_interactive_to_bulk"], point["p_bulk_to_interactive"]
    n_i, n_b = tr["ii"] + tr["ib"], tr["bi"] + tr["bb"]
    keys["p_interactive_to_bulk"] = alpha
    notes["p_interactive_to_bulk"] = f"α = n(I→B)/n(I→·) = {tr['ib']}/{n_i} ± {_binom_se(alpha, n_i):.2g} (1 s.e.)"
    keys["p_bulk_to_interactive"] = beta
    notes["p_bulk_to_interactive"] = f"β = n(B→I)/n(B→·) = {tr['bi']}/{n_b} ± {_binom_se(beta, n_b):.2g} (1 s.e.)"
    for t in TRANSITIONS:
        g = gaps[t]
        if g["n"] == 0:
            # Never seen (a short capture): the other gap out of the same state, which
            # the chain then hardly uses (α or β is 0 or 1 for this transition).
            sibling = t[0] + ("b" if t[1] == "i" else "i")
            keys[f"gap_{t}_s"] = point[f"gap_{sibling}_s"]
            notes[f"gap_{t}_s"] = f"no {t.upper()} gap in the capture: the {sibling.upper()} mean"
            continue
        keys[f"gap_{t}_s"] = point[f"gap_{t}_s"]
        notes[f"gap_{t}_s"] = f"mean of n = {g['n']} {t.upper()} gaps" + (
            f", ± {_mean_se(pooled['gaps'][t]):.2g} s (1 s.e.)" if g["n"] > 1 else ""
        )

    # One gap law for all transitions (the simulator's): the lower total AIC.
    fitted = [t for t in TRANSITIONS if gaps[t]["laws"]]
    if fitted:
        aic = {w: sum(gaps[t]["laws"][w]["aic"] for t in fitted) for w in SIM_GAP_LAWS}
        law = min(aic, key=lambda w: aic[w])
        best_any = {t: gaps[t]["best"] for t in fitted}
        notes["gap_distribution"] = (
            f"lower total binned AIC over {', '.join(t.upper() for t in fitted)}: "
            + ", ".join(f"{w} {aic[w]:.1f}" for w in SIM_GAP_LAWS)
            + "; best of all laws per transition: "
            + ", ".join(f"{t.upper()} {w}" for t, w in best_any.items())
        )
    else:
        law = "lognormal"
        notes["gap_distribution"] = "too few gaps to compare laws: the source's lognormal"
    keys["gap_distribution"] = law
    act_sigma = activity.get("sigma", 0.0) if "sigma" in activity else 0.0
    # Pooled ln gaps mix the within-session spread and the activity spread: σ² adds.
    n_all = sum(gaps[t]["n"] for t in fitted) or 1
    pooled_var = (
        sum(gaps[t]["n"] * gaps[t]["laws"]["lognormal"]["sigma"] ** 2 for t in fitted) / n_all if fitted else 1.0
    )
    keys["gap_lognormal_sigma"] = _within_sigma(math.sqrt(pooled_var), act_sigma)
    notes["gap_lognormal_sigma"] = f"σ of ln(gap) pooled over transitions ({math.sqrt(pooled_var):.3f})" + (
        f", less the activity σ ({act_sigma:.3f}) in quadrature" if act_sigma else ""
    )
    for t in TRANSITIONS:
        key = f"gap_lognormal_sigma_{t}"
        if t in fitted:
            ln = gaps[t]["laws"]["lognormal"]
            keys[key] = _within_sigma(ln["sigma"], act_sigma)
            notes[key] = (
                f"MLE σ of ln(gap) {ln['sigma']:.3f} (n = {gaps[t]['n']}; KS {ln['ks']:.3f}, "
                f"exp. KS {gaps[t]['laws']['exponential']['ks']:.3f})" + (" less the activity σ" if act_sigma else "")
            )
        else:
            keys[key] = 0.0
            notes[key] = f"too few {t.upper()} gaps: gap_lognormal_sigma"

    keys["session_activity"] = "lognormal" if "sigma" in activity else "identical"
    # The scenario accepts σ ≤ 5 (a factor e^5 ≈ 150 between typical sessions already).
    keys["session_activity_sigma"] = round(min(activity.get("sigma", 0.0), 5.0), 4)
    if "sigma" in activity:
        lo, hi = activity["ci95"]
        notes["session_activity"] = (
            f"{activity['used']} of {activity['sessions']} sessions ≥ {opts.min_session_s:g} s "
            f"and ≥ {opts.min_session_flows} flows"
        )
        notes["session_activity_sigma"] = (
            f"σ of ln(flows/s) {activity['sigma_observed']:.3f} less counting noise → "
            f"{activity['sigma']:.3f}, 95 % CI [{lo:.3f}, {hi:.3f}]"
        )
    else:
        notes["session_activity"] = activity["note"]
        notes["session_activity_sigma"] = "unused (identical)"

    for kind in ("interactive", "bulk"):
        s = sizes[kind]
        key = f"{kind}_bytes_mean"
        keys[key] = point[key]
        notes[key] = f"mean of n = {s['n']} {kind} packets' payload (range {s.get('min')}–{s.get('max')} B)"
    spreads = [(sizes[k]["n"], sizes[k]["uniform"]["spread"]) for k in ("interactive", "bulk") if sizes[k]["n"]]
    spread = sum(n * v for n, v in spreads) / sum(n for n, _ in spreads) if spreads else 0.5
    keys["size_spread"] = round(min(max(spread, 0.0), 1.0), 4)
    notes["size_spread"] = "√3·sd/mean, packet-weighted over kinds: " + ", ".join(
        f"{k} {sizes[k]['uniform']['spread']:.3f} (uniform KS {sizes[k]['uniform']['ks']:.3f}, "
        f"lognormal KS {sizes[k].get('lognormal', {}).get('ks', math.nan):.3f})"
        for k in ("interactive", "bulk")
        if sizes[k]["n"]
    )

    keys["bulk_packets_mean"] = point["bulk_packets_mean"]
    notes["bulk_packets_mean"] = f"c_B, mean of n = {blocks['n']} blocks"
    keys["bulk_packets_max"] = max(blocks["max"], math.floor(point["bulk_packets_mean"]) + 1)
    notes["bulk_packets_max"] = "longest block in the capture"
    tail = blocks["tail"]
    if "shape" in tail:
        s = tail["shape"]
        keys["bulk_pareto_shape"] = round(max(s, 1.05), 4)
        lo, hi = tail["ci95"]
        notes["bulk_pareto_shape"] = (
            f"discrete Pareto MLE {s:.3f}, 95 % CI [{lo:.3f}, {hi:.3f}], over {tail['n_tail']} blocks ≥ "
            f"k_min = {tail['kmin']} (KS-minimising), KS {tail['ks']:.3f}"
            + (" (raised to 1.05: the source needs a finite mean)" if s < 1.05 else "")
        )
    else:
        keys["bulk_pareto_shape"] = 1.5
        notes["bulk_pareto_shape"] = tail["note"] + ": the source's default"

    keys["intra_bulk_gap_ms"] = point["intra_bulk_gap_ms"]
    notes["intra_bulk_gap_ms"] = f"mean of n = {intra['n']} gaps inside blocks (the source's law: exponential)" + (
        f"; KS exponential {intra['laws']['exponential']['ks']:.3f}, lognormal {intra['laws']['lognormal']['ks']:.3f}"
        if intra["laws"]
        else ""
    )
    return {
        "keys": keys,
        "notes": notes,
        "point": point,
        "transitions": tr,
        "gaps": gaps,
        "intra": intra,
        "sizes": sizes,
        "blocks": blocks,
        "activity": activity,
    }


def _within_sigma(pooled: float, activity: float) -> float:
    """σ of ln(gap) within a session from the pooled σ and the activity σ (variances add:
    ln g = ln g' − ln a with a independent of g'); at least 0.05 (the key needs > 0)."""
    return round(max(math.sqrt(max(pooled * pooled - activity * activity, 0.0)), 0.05), 4)


def _binom_se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n) if n else math.nan


def _mean_se(h: dict[str, Any]) -> float:
    """Standard error of a gap mean, sd from the lognormal fit (no sum of squares)."""
    n, _mean, mu, sigma = _ln_moments(h)
    var = (math.exp(sigma**2) - 1) * math.exp(2 * mu + sigma**2)
    return math.sqrt(var / n)
