"""The scaling benchmark's summary: the fitted exponent b of cost = a * packets^b, which
BENCHMARKS.md reports for the "cost grows about linearly" criterion."""

from __future__ import annotations

import pytest

bench_scaling = pytest.importorskip("bench.bench_scaling", reason="needs the built simulator")


def rows(cost):
    return [{"pairs": p, "packets": 1000 * p, "sim_wall_s": cost(1000 * p)} for p in (100, 1000, 10000)]


@pytest.mark.parametrize("b", [1.0, 1.5, 2.0])
def test_exponent_recovers_a_power_law(b):
    assert bench_scaling.exponent(rows(lambda n: 3e-7 * n**b)) == pytest.approx(b)


def test_exponents_fit_all_sizes_and_each_step():
    # Linear to 1,000 pairs, then twice the cost per packet at 10,000: b = log 20 / log 10.
    r = rows(lambda n: 1e-6 * n)
    r[2]["sim_wall_s"] *= 2
    e = bench_scaling.exponents(r)
    assert set(e) == {"all", "100-1000", "1000-10000"}
    assert e["100-1000"] == pytest.approx(1.0)
    assert e["1000-10000"] == pytest.approx(1.30103, rel=1e-5)
    assert 1.0 < e["all"] < e["1000-10000"]


def test_exponents_of_one_size_is_empty():
    assert bench_scaling.exponents(rows(lambda n: n)[:1]) == {}


def test_pair_counts_parse_and_reject_with_the_value():
    assert bench_scaling.pair_counts("100,1000") == [100, 1000]
    for bad in ("abc", "100,x", "0", ""):
        with pytest.raises(Exception, match="not a list of pair counts"):
            bench_scaling.pair_counts(bad)
