"""Infer the network hierarchy (hosts, racks, pods) from measured matrices.

Contents
--------
infer_hierarchy
    Nested group labels, finest level first, from latency and/or bandwidth,
    by average-linkage clustering (``scipy.cluster.hierarchy``) cut at the
    large gaps between merge heights.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._validation import RankoptInputError, check_matrix, check_positive

__all__ = ["infer_hierarchy", "DEFAULT_GAP"]

#: A level boundary is a jump by at least this factor between consecutive merge heights.
DEFAULT_GAP = 1.5


def _levels_of(dist: NDArray[np.float64], gap: float) -> list[NDArray[np.int64]]:
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    n = dist.shape[0]
    z = linkage(squareform(dist, checks=False), method="average")
    h = np.maximum.accumulate(z[:, 2])
    floor = 1e-12 * max(float(h[-1]), 1e-300)
    out = []
    for k in range(n - 2):
        lo, hi = max(float(h[k]), floor), float(h[k + 1])
        if hi >= gap * lo:
            cut = math.sqrt(lo * hi)
            lab = fcluster(z, cut, criterion="distance").astype(np.int64) - 1
            if 1 < lab.max() + 1 < n:
                out.append(lab)
    return out


def _relabel(lab: NDArray[np.int64]) -> NDArray[np.int64]:
    """Labels 0..G-1 in order of first appearance."""
    _, first, inv = np.unique(lab, return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[inv.reshape(-1)].astype(np.int64)


def _meet(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
    return _relabel(a * (int(b.max()) + 1) + b)


def infer_hierarchy(
    latency: ArrayLike | None = None,
    bandwidth: ArrayLike | None = None,
    *,
    gap: float = DEFAULT_GAP,
) -> list[NDArray[np.int64]]:
    """Group labels per level of the network hierarchy, finest level first.

    Parameters
    ----------
    latency : array_like (n, n), optional
        One-way latency (s). Directions are averaged.
    bandwidth : array_like (n, n), optional
        Pair bandwidth (bytes/s); clustered as its inverse (s/byte), so
        racks that differ only in bandwidth are found.
    gap : float
        Cut rule: sort the merge heights of an average-linkage dendrogram;
        wherever the next height is at least ``gap`` times the previous
        one, cut between them (at their geometric mean). Each cut that gives
        more than one and fewer than n groups is a level.

    Returns
    -------
    list of ndarray of int64
        One label array per level (labels 0..G-1 in order of first
        appearance), finest first, each level nested in the next. Empty when
        no gap is found (a flat network).

    Notes
    -----
    With both matrices, the levels found in each are pooled, sorted by
    number of groups, made nested (each level is intersected with every
    coarser one) and deduplicated. Noise within a level must stay well
    below the ratio between levels (``gap``); a few congested machines can
    add a level of their own.

    Examples
    --------
    Two racks of two hosts that differ only in bandwidth:

    >>> import numpy as np
    >>> rack = np.array([0, 1, 0, 1])
    >>> bw = np.where(rack[:, None] == rack[None, :], 10e9, 1e9)
    >>> infer_hierarchy(bandwidth=bw)
    [array([0, 1, 0, 1])]
    """
    if latency is None and bandwidth is None:
        raise RankoptInputError("infer_hierarchy needs `latency`, `bandwidth` or both.")
    gap = check_positive(gap, "gap")
    if gap <= 1:
        raise RankoptInputError(f"`gap` must be greater than 1; got {gap!r} instead.")
    dists = []
    n = None
    if latency is not None:
        lat = check_matrix(latency, "latency")
        n = lat.shape[0]
        dists.append(0.5 * (lat + lat.T))
    if bandwidth is not None:
        bw = check_matrix(bandwidth, "bandwidth", allow_zero=False)
        if n is not None and bw.shape[0] != n:
            raise RankoptInputError(
                f"`bandwidth` must have the shape of `latency` {(n, n)}; got {bw.shape}."
            )
        np.fill_diagonal(bw, 1.0)
        inv = 0.5 * (1.0 / bw + 1.0 / bw.T)
        np.fill_diagonal(inv, 0.0)
        dists.append(inv)
    pooled = [lab for d in dists if d.shape[0] > 2 for lab in _levels_of(d, gap)]
    pooled.sort(key=lambda lab: -int(lab.max()))  # finest (most groups) first
    out: list[NDArray[np.int64]] = []
    for lab in reversed(pooled):  # coarsest first: refine each by all coarser levels
        cur = _relabel(lab) if not out else _meet(lab, out[-1])
        if not any(np.array_equal(cur, o) for o in out) and cur.max() + 1 < len(cur):
            out.append(cur)
    out.reverse()
    return out
