"""Cost-model speed: full cost at n = 1024, swap deltas (ring and step-based).

Run: ``python -m pytest bench/bench_models.py --benchmark-only``.
Targets: full cost < 1 ms; ring swap delta < 1 us; step-based swap delta < 20 us.
Gloo's broadcast (``binomial_gloo``) is priced by the flow model, an event-driven
run that recomputes max-min fair rates at every start and end of a flow; it is
outside the 1 ms target (tens of ms at n = 1024) and its swap delta is two runs.
The ``*_batch`` cases time ``swap_deltas`` over 1000 pairs in one call and
report the time per delta in ``extra_info``.
"""

import numpy as np
import pytest

import rankopt
from rankopt.models import ALGORITHMS, make_model

N = 1024
PAIRS = [(c, a) for c, algs in ALGORITHMS.items() for a in algs]


@pytest.fixture(scope="module")
def cloud():
    return rankopt.synthetic_cloud(4, 8, 8, 4, rng=0)  # 1024 processes


def _model(cloud, c, a, contention=False):
    kw = dict(bandwidth=cloud.bandwidth, nbytes=64e6)
    if contention:
        kw.update(groups=cloud.groups, uplink_bandwidth=[40e9, 25e9, 10e9])
    return make_model(cloud.latency, c, a, objective="contention" if contention else "time", **kw)


@pytest.mark.parametrize("c,a", PAIRS)
def test_full_cost(benchmark, cloud, c, a):
    m = _model(cloud, c, a)
    o = np.random.default_rng(0).permutation(N)
    t = benchmark(m.cost, o)
    benchmark.extra_info.update(
        cost_s=t, transfers=getattr(getattr(m, "schedule", None), "n_transfers", None)
    )


@pytest.mark.parametrize("c,a", [("allreduce", "ring"), ("allreduce", "rabenseifner")])
def test_full_cost_contention(benchmark, cloud, c, a):
    m = _model(cloud, c, a, contention=True)
    o = np.random.default_rng(0).permutation(N)
    benchmark(m.cost, o)


def _pairs(k=1000):
    rng = np.random.default_rng(1)
    p = rng.integers(0, N, (k, 2))
    return np.ascontiguousarray(p[p[:, 0] != p[:, 1]])


@pytest.mark.parametrize(
    "c,a,contention",
    [
        ("allreduce", "ring", False),
        ("allreduce", "ring", True),
        ("allreduce", "recursive_doubling", False),
        ("allreduce", "rabenseifner", False),
        ("allreduce", "rabenseifner", True),
        ("allreduce", "double_binary_tree", False),
        ("allgather", "bruck", False),
        ("broadcast", "binomial", False),
        ("alltoall", "pairwise", False),
    ],
)
def test_swap_delta_batch(benchmark, cloud, c, a, contention):
    m = _model(cloud, c, a, contention)
    o = np.random.default_rng(0).permutation(N)
    pairs = _pairs()
    m.swap_deltas(o, pairs[:1])  # build the cache once
    benchmark(m.swap_deltas, o, pairs)
    if benchmark.stats is not None:  # None under --benchmark-disable
        benchmark.extra_info["per_delta_us"] = benchmark.stats.stats.median / len(pairs) * 1e6


@pytest.mark.parametrize("c,a", [("allreduce", "ring"), ("allreduce", "rabenseifner")])
def test_swap_delta_single_call(benchmark, cloud, c, a):
    m = _model(cloud, c, a)
    o = np.random.default_rng(0).permutation(N)
    m.swap_delta(o, 3, 700)
    benchmark(m.swap_delta, o, 3, 700)
