"""Infer the network hierarchy (hosts, racks, pods) from measured matrices.

Contents
--------
infer_uplinks
    The capacity of every group's uplink per level, from probed bandwidth
    (the best pair rate across the group boundary).
infer_hierarchy
    Nested group labels, finest level first, from latency and/or bandwidth
    and, optionally, the host of every process, by average- or single-linkage
    clustering cut at the large gaps between merge heights. Single linkage (group maxima of bandwidth) is the rule
    for probed matrices.
host_labels
    Label every process with the index of its host.
DEFAULT_GAP
    The factor between two merge heights that makes them separate levels.

This is the one place where rankopt infers a hierarchy: the probe schedules
its bandwidth phase with it (:func:`rankopt.probe._topology.infer_link_levels`)
and the testbed reads racks and pods from probed bandwidth with it
(:func:`rankopt.testbed.hierarchy.infer_bandwidth_levels`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import (
    RankoptInputError,
    check_host_names,
    check_matrix,
    check_options,
    check_positive,
)

__all__ = [
    "infer_hierarchy",
    "infer_host_hierarchy",
    "host_block_min",
    "tree_levels",
    "nest_levels",
    "infer_uplinks",
    "block_max",
    "block_runner_up",
    "host_labels",
    "DEFAULT_GAP",
]

logger = logging.getLogger("rankopt")

#: A level boundary is a jump by at least this factor between consecutive merge heights.
DEFAULT_GAP = 1.5

Linkage = Literal["average", "single"]
_LINKAGES = ("average", "single")


def host_labels(hosts: Sequence[str]) -> NDArray[np.int64]:
    """Label every process with the index of its host, in order of first appearance.

    Parameters
    ----------
    hosts : sequence of str
        Host name of every process.

    Returns
    -------
    ndarray of int64, shape (n,)

    Examples
    --------
    >>> host_labels(["b", "a", "b", "c"])
    array([0, 1, 0, 2])
    """
    index: dict[str, int] = {}
    return np.array([index.setdefault(h, len(index)) for h in hosts], dtype=np.int64)


def _relabel(lab: NDArray[np.int64]) -> NDArray[np.int64]:
    """Labels 0..G-1 in order of first appearance."""
    _, first, inv = np.unique(lab, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[inv.reshape(-1)].astype(np.int64)


def _meet(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
    """The coarsest partition finer than both ``a`` and ``b``."""
    return _relabel(a * (int(b.max()) + 1) + b)


def _minimum_spanning_tree(dist: NDArray[np.float64]) -> tuple[NDArray[np.int64], ...]:
    """Prim's algorithm on a dense symmetric matrix: the tree's edges (a, b, weight order).

    :math:`O(n^2)` time and :math:`O(n)` memory beyond the matrix; the single-linkage
    dendrogram's merge heights are the tree's weights in ascending order.
    """
    n = dist.shape[0]
    inside = np.zeros(n, dtype=bool)
    inside[0] = True
    best = dist[0].astype(np.float64, copy=True)
    via = np.zeros(n, dtype=np.int64)
    best[0] = np.inf
    a = np.empty(n - 1, dtype=np.int64)
    b = np.empty(n - 1, dtype=np.int64)
    for k in range(n - 1):
        j = int(np.argmin(best))
        a[k], b[k] = via[j], j
        inside[j] = True
        best[j] = np.inf
        row = dist[j]
        closer = (row < best) & ~inside
        best[closer] = row[closer]
        via[closer] = j
    return a, b


def _single_levels(dist: NDArray[np.float64], gap: float) -> list[NDArray[np.int64]]:
    """The cuts of the single-linkage dendrogram, from its minimum spanning tree.

    The same levels as ``scipy.cluster.hierarchy`` (single linkage, cut with
    ``fcluster(criterion="distance")``), without importing it: that import costs
    every process of a probe about half a second of CPU between its phases.
    """
    a, b = _minimum_spanning_tree(dist)
    return tree_levels(a, b, dist[a, b], dist.shape[0], gap)


def tree_levels(
    a: NDArray[np.int64], b: NDArray[np.int64], w: NDArray[np.float64], n: int, gap: float
) -> list[NDArray[np.int64]]:
    """The single-linkage levels of a spanning tree given by its edges, finest first.

    ``(a[k], b[k])`` joins two of the ``n`` items at height ``w[k]``. The
    heights are sorted; wherever the next is at least ``gap`` times the
    previous (zero heights count as ``1e-12`` times the largest), the
    components of the edges below the cut are a level, kept when it has more
    than one and fewer than ``n`` groups. For the minimum spanning tree of a
    distance matrix this is the cut rule of :func:`infer_hierarchy` (single
    linkage); any tree whose edges are the merge heights of a hierarchy --
    one edge per merge -- gives that hierarchy's levels.

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt.probe.hierarchy import tree_levels
    >>> a, b = np.array([0, 2, 0]), np.array([1, 3, 2])
    >>> [lv.tolist() for lv in tree_levels(a, b, np.array([1.0, 1.1, 9.0]), 4, 1.5)]
    [[0, 0, 1, 1]]
    """
    order = np.argsort(w, kind="stable")
    a, b, h = a[order], b[order], np.asarray(w, dtype=np.float64)[order]
    if h.size == 0:
        return []
    floor = 1e-12 * max(float(h[-1]), 1e-300)
    parent = np.arange(n, dtype=np.int64)

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    out = []
    for k in range(h.size):
        ra, rb = root(int(a[k])), root(int(b[k]))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
        if k >= h.size - 1:
            break
        lo, hi = max(float(h[k]), floor), float(h[k + 1])
        if hi >= gap * lo:
            lab = parent.copy()
            while True:  # pointer jumping to every node's root
                up = lab[lab]
                if np.array_equal(up, lab):
                    break
                lab = up
            if 1 < np.unique(lab).size < n:
                out.append(_relabel(lab))
    return out


def _levels_of(dist: NDArray[np.float64], gap: float, linkage: str) -> list[NDArray[np.int64]]:
    """Every cut of one distance matrix's dendrogram at a gap in merge height.

    Average linkage comes from :func:`rankopt._linkage.average_linkage`
    (SciPy's merges, without importing ``scipy.cluster``); each merge becomes an
    edge between one leaf of each of its two clusters at the merge's height
    (heights made non-decreasing), and :func:`tree_levels` cuts that tree by the
    same rule as single linkage's minimum spanning tree: the levels are the cuts
    ``fcluster(criterion="distance")`` makes at the geometric mean of two merge
    heights ``gap`` apart.
    """
    if linkage == "single":
        return _single_levels(dist, gap)
    from rankopt._linkage import average_linkage

    n = dist.shape[0]
    z = average_linkage(dist)
    leaf = np.empty(2 * n - 1, dtype=np.int64)  # one leaf of every cluster
    leaf[:n] = np.arange(n)
    a = np.empty(n - 1, dtype=np.int64)
    b = np.empty(n - 1, dtype=np.int64)
    for k in range(n - 1):
        a[k], b[k] = leaf[int(z[k, 0])], leaf[int(z[k, 1])]
        leaf[n + k] = a[k]
    return tree_levels(a, b, np.maximum.accumulate(z[:, 2]), n, gap)


def infer_hierarchy(
    latency: ArrayLike | None = None,
    bandwidth: ArrayLike | None = None,
    *,
    hosts: Sequence[str] | None = None,
    linkage: Linkage = "average",
    gap: float = DEFAULT_GAP,
) -> list[NDArray[np.int64]]:
    """Group labels per level of the network hierarchy, finest level first.

    Parameters
    ----------
    latency : array_like (n, n), optional
        One-way latency (s).
    bandwidth : array_like (n, n), optional
        Pair bandwidth (bytes/s), positive off the diagonal; clustered as its
        inverse (s/byte), so racks that differ only in bandwidth are found.
    hosts : sequence of str, optional
        Host name of every process. Processes of one host always share a
        group, and the host level is always returned first.
    linkage : {"average", "single"}
        Distance between two groups. ``"average"``: the mean over their
        member pairs, directions averaged -- best when errors go both ways.
        ``"single"``: their closest pair in the better direction (the
        *largest* bandwidth, the *smallest* latency) -- for probed matrices,
        where interference only ever lowers a measured bandwidth or raises a
        measured latency (a probe's concurrent transfers that shared an
        uplink), so one unaffected pair per pair of groups is enough.
    gap : float
        Cut rule: sort the merge heights of the dendrogram; wherever the next
        height is at least ``gap`` times the previous one, cut between them
        (at their geometric mean). Each cut that gives more than one and
        fewer than n groups is a level.

    Returns
    -------
    list of ndarray of int64, shape (n,)
        One label array per level (labels 0..G-1 in order of first
        appearance), finest first, each level nested in the next. The whole
        network (one group) is never a level. Without ``hosts`` single
        processes are no level either, and a flat network gives ``[]``; with
        ``hosts``, ``levels[0]`` labels the hosts, always (even when every
        process has its own host, or all share one).

    Raises
    ------
    RankoptInputError
        If neither matrix is given, a matrix is invalid (not square, fewer
        than 2 processes, not finite, negative, a zero bandwidth), the two
        shapes differ, ``hosts`` does not name one host per process or
        holds a name :func:`rankopt._validation.check_host_name` refuses,
        ``linkage`` is unknown or ``gap`` is not greater than 1.

    See Also
    --------
    rankopt.probe._topology.infer_link_levels : the probe's call, from latency.
    rankopt.testbed.hierarchy.infer_bandwidth_levels : the testbed's call, from
        probed bandwidth.

    Notes
    -----
    The dendrogram of each matrix is built over the processes (single
    linkage: its minimum spanning tree; average: SciPy's merges, computed by
    :mod:`rankopt._linkage`); with ``hosts``, two processes of one host are at
    distance 0, so hosts merge first. Zero merge heights count as ``1e-12``
    times the largest. Noise within a level must stay well below the ratio
    between levels (``gap``); a few congested machines can add a level of
    their own. With ``"single"``, one pair measured *closer* than it is joins
    two groups.

    With both matrices, the levels found in each are pooled, sorted by
    number of groups, made nested (each level is intersected with every
    coarser one) and deduplicated. Cost: :math:`O(n^2)` memory and the
    linkage's :math:`O(n^2)` to :math:`O(n^2 \\log n)` time per matrix.

    Examples
    --------
    Two racks of two hosts that differ only in bandwidth:

    >>> import numpy as np
    >>> rack = np.array([0, 1, 0, 1])
    >>> bw = np.where(rack[:, None] == rack[None, :], 10e9, 1e9)
    >>> infer_hierarchy(bandwidth=bw)
    [array([0, 1, 0, 1])]

    The same racks, three processes each, probed with transfers that shared
    the rack uplinks: a third of the in-rack pairs were measured 5x low in
    both directions. Their group maximum shows the racks; averaging adds a
    false level that splits off the pairs that happened to share:

    >>> rack = np.arange(6) % 2
    >>> bw = np.where(rack[:, None] == rack[None, :], 10e9, 1e9)
    >>> bw[0, 2] = bw[2, 0] = bw[1, 3] = bw[3, 1] = 2e9
    >>> infer_hierarchy(bandwidth=bw, linkage="single")
    [array([0, 1, 0, 1, 0, 1])]
    >>> infer_hierarchy(bandwidth=bw)
    [array([0, 1, 2, 3, 0, 1]), array([0, 1, 0, 1, 0, 1])]

    Latency tiers above the hosts, two processes per host:

    >>> lat = np.full((6, 6), 90e-6)
    >>> lat[:4, :4] = 30e-6
    >>> lat[:2, :2] = lat[2:4, 2:4] = lat[4:, 4:] = 2e-6
    >>> infer_hierarchy(lat, hosts=["x", "x", "y", "y", "z", "z"])
    [array([0, 0, 1, 1, 2, 2]), array([0, 0, 0, 0, 1, 1])]
    """
    if latency is None and bandwidth is None:
        raise RankoptInputError("infer_hierarchy needs `latency`, `bandwidth` or both.")
    linkage = cast(Linkage, check_options("linkage", linkage, _LINKAGES))
    gap = check_positive(gap, "gap")
    if gap <= 1:
        raise RankoptInputError(f"`gap` must be greater than 1; got {gap!r} instead.")
    dists = []
    if latency is not None:
        dists.append(check_matrix(latency, "latency"))
    if bandwidth is not None:
        bw = check_matrix(bandwidth, "bandwidth", allow_zero=False)
        if dists and bw.shape != dists[0].shape:
            raise RankoptInputError(
                f"`bandwidth` must have the shape of `latency` {dists[0].shape}; got {bw.shape}."
            )
        np.fill_diagonal(bw, 1.0)
        inv = 1.0 / bw
        np.fill_diagonal(inv, 0.0)
        dists.append(inv)
    n = dists[0].shape[0]
    start = None if hosts is None else _check_hosts(hosts, n)
    pooled = []
    for d in dists:
        d = np.minimum(d, d.T) if linkage == "single" else 0.5 * (d + d.T)
        if start is not None:
            d[start[:, None] == start[None, :]] = 0.0
        if n > 2:
            pooled.extend(_levels_of(d, gap, linkage))
    out = _nest(pooled, n)
    if start is not None:
        out = [start, *(lv for lv in out if not np.array_equal(lv, start))]
    logger.debug("infer_hierarchy: levels of %s groups", [int(lv.max()) + 1 for lv in out])
    return out


def nest_levels(pooled: Sequence[NDArray[np.int64]], n: int) -> list[NDArray[np.int64]]:
    """Levels pooled from several sources, sorted, made nested and deduplicated.

    Finest first; each level is intersected with every coarser one; levels
    of ``n`` groups (every item alone) are dropped. The pooling rule of
    :func:`infer_hierarchy` with both matrices.

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt.probe.hierarchy import nest_levels
    >>> [lv.tolist() for lv in nest_levels([np.array([0, 0, 1, 1]), np.array([0, 1, 2, 2])], 4)]
    [[0, 1, 2, 2], [0, 0, 1, 1]]
    """
    return _nest(list(pooled), n)


def _nest(pooled: list[NDArray[np.int64]], n: int) -> list[NDArray[np.int64]]:
    """Levels pooled from several matrices, sorted, made nested and deduplicated."""
    pooled = sorted(pooled, key=lambda lab: -int(lab.max()))  # finest (most groups) first
    out: list[NDArray[np.int64]] = []
    for lab in reversed(pooled):  # coarsest first: refine each by all coarser levels
        cur = _relabel(lab) if not out else _meet(lab, out[-1])
        if not any(np.array_equal(cur, o) for o in out) and cur.max() + 1 < n:
            out.append(cur)
    out.reverse()
    return out


def host_block_min(
    matrix: NDArray[np.float64], host_of: NDArray[np.int64], *, chunk_bytes: int = 1 << 24
) -> NDArray[np.float64]:
    """``out[g, h]``: the smallest entry between hosts ``g`` and ``h``, either direction.

    The host-level distance of single linkage: processes of one host are
    merged first, and two hosts then meet at their closest pair in the
    better direction. The diagonal is 0.

    Parameters
    ----------
    matrix : ndarray, shape (n, n)
        Process-level distances (latency), read, never copied whole.
    host_of : ndarray of int, shape (n,)
        Host label (0..H-1) of every process.
    chunk_bytes : int
        Rows are reduced a block at a time, so the working memory beyond the
        ``(H, H)`` result is about this many bytes.

    Returns
    -------
    ndarray, shape (H, H)

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt.probe.hierarchy import host_block_min
    >>> m = np.array([[0, 1, 7, 8], [1, 0, 6, 9], [5, 9, 0, 2], [9, 9, 2, 0.]])
    >>> host_block_min(m, np.array([0, 0, 1, 1])).tolist()
    [[0.0, 5.0], [5.0, 0.0]]
    """
    n = matrix.shape[0]
    n_hosts = int(host_of.max()) + 1 if n else 0
    order = np.argsort(host_of, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(host_of[order]) != 0])
    out = np.full((n_hosts, n_hosts), np.inf)
    rows = max(1, chunk_bytes // (8 * max(n, 1)))
    for i0 in range(0, n, rows):
        block = np.asarray(matrix[i0 : i0 + rows], dtype=np.float64)[:, order]
        reduced = np.minimum.reduceat(block, starts, axis=1)
        np.minimum.at(out, host_of[i0 : i0 + rows], reduced)
    out = np.minimum(out, out.T)
    np.fill_diagonal(out, 0.0)
    return out


def infer_host_hierarchy(
    host_of: NDArray[np.int64],
    host_latency: NDArray[np.float64] | None = None,
    host_bandwidth: NDArray[np.float64] | None = None,
    *,
    gap: float = DEFAULT_GAP,
) -> list[NDArray[np.int64]]:
    """:func:`infer_hierarchy` with single linkage and hosts, from host-level matrices.

    Parameters
    ----------
    host_of : ndarray of int, shape (n,)
        Host label (0..H-1, in order of first appearance) of every process.
    host_latency : ndarray, shape (H, H), optional
        Host-level latency: :func:`host_block_min` of the process matrix.
    host_bandwidth : ndarray, shape (H, H), optional
        Host-level bandwidth: the largest rate between two hosts, either
        direction (the process matrix's block maximum).

    Returns
    -------
    list of ndarray of int64, shape (n,)
        The same levels as ``infer_hierarchy(latency, bandwidth, hosts=...,
        linkage="single", gap=gap)`` on the process matrices, host level first:
        with processes of one host at distance 0, single linkage merges the
        hosts first and then works on the host-level distances alone, and the
        groups' order of first appearance is the same over hosts as over
        processes. Cost :math:`O(H^2)` time and memory per matrix, never
        :math:`O(n^2)`.

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt.probe.hierarchy import infer_host_hierarchy
    >>> lat = np.array([[0, 2, 9], [2, 0, 9], [9, 9, 0.]]) * 1e-5
    >>> [lv.tolist() for lv in infer_host_hierarchy(np.array([0, 0, 1, 1, 2, 2]), lat)]
    [[0, 0, 1, 1, 2, 2], [0, 0, 0, 0, 1, 1]]
    """
    host_of = np.asarray(host_of, dtype=np.int64)
    n_hosts = int(host_of.max()) + 1 if host_of.size else 0
    dists = []
    if host_latency is not None:
        dists.append(np.asarray(host_latency, dtype=np.float64))
    if host_bandwidth is not None:
        bw = np.maximum(host_bandwidth, np.asarray(host_bandwidth).T).astype(np.float64)
        np.fill_diagonal(bw, 1.0)
        inv = 1.0 / bw
        np.fill_diagonal(inv, 0.0)
        dists.append(inv)
    pooled: list[NDArray[np.int64]] = []
    for d in dists:
        d = np.minimum(d, d.T)
        np.fill_diagonal(d, 0.0)
        if n_hosts > 2:
            pooled.extend(_single_levels(d, gap))
    levels = [lv[host_of] for lv in _nest(pooled, n_hosts)]
    return [host_of.copy(), *(lv for lv in levels if not np.array_equal(lv, host_of))]


def _check_hosts(hosts: Sequence[str], n: int) -> NDArray[np.int64]:
    """Host labels of ``hosts``, after checking that it names one host per process."""
    return host_labels(check_host_names(hosts, n, "hosts"))


def block_max(matrix: NDArray[np.float64], labels: NDArray[np.int64]) -> NDArray[np.float64]:
    """``out[g, h]``: the largest entry of ``matrix`` between groups ``g`` and ``h``.

    Labels must be 0..G-1. Cost: :math:`O(n^2)` (two ``maximum.reduceat``).

    Examples
    --------
    >>> m = np.arange(16.0).reshape(4, 4)
    >>> block_max(m, np.array([0, 1, 0, 1]))
    array([[10., 11.],
           [14., 15.]])
    """
    idx = np.argsort(labels, kind="stable")
    lab = labels[idx]
    starts = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
    m = matrix[np.ix_(idx, idx)]
    return np.maximum.reduceat(np.maximum.reduceat(m, starts, axis=0), starts, axis=1)


def block_runner_up(matrix: NDArray[np.float64], labels: NDArray[np.int64]) -> NDArray[np.float64]:
    """``out[g, h]``: the second largest entry of ``matrix`` from group ``g`` to ``h``.

    The largest where the block has one entry; ``nan`` for a block of one
    process to itself. Labels must be 0..G-1; the diagonal of ``matrix`` is
    left out. Cost: one compiled pass over the ``n^2`` entries (a sort with NaN among them).

    Examples
    --------
    >>> m = np.array([[0, 1, 5, 7], [2, 0, 6, 9], [3, 4, 0, 8], [1, 1, 1, 0.]])
    >>> block_runner_up(m, np.array([0, 0, 1, 1]))
    array([[1., 7.],
           [3., 1.]])
    """
    n = labels.size
    g_count = int(labels.max()) + 1
    vals = np.ascontiguousarray(matrix, dtype=np.float64)
    if np.isnan(vals[~np.eye(n, dtype=bool)]).any() or int(labels.min()) < 0:
        return _runner_up_sorted(vals, labels, g_count)
    from rankopt._build_check import require_extension

    blocks = require_extension("rankopt.probe._blocks")  # one compiled pass over the entries
    top, second, count = blocks.block_top_two(
        vals, np.ascontiguousarray(labels, dtype=np.int64), g_count
    )
    out = np.where(count >= 2, second, top)
    out[count == 0] = np.nan
    return out


def _runner_up_sorted(
    vals: NDArray[np.float64], labels: NDArray[np.int64], g_count: int
) -> NDArray[np.float64]:
    """:func:`block_runner_up` by one sort of the ``n^2`` entries (NaN sorts as the largest)."""
    n = labels.size
    off = ~np.eye(n, dtype=bool)
    key = (labels[:, None] * g_count + labels[None, :])[off]
    flat = vals[off]
    order = np.lexsort((flat, key))
    key, flat = key[order], flat[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    ends = np.r_[starts[1:], key.size]
    out = np.full(g_count * g_count, np.nan)
    out[key[starts]] = flat[np.maximum(ends - 2, starts)]
    return out.reshape(g_count, g_count)


def infer_uplinks(bandwidth: ArrayLike, levels: Sequence[ArrayLike]) -> list[NDArray[np.float64]]:
    """Uplink capacity of every group per level and direction (bytes/s), from pair bandwidth.

    A single transfer from group ``g`` to a group ``h`` that shares its
    parent at the next level leaves through ``g``'s uplink and enters through
    ``h``'s, and crosses nothing slower, so it runs at most at the smaller of
    the two. For group ``g`` of level ``k``: its capacity *out* is the best
    rate from ``g`` to any sibling (another group of ``k`` with the same
    parent at ``k + 1``; the whole network is the parent of the top level),
    its capacity *in* the best rate from any sibling into ``g``. Each
    direction is its own estimate: another tenant's traffic that loads one
    direction of one uplink shows as every transfer through that direction
    running slow, and neither the other direction nor the siblings outvote
    it. A group without a sibling shares its parent's uplink: it gets the
    estimate of the nearest ancestor that has siblings (the largest rate
    leaving, or entering, it when none has).

    Parameters
    ----------
    bandwidth : array_like (n, n)
        Pair bandwidth (bytes/s), ``bandwidth[i, j]`` from ``i`` to ``j``;
        the diagonal is ignored.
    levels : sequence of array_like (n,)
        Group labels per level, finest first, each nested in the next.

    Returns
    -------
    list of ndarray of float64
        ``out[k]``: the capacities of level ``k``'s groups, labelled 0..G-1
        in order of the sorted labels (the order :func:`rankopt.cost` reads
        ``uplink_bandwidth`` in): shape ``(G,)`` when every group's two
        directions came out equal (symmetric bandwidth), else ``(2, G)``,
        row 0 out of the group and row 1 into it.

    Notes
    -----
    Between two groups, the second best of their pairs' rates
    (:func:`block_runner_up`), not the mean nor a lower quantile, because
    a probe's transfers that ran side by side and shared a link only ever
    come out slower than the link (the all-pairs schedule puts most of a
    block's pairs in such slots when latency does not show the racks:
    on a quiet 250 Mbit/s uplink 2 of 12 pairs measured its 30 MB/s, the
    others 9-29), and not the best pair alone, which one transfer lucky in
    its timing sets (a pair at 20 MB/s through a way in loaded down to 11); the best over siblings, not their median, because a sibling
    whose own uplink is loaded is slow for a reason that is not ``g``'s.
    A pair is limited by the slowest link
    on its path, so the estimate is a lower bound on the uplink's capacity
    when hosts are slower than the uplink; that is the rate one transfer
    gets, which is what the contention model divides.

    Examples
    --------
    Two racks of two hosts: 100 inside a rack, 20 across.

    >>> bw = np.full((4, 4), 20.0)
    >>> bw[:2, :2] = bw[2:, 2:] = 100.0
    >>> hosts, racks = np.arange(4), np.array([0, 0, 1, 1])
    >>> [u.tolist() for u in infer_uplinks(bw, [hosts, racks])]
    [[100.0, 100.0, 100.0, 100.0], [20.0, 20.0]]

    Another tenant loads rack 0's uplink out of the rack: 8 left of 20.

    >>> bw[:2, 2:] = 8.0
    >>> infer_uplinks(bw, [hosts, racks])[1].tolist()
    [[8.0, 20.0], [20.0, 8.0]]
    """
    bw = np.array(bandwidth, dtype=np.float64)
    n = bw.shape[0]
    np.fill_diagonal(bw, 0.0)
    labs = [np.unique(np.asarray(lv), return_inverse=True)[1].reshape(-1) for lv in levels]
    est: list[NDArray[np.float64]] = []  # (2, G) per level: out, in
    for k, lab in enumerate(labs):
        parent = labs[k + 1] if k + 1 < len(labs) else np.zeros(n, dtype=np.int64)
        g_count = int(lab.max()) + 1
        m = block_runner_up(bw, lab)
        parent_of = np.zeros(g_count, dtype=np.int64)
        parent_of[lab] = parent
        sib = (parent_of[:, None] == parent_of[None, :]) & ~np.eye(g_count, dtype=bool)
        both = np.full((2, g_count), np.nan)
        has = sib.any(axis=1)
        both[0, has] = np.where(sib, m, -np.inf).max(axis=1)[has]
        both[1, has] = np.where(sib, m.T, -np.inf).max(axis=1)[has]
        est.append(both)
    # groups without siblings: the nearest ancestor's estimate
    for k in range(len(labs) - 1, -1, -1):
        for g in np.flatnonzero(np.isnan(est[k][0])).tolist():
            members = labs[k] == g
            for d in range(2):
                value = np.nan
                for j in range(k + 1, len(labs)):
                    value = est[j][d, int(labs[j][members][0])]
                    if np.isfinite(value):
                        break
                if not np.isfinite(value):
                    cross = (
                        bw[np.ix_(members, ~members)] if d == 0 else bw[np.ix_(~members, members)]
                    )
                    value = float(cross.max()) if cross.size else np.inf
                est[k][d, g] = value
    return [e[0].copy() if np.array_equal(e[0], e[1]) else e for e in est]
