"""Compiled ring evaluators and search kernels against the NumPy references."""

import numpy as np
import pytest
from _rings import is_perm as _is_perm
from _rings import uniform as _uniform
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rankopt import RankoptInputError
from rankopt.models import _ring_eval as ev
from rankopt.models.ring import (
    RingBottleneck,
    RingSum,
    ring_bottleneck_reference,
    ring_sum_reference,
)
from rankopt.solvers import _ring_directed as rd
from rankopt.solvers import _ring_search as rs
from rankopt.solvers.ring import candidate_lists, greedy_ring


@st.composite
def matrix_and_order(draw, min_n=2, max_n=24, symmetric=False):
    n = draw(st.integers(min_n, max_n))
    m = draw(arrays(np.float64, (n, n), elements=st.floats(0, 1e3, allow_nan=False)))
    if symmetric:
        m = np.triu(m) + np.triu(m, 1).T
    np.fill_diagonal(m, 0)
    perm = draw(st.permutations(range(n)))
    return np.ascontiguousarray(m), np.array(perm, dtype=np.int64)


@given(matrix_and_order())
def test_full_costs_equal_reference(mo):
    m, order = mo
    assert np.isclose(ev.ring_sum(m, order), ring_sum_reference(m, order))
    assert ev.ring_max(m, order) == ring_bottleneck_reference(m, order)
    assert np.isclose(RingSum(m).cost(order), RingSum(m).reference_cost(order))
    assert RingBottleneck(m).cost(order) == RingBottleneck(m).reference_cost(order)
    batch = np.stack([order, order[::-1].copy(), np.roll(order, 1)])
    assert np.allclose(RingSum(m).batch_cost(batch), [ring_sum_reference(m, o) for o in batch])
    assert np.allclose(
        RingBottleneck(m).batch_cost(batch), [ring_bottleneck_reference(m, o) for o in batch]
    )


@given(matrix_and_order(min_n=4, symmetric=True), st.data())
def test_two_opt_delta(mo, data):
    m, order = mo
    n = len(order)
    i = data.draw(st.integers(0, n - 1))
    j = data.draw(st.integers(0, n - 1).filter(lambda j: (j - i) % n >= 2 and (i - j) % n >= 2))
    new = np.roll(order, -(i + 1))  # position i+1 first; i is last
    k = (j - i - 1) % n
    new[: k + 1] = new[: k + 1][::-1]
    expected = ring_sum_reference(m, new) - ring_sum_reference(m, order)
    assert np.isclose(ev.two_opt_delta(m, order, i, j), expected, atol=1e-9)


@given(matrix_and_order(min_n=5, symmetric=True), st.data())
def test_or_opt_delta(mo, data):
    m, order = mo
    n = len(order)
    length = data.draw(st.integers(1, min(3, n - 3)))
    i = data.draw(st.integers(0, n - 1))
    seg = [(i + t) % n for t in range(length)]
    j = data.draw(st.integers(0, n - 1).filter(lambda j: j not in seg and (j + 1) % n not in seg))
    rev = data.draw(st.booleans())
    run = [order[p] for p in seg]
    rest = [order[p] for p in range(n) if p not in seg]
    cpos = rest.index(order[j])
    ins = run[::-1] if rev else run
    new = np.array(rest[: cpos + 1] + ins + rest[cpos + 1 :], dtype=np.int64)
    expected = ring_sum_reference(m, new) - ring_sum_reference(m, order)
    assert np.isclose(ev.or_opt_delta(m, order, i, length, j, rev), expected, atol=1e-9)


