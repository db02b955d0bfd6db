"""Compiled ring evaluators and search kernels against the NumPy references."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rankopt.models import _ring_eval as ev
from rankopt.models.ring import (
    RingBottleneck,
    RingSum,
    ring_bottleneck_reference,
    ring_sum_reference,
)
from rankopt.solvers import _ring_search as rs


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
