"""Suspected link hierarchy, for scheduling the bandwidth phase of a probe.

The probe does not know the network. It knows the host of every process and,
after the latency phase, the latency matrix. From these
:func:`rankopt.infer_hierarchy` builds a nested hierarchy of groups (hosts,
then clusters of hosts with clearly lower latency among themselves than to the
rest: racks, pods), and the probe assumes that every group reaches the rest of
the network through one uplink. Transfers that leave the same group share that
uplink; transfers inside one host share its bus.

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
from numpy.typing import ArrayLike, NDArray

from rankopt.probe.hierarchy import DEFAULT_GAP, host_labels, infer_hierarchy

__all__ = ["host_labels", "infer_link_levels", "pair_links"]

Link = tuple[int, int, int]  # (level, group, kind) -- kind 0: uplink, 1: host bus


def infer_link_levels(
    latency: ArrayLike, hosts: Sequence[str], *, ratio: float = DEFAULT_GAP
) -> list[NDArray[np.int64]]:
    """Nested group labels per level, finest (hosts) first, from latency.

    ``infer_hierarchy(latency, hosts=hosts, linkage="single", gap=ratio)``:
    the host level, then every latency tier above it. Groups are joined by
    their closest pair, since a busy machine only ever makes a measured
    latency larger.

    Parameters
    ----------
    latency : array_like, shape (n, n)
        One-way latencies in seconds.
    hosts : sequence of str
        Host name of every process.
    ratio : float
        Factor between consecutive latency tiers that starts a new level.

    Returns
    -------
    list of ndarray of int64, shape (n,)
        ``levels[0]`` labels hosts; each further level labels clusters of the
        previous level's groups. The whole network (one group) is not a level.

    See Also
    --------
    rankopt.infer_hierarchy : the rule, its options and its errors.

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
    return infer_hierarchy(latency, hosts=hosts, linkage="single", gap=ratio)


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
