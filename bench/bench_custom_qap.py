"""Custom objectives against SciPy's FAQ: stencil and random traffic as a QAP.

    python bench/bench_custom_qap.py             # the table (a few minutes: random traffic)
    python bench/bench_custom_qap.py --seeds 5
    python -m pytest bench/bench_custom_qap.py --benchmark-disable   # smoke run

Every instance is a quadratic assignment: traffic ``T`` between ranks,
``cost(order) = sum_ab T[a, b] latency[order[a], order[b]]``, given to
``rankopt.solve(latency, objective=f)`` as an ``@numba.njit`` function of
``(latency, order)`` that loops over the nonzero entries of ``T`` (a black
box to rankopt: every move re-evaluates it in full), and to
``scipy.optimize.quadratic_assignment(T, latency, method="faq")``.

Traffic: the neighbours of a 2-D grid (8x8, 12x12, 16x16) or 3-D grid
(8x8x4), or random (uniform, symmetric, dense). Latency, its nodes shuffled
(launch order random): ``hier``, hosts of 4 processes in racks, distances
1 : 10 : 100 within a host, a rack, across racks; ``cloud``,
:func:`rankopt.synthetic_cloud`.

Columns: ``start`` the greedy-cluster start the anneal runs from;
``rankopt`` the default solve (``rankopt.solve(latency, objective=f,
rng=seed)``), median cost and wall time over the seeds, and ``moved`` in
how many seeds it ended below its start; ``faq`` SciPy's default (barycentre
start, deterministic), its cost and median time; ``faq x3`` the best of
three random starts (``P0="randomized"``) per seed, median over the seeds,
time of the three together. Ratios are rankopt's cost over FAQ's. The rows
``(t=faq)`` (n = 256) give rankopt FAQ's median time as ``time_limit``.
``map``: the same traffic given to rankopt as a matrix instead of hidden in
``f`` (``rankopt.solve(latency, traffic=Traffic.from_weights(T), method="map")``,
whose swap deltas read only the pairs a swap touches), its order priced by
``f``; median cost and time over the seeds, and its ratio to FAQ's default.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable

import numba
import numpy as np
from numpy.typing import NDArray
from scipy.optimize import quadratic_assignment

import rankopt
from rankopt.models.traffic import Traffic

Objective = Callable[[NDArray[np.float64], NDArray[np.int64]], float]


def grid_traffic(*shape: int) -> NDArray[np.float64]:
    """Unit traffic both ways between the neighbours of a grid of ``shape`` (row-major ranks)."""
    n = int(np.prod(shape))
    idx = np.arange(n).reshape(shape)
    t = np.zeros((n, n))
    for axis in range(len(shape)):
        a = np.delete(idx, -1, axis=axis).ravel()
        b = np.delete(idx, 0, axis=axis).ravel()
        t[a, b] = t[b, a] = 1.0
    return t


def random_traffic(n: int, seed: int) -> NDArray[np.float64]:
    """Uniform random symmetric traffic with a zero diagonal."""
    t = np.random.default_rng(seed).random((n, n))
    t = t + t.T
    np.fill_diagonal(t, 0.0)
    return t


def hierarchical_latency(n: int, host: int, rack: int) -> NDArray[np.float64]:
    """Latency 1 within a host of ``host`` processes, 10 within a rack of ``rack`` hosts, 100 across."""
    i = np.arange(n)
    h, r = i // host, i // (host * rack)
    lat = np.where(r[:, None] == r[None, :], 10.0, 100.0)
    lat = np.where(h[:, None] == h[None, :], 1.0, lat)
    np.fill_diagonal(lat, 0.0)
    return lat


def shuffled(lat: NDArray[np.float64], seed: int = 7) -> NDArray[np.float64]:
    """``lat`` with its nodes in random order."""
    p = np.random.default_rng(seed).permutation(lat.shape[0])
    return np.ascontiguousarray(lat[np.ix_(p, p)])


def qap_objective(traffic: NDArray[np.float64]) -> Objective:
    """A jitted ``f(latency, order)``: the QAP cost of ``traffic`` over its nonzero entries."""
    a, b = np.nonzero(traffic)
    src, dst = a.astype(np.int64), b.astype(np.int64)
    w = traffic[a, b].astype(np.float64)

    @numba.njit(nogil=True)
    def qap(lat, order):  # pragma: no cover - compiled
        s = 0.0
        for k in range(w.shape[0]):
            s += w[k] * lat[order[src[k]], order[dst[k]]]
        return s

    return qap  # type: ignore[no-any-return]


def instances(big: bool = True) -> dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]]:
    """``name -> (traffic, latency)``."""
    cloud64 = shuffled(rankopt.synthetic_cloud(2, 2, 4, 4, rng=1).latency)
    out = {
        "2-D 8x8 hier": (grid_traffic(8, 8), shuffled(hierarchical_latency(64, 4, 4))),
        "2-D 8x8 cloud": (grid_traffic(8, 8), cloud64),
    }
    if big:
        cloud256 = shuffled(rankopt.synthetic_cloud(2, 4, 8, 4, rng=1).latency)
        hier256 = shuffled(hierarchical_latency(256, 4, 8))
        out.update(
            {
                "2-D 12x12 hier": (grid_traffic(12, 12), shuffled(hierarchical_latency(144, 4, 9))),
                "2-D 16x16 hier": (grid_traffic(16, 16), hier256),
                "2-D 16x16 cloud": (grid_traffic(16, 16), cloud256),
                "3-D 8x8x4 hier": (grid_traffic(8, 8, 4), hier256),
                "3-D 8x8x4 cloud": (grid_traffic(8, 8, 4), cloud256),
                "random 256 cloud": (random_traffic(256, 0), cloud256),
            }
        )
    return out


def timed(fn: Callable[..., object], *args: object, **kw: object) -> tuple[object, float]:
    tic = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - tic


def faq(traffic: NDArray[np.float64], lat: NDArray[np.float64], seed: int | None) -> float:
    """FAQ's cost: its default start (``seed=None``) or a random one."""
    opts: dict[str, object] = {}
    if seed is not None:
        opts = {"P0": "randomized", "rng": np.random.default_rng(seed)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(quadratic_assignment(traffic, lat, method="faq", options=opts).fun)


def compare(
    traffic: NDArray[np.float64], lat: NDArray[np.float64], seeds: int, time_limit: bool
) -> dict[str, float]:
    """One row of the table (see the module docstring)."""
    f = qap_objective(traffic)
    start = rankopt.solve(lat, objective=f, method="greedy_cluster").cost
    faq_cost, faq_times = 0.0, []
    for _ in range(seeds):
        faq_cost, t = timed(faq, traffic, lat, None)  # type: ignore[assignment]
        faq_times.append(t)
    faq_s = statistics.median(faq_times)
    restarts, restart_times = [], []
    for s in range(seeds):
        tic = time.perf_counter()
        restarts.append(min(faq(traffic, lat, 3 * s + k) for k in range(3)))
        restart_times.append(time.perf_counter() - tic)
    costs, times = [], []
    for s in range(seeds):
        kw = {"time_limit": faq_s} if time_limit else {}
        res, t = timed(rankopt.solve, lat, objective=f, rng=s, **kw)
        costs.append(res.cost)  # type: ignore[attr-defined]
        times.append(t)
    given = Traffic.from_weights(traffic)
    map_costs, map_times = [], []
    for s in range(seeds):
        kw = {"time_limit": faq_s} if time_limit else {}
        res, t = timed(rankopt.solve, lat, traffic=given, method="map", rng=s, **kw)
        map_costs.append(float(f(lat, res.order)))  # type: ignore[attr-defined]
        map_times.append(t)
    return {
        "map": statistics.median(map_costs),
        "map_s": statistics.median(map_times),
        "start": start,
        "cost": statistics.median(costs),
        "s": statistics.median(times),
        "moved": sum(c < start for c in costs),
        "faq": faq_cost,
        "faq_s": faq_s,
        "faq3": statistics.median(restarts),
        "faq3_s": statistics.median(restart_times),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    f = qap_objective(grid_traffic(2, 2))
    rankopt.solve(hierarchical_latency(4, 2, 1), objective=f)  # compile and load the kernels
    head = (
        f"{'instance':<24} {'n':>4} {'start':>9} {'rankopt':>9} {'s':>6} {'moved':>5} "
        f"{'faq':>9} {'s':>5} {'faq x3':>9} {'s':>5} {'/faq':>6} {'/faq x3':>7} "
        f"{'map':>9} {'s':>5} {'/faq':>6}"
    )
    print(f"rankopt {rankopt.__version__}; medians of {args.seeds} seeds")
    print(head)
    print("-" * len(head))
    for name, (traffic, lat) in instances().items():
        for limited in (False, True) if lat.shape[0] >= 256 else (False,):
            r = compare(traffic, lat, args.seeds, limited)
            label = name + (" (t=faq)" if limited else "")
            print(
                f"{label:<24} {lat.shape[0]:>4} {r['start']:>9.4g} {r['cost']:>9.4g} "
                f"{r['s']:>6.2f} {r['moved']:>3}/{args.seeds} {r['faq']:>9.4g} "
                f"{r['faq_s']:>5.2f} {r['faq3']:>9.4g} {r['faq3_s']:>5.2f} "
                f"{r['cost'] / r['faq']:>6.3f} {r['cost'] / r['faq3']:>7.3f} "
                f"{r['map']:>9.4g} {r['map_s']:>5.2f} {r['map'] / r['faq']:>6.3f}",
                flush=True,
            )


def test_custom_qap_small(benchmark):
    """Smoke run: the 8x8 stencil on the hierarchy, no worse than FAQ's default."""
    traffic, lat = instances(big=False)["2-D 8x8 hier"]
    f = qap_objective(traffic)
    res = benchmark.pedantic(
        rankopt.solve, args=(lat,), kwargs={"objective": f, "rng": 0}, rounds=1, iterations=1
    )
    benchmark.extra_info["cost / faq"] = res.cost / faq(traffic, lat, None)
    assert res.cost <= faq(traffic, lat, None)


if __name__ == "__main__":
    main()
