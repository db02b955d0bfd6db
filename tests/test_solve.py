"""The solve() façade, the result type, and exactness of the ring methods."""

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from _tsplib import read_optima, read_tsplib
from conftest import random_matrix
from hypothesis import given
from hypothesis import strategies as st

import rankopt
from rankopt import RankoptInputError, SolveResult, solve
from rankopt.models.ring import ring_bottleneck_reference, ring_sum_reference

RING_METHODS = ["nearest_neighbor", "two_opt", "ils", "auto", "exact", "brute_force"]
REFERENCE = {"sum": ring_sum_reference, "bottleneck": ring_bottleneck_reference}


def brute_optimum(m, objective):
    n = m.shape[0]
    f = REFERENCE[objective]
    return min(f(m, (0,) + p) for p in itertools.permutations(range(1, n)))


@pytest.mark.parametrize("objective", ["sum", "bottleneck"])
@pytest.mark.parametrize("method", RING_METHODS)
@given(n=st.integers(3, 8), seed=st.integers(0, 2**31), symmetric=st.booleans())
def test_contract(method, objective, n, seed, symmetric):
    m = random_matrix(np.random.default_rng(seed), n, symmetric)
    res = solve(m, objective=objective, method=method, rng=seed)
    assert sorted(res.order.tolist()) == list(range(n))
    assert (res.rank_of[res.order] == np.arange(n)).all()
    ref = REFERENCE[objective](m, res.order)
    assert res.cost == pytest.approx(ref, rel=1e-12)
    assert res.baseline_cost == pytest.approx(REFERENCE[objective](m, np.arange(n)), rel=1e-12)
    assert res.cost >= brute_optimum(m, objective) - 1e-12
    again = solve(m, objective=objective, method=method, rng=seed)
    assert (again.order == res.order).all() and again.cost == res.cost
    if method not in ("nearest_neighbor",):
        assert res.cost <= res.baseline_cost + 1e-12


@pytest.mark.parametrize("objective", ["sum", "bottleneck"])
@given(n=st.integers(3, 9), seed=st.integers(0, 2**31), symmetric=st.booleans())
def test_exact_is_optimal(objective, n, seed, symmetric):
    m = random_matrix(np.random.default_rng(seed), n, symmetric)
    res = solve(m, objective=objective, method="exact", rng=0)
    assert res.cost == pytest.approx(brute_optimum(m, objective), rel=1e-12)
    assert res.stop_reason == "optimal"


def test_held_karp_matches_brute_force_directed(rng):
    m = random_matrix(rng, 9, symmetric=False)
    hk = solve(m, method="held_karp")
    bf = solve(m, method="brute_force")
    assert hk.cost == pytest.approx(bf.cost)


def test_heuristics_reach_optimum_on_small_instances():
    hits = 0
    for seed in range(20):
        m = random_matrix(np.random.default_rng(seed), 11)
        opt = solve(m, method="held_karp").cost
        hits += solve(m, method="ils", rng=seed).cost <= opt * (1 + 1e-9)
    assert hits >= 19


@pytest.mark.parametrize("name", ["burma14", "ulysses16", "gr17"])
def test_exact_on_tsplib(shared_data, name):
    optima = read_optima(shared_data / "optima.csv")
    m = read_tsplib(shared_data / "tsplib" / f"{name}.tsp")
    res = solve(m, method="exact")
    assert res.cost == optima[name]


@pytest.mark.parametrize("name", ["eil51", "berlin52", "kroA100", "ch150"])
def test_ils_near_optimum_on_tsplib(shared_data, name):
    optima = read_optima(shared_data / "optima.csv")
    m = read_tsplib(shared_data / "tsplib" / f"{name}.tsp")
    res = solve(m, method="ils", rng=0)
    assert res.cost <= optima[name] * 1.01


def test_synthetic_cloud_two_opt_finds_racks():
    cloud = rankopt.synthetic_cloud(2, 4, 8, noise=0.0, asymmetry=0.0, congested=0.0, rng=3)
    res = solve(cloud.latency, method="ils", rng=0)
    racks = cloud.groups[1][res.order]
    changes = int((racks != np.roll(racks, 1)).sum())
    assert changes == 8  # every rack contiguous: 8 racks, 8 boundaries around the ring
    pods = cloud.groups[2][res.order]
    assert int((pods != np.roll(pods, 1)).sum()) == 2


