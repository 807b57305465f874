"""`thinwan.analysis.fit` on synthetic pooled statistics drawn from known laws: the fit
must recover what was drawn (lognormal σ, gap means, block-length Pareto shape inside
its interval, session activity σ) and pick the law that generated the gaps."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import tomllib

from thinwan.analysis import fit

EDGES = [10 ** (-6 + i / 20) for i in range(201)]  # 1 µs … 10⁴ s, 20 per decade


def hist(x: np.ndarray, *, under_over: bool = False) -> dict:
    """A gap histogram of the analyzer's shape: log bins, exact sums."""
    counts, _ = np.histogram(x, bins=EDGES)
    if under_over:
        counts = np.concatenate(([np.sum(x < EDGES[0])], counts, [np.sum(x >= EDGES[-1])]))
    ln = np.log(x)
    return {
        "counts": counts.tolist(),
        "n": len(x),
        "sum": float(x.sum()),
        "sum_ln": float(ln.sum()),
        "sum_ln2": float((ln**2).sum()),
    }


def pareto_blocks(rng: np.random.Generator, n: int, shape: float, scale: float) -> np.ndarray:
    """The source's block law: ⌈X⌉ ≥ 2, X Pareto(scale, shape), no cap."""
    x = scale * (1 - rng.random(n)) ** (-1 / shape)
    return np.maximum(np.ceil(x), 2).astype(int)


def synthetic(
    rng: np.random.Generator,
    *,
    sigma: dict[str, float],
    means: dict[str, float],
    n_gaps: int = 20_000,
    shape: float = 1.5,
    gap_law: str = "lognormal",
    sessions: list[dict] | None = None,
    under_over: bool = False,
) -> dict:
    gaps = {}
    for t in fit.TRANSITIONS:
        if gap_law == "lognormal":
            mu = math.log(means[t]) - sigma[t] ** 2 / 2
            x = rng.lognormal(mu, sigma[t], n_gaps)
        else:
            x = rng.exponential(means[t], n_gaps)
        gaps[t] = hist(x, under_over=under_over)
    gaps["intra"] = hist(rng.exponential(0.36e-3, n_gaps), under_over=under_over)
    for k in ("request", "response"):
        gaps[k] = hist(rng.exponential(0.1, 100), under_over=under_over)
    inter = np.bincount(np.round(rng.uniform(137.2 * 0.5, 137.2 * 1.5, n_gaps)).astype(int), minlength=65536)
    bulk = np.bincount(np.round(rng.uniform(936.2 * 0.7, 936.2 * 1.3, n_gaps)).astype(int), minlength=65536)
    blocks = pareto_blocks(rng, n_gaps, shape, 2.2)
    small = blocks[blocks <= 4096]
    lens, cnt = np.unique(small, return_counts=True)
    return {
        "transitions": {"ii": 9100, "ib": 900, "bi": 420, "bb": 580},
        "gaps": gaps,
        "bin_edges_s": EDGES,
        "sizes": {"interactive": inter.tolist(), "bulk": bulk.tolist()},
        "block_lengths": {
            "counts": {str(k): int(c) for k, c in zip(lens, cnt, strict=True)},
            "overflow": blocks[blocks > 4096].tolist(),
        },
        "sessions": sessions or [],
    }


SIGMA = {"ii": 1.0, "ib": 0.6, "bi": 1.4, "bb": 0.8}
MEANS = {"ii": 0.27, "ib": 0.22, "bi": 0.24, "bb": 0.11}


@pytest.mark.parametrize("under_over", [False, True])
def test_lognormal_gaps_are_recovered_and_preferred(under_over: bool) -> None:
    rng = np.random.default_rng(1)
    out = fit.fit_capture(synthetic(rng, sigma=SIGMA, means=MEANS, under_over=under_over))
    k = out["keys"]
    assert k["gap_distribution"] == "lognormal"
    for t in fit.TRANSITIONS:
        assert k[f"gap_lognormal_sigma_{t}"] == pytest.approx(SIGMA[t], rel=0.03)
        assert k[f"gap_{t}_s"] == pytest.approx(MEANS[t], rel=0.05)
        g = out["gaps"][t]
        assert g["best"] == "lognormal", (t, {w: g["laws"][w]["aic"] for w in g["laws"]})
        assert g["laws"]["lognormal"]["ks"] < 0.02 < g["laws"]["exponential"]["ks"]
    assert k["intra_bulk_gap_ms"] == pytest.approx(0.36, rel=0.03)
    assert out["intra"]["best"] in ("exponential", "gamma", "weibull")  # all contain the exponential
    assert out["intra"]["laws"]["exponential"]["ks"] < 0.02


def test_exponential_gaps_choose_the_exponential_law() -> None:
    rng = np.random.default_rng(2)
    out = fit.fit_capture(synthetic(rng, sigma=SIGMA, means=MEANS, gap_law="exponential"))
    assert out["keys"]["gap_distribution"] == "exponential"
    for t in fit.TRANSITIONS:
        assert out["gaps"][t]["laws"]["exponential"]["chi2_p"] > 1e-4
        assert out["keys"][f"gap_{t}_s"] == pytest.approx(MEANS[t], rel=0.05)


@pytest.mark.parametrize("shape", [1.2, 1.5, 2.5])
def test_block_pareto_shape_within_its_interval(shape: float) -> None:
    rng = np.random.default_rng(int(shape * 10))
    out = fit.fit_capture(synthetic(rng, sigma=SIGMA, means=MEANS, shape=shape, n_gaps=40_000))
    tail = out["blocks"]["tail"]
    lo, hi = tail["ci95"]
    assert lo < shape < hi, tail
    assert hi - lo < 0.5 * shape, "the interval is informative"
    assert out["keys"]["bulk_pareto_shape"] == pytest.approx(tail["shape"], abs=1e-3)


