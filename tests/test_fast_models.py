"""Structure-specific fast paths against the NumPy reference: ring with uplinks,
hierarchical position space, pairwise all-to-all, pipelined chain."""

import numpy as np
import pytest
from conftest import swapped

from rankopt.models import make_model
from rankopt.models.contention import make_step_contention


def _contention_net(n, rng, ties):
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    if ties:
        lat = np.round(lat, 5)
    rack = rng.permutation(np.arange(n) % 3)
    kw = dict(
        bandwidth=rng.uniform(1e8, 1e10, (n, n)),
        nbytes=1e6,
        groups=[rack, rack // 2],
        uplink_bandwidth=[rng.uniform(1e8, 1e9, min(n, 3)), 2e8],
    )
    return lat, kw


@pytest.mark.parametrize("c", ["allreduce", "allgather", "reduce_scatter"])
@pytest.mark.parametrize("seed", range(6))
def test_ring_contention_deltas_follow_accepted_swaps(c, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 16))
    lat, kw = _contention_net(n, rng, ties=seed % 2 == 0)
    m = make_model(lat, c, "ring", objective="contention", **kw)
    assert type(m.evaluator).__name__ == "StepContention"
    o = rng.permutation(n)
    for _ in range(80):
        i, j = rng.integers(0, n, 2)
        new = swapped(o, i, j)
        want = m.reference_cost(new) - m.reference_cost(o)
        assert m.swap_delta(o, i, j) == pytest.approx(want, rel=1e-9, abs=1e-15)
        # the incremental state equals a fresh one
        fresh = make_step_contention(m.schedule, m.network, None, alike=True)
        assert m.evaluator.state_cost(o) == pytest.approx(fresh.state_cost(o), rel=1e-12)
        assert fresh.state_cost(o) == pytest.approx(m.reference_cost(o), rel=1e-12)
        if rng.random() < 0.6:
            o = new
        elif rng.random() < 0.1:
            o = rng.permutation(n)


