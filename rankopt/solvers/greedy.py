"""Greedy clustering: an order in which every cluster of the network is contiguous.

``greedy_cluster``
    Agglomerative clustering (average linkage, :mod:`rankopt._linkage`:
    the merges of ``scipy.cluster.hierarchy.linkage``, without the 0.15-0.25 s
    its import costs a starting job) of the symmetrised latency, then the
    dendrogram's leaf order -- every cluster, at every level, is a contiguous
    run of new ranks. For rings the leaves are ordered optimally (the least
    sum of neighbouring distances, Bar-Joseph et al.'s O(n^3) dynamic program;
    SciPy's ``optimal_leaf_ordering`` misses the optimum on some trees,
    scipy/scipy#11227) when n is small enough for its cost.

    For recursive algorithms (recursive doubling / halving, Rabenseifner,
    trees) on a power-of-two n, new rank ``r`` pairs with ``r ^ 2^b`` at the
    steps driven by bit ``b``. Position ``q`` in the leaf order carries the
    dendrogram's recursive bisection in its bits (the top bit is the
    coarsest split), so the order is ``order[r] = leaves[q]`` where the bits
    of ``q`` are a permutation of those of ``r``. The permutation is chosen
    by local search over bit swaps scored by the model itself: the finest
    splits (closest processes) land on the bits whose steps move the most
    bytes, whatever the algorithm.

The result is never worse than the start (``init``, else the launch order):
the clustering distance is only a proxy of the model, and on a network
without clusters the launch order can be cheaper.

Complexity: O(n^2) for the linkage, plus ``O(log(n)^3)`` model evaluations
for the bit mapping.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray

from rankopt._linkage import average_linkage, leaves, optimal_leaves
from rankopt._validation import RankoptInputError
from rankopt.models.base import CostModel
from rankopt.solvers._base import (
    MethodOutput,
    SolveContext,
    fix_first,
    no_worse_than_start,
    rank0_pinned,
    register,
)

__all__ = ["greedy_cluster", "leaf_order", "distance_matrix", "bit_orders"]

#: Largest n for which leaves are ordered optimally (O(n^3)).
OPTIMAL_LEAF_MAX_N = 256


def distance_matrix(model: CostModel) -> NDArray[np.float64]:
    """Symmetric dissimilarity used to cluster.

    The ring weights for ring models; otherwise the pair time of a message of
    ``nbytes / 2`` (latency plus bytes over bandwidth) when the model's
    network has both, else the latency; symmetrised. All read from the
    model's :class:`~rankopt.models.base.Capabilities`.
    """
    caps = model.capabilities
    if caps.ring_weights is not None:
        return np.asarray(caps.ring_weights, dtype=np.float64)  # a copy of float32 weights only
    if caps.latency is None:
        raise RankoptInputError(
            "method 'greedy_cluster' needs a model that declares its `latency` or "
            "`ring_weights` (Capabilities); this one declares neither."
        )
    d = np.array(caps.latency, dtype=np.float64)
    bw, nbytes = caps.bandwidth, caps.nbytes
    if bw is not None and nbytes:
        with np.errstate(divide="ignore"):
            d = d + np.where(bw > 0, 0.5 * nbytes / np.where(bw > 0, bw, 1.0), 0.0)
    d = 0.5 * (d + d.T)
    np.fill_diagonal(d, 0.0)
    return d


def _normalized(d: NDArray[np.float64]) -> NDArray[np.float64]:
    """``d[i, j] / sqrt(m_i m_j)`` with ``m_i`` the median of row i, scaled to a maximum of 1.

    A congested VM has all its links slower by one factor; dividing it out
    lets the clustering see where the VM sits rather than how slow it is.
    The quotient is formed in logarithms and divided by its largest value
    (average linkage does not depend on the scale): ``m_i m_j`` underflows
    below ~1e-154 s and ``d / sqrt(m_i m_j)`` overflows when a row's median
    is tiny and another entry large, while every valid latency gives finite
    values here.

    Examples
    --------
    >>> d = np.array([[0, 1e-200, 2e-200], [1e-200, 0, 4e-200], [2e-200, 4e-200, 0]])
    >>> a = _normalized(d)  # the same as at 1 s: the scale does not matter
    >>> bool(np.allclose(a, _normalized(d * 1e200))), float(a.max())
    (True, 1.0)
    """
    n = d.shape[0]
    off = d[~np.eye(n, dtype=bool)].reshape(n, n - 1)
    m = np.median(off, axis=1)
    half_log_m = 0.5 * np.log(np.where(m > 0, m, 1.0))
    pos = d > 0
    if not pos.any():
        return np.zeros_like(d)
    with np.errstate(divide="ignore"):
        r = np.log(np.where(pos, d, 0.0)) - half_log_m[:, None] - half_log_m[None, :]
    out = np.exp(r - r[pos].max())  # exp(-inf) = 0 where d is 0
    np.fill_diagonal(out, 0.0)
    return out


def leaf_order(d: NDArray[np.float64], optimal: bool | None = None) -> NDArray[np.int64]:
    """Dendrogram leaf order of ``d`` (average linkage): clusters are contiguous.

    Examples
    --------
    >>> d = np.array([[0, 9, 1, 9], [9, 0, 9, 1], [1, 9, 0, 9], [9, 1, 9, 0]], float)
    >>> o = leaf_order(d).tolist()
    >>> sorted([sorted(o[:2]), sorted(o[2:])])  # each cluster contiguous
    [[0, 2], [1, 3]]
    """
    n = d.shape[0]
    if n <= 2:
        return np.arange(n, dtype=np.int64)
    z = average_linkage(d)
    if optimal is None:
        optimal = n <= OPTIMAL_LEAF_MAX_N
    return optimal_leaves(z, d) if optimal else leaves(z)


def bit_orders(leaves: NDArray[np.int64], perm: tuple[int, ...]) -> NDArray[np.int64]:
    """``order[r] = leaves[q]`` where bit ``t`` of ``q`` is bit ``perm[t]`` of ``r``."""
    n = len(leaves)
    r = np.arange(n)
    q = np.zeros(n, dtype=np.int64)
    for t, b in enumerate(perm):
        q |= ((r >> b) & 1) << t
    return leaves[q]


def _fix_rank0(order: NDArray[np.int64], pow2: bool) -> list[NDArray[np.int64]]:
    """Variants of ``order`` with process 0 at new rank 0 (structure-preserving first)."""
    p = int(np.flatnonzero(order == 0)[0])
    if p == 0:
        return [order]
    n = len(order)
    out = [np.roll(order, -p)]
    if pow2:
        out.append(order[np.arange(n) ^ p])  # XOR keeps every recursive-doubling pair
    out.append(fix_first(order))
    return out


class _Scored:
    def __init__(self, model: CostModel, ctx: SolveContext) -> None:
        self.model = model
        self.ctx = ctx
        self.evals = 0
        self.best: NDArray[np.int64] | None = None
        self.best_cost = np.inf

    def __call__(self, order: NDArray[np.int64]) -> float:
        pow2 = len(order) & (len(order) - 1) == 0
        cands = [order]
        if rank0_pinned(self.model, self.ctx):
            cands = _fix_rank0(order, pow2)
        best = np.inf
        for o in cands:
            c = float(self.model.cost(o))
            self.evals += 1
            best = min(best, c)
            if self.best is None or c < self.best_cost:
                self.best_cost, self.best = c, o.copy()
                self.ctx.record(c, self.evals)
        return best


def _search_bits(score: _Scored, leaves: NDArray[np.int64], m: int) -> None:
    """Local search over bit permutations (exhaustive for m <= 5)."""
    if m <= 5:
        for p in itertools.permutations(range(m)):
            score(bit_orders(leaves, p))
        return
    starts = [tuple(range(m)), tuple(range(m - 1, -1, -1))]
    for perm0 in starts:
        perm = list(perm0)
        cur = score(bit_orders(leaves, tuple(perm)))
        improved = True
        while improved and not score.ctx.out_of_time():
            improved = False
            for a, b in itertools.combinations(range(m), 2):
                perm[a], perm[b] = perm[b], perm[a]
                c = score(bit_orders(leaves, tuple(perm)))
                if c < cur - 1e-15 * abs(cur):
                    cur, improved = c, True
                else:
                    perm[a], perm[b] = perm[b], perm[a]


def greedy_order(model: CostModel, ctx: SolveContext) -> tuple[NDArray[np.int64], int]:
    """The greedy-cluster order of ``model`` and the number of model evaluations."""
    n = model.n
    d = distance_matrix(model)
    score = _Scored(model, ctx)
    # neighbours matter on a ring only: elsewhere the bit search below places
    # the clusters and the optimal leaf ordering (O(n^3)) buys nothing
    caps = model.capabilities
    ring = caps.ring_weights is not None or caps.ring_schedule
    for dd in (d, _normalized(d)) if n > 2 else (d,):
        leaves = leaf_order(dd, optimal=None if ring else False)
        score(leaves)
        score(leaves[::-1].copy())
        if caps.ring_weights is None and n >= 4 and n & (n - 1) == 0:
            _search_bits(score, leaves, n.bit_length() - 1)
    assert score.best is not None
    # the clustering distance is a proxy of the model: keep the start when it is cheaper
    order, _ = no_worse_than_start(model, ctx, score.best, score.best_cost)
    return order, score.evals + 1


@register("greedy_cluster", doc="agglomerative clustering; clusters contiguous at every level")
def greedy_cluster(model: CostModel, ctx: SolveContext) -> MethodOutput:
    """Order by hierarchical clustering (see the module docstring)."""
    order, evals = greedy_order(model, ctx)
    return MethodOutput(order, iterations=1, evaluations=evals, stop_reason="constructed")