@given(matrix_and_order(min_n=3, max_n=40, symmetric=True), st.integers(0, 2**32))
def test_local_search_and_ils_keep_permutation_and_track_cost(mo, seed):
    m, order = mo
    n = len(order)
    tour = order.copy()
    nb = rs.knn_lists(m, 6)
    before = ring_sum_reference(m, tour)
    delta, evals, moves, stop = rs.local_search(m, tour, nb)
    assert sorted(tour.tolist()) == list(range(n))
    assert delta <= 1e-9
    assert np.isclose(ring_sum_reference(m, tour), before + delta, atol=1e-6)
    mid = ring_sum_reference(m, tour)
    d2, *_ = rs.iterated_local_search(m, tour, nb, seed, 50)
    assert sorted(tour.tolist()) == list(range(n))
    assert d2 <= 1e-9
    assert np.isclose(ring_sum_reference(m, tour), mid + d2, atol=1e-6)


def test_knn_lists_sorted(rng):
    m = rng.random((30, 30))
    m = m + m.T
    np.fill_diagonal(m, 0)
    nb = rs.knn_lists(m, 5)
    for i in range(30):
        others = [j for j in np.argsort(m[i], kind="stable") if j != i][:5]
        assert set(nb[i]) == set(others)
        assert all(m[i, nb[i, k]] <= m[i, nb[i, k + 1]] for k in range(4))


def test_nearest_neighbor_is_greedy(rng):
    m = rng.random((12, 12))
    m = m + m.T
    tour = rs.nearest_neighbor(np.ascontiguousarray(m), 3)
    assert tour[0] == 3 and sorted(tour) == list(range(12))
    for k in range(1, 11):
        rest = [j for j in range(12) if j not in tour[:k]]
        assert tour[k] == min(rest, key=lambda j: m[tour[k - 1], j])


@given(matrix_and_order(min_n=6, max_n=40), st.integers(0, 2**32), st.integers(0, 60))
def test_directed_search_keeps_permutation_and_tracks_directed_cost(mo, seed, kicks):
    m, order = mo  # asymmetric
    n = len(order)
    w = np.ascontiguousarray(0.5 * (m + m.T))
    nb = rs.knn_lists(w, 5)
    tour = order.copy()
    before = ring_sum_reference(m, tour)
    delta, evals, moves, done, stop = rd.directed_search(m, tour, nb, seed, kicks, 0.0, 4)
    assert sorted(tour.tolist()) == list(range(n))
    assert done == kicks
    assert delta <= 1e-9
    # the delta is exact for the directed cost, and the direction was kept
    assert np.isclose(ring_sum_reference(m, tour), before + delta, atol=1e-6)


def test_directed_search_uses_the_cheap_direction_of_each_link():
    # a ring 0..n-1 that is cheap one way round, plus one misplaced process
    n = 12
    m = np.full((n, n), 10.0)
    for i in range(n):
        m[i, (i + 1) % n] = 1.0
        m[(i + 1) % n, i] = 5.0
    np.fill_diagonal(m, 0.0)
    w = np.ascontiguousarray(0.5 * (m + m.T))
    start = np.array([0, 1, 2, 4, 3, 5, 6, 7, 8, 9, 10, 11], dtype=np.int64)
    tour = start.copy()
    rd.directed_search(m, tour, rs.knn_lists(w, 4), 1, 20, 0.0, 3)
    assert ring_sum_reference(m, tour) == n * 1.0
    # the symmetric search sees no difference between the two directions
    assert ring_sum_reference(w, tour) == ring_sum_reference(w, tour[::-1].copy())


def test_greedy_edge_takes_shortest_links_first(rng):
    pts = rng.random((60, 2))
    m = np.ascontiguousarray(np.linalg.norm(pts[:, None] - pts[None], axis=-1))
    nb = rs.knn_lists(m, 8)
    tour = greedy_ring(m, nb)
    assert sorted(tour.tolist()) == list(range(60))
    links = {frozenset(e) for e in zip(tour, np.roll(tour, -1), strict=True)}
    # the shortest link of all is always taken
    iu = np.triu_indices(60, 1)
    k = int(np.argmin(m[iu]))
    assert frozenset((iu[0][k], iu[1][k])) in links
    # and the ring is far shorter than a random one
    assert ring_sum_reference(m, tour) < 0.5 * ring_sum_reference(m, rng.permutation(60))


