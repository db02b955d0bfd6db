"""Time models: textbook closed forms, compiled kernels against the reference, properties."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rankopt
from rankopt import RankoptInputError
from rankopt.models import ALGORITHMS, default_objective, make_model
from rankopt.models.network import make_network, reference_time
from rankopt.models.schedule import schedule
from rankopt.solvers import METHODS
from rankopt.solvers._base import SolveContext

PAIRS = [(c, a) for c, algs in ALGORITHMS.items() for a in algs]
A, B, M = 3e-6, 2e9, 8e6  # latency (s), bandwidth (B/s), nbytes


# The closed forms of every algorithm, at every size each claims, are checked by
# tests/test_algorithm_contract.py from the algorithm's own spec.


@pytest.mark.parametrize("s,m", [(4, 2), (2, 8), (8, 8), (1, 4), (4, 1)])
def test_hierarchical_closed_form(s, m):
    p = s * m
    lat = np.full((p, p), A)
    host = np.arange(p) // s
    t = rankopt.cost(
        lat, np.arange(p), "allreduce", "hierarchical", bandwidth=B, nbytes=M, groups=host
    )
    want = 2 * (s - 1) * (A + M / (s * B)) + 2 * (m - 1) * (A + M / (p * B))
    assert t == pytest.approx(want, rel=1e-9)


def test_latency_only_counts_steps():
    lat = np.full((8, 8), A)
    assert rankopt.cost(lat, np.arange(8), "allreduce", "rabenseifner") == pytest.approx(6 * A)
    ring = rankopt.cost(lat, np.arange(8), "allreduce", "ring", objective="time")
    assert ring == pytest.approx(14 * A)
    # no objective: the ring's latency sum, as solve() prices it
    assert rankopt.cost(lat, np.arange(8), "allreduce", "ring") == pytest.approx(8 * A)


# ----------------------------------------------------- compiled == reference
def _network(n, seed, *, contention, bw_kind="matrix"):
    rng = np.random.default_rng(seed)
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    bw = {"matrix": rng.uniform(1e8, 1e10, (n, n)), "scalar": 5e9, "none": None}[bw_kind]
    kw = {"bandwidth": bw, "nbytes": 1e6}
    if contention:
        rack = rng.permutation(np.arange(n) % 3)
        pod = rack // 2
        kw.update(groups=[rack, pod], uplink_bandwidth=[rng.uniform(1e8, 1e9, min(n, 3)), 2e8])
    return lat, kw


@pytest.mark.parametrize("c,a", PAIRS)
@pytest.mark.parametrize("contention", [False, True])
@pytest.mark.parametrize("n", [5, 8, 13])
def test_compiled_matches_reference(c, a, contention, n):
    lat, kw = _network(n, n, contention=contention, bw_kind="scalar" if n == 5 else "matrix")
    model = make_model(lat, c, a, objective="contention" if contention else "time", **kw)
    rng = np.random.default_rng(0)
    orders = np.array([rng.permutation(n) for _ in range(4)])
    ref = [model.reference_cost(o) for o in orders]
    assert [model.cost(o) for o in orders] == pytest.approx(ref, rel=1e-12)
    assert model.batch_cost(orders) == pytest.approx(ref, rel=1e-12)
    if a == "hierarchical":
        return
    o = orders[0].copy()
    for _ in range(12):  # deltas against the reference, following accepted swaps
        i, j = rng.choice(n, 2, replace=False)
        new = o.copy()
        new[[i, j]] = new[[j, i]]
        want = model.reference_cost(new) - model.reference_cost(o)
        assert model.swap_delta(o, i, j) == pytest.approx(want, rel=1e-9, abs=1e-15)
        if rng.random() < 0.5:
            o = new
        elif rng.random() < 0.3:
            o = rng.permutation(n)
    pairs = np.array([[0, 1], [2, n - 1], [1, 1]])
    got = model.swap_deltas(o, pairs)
    for (i, j), d in zip(pairs, got, strict=False):
        new = o.copy()
        new[[i, j]] = new[[j, i]]
        assert d == pytest.approx(model.cost(new) - model.cost(o), rel=1e-9, abs=1e-15)


@given(st.integers(2, 12), st.integers(0, 2**31), st.sampled_from(PAIRS), st.booleans())
def test_compiled_matches_reference_random(n, seed, pair, contention):
    lat, kw = _network(
        n, seed, contention=contention, bw_kind="none" if seed % 3 == 0 else "matrix"
    )
    if kw["bandwidth"] is None and not contention:
        kw.pop("nbytes")
    model = make_model(lat, *pair, objective="contention" if contention else "time", **kw)
    o = np.random.default_rng(seed).permutation(n)
    assert model.cost(o) == pytest.approx(model.reference_cost(o), rel=1e-12)


# ------------------------------------------------------------- properties
@given(st.integers(3, 12), st.integers(0, 2**31), st.integers(0, 11))
def test_ring_rotation_and_reversal_invariance(n, seed, shift):
    rng = np.random.default_rng(seed)
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    lat = lat + lat.T
    bw = rng.uniform(1e8, 1e10, (n, n))
    bw = np.minimum(bw, bw.T)
    o = rng.permutation(n)
    for c in ("allreduce", "allgather", "reduce_scatter"):
        kw = dict(bandwidth=bw, nbytes=1e6)
        t = rankopt.cost(lat, o, c, "ring", **kw)
        assert rankopt.cost(lat, np.roll(o, shift), c, "ring", **kw) == pytest.approx(t, rel=1e-12)
        assert rankopt.cost(lat, o[::-1], c, "ring", **kw) == pytest.approx(t, rel=1e-12)


@given(st.integers(2, 10), st.integers(0, 2**31), st.sampled_from(PAIRS), st.floats(0.01, 100.0))
def test_cost_scales_linearly(n, seed, pair, k):
    rng = np.random.default_rng(seed)
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    bw = rng.uniform(1e8, 1e10, (n, n))
    o = rng.permutation(n)
    t = rankopt.cost(lat, o, *pair, bandwidth=bw, nbytes=1e6)
    # scaling time: latency x k and bandwidth / k scale the total by k
    assert rankopt.cost(k * lat, o, *pair, bandwidth=bw / k, nbytes=1e6) == pytest.approx(k * t)
    lat_only = rankopt.cost(lat, o, *pair)
    assert rankopt.cost(k * lat, o, *pair) == pytest.approx(k * lat_only)


def test_two_rack_testbed_interleaved_ring_is_4x_slower():
    """8 hosts in 2 racks: interleaved ring puts 4 flows on each uplink direction."""
    rack = np.repeat([0, 1], 4)
    same = rack[:, None] == rack[None, :]
    lat = np.where(same, 30e-6, 60e-6)
    bw = np.full((8, 8), 125e6)  # every pair alone gets the full 1 Gbit/s
    kw = dict(bandwidth=bw, nbytes=64e6, groups=rack, uplink_bandwidth=125e6)
    inter = np.array([0, 4, 1, 5, 2, 6, 3, 7])
    contig = np.arange(8)
    t_i = rankopt.cost(lat, inter, "allreduce", "ring", **kw)
    t_c = rankopt.cost(lat, contig, "allreduce", "ring", **kw)
    assert 3.8 < t_i / t_c < 4.1
    # the pairwise model alone cannot see it (same bandwidths, only latency differs)
    p_i = rankopt.cost(lat, inter, "allreduce", "ring", bandwidth=bw, nbytes=64e6)
    p_c = rankopt.cost(lat, contig, "allreduce", "ring", bandwidth=bw, nbytes=64e6)
    assert p_i / p_c < 1.01
    res = rankopt.solve(
        lat,
        bandwidth=bw,
        nbytes=64e6,
        groups=rack,
        uplink_bandwidth=125e6,
        method="swap",
        init=inter,
        rng=0,
    )
    assert res.objective == "contention"
    assert res.cost == pytest.approx(t_c, rel=1e-9)


# ------------------------------------------------------- objectives, errors
def test_default_objective_rule():
    assert default_objective("ring") == "sum"
    assert default_objective("ring", bandwidth=1e9) == "sum"
    assert default_objective("ring", bandwidth=1e9, nbytes=1) == "time"
    assert default_objective("rabenseifner") == "time"
    assert default_objective("bruck", groups=[0, 1], uplink_bandwidth=1, nbytes=1) == "contention"


def test_ring_objectives_unchanged():
    lat = np.array([[0, 1, 5], [1, 0, 2], [5, 2, 0]], float)
    assert rankopt.cost(lat, [0, 1, 2], objective="sum") == 8.0
    assert rankopt.cost(lat, [0, 1, 2], objective="bottleneck") == 5.0
    assert rankopt.solve(lat, rng=0).objective == "sum"


def test_cost_errors():
    lat = np.full((4, 4), 1e-6)
    o = np.arange(4)
    with pytest.raises(RankoptInputError, match="`nbytes` is required"):
        rankopt.cost(lat, o, bandwidth=1e9)
    with pytest.raises(RankoptInputError, match="objective 'contention' needs `groups`"):
        rankopt.cost(lat, o, objective="contention", nbytes=1)
    with pytest.raises(RankoptInputError, match="applies to ring algorithms only"):
        rankopt.cost(lat, o, "allreduce", "binomial", objective="sum")
    with pytest.raises(RankoptInputError, match="`objective` must be one of"):
        rankopt.cost(lat, o, objective="fast")
    with pytest.raises(RankoptInputError, match="`bandwidth` must be positive off the diagonal"):
        rankopt.cost(lat, o, bandwidth=np.zeros((4, 4)), nbytes=1)
    with pytest.raises(RankoptInputError, match=r"`bandwidth` must have the shape of `latency`"):
        rankopt.cost(lat, o, bandwidth=np.ones((3, 3)), nbytes=1)
    with pytest.raises(RankoptInputError, match="`uplink_bandwidth` needs `groups`"):
        make_network(lat, uplink_bandwidth=1.0, nbytes=1)
    with pytest.raises(RankoptInputError, match=r"`groups` level 0 must have shape \(4,\)"):
        rankopt.cost(lat, o, groups=[0, 1], uplink_bandwidth=1, nbytes=1)
    with pytest.raises(RankoptInputError, match="one entry per level"):
        rankopt.cost(lat, o, groups=[[0, 0, 1, 1]], uplink_bandwidth=[1, 2], nbytes=1)
    with pytest.raises(RankoptInputError, match="one rate per group"):
        rankopt.cost(lat, o, groups=[0, 0, 1, 1], uplink_bandwidth=[[1, 2, 3]], nbytes=1)
    with pytest.raises(RankoptInputError, match="level 0 group 1 is 0.0"):
        rankopt.cost(lat, o, groups=[0, 0, 1, 1], uplink_bandwidth=[[1, 0]], nbytes=1)
    with pytest.raises(RankoptInputError, match="`order` must be a permutation"):
        rankopt.cost(lat, [0, 0, 1, 2])


def test_reference_is_plain_alpha_beta():
    s = schedule("allgather", "bruck", 3)
    lat = np.array([[0, 1, 2], [3, 0, 4], [5, 6, 0]], float)
    net = make_network(lat, bandwidth=10.0, nbytes=30.0)
    # step 0: k -> k-1, 10 bytes; step 1: k -> k-2 = k+1, 10 bytes
    want = max(3, 2, 6) + 1.0 + max(1, 4, 5) + 1.0
    assert reference_time(s, net, np.arange(3)) == pytest.approx(want)


# -------------------------------------------------------------- solve()
@pytest.mark.parametrize("c,a", PAIRS)
def test_solve_accepts_every_pair(c, a):
    cloud = rankopt.synthetic_cloud(2, 2, 3, rng=1)
    kw = dict(bandwidth=cloud.bandwidth, nbytes=4e6)
    base = rankopt.cost(cloud.latency, np.arange(cloud.n), c, a, **kw)
    res = rankopt.solve(cloud.latency, c, a, method="swap", keep_rank0=True, rng=3, **kw)
    assert res.order[0] == 0 and sorted(res.order) == list(range(cloud.n))
    assert res.cost == pytest.approx(rankopt.cost(cloud.latency, res.order, c, a, **kw))
    # the swap search's own order, before solve() rolls it or keeps the launch order
    model = make_model(cloud.latency, c, a, **kw)
    ctx = SolveContext(gen=np.random.default_rng(3), seed=3, keep_rank0=True)
    own = np.asarray(METHODS["swap"][0](model, ctx).order)
    assert model.cost(own) <= base * (1 + 1e-12)
    assert own[0] == 0 or model.rotation_invariant
    again = rankopt.solve(cloud.latency, c, a, method="swap", keep_rank0=True, rng=3, **kw)
    assert np.array_equal(again.order, res.order)


def test_swap_budget_and_init():
    cloud = rankopt.synthetic_cloud(2, 2, 4, rng=2)
    kw = dict(bandwidth=cloud.bandwidth, nbytes=4e6, method="swap", rng=0)
    res = rankopt.solve(cloud.latency, "allreduce", "rabenseifner", max_iter=2, **kw)
    assert res.iterations == 2 and res.stop_reason == "max_iter"
    init = np.random.default_rng(0).permutation(cloud.n)
    model = make_model(
        cloud.latency, "allreduce", "rabenseifner", bandwidth=cloud.bandwidth, nbytes=4e6
    )
    # the swap search's own order from init, before solve() falls back to init
    ctx = SolveContext(gen=np.random.default_rng(0), seed=0, init=init)
    own = METHODS["swap"][0](model, ctx)
    assert model.cost(np.asarray(own.order)) < model.cost(init)
    assert ctx.history[0][1] == pytest.approx(model.cost(init))


def test_swap_reaches_brute_force_optimum_often():
    rng = np.random.default_rng(5)
    n = 6
    hits = 0
    for _t in range(5):
        lat = rng.uniform(1e-6, 1e-4, (n, n))
        exact = rankopt.solve(lat, "allgather", "bruck", method="brute_force")
        best = min(
            rankopt.solve(lat, "allgather", "bruck", method="swap", rng=s).cost for s in range(8)
        )
        assert exact.cost * (1 - 1e-12) <= best <= 1.15 * exact.cost
        hits += best <= exact.cost * (1 + 1e-9)
    assert hits >= 3


# ------------------------------------------------- all-at-once all-to-all
def test_linear_alltoall_schedule_moves_every_block_once():
    s = schedule("alltoall", "linear", 5, blocks=True)
    assert s.n_distinct == 1 and int(s.repeat[0]) == 1
    pairs = sorted(zip(s.src.tolist(), s.dst.tolist(), strict=True))
    assert pairs == [(a, b) for a in range(5) for b in range(5) if a != b]
    assert np.allclose(s.frac, 1 / 5)


@pytest.mark.parametrize("objective", ["time", "contention"])
def test_linear_alltoall_costs_the_busiest_link_under_every_order(objective):
    from rankopt.models.concurrent import ConcurrentTime

    rng = np.random.default_rng(4)
    n, nbytes = 7, 7e6
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    bw = rng.uniform(1e8, 1e9, (n, n))
    groups = [np.array([0, 0, 0, 1, 1, 2, 2])]
    kw = {"groups": groups, "uplink_bandwidth": [np.array([2e7, 5e7, 1e8])]}
    if objective == "time":
        kw = {}
    m = make_model(lat, "alltoall", "linear", objective=objective, bandwidth=bw,
                   nbytes=nbytes, **kw)  # fmt: skip
    assert isinstance(m, ConcurrentTime) and m.rotation_invariant
    block = nbytes / n
    t = block / bw
    np.fill_diagonal(t, 0.0)
    busiest = max(t.sum(axis=1).max(), t.sum(axis=0).max())  # a process's own link
    if objective == "contention":  # group g sends size_g * (n - size_g) blocks out
        busiest = max(
            busiest,
            *(s * (n - s) * block / u for s, u in zip((3, 2, 2), (2e7, 5e7, 1e8), strict=True)),
        )
    off = ~np.eye(n, dtype=bool)
    want = lat[off].max() + busiest
    for _ in range(5):
        order = rng.permutation(n)
        assert m.reference_cost(order) == pytest.approx(want, rel=1e-12)
        assert m.cost(order) == pytest.approx(want, rel=1e-12)
        assert m.swap_delta(order, 1, 4) == 0.0
    orders = np.array([rng.permutation(n) for _ in range(3)])
    assert np.allclose(m.batch_cost(orders), want)


def test_linear_alltoall_in_a_workload_leaves_the_order_to_the_other_calls():
    from rankopt.models.workload import as_workload, price_calls

    rng = np.random.default_rng(2)
    n = 8
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    lat = (lat + lat.T) / 2
    wl = price_calls(as_workload([("allreduce", 1e6, 3), ("alltoall", 8 * 300e3, 5)]), n, "openmpi")
    assert [c.algorithm for c in wl] == ["rabenseifner_ompi", "linear"]
    both = make_model(lat, workload=wl, bandwidth=1e9)
    alone = make_model(lat, "allreduce", "rabenseifner_ompi", bandwidth=1e9, nbytes=1e6)
    const = make_model(lat, "alltoall", "linear", bandwidth=1e9, nbytes=8 * 300e3).cost(
        np.arange(n)
    )
    for _ in range(4):
        o = rng.permutation(n)
        assert both.cost(o) == pytest.approx(3 * alone.cost(o) + 5 * const, rel=1e-12)