def test_ring_contention_large_groups_refill():
    # big groups, few top values kept: lists run low and are refilled by scans
    rng = np.random.default_rng(7)
    n = 48
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    rack = np.arange(n) // 12
    m = make_model(
        lat,
        "allreduce",
        "ring",
        objective="contention",
        bandwidth=5e9,
        nbytes=1e7,
        groups=[rack, rack // 2],
        uplink_bandwidth=[1e9, 5e8],
    )
    o = rng.permutation(n)
    pairs = rng.integers(0, n, (300, 2))
    for i, j in pairs:
        new = swapped(o, i, j)
        d = m.swap_delta(o, i, j)
        assert d == pytest.approx(m.reference_cost(new) - m.reference_cost(o), rel=1e-9, abs=1e-15)
        if d <= 0 or rng.random() < 0.3:
            o = new
    got = m.swap_deltas(o, np.ascontiguousarray(pairs[:20]))
    want = [m.cost(swapped(o, i, j)) - m.cost(o) for i, j in pairs[:20]]
    assert got == pytest.approx(want, rel=1e-9, abs=1e-15)


def test_ring_contention_many_groups():
    # more slots than the short list of largest terms holds
    rng = np.random.default_rng(9)
    n = 64
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    host = rng.permutation(np.arange(n) // 2)
    m = make_model(
        lat,
        "allreduce",
        "ring",
        objective="contention",
        bandwidth=rng.uniform(1e9, 1e10, (n, n)),
        nbytes=1e7,
        groups=[host, host // 4, host // 16],
        uplink_bandwidth=[rng.uniform(1e9, 4e9, 32), 1e9, 5e8],
    )
    o = rng.permutation(n)
    for i, j in rng.integers(0, n, (150, 2)):
        new = swapped(o, i, j)
        d = m.swap_delta(o, i, j)
        assert d == pytest.approx(m.reference_cost(new) - m.reference_cost(o), rel=1e-9, abs=1e-15)
        if d <= 0 or rng.random() < 0.3:
            o = new


def test_ring_contention_search_cost_is_consistent():
    rng = np.random.default_rng(3)
    lat, kw = _contention_net(24, rng, ties=False)
    m = make_model(lat, "allreduce", "ring", objective="contention", **kw)
    o = rng.permutation(24)
    start = m.cost(o)
    moves, evals, stop = m.evaluator.search(o, 5, 0, 0.0, False, 1e-12)
    assert sorted(o) == list(range(24)) and stop == 0 and moves > 0
    assert m.cost(o) < start
    for i in range(24):  # a local optimum
        for j in range(i + 1, 24):
            assert m.reference_cost(swapped(o, i, j)) >= m.reference_cost(o) * (1 - 1e-9)


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8, 12, 16])
@pytest.mark.parametrize("ties", [False, True])
def test_pairwise_cost_and_deltas_follow_accepted_swaps(n, ties):
    rng = np.random.default_rng(n)
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    bw = rng.uniform(1e8, 1e10, (n, n))
    if ties:
        lat, bw = np.round(lat, 5), 5e9
    m = make_model(lat, "alltoall", "pairwise", objective="time", bandwidth=bw, nbytes=1e6)
    assert type(m).__name__ == "PairwiseTime"
    orders = np.array([rng.permutation(n) for _ in range(3)])
    ref = [m.reference_cost(o) for o in orders]
    assert [m.cost(o) for o in orders] == pytest.approx(ref, rel=1e-12)
    assert m.batch_cost(orders) == pytest.approx(ref, rel=1e-12)
    o = orders[0].copy()
    for _ in range(60):
        i, j = rng.integers(0, n, 2)
        new = swapped(o, i, j)
        want = m.reference_cost(new) - m.reference_cost(o)
        assert m.swap_delta(o, i, j) == pytest.approx(want, rel=1e-9, abs=1e-15)
        assert np.sum(m.fast.step_times(o)) == pytest.approx(m.reference_cost(o), rel=1e-12)
        if rng.random() < 0.6:
            o = new
        elif rng.random() < 0.1:
            o = rng.permutation(n)


def test_pairwise_latency_only_and_many_swaps():
    rng = np.random.default_rng(11)
    n = 32
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    m = make_model(lat, "alltoall", "pairwise", objective="time")
    o = rng.permutation(n)
    for _ in range(200):  # accepting every swap drains the step lists: refills
        i, j = rng.integers(0, n, 2)
        new = swapped(o, i, j)
        assert m.swap_delta(o, i, j) == pytest.approx(
            m.reference_cost(new) - m.reference_cost(o), rel=1e-9, abs=1e-15
        )
        o = new
    pairs = np.ascontiguousarray(rng.integers(0, n, (10, 2)))
    want = [m.cost(swapped(o, i, j)) - m.cost(o) for i, j in pairs]
    assert m.swap_deltas(o, pairs) == pytest.approx(want, rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("n", [2, 3, 5, 9, 16])
@pytest.mark.parametrize(
    "nbytes,seg", [(1e6, 1e6), (1e6, 3e5), (1e6, 1e5), (1e6, 2.5e4), (None, None)]
)
def test_chain_full_cost_matches_reference(n, nbytes, seg):
    rng = np.random.default_rng(n)
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    kw = {} if nbytes is None else dict(bandwidth=rng.uniform(1e8, 1e10, (n, n)), nbytes=nbytes)
    m = make_model(lat, "broadcast", "chain", objective="time", segment_size=seg, **kw)
    assert type(m).__name__ == "ChainTime"
    orders = np.array([rng.permutation(n) for _ in range(4)])
    ref = [m.reference_cost(o) for o in orders]
    assert [m.cost(o) for o in orders] == pytest.approx(ref, rel=1e-12)
    assert m.batch_cost(orders) == pytest.approx(ref, rel=1e-12)
    o = orders[0]
    for i, j in rng.integers(0, n, (10, 2)):
        new = swapped(o, i, j)
        assert m.swap_delta(o, i, j) == pytest.approx(m.cost(new) - m.cost(o), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("sizes", [[4, 4, 4], [3, 1, 4, 2]])
def test_hierarchical_position_space_matches_reference(sizes):
    rng = np.random.default_rng(len(sizes))
    host = rng.permutation(np.repeat(np.arange(len(sizes)), sizes))
    n = len(host)
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    m = make_model(
        lat,
        "allreduce",
        "hierarchical",
        objective="time",
        bandwidth=rng.uniform(1e8, 1e10, (n, n)),
        nbytes=1e6,
        groups=host,
    )
    m._CACHE = 2  # exercise eviction
    for _ in range(12):
        o = rng.permutation(n)
        assert m.cost(o) == pytest.approx(m.reference_cost(o), rel=1e-12)
        i, j = rng.integers(0, n, 2)
        new = swapped(o, i, j)
        assert m.swap_delta(o, i, j) == pytest.approx(
            m.reference_cost(new) - m.reference_cost(o), rel=1e-9, abs=1e-15
        )
    assert len(m._evaluators) <= 2


STEP_PAIRS = [
    ("allreduce", "rabenseifner"),
    ("allreduce", "recursive_doubling"),
    ("allreduce", "binomial"),
    ("allreduce", "double_binary_tree"),
    ("allgather", "bruck"),
    ("allgather", "recursive_doubling"),
    ("reduce_scatter", "recursive_halving"),
    ("broadcast", "binary_tree"),
    ("alltoall", "pairwise"),
]


@pytest.mark.parametrize("c,a", STEP_PAIRS)
@pytest.mark.parametrize("n", [6, 16, 21])
def test_step_contention_deltas_follow_accepted_swaps(c, a, n):
    rng = np.random.default_rng(n)
    lat = rng.uniform(1e-6, 1e-4, (n, n))
    host = rng.permutation(np.arange(n) // 2)
    m = make_model(
        lat,
        c,
        a,
        objective="contention",
        bandwidth=rng.uniform(1e9, 1e10, (n, n)),
        nbytes=1e7,
        groups=[host, host // 2, host // 4],
        uplink_bandwidth=[2e9, 1e9, 5e8],
    )
    if n == 16:  # non-powers of two fold unequal blocks into some steps: generic kernel
        assert type(m.evaluator).__name__ == "StepContention"
    state = getattr(m.evaluator, "state_cost", m.cost)
    o = rng.permutation(n)
    for i, j in rng.integers(0, n, (40, 2)):
        new = swapped(o, i, j)
        d = m.swap_delta(o, i, j)
        assert d == pytest.approx(m.reference_cost(new) - m.reference_cost(o), rel=1e-9, abs=1e-15)
        assert state(o) == pytest.approx(m.reference_cost(o), rel=1e-12)
        if d <= 0 or rng.random() < 0.4:
            o = new
    moves, _, stop = m.evaluator.search(o, 1, 0, 0.0, False, 1e-12)
    assert stop == 0 and sorted(o) == list(range(n))
    assert state(o) == pytest.approx(m.reference_cost(o), rel=1e-12)


def test_chain_with_uplinks_keeps_the_generic_kernel():
    rng = np.random.default_rng(2)
    n = 8
    host = np.arange(n) // 2
    m = make_model(
        rng.uniform(1e-6, 1e-4, (n, n)),
        "broadcast",
        "chain",
        objective="contention",
        bandwidth=5e9,
        nbytes=1e6,
        segment_size=3e5,
        groups=host,
        uplink_bandwidth=1e9,
    )
    assert type(m.evaluator).__name__ == "StepEval"  # its last segment is shorter