def test_greedy_edge_chains_fragments_when_candidates_are_few(rng):
    m = rng.random((25, 25))
    m = np.ascontiguousarray(m + m.T)
    np.fill_diagonal(m, 0)
    tour = greedy_ring(m, rs.knn_lists(m, 1))
    assert sorted(tour.tolist()) == list(range(25))


def _mst_links(w):
    from scipy.sparse.csgraph import minimum_spanning_tree

    t = minimum_spanning_tree(w).tocoo()
    return {frozenset((int(a), int(b))) for a, b in zip(t.row, t.col, strict=True)}


def test_alpha_candidates_hold_the_spanning_tree_links(rng):
    pts = rng.random((50, 2))
    m = np.ascontiguousarray(np.linalg.norm(pts[:, None] - pts[None], axis=-1))
    nb, pi, bound = rs.alpha_candidates(m, 6, 0)
    assert np.all(pi == 0)
    for a, b in _mst_links(m):  # alpha = 0 on tree links
        assert b in nb[a] or sum(m[a] <= m[a, b]) > 7  # unless many ties
    for i in range(50):
        assert i not in nb[i]
        assert all(m[i, nb[i, k]] <= m[i, nb[i, k + 1]] for k in range(5))


@pytest.mark.parametrize("n", [3, 4, 7, 31, 64])
def test_alpha_candidates_one_tree_at_zero_penalties(n, rng):
    # one subgradient step prices the 1-tree of the raw weights: the minimum
    # spanning tree plus the cheapest second link of one of its leaves
    from scipy.sparse.csgraph import minimum_spanning_tree

    a = rng.random((n, n)) + 0.1
    m = np.ascontiguousarray(np.triu(a, 1) + np.triu(a, 1).T)
    tree = minimum_spanning_tree(m).toarray()
    links = tree + tree.T
    deg = (links > 0).sum(axis=1)
    extra = min(
        min(m[i, j] for j in range(n) if j != i and links[i, j] == 0)
        for i in np.flatnonzero(deg == 1)
    )
    bound = rs.alpha_candidates(m, min(5, n - 1), 1)[2]
    assert bound == pytest.approx(tree.sum() + extra, rel=1e-12)


def test_alpha_candidates_bridge_groups_larger_than_k():
    # two groups of 12 close points far apart: the 5 nearest never leave a
    # group, the alpha-nearest hold the bridge between them
    pts = np.concatenate([np.linspace(0, 1, 12), 100 + np.linspace(0, 1, 12)])
    m = np.ascontiguousarray(np.abs(pts[:, None] - pts[None]))
    knn = rs.knn_lists(m, 5)
    assert all((knn[i] < 12).all() == (i < 12) for i in range(24))
    nb, _, bound = rs.alpha_candidates(m, 5, 30)
    assert 12 in nb[11] and 11 in nb[12]
    # the subgradient bound is a lower bound on the optimal ring (2 * 101)
    assert 0 < bound <= 202 + 1e-9


@pytest.mark.parametrize("n", [40, 300])
def test_alpha_candidates_sparse_steps_match_the_dense_ones(n):
    # independent uniform weights: the penalised spanning trees keep to each process's
    # 16 nearest links, so pricing the steps on those alone changes nothing
    gen = np.random.default_rng(n)
    a = gen.random((n, n))
    m = np.ascontiguousarray(np.triu(a, 1) + np.triu(a, 1).T)
    nb, pi, bound = rs.alpha_candidates(m, 5, 50)
    nb_s, pi_s, bound_s = rs.alpha_candidates(m, 5, 50, 16)
    assert np.array_equal(nb, nb_s) and np.allclose(pi, pi_s)
    assert bound_s == pytest.approx(bound, rel=1e-12)
    # at zero penalties the sparse graph is never read: the dense 1-tree's bound
    assert rs.alpha_candidates(m, 5, 1, 16)[2] == rs.alpha_candidates(m, 5, 1)[2]