def test_keep_rank0_and_rotation(rng):
    m = random_matrix(rng, 30)
    free = solve(m, rng=1)
    pinned = solve(m, rng=1, keep_rank0=True)
    assert pinned.order[0] == 0
    assert pinned.cost == pytest.approx(free.cost)


def test_init_is_never_worsened(rng):
    from rankopt.models import make_model
    from rankopt.solvers import METHODS
    from rankopt.solvers._base import SolveContext

    m = random_matrix(rng, 40)
    good = solve(m, method="ils", rng=0, max_iter=2000)
    # two_opt's own order, before solve() falls back to init
    ctx = SolveContext(gen=np.random.default_rng(5), seed=5, init=good.order)
    out = METHODS["two_opt"][0](make_model(m), ctx)
    assert ring_sum_reference(m, out.order) <= good.cost + 1e-12
    assert ctx.history[0][1] == pytest.approx(good.cost)  # the search started from init


def test_result_type(rng):
    m = random_matrix(rng, 10)
    res = solve(m, rng=7)
    order, cost = res
    assert order is res.order and cost == res.cost
    assert isinstance(res, SolveResult) and res.seed == 7 and res.method == "held_karp"
    d = res.to_dict()
    assert d["order"] == res.order.tolist() and d["seed"] == 7
    text = res.summary()
    assert "speedup" in text and "held_karp" in text and str(res) == text
    assert res.speedup == pytest.approx(res.baseline_cost / res.cost)
    with pytest.raises(AttributeError):
        res.cost = 0.0  # frozen


def test_history_is_monotone(rng):
    m = random_matrix(rng, 200)
    seen = []
    res = solve(m, method="ils", rng=0, max_iter=2000, callback=seen.append)
    costs = [c for _, c in res.history]
    assert costs == sorted(costs, reverse=True) and costs[-1] == pytest.approx(res.cost)
    assert seen and {"elapsed", "cost", "iteration"} <= set(seen[0])


def test_seed_none_is_recorded_and_replays(rng):
    m = random_matrix(rng, 60)
    a = solve(m, method="ils", max_iter=300)
    b = solve(m, method="ils", max_iter=300, rng=a.seed)
    assert (a.order == b.order).all()
    c = solve(m, method="ils", max_iter=300, rng=np.random.default_rng(1))
    assert isinstance(c.seed, int)


def test_measurement_like_and_path_inputs(tmp_path, rng):
    m = random_matrix(rng, 8)
    meas = SimpleNamespace(latency=m, bandwidth=None)
    assert solve(meas, rng=0).cost == solve(m, rng=0).cost
    f = tmp_path / "m.npy"
    np.save(f, m)
    assert solve(str(f), rng=0).cost == solve(m, rng=0).cost


def test_time_limit_guard(rng):
    m = random_matrix(rng, 400)
    res = solve(m, method="ils", max_iter=10_000_000, time_limit=0.2, rng=0)
    assert res.stop_reason == "time_limit" and res.runtime_s < 2.0


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"method": "magic"}, RankoptInputError, r"`method` must be one of .*'ils'.*got 'magic'"),
        (
            {"collective": "scan"},
            RankoptInputError,
            r"`collective` must be one of 'allreduce'.*got 'scan'",
        ),
        (
            {"algorithm": "hypercube"},
            RankoptInputError,
            r"`algorithm` must be one of 'ring'.*for collective 'allreduce'; got 'hypercube'",
        ),
        (
            {"objective": "fastest"},
            RankoptInputError,
            r"`objective` must be one of .*got 'fastest'",
        ),
        ({"rng": -1}, RankoptInputError, r"`rng` must be a non-negative integer; got -1"),
        (
            {"rng": "x"},
            RankoptInputError,
            r"`rng` must be None, an int or a numpy.random.Generator; got 'x'",
        ),
        ({"time_limit": 0}, RankoptInputError, r"`time_limit` must be positive and finite; got 0"),
        ({"max_iter": 1.5}, RankoptInputError, r"`max_iter` must be an integer; got 1.5"),
        ({"keep_rank0": 1}, RankoptInputError, r"`keep_rank0` must be a bool; got 1"),
        (
            {"init": [0, 1, 1, 2]},
            RankoptInputError,
            r"`init` must be a permutation of 0..3; 1 appears at positions \[1, 2\]",
        ),
        ({"callback": 3}, RankoptInputError, r"`callback` must be callable; got 3"),
        (
            {"method": "ils", "options": {"neighbours": 3}},
            TypeError,
            r"method 'ils' got unknown option\(s\) 'neighbours'; it accepts: 'candidates', 'neighbors', 'window'",
        ),
        (
            {"method": "ils", "options": {"neighbors": 0}},
            RankoptInputError,
            r"`neighbors` must be positive",
        ),
        (
            {"method": "held_karp", "objective": "bottleneck"},
            RankoptInputError,
            r"'held_karp' solves the ring objective 'sum' only",
        ),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    m = random_matrix(np.random.default_rng(0), 4)
    with pytest.raises(exc, match=match):
        solve(m, **kwargs)


