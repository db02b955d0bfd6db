"""Average linkage and leaf orders (rankopt._linkage) against SciPy and brute force."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.cluster import hierarchy
from scipy.spatial.distance import squareform

from rankopt._linkage import average_linkage, leaves, optimal_leaves
from rankopt.solvers.greedy import leaf_order


def _matrix(kind: str, n: int, gen: np.random.Generator) -> np.ndarray:
    if kind == "points":
        x = gen.random((n, 3))
        d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    else:  # racks: exact ties, or ties broken by a little noise
        rack = gen.integers(0, max(1, n // 3), n)
        d = np.where(rack[:, None] == rack[None, :], 1.0, 5.0)
        if kind == "noisy racks":
            d = d * np.exp(0.05 * gen.standard_normal((n, n)))
            d = (d + d.T) / 2
    np.fill_diagonal(d, 0.0)
    return d


def _path(order, d) -> float:
    return float(sum(d[a, b] for a, b in zip(order[:-1], order[1:], strict=True)))


def _all_orders(z: np.ndarray, n: int) -> list[list[int]]:
    """Every leaf order of the dendrogram: each merge's two children either way."""

    def rec(c: int) -> list[list[int]]:
        if c < n:
            return [[c]]
        a, b = rec(int(z[c - n, 0])), rec(int(z[c - n, 1]))
        return [x + y for x in a for y in b] + [y + x for x in a for y in b]

    return rec(2 * n - 2)


def _contiguous(order, z: np.ndarray, n: int) -> bool:
    pos = {v: i for i, v in enumerate(order)}
    members = {i: [i] for i in range(n)}
    for k in range(n - 1):
        m = members[int(z[k, 0])] + members[int(z[k, 1])]
        members[n + k] = m
        p = sorted(pos[v] for v in m)
        if p[-1] - p[0] != len(p) - 1:
            return False
    return True


@pytest.mark.parametrize("kind", ["points", "racks", "noisy racks"])
def test_average_linkage_and_leaves_are_scipys(kind):
    gen = np.random.default_rng(["points", "racks", "noisy racks"].index(kind))
    for n in [2, 3, 5, 9, 16, 33, 64, 130]:
        d = _matrix(kind, n, gen)
        z = hierarchy.linkage(squareform(d, checks=False), method="average")
        mine = average_linkage(d)
        np.testing.assert_array_equal(mine, z)
        np.testing.assert_array_equal(leaves(mine), hierarchy.leaves_list(z))


@pytest.mark.parametrize("kind", ["points", "racks", "noisy racks"])
def test_optimal_leaves_reach_the_optimum_of_every_orientation(kind):
    gen = np.random.default_rng(10 + ["points", "racks", "noisy racks"].index(kind))
    for _ in range(60):
        n = int(gen.integers(2, 9))
        d = _matrix(kind, n, gen)
        z = average_linkage(d)
        got = optimal_leaves(z, d).tolist()
        assert sorted(got) == list(range(n)) and _contiguous(got, z, n)
        best = min(_path(o, d) for o in _all_orders(z, n))
        assert _path(got, d) == pytest.approx(best, rel=1e-12, abs=0.0)


def test_optimal_leaves_never_longer_than_scipys_and_scale():
    gen = np.random.default_rng(3)
    shorter = 0
    for n in [12, 40, 100, 256]:
        for _ in range(3):
            d = _matrix("points", n, gen)
            z = average_linkage(d)
            got = optimal_leaves(z, d)
            assert _contiguous(got.tolist(), z, n)
            ref = hierarchy.leaves_list(
                hierarchy.optimal_leaf_ordering(z, squareform(d, checks=False))
            )
            assert _path(got, d) <= _path(ref, d) * (1 + 1e-12)
            shorter += _path(got, d) < _path(ref, d) * (1 - 1e-9)
    assert shorter >= 1  # SciPy's misses the optimum on some (scipy/scipy#11227)


def test_leaf_order_keeps_clusters_contiguous_and_small_cases():
    assert leaf_order(np.zeros((1, 1))).tolist() == [0]
    assert leaf_order(np.array([[0.0, 1.0], [1.0, 0.0]])).tolist() == [0, 1]
    rack = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])
    d = np.where(rack[:, None] == rack[None, :], 1.0, 10.0)
    np.fill_diagonal(d, 0.0)
    for optimal in (True, False):
        o = leaf_order(d, optimal=optimal)
        assert sorted(o.tolist()) == list(range(9))
        assert all(len(set(rack[o[i : i + 3]])) == 1 for i in (0, 3, 6))


def _valid_tree(z: np.ndarray, n: int) -> bool:
    """Every merge joins two live clusters, children before parents, sizes adding up."""
    size = dict.fromkeys(range(n), 1)
    for k in range(n - 1):
        a, b = int(z[k, 0]), int(z[k, 1])
        if a not in size or b not in size or a == b:
            return False
        size[n + k] = size.pop(a) + size.pop(b)
        if size[n + k] != int(z[k, 3]):
            return False
    return bool(np.all(np.diff(z[:, 2]) >= 0))


@pytest.mark.parametrize("far", [0.1, 0.27965027, 1 / 3, 0.7, 3e-5])
@pytest.mark.parametrize("r", [3, 5, 6, 7])
def test_linkage_of_equal_distances_that_average_an_ulp_lower_is_a_tree(far, r):
    # averages of clusters of 3, 5, 6 or 7 all at distance ``far`` can round
    # an ulp below it; such a merge, sorted before the one that made its child,
    # left optimal_leaves with a cluster of no leaves
    n = 8 * r
    rack = np.arange(n) // r
    d = np.where(rack[:, None] == rack[None, :], far / 10, far)
    np.fill_diagonal(d, 0.0)
    z = average_linkage(d)
    assert _valid_tree(z, n)
    o = optimal_leaves(z, d)
    assert sorted(o.tolist()) == list(range(n)) and _contiguous(o.tolist(), z, n)
    assert all(len(set(rack[o[i : i + r]])) == 1 for i in range(0, n, r))


def test_a_ring_over_racks_only_the_bandwidth_shows_solves():
    from rankopt import Network, solve

    for n, r in [(24, 3), (64, 8)]:
        lat = np.full((n, n), 30e-6)
        np.fill_diagonal(lat, 0.0)
        rack = np.arange(n) // r
        bw = np.where(rack[:, None] == rack[None, :], 100e6, 30e6)
        launch = np.random.default_rng(n).permutation(n)
        net = Network.from_matrices(lat[np.ix_(launch, launch)], bw[np.ix_(launch, launch)])
        res = solve(net, nbytes=2**24, rng=0)
        assert sorted(res.order.tolist()) == list(range(n))
        assert res.cost < res.baseline_cost
