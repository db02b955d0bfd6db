"""Suspected link hierarchy, for scheduling the bandwidth phase of a probe.

The probe does not know the network. It knows the host of every process and,
after the latency phase, the latency matrix. From these it builds a nested
hierarchy of groups (hosts, then clusters of hosts with clearly lower latency
among themselves than to the rest: racks, pods) and assumes that every group
reaches the rest of the network through one uplink. Transfers that leave the
same group share that uplink; transfers inside one host share its bus.

Latency may not show a hierarchy at all (links that differ in rate but not in
delay). So the top of the inferred hierarchy is assumed to be joined by one
shared core: transfers between different top-level groups -- between any two
hosts when no tier was found -- share it too. The schedule is then exact
whatever latency failed to show, at the price of running those transfers one
at a time.

Over-splitting only makes the bandwidth schedule more cautious (slower, never
wrong), so the inference splits whenever the latency levels are clearly apart.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["host_labels", "infer_link_levels", "pair_links"]

#: Two latency levels are distinct tiers when they differ by at least this factor.
TIER_RATIO = 1.5

Link = tuple[int, int, int]  # (level, group, kind) -- kind 0: uplink, 1: host bus


def host_labels(hosts: Sequence[str]) -> NDArray[np.int64]:
    """Label every process with the index of its host, in order of first appearance.

    Examples
    --------
    >>> from rankopt.probe._topology import host_labels
    >>> host_labels(["b", "a", "b", "c"])
    array([0, 1, 0, 2])
    """
    index: dict[str, int] = {}
    return np.array([index.setdefault(h, len(index)) for h in hosts], dtype=np.int64)


def infer_link_levels(
    latency: NDArray[np.float64], hosts: Sequence[str], *, ratio: float = TIER_RATIO
) -> list[NDArray[np.int64]]:
    """Nested group labels per level, finest (hosts) first.

    Parameters
    ----------
    latency : ndarray, shape (n, n)
        One-way latencies in seconds.
    hosts : sequence of str
        Host name of every process.
    ratio : float
        Factor between consecutive sorted host-to-host latencies that starts a
        new tier.

    Returns
    -------
    list of ndarray of int64, shape (n,)
        ``levels[0]`` labels hosts; each further level labels clusters of the
        previous level's groups. The whole network (one group) is not a level.

    Notes
    -----
    Host-to-host latency is the median over the process pairs of the two
    hosts, symmetrised by the maximum of both directions. Tier boundaries are
    the gaps of at least ``ratio`` in the sorted host-to-host latencies; each
    boundary cuts a complete-linkage dendrogram, which yields nested clusters
    whose members are all closer than the boundary.

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt.probe._topology import infer_link_levels
    >>> near, far = 1e-5, 1e-4
    >>> lat = np.full((4, 4), far)
    >>> lat[:2, :2] = lat[2:, 2:] = near
    >>> [lv.tolist() for lv in infer_link_levels(lat, ["h0", "h1", "h2", "h3"])]
    [[0, 1, 2, 3], [0, 0, 1, 1]]
    """
    hl = host_labels(hosts)
    levels = [hl]
    k = int(hl.max()) + 1 if hl.size else 0
    if k <= 2:
        return levels
    lat = np.asarray(latency, dtype=np.float64)
    h = np.zeros((k, k))
    for p in range(k):
        rows = hl == p
        for q in range(p + 1, k):
            cols = hl == q
            h[p, q] = h[q, p] = max(
                float(np.median(lat[np.ix_(rows, cols)])),
                float(np.median(lat[np.ix_(cols, rows)])),
            )
    values = np.unique(h[np.triu_indices(k, 1)])
    values = values[values > 0]
    if values.size < 2:
        return levels
    gaps = np.nonzero(values[1:] >= ratio * values[:-1])[0]
    if gaps.size == 0:
        return levels
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    tree = linkage(squareform(h, checks=False), method="complete")
    previous = np.arange(k)
    for g in gaps:
        threshold = float(np.sqrt(values[g] * values[g + 1]))
        clusters = fcluster(tree, t=threshold, criterion="distance").astype(np.int64) - 1
        if np.unique(clusters).size in (1, np.unique(previous).size):
            continue
        previous = clusters
        levels.append(host_labels([str(c) for c in clusters[hl]]))
    return levels


def pair_links(levels: Sequence[NDArray[np.int64]], a: int, b: int) -> list[Link]:
    """The suspected links that a transfer between processes ``a`` and ``b`` uses.

    The uplink of every group that contains exactly one of ``a`` and ``b``,
    the shared core when they are in different top-level groups, and the host
    bus when both run on one host.

    Examples
    --------
    Two racks (level 1) of two hosts (level 0):

    >>> import numpy as np
    >>> from rankopt.probe._topology import pair_links
    >>> levels = [np.array([0, 1, 2, 3]), np.array([0, 0, 1, 1])]
    >>> pair_links(levels, 0, 1)
    [(0, 0, 0), (0, 1, 0)]
    >>> pair_links(levels, 0, 2)
    [(0, 0, 0), (0, 2, 0), (1, 0, 0), (1, 1, 0), (2, 0, 0)]
    """
    links: list[Link] = []
    if levels[0][a] == levels[0][b]:
        links.append((0, int(levels[0][a]), 1))
        return links
    for level, labels in enumerate(levels):
        ga, gb = int(labels[a]), int(labels[b])
        if ga != gb:
            links.append((level, ga, 0))
            links.append((level, gb, 0))
    if levels[-1][a] != levels[-1][b]:
        links.append((len(levels), 0, 0))  # the core joining the top-level groups
    return links
