"""How transfers that share an uplink split it: the probe's sharing test.

A collective's step waits for its slowest transfer. When ``K`` transfers of
a step cross one uplink, an even split gives each ``uplink / K``; TCP flows
through one bottleneck do not split evenly, and the slowest of them -- the
one the step waits for -- gets less. Timed on an emulated rack network, a
ring step with ``K`` flows on one uplink lasted about ``K**1.17`` times a
flow alone, not ``K``. The contention model prices the split as
``uplink / K**straggle`` (:attr:`rankopt.Network.straggle`); this module
measures ``straggle``.

The test runs, in one slot, ``K`` transfers from distinct hosts of one group
to distinct hosts of a sibling group, all in the same direction (the probe's
lower rank of a pair sends first, so every pair is oriented alike; the
answers that follow are not in step and are not used). Against the rate of
one flow alone, the slowest together gives

    ``straggle = log(alone / slowest) / log(K)``.

When the flows did not slow down by more than :data:`SHARED_SLOWDOWN`, the uplink was
not their limit and the test says nothing (``None``); the estimate is kept
within :data:`~rankopt._validation.STRAGGLE_RANGE`.

Contents
--------
sharing_pairs
    The test's pairs, from the groups the probe found.
straggle_exponent
    The exponent from the rates together and alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import STRAGGLE_RANGE

__all__ = ["MAX_SHARING_FLOWS", "SHARED_SLOWDOWN", "sharing_pairs", "straggle_exponent"]

#: Most transfers the sharing test runs side by side.
MAX_SHARING_FLOWS = 4
#: Most groups of one parent the test's pair of groups is chosen among.
MAX_SHARING_GROUPS = 8
#: The typical flow of the test slowed more than this against alone: the
#: flows shared a limit (an even split of two already halves each).
SHARED_SLOWDOWN = 1.5


def _one_per_host(members: NDArray[np.int64], host_of: NDArray[np.int64]) -> list[int]:
    """The lowest process of every host among ``members``, ascending."""
    first = np.unique(host_of[members], return_index=True)[1]
    return sorted(int(members[i]) for i in first)


def _match(low: list[int], high: list[int], most: int) -> list[tuple[int, int]]:
    """Most pairs ``(a, b)``, ``a`` from ``low`` and ``b`` from ``high`` with ``a < b``.

    Both lists ascending; the greedy match of every ``a`` with the smallest
    free ``b`` above it is a largest one for this order relation.
    """
    pairs: list[tuple[int, int]] = []
    j = 0
    for a in low:
        while j < len(high) and high[j] <= a:
            j += 1
        if j == len(high) or len(pairs) == most:
            break
        pairs.append((a, high[j]))
        j += 1
    return pairs


def sharing_pairs(
    groups: Sequence[NDArray[np.int64]], most: int = MAX_SHARING_FLOWS
) -> list[tuple[int, int]]:
    """Pairs of the sharing test: ``K`` transfers across one uplink, one direction.

    ``groups`` are the probe's process labels per level, hosts first. The
    test uses the first level above the hosts with two groups of two or more
    hosts under one parent: of the :data:`MAX_SHARING_GROUPS` largest such
    groups, the two (and the direction) that give the most pairs oriented
    alike, one process per host. Pairs are ``(low, high)`` ranks, every one
    with its low rank in the same group, so the first transfer of every pair
    leaves that group and the answers enter it. Empty when no level has such
    groups or fewer than two pairs can be oriented alike.

    Examples
    --------
    >>> import numpy as np
    >>> host = np.arange(8)
    >>> rack = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    >>> sharing_pairs([host, rack])
    [(0, 1), (2, 3), (4, 5), (6, 7)]
    """
    if len(groups) < 2:
        return []
    host_of = np.asarray(groups[0], dtype=np.int64)
    n = host_of.size
    for k in range(1, len(groups)):
        lab = np.asarray(groups[k], dtype=np.int64)
        parent = (
            np.asarray(groups[k + 1], dtype=np.int64)
            if k + 1 < len(groups)
            else np.zeros(n, dtype=np.int64)
        )
        best: list[tuple[int, int]] = []
        for p in np.unique(parent).tolist():
            inside = np.flatnonzero(parent == p)
            hosts = {
                int(g): _one_per_host(inside[lab[inside] == g], host_of)
                for g in np.unique(lab[inside]).tolist()
            }
            big = sorted((g for g in hosts if len(hosts[g]) >= 2), key=lambda g: -len(hosts[g]))
            big = big[:MAX_SHARING_GROUPS]
            for i, ga in enumerate(big):
                for gb in big[i + 1 :]:
                    a, b = hosts[ga], hosts[gb]
                    for pairs in (_match(a, b, most), [(y, x) for x, y in _match(b, a, most)]):
                        if len(pairs) > len(best):
                            best = pairs
        if len(best) >= 2:
            return sorted((min(x, y), max(x, y)) for x, y in best)
    return []


def straggle_exponent(
    together: NDArray[np.float64],
    alone: NDArray[np.float64],
    pairs: Sequence[tuple[int, int]],
) -> float | None:
    """``straggle`` from the sharing test's rates, or ``None`` when nothing was shared.

    ``together[a, b]`` is the rate of the transfer ``a -> b`` in the test
    and ``alone`` the probe's rate matrix (bytes/s). Only the first
    transfer of every pair (low rank to high) started with the others, so
    only those are read. A flow alone is taken at the best rate the probe
    measured from any of the test's senders to any of its receivers (the
    probe's own side-by-side pairs may have slowed some of them). When the
    typical flow of the test slowed by more than :data:`SHARED_SLOWDOWN`
    (an even split of ``K >= 2`` flows slows each ``K`` times), the
    estimate is ``log(alone / slowest together) / log(K)``, within
    :data:`~rankopt._validation.STRAGGLE_RANGE`.

    Examples
    --------
    Three flows alone at 30 MB/s; together the slowest got 8.3 MB/s (an
    even split would give 10):

    >>> import numpy as np
    >>> alone = np.full((6, 6), 30e6)
    >>> together = np.full((6, 6), 11e6)
    >>> together[0, 3] = 8.3e6
    >>> round(straggle_exponent(together, alone, [(0, 3), (1, 4), (2, 5)]), 2)
    1.17
    """
    k = len(pairs)
    if k < 2:
        return None
    lows = [a for a, _ in pairs]
    highs = [b for _, b in pairs]
    got = np.array([together[a, b] for a, b in pairs], dtype=np.float64)
    best = float(np.max(np.asarray(alone, dtype=np.float64)[np.ix_(lows, highs)]))
    if not (np.all(np.isfinite(got)) and np.all(got > 0) and np.isfinite(best) and best > 0):
        return None
    if best <= SHARED_SLOWDOWN * float(np.median(got)):
        return None  # the flows kept about their rate alone: no shared limit
    lo, hi = STRAGGLE_RANGE
    return float(min(max(math.log(best / float(got.min())) / math.log(k), lo), hi))