def test_alpha_candidates_sparse_steps_bridge_groups_and_bound_the_ring():
    # groups of 12 close points, far apart: no process's 3 nearest leave its group,
    # but the first tree's links join the groups in the sparse graph
    gen = np.random.default_rng(5)
    pts = np.concatenate([g * 100 + gen.random(12) for g in range(4)])
    m = np.ascontiguousarray(np.abs(pts[:, None] - pts[None]))
    nb, pi, bound = rs.alpha_candidates(m, 5, 30, 3)
    tour = np.argsort(pts)  # the optimal ring on a line: out and back
    assert 0 < bound <= m[tour, np.roll(tour, -1)].sum() + 1e-9
    for g in range(3):  # the bridge between neighbouring groups is a candidate
        hi = int(np.argmax(np.where(pts < (g + 1) * 100, pts, -1)))
        lo = int(np.argmin(np.where(pts > (g + 1) * 100, pts, np.inf)))
        assert lo in nb[hi] and hi in nb[lo]


def test_local_search_ends_two_opt_and_or_opt_optimal_over_candidates(rng):
    pts = rng.random((120, 2))
    m = np.ascontiguousarray(np.linalg.norm(pts[:, None] - pts[None], axis=-1))
    nb = rs.alpha_candidates(m, 8, 20)[0]
    tour = rng.permutation(120).astype(np.int64)
    rs.local_search(m, tour, nb)
    n = len(tour)
    pos = np.empty(n, dtype=np.int64)
    pos[tour] = np.arange(n)
    for a in range(n):
        b = tour[(pos[a] + 1) % n]
        for c in nb[a]:
            d = tour[(pos[c] + 1) % n]
            if len({a, b, c, d}) == 4:  # 2-opt: (a,b),(c,d) -> (a,c),(b,d)
                assert m[a, c] + m[b, d] - m[a, b] - m[c, d] >= -1e-9
        # Or-opt of the single process a next to any of its candidates
        p, s = tour[(pos[a] - 1) % n], b
        for c in nb[a]:
            for e in (tour[(pos[c] + 1) % n], tour[(pos[c] - 1) % n]):
                if len({a, p, s, c, e}) == 5:
                    gain = m[p, a] + m[a, s] - m[p, s]
                    assert m[c, a] + m[a, e] - m[c, e] - gain >= -1e-9


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_local_search_ends_free_of_pure_three_opt_moves_over_full_lists(seed):
    """The Lin-Kernighan step holds both or-type 3-opt cases (its first exchange alone
    would split the ring): over full candidate lists no exchange of two adjacent runs
    (a b..e f..c d -> a f..c b..e d) and no reversal of both in place
    (-> a e..b c..f d) shortens the final ring."""
    g = np.random.default_rng(seed)
    n = 28
    m = g.random((n, n))
    m = np.ascontiguousarray(np.triu(m) + np.triu(m, 1).T)
    np.fill_diagonal(m, 0)
    nb = rs.knn_lists(m, n - 1)
    tour = g.permutation(n).astype(np.int64)
    rs.local_search(m, tour, nb)
    for r in range(n):
        t = np.roll(tour, -r)  # a = t[0]
        a = t[0]
        for i in range(1, n - 2):  # first run t[1..i]
            for j in range(i + 1, n - 1):  # second run t[i+1..j], d = t[j+1]
                b, e, f, c, d = t[1], t[i], t[i + 1], t[j], t[j + 1]
                old = m[a, b] + m[e, f] + m[c, d]
                assert m[a, f] + m[c, b] + m[e, d] - old >= -1e-9  # runs exchanged
                assert m[a, e] + m[b, c] + m[f, d] - old >= -1e-9  # both reversed


def test_candidate_lists_reject_bad_arguments(rng):
    m = np.ascontiguousarray(rng.random((10, 10)))
    assert candidate_lists(m, 3, "nearest").shape == (10, 3)
    with pytest.raises(RankoptInputError, match="`k`.*0"):
        candidate_lists(m, 0)
    with pytest.raises(RankoptInputError, match="`kind` must be one of 'auto'.*'knn'"):
        candidate_lists(m, 3, "knn")