def test_uniform_sizes_give_their_spread() -> None:
    rng = np.random.default_rng(3)
    out = fit.fit_capture(synthetic(rng, sigma=SIGMA, means=MEANS))
    s = out["sizes"]
    assert s["interactive"]["uniform"]["spread"] == pytest.approx(0.5, abs=0.02)
    assert s["bulk"]["uniform"]["spread"] == pytest.approx(0.3, abs=0.02)
    assert s["interactive"]["best"] == "uniform"
    assert out["keys"]["interactive_bytes_mean"] == pytest.approx(137.2, rel=0.01)
    assert 0.3 < out["keys"]["size_spread"] < 0.5


def sessions(rng: np.random.Generator, sigma: float, n: int = 400, duration: float = 300.0) -> list[dict]:
    """Sessions whose flows are a Poisson count at rate 4/s × activity (ln a ~ N(−σ²/2, σ²))."""
    a = np.exp(rng.normal(-(sigma**2) / 2, sigma, n)) if sigma else np.ones(n)
    flows = rng.poisson(4.0 * a * duration)
    return [{"duration_s": duration, "flows": int(f), "bytes": int(f) * 300} for f in flows]


@pytest.mark.parametrize("sigma", [0.0, 0.4, 0.9])
def test_activity_sigma_is_recovered(sigma: float) -> None:
    rng = np.random.default_rng(4)
    ss = sessions(rng, sigma) + [{"duration_s": 5.0, "flows": 1, "bytes": 10}]  # too short
    # The Poisson count's noise: CV² of exponential gaps is 1.
    a = fit.fit_activity(ss, 1.0, fit.FitOptions())
    assert a["used"] == 400 and a["sessions"] == 401
    assert a["sigma"] == pytest.approx(sigma, abs=0.05)
    lo, hi = a["ci95"]
    assert lo <= max(sigma, 0.0) + 0.02 and sigma <= hi + 0.02


def test_activity_sigma_comes_off_the_gap_sigma() -> None:
    rng = np.random.default_rng(5)
    pooled = synthetic(rng, sigma=SIGMA, means=MEANS, sessions=sessions(rng, 0.6))
    out = fit.fit_capture(pooled)
    k = out["keys"]
    assert k["session_activity"] == "lognormal"
    assert k["session_activity_sigma"] == pytest.approx(0.6, abs=0.08)
    s = k["session_activity_sigma"]
    assert k["gap_lognormal_sigma_ii"] == pytest.approx(math.sqrt(1.0 - s * s), rel=0.03)
    few = fit.fit_capture(synthetic(rng, sigma=SIGMA, means=MEANS, sessions=sessions(rng, 0.6, n=3)))
    assert few["keys"]["session_activity"] == "identical"


def test_capture_without_bulk_is_a_clear_error() -> None:
    rng = np.random.default_rng(6)
    pooled = synthetic(rng, sigma=SIGMA, means=MEANS)
    pooled["transitions"] = {"ii": 100, "ib": 0, "bi": 0, "bb": 0}
    with pytest.raises(fit.FitError, match="α and β"):
        fit.fit_capture(pooled)
    pooled = synthetic(rng, sigma=SIGMA, means=MEANS)
    pooled["block_lengths"] = {"counts": {}, "overflow": []}
    with pytest.raises(fit.FitError, match="no bulk blocks"):
        fit.fit_capture(pooled)


LARGE = Path(__file__).resolve().parents[1] / "scenarios" / "ogawa2011" / "large-buffer.toml"


def test_scenario_file_lists_every_key_and_comments_the_fitted_ones() -> None:
    from thinwan.config.scenario import Scenario, load_scenario, scenario_from_dict
    from thinwan.report.scenario_file import SECTIONS, scenario_toml

    rng = np.random.default_rng(7)
    fitted = fit.fit_capture(synthetic(rng, sigma=SIGMA, means=MEANS, sessions=sessions(rng, 0.5)))
    cap = {"name": "x.pcap", "packets": 10, "matched": 9, "flows": 3, "server_port": 3389, "gap_ms": 6.31}
    text = scenario_toml(load_scenario(LARGE), "large-buffer.toml", fitted, cap)
    data = tomllib.loads(text)
    sc = scenario_from_dict(data)
    for section in SECTIONS:
        assert set(data[section]) == set(type(getattr(Scenario(), section)).model_fields), section
    for key, value in fitted["keys"].items():
        assert getattr(sc.traffic, key) == pytest.approx(value, rel=1e-5) if isinstance(value, float) else value
        line = next(li for li in text.splitlines() if li.startswith(f"{key} = "))
        assert "# fitted; " in line, line
    assert sc.traffic.session_activity == "lognormal"
    assert sc.queue.limit_bytes == 2_500_000, "the base's network"
    assert "x.pcap" in text.splitlines()[0]


def test_a_transition_never_seen_takes_its_siblings_mean() -> None:
    rng = np.random.default_rng(8)
    pooled = synthetic(rng, sigma=SIGMA, means=MEANS)
    pooled["transitions"]["bb"] = 0
    pooled["gaps"]["bb"] = {"counts": [0] * 200, "n": 0, "sum": 0.0, "sum_ln": 0.0, "sum_ln2": 0.0}
    out = fit.fit_capture(pooled)
    k = out["keys"]
    assert k["gap_bb_s"] == k["gap_bi_s"] and k["p_bulk_to_interactive"] == 1.0
    assert k["gap_lognormal_sigma_bb"] == 0.0
    assert "no BB gap" in out["notes"]["gap_bb_s"]
