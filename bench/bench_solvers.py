"""pytest-benchmark suites for the solvers: time, with quality in ``extra_info``.

    pytest bench/bench_solvers.py --benchmark-only --benchmark-group-by=group
    pytest bench/bench_solvers.py --benchmark-disable     # smoke run (CI)

Groups: ``ring`` (methods on synthetic clouds), ``tsplib`` (gap to the
optimum), ``auto`` (the auto rule on every model kind), ``step`` (recursive
doubling / Rabenseifner at n = 256), ``greedy`` (greedy vs annealing on a
two-level cloud), ``starts`` (annealing's default starts on testbed-shaped
networks of uneven racks: how often one start and four miss the best order
found with eight). ``bench/compare.py`` runs the external solvers.
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


#: Racks of uneven sizes, 9-16 hosts: the testbed's 1 Gbit/s hosts, 200 Mbit/s uplinks.
UNEVEN = [(5, 4, 3), (5, 3, 2), (4, 4, 3), (4, 3, 3), (3, 3, 2, 2), (4, 3, 3, 2), (6, 4, 3, 3),
          (5, 5, 4, 2)]  # fmt: skip


def _uneven_cases():
    from rankopt.models import make_model
    from rankopt.models.workload import as_workload, price_calls
    from rankopt.testbed.fidelity import truth_network
    from rankopt.testbed.topology import Topology

    cases = []
    for racks in UNEVEN:
        top = Topology(racks=racks, rates=("1gbit", "200mbit"))
        net = truth_network(top, np.random.default_rng(0).permutation(top.n_hosts))
        kw = {k: net[k] for k in ("bandwidth", "groups", "uplink_bandwidth")}
        for size in (1 << 20, 16 << 20):
            wl = as_workload([("allreduce", size, 1)])
            model = make_model(
                net["latency"], workload=price_calls(wl, top.n_hosts, "openmpi"), **kw
            )
            cases.append((net["latency"], kw, wl, model))
    return cases


def _solve_all(cases, starts, seeds=(0, 1)):
    return [
        c[3].cost(np.asarray(rankopt.solve(c[0], workload=c[2], engine="openmpi", rng=s,
                                           options={"starts": starts}, **c[1]).order))
        for c in cases
        for s in seeds
    ]  # fmt: skip


@pytest.fixture(scope="module")
def uneven():
    cases = _uneven_cases()
    return cases, _solve_all(cases, 8)


@pytest.mark.benchmark(group="starts")
@pytest.mark.parametrize("starts", [1, 4])
def test_anneal_starts_on_uneven_racks(benchmark, uneven, starts):
    cases, best = uneven
    costs = benchmark.pedantic(_solve_all, args=(cases, starts), rounds=1, iterations=1)
    ratio = np.asarray(costs) / np.minimum(best, costs)
    benchmark.extra_info["missed"] = int(np.sum(ratio > 1 + 1e-9))
    benchmark.extra_info["solves"] = len(costs)
    benchmark.extra_info["worst"] = float(ratio.max())
    assert np.all(np.isfinite(costs))
