"""Racks and pods from a probe's bandwidth matrix.

Contents
--------
infer_bandwidth_levels
    Nested groups from pair bandwidths, robust to probe transfers that shared
    an uplink (which only ever *lower* a measured bandwidth): a thin call of
    :func:`rankopt.infer_hierarchy`.
probe_network
    Deprecated alias: the model keyword arguments of
    :meth:`rankopt.Network.from_measurement`, the core's one inference of
    hierarchy and uplinks, which every entry point (and the testbed) uses.

With one rank per host the hierarchy of the testbed is invisible to latency
(a few microseconds apart, below the noise of a busy machine) but plain in
bandwidth.  A probe that runs several transfers at once across an uplink it
does not know of measures some pairs at a fraction of their rate, so single
entries spread over a continuum; the group-to-group *maximum*, which
:func:`rankopt.infer_hierarchy` uses, does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt.probe.hierarchy import DEFAULT_GAP, infer_hierarchy

__all__ = ["infer_bandwidth_levels", "probe_network"]


def infer_bandwidth_levels(
    bandwidth: ArrayLike, hosts: Sequence[str], *, ratio: float = DEFAULT_GAP
) -> list[NDArray[np.int64]]:
    """Nested group labels per level, finest (hosts) first, from probed bandwidth.

    ``infer_hierarchy(bandwidth=bandwidth, hosts=hosts, linkage="single",
    gap=ratio)``: the host level, then every bandwidth tier above it, merging
    groups by their best pair bandwidth (the group maximum).

    Parameters
    ----------
    bandwidth : array_like, shape (n, n)
        Pair bandwidth in bytes/s (diagonal ignored).
    hosts : sequence of str
        Host of every process; processes of one host form the finest level.
    ratio : float
        Minimum factor between the bandwidth tiers that separates two levels.

    Returns
    -------
    list of ndarray of int64
        ``levels[0]`` labels hosts; each further level merges groups of the
        previous one whose best pair bandwidth lies in the next tier.

    See Also
    --------
    rankopt.infer_hierarchy : the rule, its options and its errors.

    Examples
    --------
    >>> import numpy as np
    >>> bw = np.full((4, 4), 20e6)
    >>> bw[:2, :2] = bw[2:, 2:] = 120e6
    >>> bw[0, 1] = 60e6  # measured while sharing a link
    >>> [g.tolist() for g in infer_bandwidth_levels(bw, ["a", "b", "c", "d"])]
    [[0, 1, 2, 3], [0, 0, 1, 1]]
    """
    return infer_hierarchy(bandwidth=bandwidth, hosts=hosts, linkage="single", gap=ratio)


def probe_network(measurement: Any, *, ratio: float = DEFAULT_GAP) -> dict[str, Any]:
    """Deprecated: use :meth:`rankopt.Network.from_measurement`.

    The keyword arguments for ``rankopt.cost`` / ``rankopt.solve`` that the
    network a probe measured stands for (``latency``, ``bandwidth``,
    ``groups`` and ``uplink_bandwidth``), read from
    ``rankopt.Network.from_measurement(measurement)``: the one hierarchy
    and uplink inference of the core.  ``ratio`` is ignored.

    Examples
    --------
    >>> import numpy as np, warnings
    >>> from types import SimpleNamespace
    >>> bw = np.full((4, 4), 20e6)
    >>> bw[:2, :2] = bw[2:, 2:] = 120e6
    >>> m = SimpleNamespace(latency=np.zeros((4, 4)), bandwidth=bw, hosts=("a", "b", "c", "d"))
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     net = probe_network(m)
    >>> [g.tolist() for g in net["groups"]]
    [[0, 1, 2, 3], [0, 0, 1, 1]]
    """
    import warnings

    from rankopt.testbed.fidelity import measured_network

    warnings.warn(
        "rankopt.testbed.hierarchy.probe_network is deprecated; pass "
        "rankopt.Network.from_measurement(measurement) to rankopt.solve / rankopt.cost.",
        DeprecationWarning,
        stacklevel=2,
    )
    return measured_network(measurement)