# --- kernel safety on every valid value (the range of rankopt._validation.RANGES)


def _bound_matrix(kind, n, seed=0):
    """Matrices at the edges of the valid latency range (0 .. 1e6 s)."""
    g = np.random.default_rng(seed)
    m = {
        "zero": lambda: np.zeros((n, n)),
        "max": lambda: np.full((n, n), 1e6),
        "equal": lambda: np.full((n, n), 1e-5),
        "subnormal": lambda: np.full((n, n), 5e-324),
        "zero_or_max": lambda: np.where(g.random((n, n)) < 0.5, 1e6, 0.0),
        "subnormal_or_max": lambda: np.where(g.random((n, n)) < 0.5, 1e6, 5e-324),
        "dynamic_range": lambda: 10.0 ** g.uniform(-12, 6, (n, n)),
        # ties broken only by rounding noise: an absolute tolerance cycles here
        "near_max": lambda: 1e6 - g.integers(0, 3, (n, n)) * 1e-4,
    }[kind]()
    np.fill_diagonal(m, 0.0)
    return np.ascontiguousarray(m)


BOUND_KINDS = (
    "zero", "max", "equal", "subnormal", "zero_or_max", "subnormal_or_max", "dynamic_range",
    "near_max",
)  # fmt: skip


@pytest.mark.parametrize("kind", BOUND_KINDS)
@pytest.mark.parametrize("n", [2, 3, 5, 9, 17])
def test_construction_kernels_at_the_bounds(kind, n):
    from rankopt.solvers import _exact

    m = _bound_matrix(kind, n, seed=n)
    w = np.ascontiguousarray(0.5 * (m + m.T))
    for start in range(min(n, 3)):
        assert _is_perm(rs.nearest_neighbor(w, start), n)
    nb = rs.knn_lists(w, 5)
    assert ((nb >= 0) & (nb < n)).all()
    assert _is_perm(greedy_ring(w, nb), n)
    if n >= 3:
        cand, pi, bound = rs.alpha_candidates(w, 5, 50)
        assert ((cand >= 0) & (cand < n)).all() and np.isfinite(pi).all() and np.isfinite(bound)
    if n <= 9:
        cost, order = _exact.held_karp(m)
        assert _is_perm(order, n) and order[0] == 0
        assert np.isclose(cost, ring_sum_reference(m, order), rtol=1e-12, atol=0)


@pytest.mark.parametrize("kind", BOUND_KINDS)
@pytest.mark.parametrize("n", [8, 9, 12, 30])
def test_local_searches_terminate_at_the_bounds(kind, n):
    m = _bound_matrix(kind, n, seed=n)
    w = np.ascontiguousarray(0.5 * (m + m.T))
    nb = rs.knn_lists(w, 6)
    for seed in range(3):
        tour = np.random.default_rng(seed).permutation(n).astype(np.int64)
        # a time limit only guards the test run: a local optimum must be reached
        _, _, _, stop = rs.local_search(w, tour, nb, True, 20.0)
        assert stop == 0 and _is_perm(tour, n)
        _, _, _, kicks, stop = rs.iterated_local_search(w, tour, nb, seed, 100, 20.0)
        assert (kicks, stop) == (100, 2) and _is_perm(tour, n)
        _, _, _, kicks, stop = rd.directed_search(m, tour, nb, seed, 50, 20.0, 4)
        assert kicks == 50 and stop == 2 and _is_perm(tour, n)
        assert np.isfinite(ring_sum_reference(m, tour))


@pytest.mark.parametrize("kind", BOUND_KINDS)
@pytest.mark.parametrize(
    "method",
    ["auto", "exact", "held_karp", "brute_force", "nearest_neighbor", "two_opt", "ils",
     "anneal", "greedy_cluster", "swap"],
)  # fmt: skip
def test_every_method_at_the_bounds(kind, method):
    import rankopt

    for n in (2, 5, 9):
        if method == "brute_force" and n > 8:
            continue
        m = _bound_matrix(kind, n, seed=n)
        res = rankopt.solve(m, method=method, rng=n, max_iter=500)
        assert _is_perm(res.order, n)
        assert np.isfinite(res.cost) and res.cost <= res.baseline_cost


