"""pytest-benchmark suites for the solvers: time, with quality in ``extra_info``.

    pytest bench/bench_solvers.py --benchmark-only --benchmark-group-by=group
    pytest bench/bench_solvers.py --benchmark-disable     # smoke run (CI)

Groups: ``ring`` (methods on synthetic clouds), ``tsplib`` (gap to the
optimum), ``auto`` (the auto rule on every model kind), ``step`` (recursive
doubling / Rabenseifner at n = 256), ``greedy`` (greedy vs annealing on a
two-level cloud). ``bench/compare.py`` runs the external solvers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import rankopt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _tsplib import read_optima, read_tsplib  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SHAPES = {64: (2, 2, 4, 4), 256: (2, 4, 8, 4), 1024: (4, 8, 8, 4), 4096: (4, 8, 16, 8)}


@pytest.fixture(scope="module")
def clouds():
    return {n: rankopt.synthetic_cloud(*s, rng=1) for n, s in SHAPES.items()}


@pytest.mark.benchmark(group="ring")
@pytest.mark.parametrize("method", ["two_opt", "ils", "anneal"])
@pytest.mark.parametrize("n", [256, 1024, 4096])
def test_ring(benchmark, clouds, method, n):
    lat = clouds[n].latency
    res = benchmark.pedantic(
        rankopt.solve, args=(lat,), kwargs={"method": method, "rng": 0}, rounds=1, iterations=1
    )
    benchmark.extra_info["cost"] = res.cost
    benchmark.extra_info["speedup"] = res.speedup


@pytest.mark.benchmark(group="tsplib")
@pytest.mark.skipif(not DATA.exists(), reason="shared data not found")
@pytest.mark.parametrize("name", ["kroA100", "tsp225", "pcb442", "gr666", "pr1002"])
def test_tsplib(benchmark, name):
    d = read_tsplib(DATA / "tsplib" / f"{name}.tsp")
    opt = read_optima(DATA / "optima.csv")[name]
    res = benchmark.pedantic(rankopt.solve, args=(d,), kwargs={"rng": 0}, rounds=1, iterations=1)
    benchmark.extra_info["gap"] = res.cost / opt - 1
    assert res.cost / opt <= 1.01


@pytest.mark.benchmark(group="step")
@pytest.mark.parametrize("algorithm", ["recursive_doubling", "rabenseifner"])
@pytest.mark.parametrize("method", ["greedy_cluster", "auto"])
def test_step(benchmark, clouds, algorithm, method):
    c = clouds[256]
    kw = {"bandwidth": c.bandwidth, "nbytes": float(1 << 24), "method": method, "rng": 0}
    res = benchmark.pedantic(
        rankopt.solve, args=(c.latency, "allreduce", algorithm), kwargs=kw, rounds=1, iterations=1
    )
    benchmark.extra_info["speedup"] = res.speedup


@pytest.mark.benchmark(group="auto")
@pytest.mark.parametrize("kind", ["ring_sum", "ring_bottleneck", "rabenseifner"])
def test_auto(benchmark, clouds, kind):
    c = clouds[64]
    kw: dict = {"rng": 0}
    args: tuple = (c.latency,)
    if kind == "ring_bottleneck":
        kw["objective"] = "bottleneck"
    elif kind == "rabenseifner":
        args = (c.latency, "allreduce", "rabenseifner")
        kw.update(bandwidth=c.bandwidth, nbytes=float(1 << 20))
    res = benchmark.pedantic(rankopt.solve, args=args, kwargs=kw, rounds=1, iterations=1)
    benchmark.extra_info["method"] = res.method
    benchmark.extra_info["speedup"] = res.speedup


@pytest.mark.benchmark(group="greedy")
def test_greedy_vs_anneal(benchmark):
    c = rankopt.synthetic_cloud(1, 4, 8, 2, congested=0.0, rng=7)
    g = benchmark.pedantic(
        rankopt.solve,
        args=(c.latency,),
        kwargs={"method": "greedy_cluster", "rng": 0},
        rounds=1,
        iterations=1,
    )
    a = rankopt.solve(c.latency, method="anneal", rng=0)
    benchmark.extra_info["greedy_over_anneal"] = g.cost / a.cost
    assert g.cost <= 1.05 * a.cost
    assert np.isfinite(g.cost)
