"""Ring ``sum`` solve time and quality on synthetic clouds (pytest-benchmark).

Run: ``pytest bench/bench_ring.py --benchmark-only --benchmark-columns=median,iqr,rounds``
Quality (``extra_info["ratio"]``) is the length over the best known length, taken
from a long ILS run on the same instance (computed once per n; the smoke run,
``--benchmark-disable``, takes a short one: its ratios mean nothing).
"""

import functools
import subprocess
import sys
import time

import pytest

import rankopt

SIZES = [64, 256, 1024]
SHAPES = {64: (2, 4, 8), 256: (4, 8, 8), 1024: (4, 8, 32)}


@functools.cache
def instance(n):
    return rankopt.synthetic_cloud(*SHAPES[n], rng=n).latency


@functools.cache
def best_known(n, kicks_per_process):
    return rankopt.solve(instance(n), method="ils", max_iter=kicks_per_process * n, rng=1).cost


def _bench(benchmark, n, method, **kw):
    lat = instance(n)
    best = best_known(n, 2 if benchmark.disabled else 200)
    res = benchmark(lambda: rankopt.solve(lat, method=method, rng=0, **kw))
    benchmark.extra_info.update(
        n=n,
        method=method,
        cost=res.cost,
        best_known=best,
        ratio=res.cost / best,
        speedup_vs_launch=res.speedup,
    )
    return res


@pytest.mark.parametrize("n", SIZES)
def test_two_opt(benchmark, n):
    benchmark.group = f"ring-sum-n{n}"
    _bench(benchmark, n, "two_opt")


@pytest.mark.parametrize("n", SIZES)
def test_ils_default(benchmark, n):
    benchmark.group = f"ring-sum-n{n}"
    _bench(benchmark, n, "ils")


@pytest.mark.parametrize("n", SIZES)
def test_auto(benchmark, n):
    benchmark.group = f"ring-sum-n{n}"
    _bench(benchmark, n, "auto")


@pytest.mark.parametrize("n", [64, 256])
def test_bottleneck(benchmark, n):
    benchmark.group = f"ring-bottleneck-n{n}"
    lat = instance(n)
    res = benchmark(lambda: rankopt.solve(lat, objective="bottleneck", rng=0))
    benchmark.extra_info.update(n=n, cost=res.cost, speedup_vs_launch=res.speedup)


def test_import_time(benchmark):
    """``import rankopt`` in a fresh interpreter (target < 0.3 s)."""

    def once():
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import rankopt"], check=True)
        return time.perf_counter() - t

    benchmark.group = "import"
    benchmark.pedantic(once, rounds=5, iterations=1)
    base = min(
        (
            lambda t: (
                subprocess.run([sys.executable, "-c", "pass"], check=True),
                time.perf_counter() - t,
            )[1]
        )(time.perf_counter())
        for _ in range(3)
    )
    benchmark.extra_info["bare_interpreter_s"] = base