@pytest.mark.parametrize("kind", ["max", "zero_or_max", "dynamic_range", "subnormal"])
@pytest.mark.parametrize("method", ["auto", "anneal", "greedy_cluster", "swap"])
@pytest.mark.parametrize("algorithm", ["ring", "recursive_doubling"])
def test_time_models_at_the_bounds(kind, method, algorithm):
    # the slowest valid transfer: 1e18 bytes at 1e-3 B/s next to 1e15 B/s links
    import rankopt

    n = 8
    m = _bound_matrix(kind, n, seed=1)
    bw = np.where(np.random.default_rng(2).random((n, n)) < 0.5, 1e-3, 1e15)
    for objective, extra in (
        ("time", {}),
        ("contention", {"groups": [np.arange(n) // 2], "uplink_bandwidth": [1e-3]}),
    ):
        res = rankopt.solve(
            m, "allreduce", algorithm, objective=objective, bandwidth=bw, nbytes=1e18,
            method=method, rng=0, max_iter=300, **extra,
        )  # fmt: skip
        assert _is_perm(res.order, n)
        assert np.isfinite(res.cost) and res.cost <= res.baseline_cost


# ------------------------------------------- blocked kernels: every tile edge
#: sizes around the 64-wide tiles of is_symmetric / symmetrize: one partial
#: tile, exactly one, one and a bit, several with a partial last one
TILE_SIZES = [1, 2, 63, 64, 65, 127, 128, 130]


@pytest.mark.parametrize("n", TILE_SIZES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_is_symmetric_sees_one_asymmetric_pair_anywhere(n, dtype):
    gen = np.random.default_rng(n)
    a = gen.uniform(0, 1, (n, n)).astype(dtype)
    a = np.ascontiguousarray(np.triu(a) + np.triu(a, 1).T)
    assert ev.is_symmetric(a)
    # the corners and both edges of every tile, the last row and column included
    edges = sorted({0, n - 1} | {k for t in range(0, n, 64) for k in (t, t + 63) if k < n})
    for i in edges:
        for j in edges:
            if i == j:
                continue
            b = a.copy()
            b[i, j] += 1
            assert not ev.is_symmetric(b), (i, j)


@pytest.mark.parametrize("n", TILE_SIZES)
@pytest.mark.parametrize("maximum", [False, True])
def test_symmetrize_writes_every_entry(n, maximum):
    gen = np.random.default_rng(n)
    for dtype in (np.float32, np.float64):
        a = np.ascontiguousarray(gen.uniform(0, 1, (n, n)).astype(dtype))
        want = np.maximum(a, a.T) if maximum else (0.5 * (a.astype(np.float64) + a.T)).astype(dtype)
        got = ev.symmetrize(a, maximum)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-15)


def test_alpha_candidates_time_limit_stops_the_ascent():
    m = _uniform(300, 4)
    full = rs.alpha_candidates(m, 5, 60, 16)
    # a limit already spent: only the first step runs, then the final tree as always
    cut = rs.alpha_candidates(m, 5, 60, 16, 1e-12)
    one = rs.alpha_candidates(m, 5, 1, 16)
    assert np.array_equal(cut[0], one[0]) and np.array_equal(cut[1], one[1])
    assert cut[2] == one[2] < full[2]
    # a limit the ascent does not reach changes nothing
    late = rs.alpha_candidates(m, 5, 60, 16, 60.0)
    assert np.array_equal(late[0], full[0]) and np.array_equal(late[1], full[1])


def _exchange_gains(w, tour, links):
    """Every exchange ``long_link_exchanges`` weighs, by brute force: the gains of the
    four reconnections of every three of the ``links`` longest ring links."""
    n = len(tour)
    lengths = w[tour, np.roll(tour, -1)]
    cand = sorted(np.argsort(-lengths, kind="stable")[: min(links, n)].tolist())
    gains = []
    for x, p in enumerate(cand):
        for y in range(x + 1, len(cand)):
            for r in cand[y + 1 :]:
                q = cand[y]
                s1, s2, rest = tour[p + 1 : q + 1], tour[q + 1 : r + 1], tour[r + 1 :]
                for block in (
                    np.r_[s2, s1],
                    np.r_[s2, s1[::-1]],
                    np.r_[s2[::-1], s1],
                    np.r_[s1[::-1], s2[::-1]],
                ):
                    t = np.r_[tour[: p + 1], block, rest]
                    gains.append(lengths.sum() - w[t, np.roll(t, -1)].sum())
    return gains


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_long_link_exchanges_leave_no_gaining_exchange_and_report_their_delta(dtype):
    gen = np.random.default_rng(4)
    for trial in range(40):
        n = int(gen.integers(8, 28))
        w = _uniform(n, 100 + trial, dtype)
        tour = gen.permutation(n).astype(np.int64)
        before = float(w[tour, np.roll(tour, -1)].astype(np.float64).sum())
        links = int(gen.integers(3, n + 3))  # more links than the ring has: all of them
        delta, evals, moves = rs.long_link_exchanges(w, tour, links)
        assert _is_perm(tour, n)
        after = float(w[tour, np.roll(tour, -1)].astype(np.float64).sum())
        assert after - before == pytest.approx(delta, abs=1e-5 * n)
        assert delta <= 0 and (moves > 0) == (delta < 0) and evals > 0
        if moves < min(links, n):  # it stopped because none gained
            eps = rs.matrix_tolerance(w)
            assert max(_exchange_gains(w.astype(np.float64), tour, links)) <= eps + 1e-6, trial
    tour = np.arange(7, dtype=np.int64)  # below 8 processes: nothing to do
    assert rs.long_link_exchanges(_uniform(7, 0), tour, 64) == (0.0, 0, 0)


def test_long_link_exchanges_join_a_group_visited_in_two_pieces():
    # 4 groups of 10 (1 within, 100 across); the ring visits group 0 in two pieces of 5
    # (longer than Or-opt's runs) with group 1 between them: 5 crossings, not 4
    group = np.repeat(np.arange(4), 10)
    w = np.where(group[:, None] == group[None, :], 1.0, 100.0)
    np.fill_diagonal(w, 0.0)
    tour = np.r_[0:5, 10:20, 5:10, 20:40].astype(np.int64)
    crossings = lambda t: int((group[t] != group[np.roll(t, -1)]).sum())  # noqa: E731
    assert crossings(tour) == 5
    delta, _, moves = rs.long_link_exchanges(w, tour, 8)
    assert _is_perm(tour, 40) and moves == 1
    assert crossings(tour) == 4 and delta == pytest.approx(-99.0)


def test_long_link_exchanges_see_no_gain_in_ties_of_float32_weights():
    # few distinct float32 weights of mixed sizes: many exchanges put the same three
    # weights back in another order, whose float32 sums round apart by an ulp of 1000
    # (6e-5), far above the kernels' tolerance; summed in double they tie exactly, and
    # the delta reported is the ring's change to the last digit
    gen = np.random.default_rng(9)
    values = np.array([0.1, 0.7, 2.9, 1000.3], dtype=np.float32)
    for trial in range(30):
        n = int(gen.integers(8, 60))
        w = values[gen.integers(0, 4, (n, n))]
        w = np.ascontiguousarray(np.triu(w, 1) + np.triu(w, 1).T)
        tour = gen.permutation(n).astype(np.int64)
        before = float(w[tour, np.roll(tour, -1)].astype(np.float64).sum())
        delta, _, moves = rs.long_link_exchanges(w, tour, 16)
        after = float(w[tour, np.roll(tour, -1)].astype(np.float64).sum())
        assert _is_perm(tour, n)
        assert after - before == pytest.approx(delta, abs=1e-9), trial
        assert (moves > 0) == (after < before - 1e-3), trial  # every move a real gain