def test_unknown_keyword_is_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'methd'"):
        solve(np.ones((3, 3)), methd="ils")


def test_size_limits_of_exact_methods(rng):
    with pytest.raises(
        RankoptInputError,
        match=r"'held_karp' needs O\(2\^n n\) memory and accepts n <= 17; got n=18",
    ):
        solve(random_matrix(rng, 18), method="held_karp")
    with pytest.raises(
        RankoptInputError,
        match=r"'brute_force' enumerates \(n-1\)! orders and accepts n <= 10; got n=11",
    ):
        solve(random_matrix(rng, 11), method="brute_force")


def test_nan_policy_reaches_solve():
    m = random_matrix(np.random.default_rng(0), 5)
    m[0, 3] = np.nan
    with pytest.raises(RankoptInputError, match=r"latency\[0, 3\] is nan"):
        solve(m)
    assert solve(m, nan="symmetric").cost > 0


@pytest.mark.parametrize(
    "collective, algorithm, kw",
    [
        ("allreduce", "ring", {}),
        ("allreduce", "ring", {"bandwidth": 1e9, "nbytes": 1e6}),
        ("allreduce", "recursive_doubling", {}),
        ("broadcast", "binomial", {"bandwidth": 1e9, "nbytes": 1e6}),
        (
            "allreduce",
            "ring",
            {"nbytes": 1e6, "groups": [0, 0, 1, 1, 2, 2], "uplink_bandwidth": 1e8},
        ),
    ],
)
def test_result_cost_equals_cost_of_its_order(collective, algorithm, kw):
    """cost() defaulted to 'time' while solve() defaulted to 'sum' for a latency-only ring."""
    rng = np.random.default_rng(0)
    lat = rng.uniform(1e-6, 1e-4, (6, 6))
    np.fill_diagonal(lat, 0.0)
    res = rankopt.solve(lat, collective, algorithm, rng=0, **kw)
    assert res.cost == pytest.approx(rankopt.cost(lat, res.order, collective, algorithm, **kw))
    assert res.objective == rankopt.models.default_objective(algorithm, **kw)


@pytest.mark.parametrize(
    ("collective", "pattern"),
    [("broadcast", "chain"), ("reduce", "ring_gather"), ("alltoall", "pairwise")],
)
def test_the_default_ring_on_a_collective_without_one_is_its_ring_pattern(collective, pattern):
    rng = np.random.default_rng(4)
    lat = rng.random((9, 9)) * 1e-5
    lat = (lat + lat.T) / 2
    np.fill_diagonal(lat, 0.0)
    res = rankopt.solve(lat, collective)  # no algorithm given: "ring", which it has not
    assert res.algorithm == pattern
    same = rankopt.solve(lat, collective, pattern)
    assert res.order.tolist() == same.order.tolist() and res.cost == same.cost
    with pytest.raises(rankopt.RankoptInputError, match=f"for collective '{collective}'"):
        rankopt.solve(lat, collective, "recursive_doubling")  # a real mismatch is still one
    # a mix of calls priced without an engine: each call with its own ring pattern
    mix = rankopt.solve(lat, workload=[("allreduce", 1 << 24), (collective, 1 << 20)])
    assert set(mix.algorithm.split("+")) == {"ring", pattern}
