"""Average-linkage clustering and dendrogram leaf orders, in NumPy.

The greedy start (:mod:`rankopt.solvers.greedy`) and the average-linkage
levels of :func:`rankopt.infer_hierarchy` need three things of
``scipy.cluster.hierarchy``: ``linkage(method="average")``, ``leaves_list``
and ``optimal_leaf_ordering``. Importing ``scipy.cluster`` costs 0.15-0.25 s
(it pulls in ``scipy.spatial`` and ``scipy.linalg``), paid by the rank that
solves while every other rank of a starting job waits for it; these versions
cost nothing to import.

average_linkage
    The nearest-neighbour-chain algorithm (O(n^2) time and memory): the same
    merges, distances and cluster labels as ``scipy.cluster.hierarchy.linkage``
    with ``method="average"``.
leaves
    The leaves of a linkage left to right (``leaves_list``).
optimal_leaves
    The leaf order of the dendrogram, children flipped where that shortens
    the sum of distances between neighbouring leaves, to the optimum (Bar-Joseph,
    Gifford and Jaakkola, "Fast optimal leaf ordering for hierarchical
    clustering", Bioinformatics 2001): O(n^3) time, O(n^2) memory.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["average_linkage", "leaves", "optimal_leaves"]


def average_linkage(d: NDArray[np.float64]) -> NDArray[np.float64]:
    """Average-linkage merges of the symmetric distances ``d`` (n x n), n >= 2.

    Returns the ``(n - 1, 4)`` linkage: per merge the two clusters' labels
    (leaves ``0..n-1``, merge ``k`` is ``n + k``; the smaller first), their
    distance and the new cluster's size, in order of distance.

    Examples
    --------
    >>> d = np.array([[0, 1, 4, 5], [1, 0, 4, 5], [4, 4, 0, 2], [5, 5, 2, 0]], float)
    >>> average_linkage(d)
    array([[0. , 1. , 1. , 2. ],
           [2. , 3. , 2. , 2. ],
           [4. , 5. , 4.5, 4. ]])
    """
    n = d.shape[0]
    dist = np.array(d, dtype=np.float64, copy=True)
    size = np.ones(n, dtype=np.int64)
    height = np.zeros(n)  # the distance of the merge that made each live cluster
    merges = np.empty((n - 1, 4))
    chain: list[int] = []
    for k in range(n - 1):
        if not chain:
            chain.append(int(np.flatnonzero(size > 0)[0]))
        while True:  # follow nearest neighbours until two are each other's
            x = chain[-1]
            row = np.where(size > 0, dist[x], np.inf)
            row[x] = np.inf
            y = int(np.argmin(row))
            best = float(row[y])
            if len(chain) > 1:
                prev = chain[-2]
                if float(dist[x, prev]) <= best:  # prefer the chain's previous: no cycles
                    y, best = prev, float(dist[x, prev])
                if y == prev:
                    break
            chain.append(y)
        del chain[-2:]
        if x > y:
            x, y = y, x
        nx, ny = int(size[x]), int(size[y])
        # an average of equal distances can round an ulp below them: a merge is
        # never lower than its children's, so that the sort below keeps every
        # child before its parent
        best = max(best, float(height[x]), float(height[y]))
        height[y] = best
        merges[k] = (x, y, best, nx + ny)
        size[x] = 0
        size[y] = nx + ny
        live = size > 0
        live[y] = False
        new = (nx * dist[x] + ny * dist[y]) / (nx + ny)
        dist[y, live] = new[live]
        dist[live, y] = new[live]
    merges = merges[np.argsort(merges[:, 2], kind="mergesort")]
    _relabel(merges, n)
    return merges


def _relabel(merges: NDArray[np.float64], n: int) -> None:
    """Merges recorded by a surviving leaf index, relabelled as clusters ``n + k``."""
    parent = np.arange(2 * n - 1)

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = int(parent[root])
        while parent[x] != root:  # path compression
            parent[x], x = root, int(parent[x])
        return root

    for k in range(n - 1):
        a, b = find(int(merges[k, 0])), find(int(merges[k, 1]))
        merges[k, 0], merges[k, 1] = min(a, b), max(a, b)
        parent[a] = parent[b] = n + k


def leaves(merges: NDArray[np.float64]) -> NDArray[np.int64]:
    """The leaves of linkage ``merges`` left to right, each cluster's first child first.

    >>> leaves(np.array([[0, 2, 1.0, 2], [1, 3, 2.0, 2], [4, 5, 3.0, 4]]))
    array([0, 2, 1, 3])
    """
    n = merges.shape[0] + 1
    out: list[int] = []
    stack = [2 * n - 2]
    while stack:
        c = stack.pop()
        if c < n:
            out.append(c)
        else:
            a, b = merges[c - n, :2]
            stack.extend((int(b), int(a)))
    return np.asarray(out, dtype=np.int64)


def optimal_leaves(merges: NDArray[np.float64], d: NDArray[np.float64]) -> NDArray[np.int64]:
    """The leaf order of ``merges`` with the least sum of neighbouring leaves' ``d``.

    Only the orientation of every merge's two children is chosen: every
    cluster stays contiguous. For each cluster ``v = (L, R)`` and each pair of
    a leaf ``i`` of one child and ``j`` of the other, ``M_v[i, j]`` is the
    shortest order of ``v`` that starts at ``i`` and ends at ``j``:
    ``min over k in L, m in R of M_L[i, k] + d[k, m] + M_R[m, j]``, two
    min-plus products; the order is read back from the argmins. ``merges`` is
    a linkage as :func:`average_linkage` (or SciPy) returns it, the clusters'
    sizes in its last column.

    >>> d = np.array([[0, 9, 1, 9], [9, 0, 9, 2], [1, 9, 0, 3], [9, 2, 3, 0]], float)
    >>> z = np.array([[0, 2, 1.0, 2], [1, 3, 2.0, 2], [4, 5, 9.0, 4]])
    >>> leaves(z).tolist(), optimal_leaves(z, d).tolist()  # 1 + 9 + 2 against 1 + 3 + 2
    ([0, 2, 1, 3], [0, 2, 3, 1])
    """
    n = merges.shape[0] + 1
    d = np.asarray(d, dtype=np.float64)
    members: dict[int, NDArray[np.int64]] = {i: np.array([i], dtype=np.int64) for i in range(n)}
    cost: dict[int, NDArray[np.float64]] = {i: np.zeros((1, 1)) for i in range(n)}
    size = np.concatenate([np.ones(n), merges[:, 3]]).astype(np.int64)  # leaves per cluster
    back: dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]] = {}
    for k in range(n - 1):
        a, b = int(merges[k, 0]), int(merges[k, 1])
        la, lb = members.pop(a), members.pop(b)
        ca, cb = cost.pop(a), cost.pop(b)
        na, nb = la.size, lb.size
        # an order of a from i to k, the link k-m, an order of b from m to j; an
        # order of a cluster starts in one child and ends in the other
        t1 = np.empty((na, nb))
        kk = np.empty((na, nb), dtype=np.int64)
        for rows, cols in _ends(a, n, merges, size):
            t1[rows], arg = _min_plus(ca[rows, cols], d[np.ix_(la[cols], lb)])
            kk[rows] = arg + cols.start
        t2 = np.empty((na, nb))
        mm = np.empty((na, nb), dtype=np.int64)
        for rows, cols in _ends(b, n, merges, size):
            t2[:, cols], arg = _min_plus(t1[:, rows], cb[rows, cols])
            mm[:, cols] = arg + rows.start
        ka = np.take_along_axis(kk, mm, axis=1)  # (i, j): the k of the best m
        full = np.full((na + nb, na + nb), np.inf)
        full[:na, na:] = t2
        full[na:, :na] = t2.T  # the same order read backwards
        members[n + k] = np.concatenate([la, lb])
        cost[n + k] = full
        back[n + k] = (ka, mm)
    root = 2 * n - 2
    flat = int(np.argmin(cost[root]))
    i, j = divmod(flat, cost[root].shape[1])
    order: list[int] = []
    _unroll(root, i, j, n, merges, size=size, back=back, out=order)
    return np.asarray(order, dtype=np.int64)


def _ends(
    c: int, n: int, merges: NDArray[np.float64], size: NDArray[np.int64]
) -> list[tuple[slice, slice]]:
    """The (start, end) blocks of cluster ``c``'s orders: its two children's leaves either way."""
    if c < n:
        return [(slice(0, 1), slice(0, 1))]
    first, total = int(size[int(merges[c - n, 0])]), int(size[c])
    return [(slice(0, first), slice(first, total)), (slice(first, total), slice(0, first))]


def _min_plus(
    a: NDArray[np.float64], b: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """``min over k of a[i, k] + b[k, j]`` and its first argmin ``k``."""
    via = a[:, None, :] + b.T[None, :, :]  # (i, j, k): k along contiguous memory
    arg = np.argmin(via, axis=2)
    return np.take_along_axis(via, arg[:, :, None], axis=2)[:, :, 0], arg


def _unroll(
    v: int,
    i: int,
    j: int,
    n: int,
    merges: NDArray[np.float64],
    *,
    size: NDArray[np.int64],
    back: dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]],
    out: list[int],
) -> None:
    """Append the leaves of cluster ``v`` from its ``i``-th to its ``j``-th leaf.

    ``i`` and ``j`` index ``v``'s leaves in its children's order (first child
    first). Iterative over a stack of pending clusters.
    """
    stack: list[tuple[int, int, int, bool]] = [(v, i, j, False)]
    while stack:
        v, i, j, rev = stack.pop()
        if v < n:
            out.append(v)
            continue
        a, b = int(merges[v - n, 0]), int(merges[v - n, 1])
        na = int(size[a])
        if i >= na:  # starts in b: the stored order from j (in a) to i, backwards
            i, j, rev = j, i, not rev
        ka, mm = back[v]
        jb = j - na
        m = int(mm[i, jb])
        k = int(ka[i, jb])
        if rev:  # b from j back to m, then a from k back to i
            stack.append((a, i, k, True))
            stack.append((b, m, jb, True))
        else:  # a from i to k, then b from m to j
            stack.append((b, m, jb, False))
            stack.append((a, i, k, False))
