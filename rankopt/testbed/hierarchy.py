"""Racks and pods from a probe's bandwidth matrix.

Contents
--------
infer_bandwidth_levels
    Nested groups from pair bandwidths, robust to probe transfers that shared
    an uplink (which only ever *lower* a measured bandwidth).
probe_network
    Keyword arguments for ``rankopt.solve`` / ``rankopt.cost`` (latency,
    bandwidth, groups, uplink_bandwidth) from a Measurement.

With one rank per host the hierarchy of the testbed is invisible to latency
(a few microseconds apart, below the noise of a busy machine) but plain in
bandwidth.  A probe that runs several transfers at once across an uplink it
does not know of measures some pairs at a fraction of their rate, so single
entries spread over a continuum; the group-to-group *maximum* does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["infer_bandwidth_levels", "probe_network"]

#: Consecutive bandwidth tiers differ by at least this factor.
TIER_RATIO = 1.5


def infer_bandwidth_levels(
    bandwidth: NDArray[np.float64], hosts: Sequence[str], *, ratio: float = TIER_RATIO
) -> list[NDArray[np.int64]]:
    """Nested group labels per level, finest (hosts) first.

    Parameters
    ----------
    bandwidth : ndarray, shape (n, n)
        Pair bandwidth in bytes/s (diagonal ignored).
    hosts : sequence of str
        Host of every process; processes of one host form the finest level.
    ratio : float
        Minimum factor between the bandwidth tiers that separates two levels.

    Returns
    -------
    list of ndarray of int64
        ``levels[0]`` labels hosts; each further level merges the groups of
        the previous one whose best pair bandwidth lies in the top tier.

    Notes
    -----
    Repeatedly: the group-to-group bandwidth is the maximum over member pairs
    and both directions; its distinct values are sorted and the highest gap
    of at least ``ratio`` between neighbours splits them into a fast tier and
    the rest; groups joined by fast-tier links merge (connected components).
    Stops when no gap qualifies or one group is left.

    Examples
    --------
    >>> import numpy as np
    >>> bw = np.full((4, 4), 20e6)
    >>> bw[:2, :2] = bw[2:, 2:] = 120e6
    >>> bw[0, 1] = 60e6  # measured while sharing a link
    >>> [g.tolist() for g in infer_bandwidth_levels(bw, ["a", "b", "c", "d"])]
    [[0, 1, 2, 3], [0, 0, 1, 1]]
    """
    from scipy.sparse.csgraph import connected_components

    from rankopt.probe._topology import host_labels

    bw = np.asarray(bandwidth, dtype=np.float64)
    labels = host_labels(list(hosts))
    levels = [labels]
    while True:
        k = int(labels.max()) + 1
        if k <= 2:
            return levels
        g = np.zeros((k, k))
        for a in range(k):
            for b in range(a + 1, k):
                block = bw[np.ix_(labels == a, labels == b)]
                block_t = bw[np.ix_(labels == b, labels == a)]
                g[a, b] = g[b, a] = max(block.max(initial=0.0), block_t.max(initial=0.0))
        values = np.unique(g[np.triu_indices(k, 1)])
        values = values[values > 0]
        if values.size < 2:
            return levels
        gaps = np.nonzero(values[1:] >= ratio * values[:-1])[0]
        if gaps.size == 0:
            return levels
        i = int(gaps[-1])  # the fastest tier merges first
        threshold = float(np.sqrt(values[i] * values[i + 1]))
        n_comp, comp = connected_components(g >= threshold, directed=False)
        if n_comp in (1, k):
            return levels
        labels = host_labels([str(c) for c in comp[labels]])
        levels.append(labels)


def probe_network(measurement: Any, *, ratio: float = TIER_RATIO) -> dict[str, Any]:
    """The network as rankopt's probe sees it, with racks/pods inferred from bandwidth.

    Returns ``latency``, ``bandwidth``, ``groups`` (finest first, hosts
    included) and ``uplink_bandwidth`` (per level: the median over
    group pairs of the best pair bandwidth between two groups that are
    joined only at the next level) as keyword arguments for
    ``rankopt.cost`` / ``rankopt.solve``; only ``latency`` without a
    bandwidth matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> bw = np.full((4, 4), 20e6)
    >>> bw[:2, :2] = bw[2:, 2:] = 120e6
    >>> m = SimpleNamespace(latency=np.zeros((4, 4)), bandwidth=bw, hosts=("a", "b", "c", "d"))
    >>> net = probe_network(m)
    >>> [g.tolist() for g in net["groups"]], net["uplink_bandwidth"]
    ([[0, 1, 2, 3], [0, 0, 1, 1]], [120000000.0, 20000000.0])
    """
    net: dict[str, Any] = {"latency": np.asarray(measurement.latency, dtype=np.float64)}
    bw = getattr(measurement, "bandwidth", None)
    if bw is None:
        return net
    bw = np.asarray(bw, dtype=np.float64)
    net["bandwidth"] = bw
    levels = infer_bandwidth_levels(bw, list(measurement.hosts), ratio=ratio)
    best = np.maximum(bw, bw.T)
    uplinks = []
    for k, lab in enumerate(levels):
        parent = levels[k + 1] if k + 1 < len(levels) else np.zeros_like(lab)
        vals = []
        for a in np.unique(lab):
            for b in np.unique(lab):
                ia, ib = lab == a, lab == b
                if a < b and parent[ia][0] == parent[ib][0]:
                    vals.append(best[np.ix_(ia, ib)].max())
        uplinks.append(float(np.median(vals)) if vals else float(np.median(best)))
    net["groups"] = levels
    net["uplink_bandwidth"] = uplinks
    return net
