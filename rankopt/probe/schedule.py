"""Who measures whom, and when: the schedules shared by every probe backend.

Contents
--------
round_robin
    The circle-method round robin: all pairs of ``n`` processes in ``n - 1``
    rounds (``n`` for odd ``n``) of disjoint pairs.
partner_table, round_partners
    The same schedule as an ``(rounds, n)`` array of partners (``-1`` for a bye),
    or one round of it.
bandwidth_slots
    The bandwidth schedule: every pair once, in slots of concurrent pairs that
    never share a suspected link (see :mod:`rankopt.probe._topology`).

The schedules are pure functions of their inputs, so every rank computes the
same one without communicating.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError
from rankopt.probe._topology import infer_link_levels, pair_links

__all__ = ["round_robin", "round_partners", "partner_table", "bandwidth_slots"]

Pair = tuple[int, int]


def _check_n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise RankoptInputError(f"`n` must be an integer; got {n!r} instead.")
    if n < 1:
        raise RankoptInputError(f"`n` must be at least 1; got {n} instead.")
    return int(n)


def round_robin(n: int) -> list[list[Pair]]:
    """All pairs of ``n`` processes in rounds of disjoint pairs (circle method).

    Parameters
    ----------
    n : int
        Number of processes, at least 1.

    Returns
    -------
    list of list of (int, int)
        ``rounds[r]`` is the list of pairs ``(a, b)`` with ``a < b`` that meet
        in round ``r``. There are ``n - 1`` rounds of ``n / 2`` pairs for even
        ``n`` and ``n`` rounds of ``(n - 1) / 2`` pairs for odd ``n`` (one
        process sits out each round: a bye). Every unordered pair occurs in
        exactly one round; the result depends only on ``n``.

    Raises
    ------
    RankoptInputError
        If ``n`` is not an integer of at least 1.

    Notes
    -----
    Circle method: process ``0`` stays fixed, the others sit on a circle that
    rotates by one place per round, and position ``i`` meets position
    ``m - 1 - i`` (``m`` = ``n`` rounded up to even; the extra position is the
    bye). Cost :math:`O(n^2)` (the output); :func:`round_partners` gives one
    round in :math:`O(n)`.

    Examples
    --------
    >>> from rankopt.probe.schedule import round_robin
    >>> round_robin(4)
    [[(0, 3), (1, 2)], [(0, 2), (1, 3)], [(0, 1), (2, 3)]]
    >>> [len(r) for r in round_robin(5)]
    [2, 2, 2, 2, 2]
    """
    n = _check_n(n)
    if n < 2:
        return []
    rounds: list[list[Pair]] = []
    for r in range(_round_count(n)):
        a, b = _round_pairs(n, r)
        rounds.append(list(zip(a.tolist(), b.tolist(), strict=True)))
    return rounds


def _round_count(n: int) -> int:
    """Rounds of the circle method on ``n`` processes (0 below 2)."""
    return 0 if n < 2 else n - 1 + (n % 2)


def _round_pairs(n: int, r: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The pairs ``(a, b)``, ``a < b``, of round ``r`` of :func:`round_robin`, sorted by ``a``.

    Closed form of the circle: after ``r`` rotations seat ``i > 0`` holds
    process ``1 + (i - 1 - r) mod (m - 1)``, and seat ``i`` meets seat
    ``m - 1 - i``. :math:`O(n)` per round, no table of all pairs.
    """
    m = n + (n % 2)
    i = np.arange(m // 2, dtype=np.int64)
    j = m - 1 - i

    def seat(k: NDArray[np.int64]) -> NDArray[np.int64]:
        return np.where(k == 0, 0, 1 + (k - 1 - r) % (m - 1))

    x, y = seat(i), seat(j)
    keep = (x < n) & (y < n)
    a, b = np.minimum(x, y)[keep], np.maximum(x, y)[keep]
    order = np.argsort(a, kind="stable")
    return a[order], b[order]


def round_partners(n: int, r: int) -> NDArray[np.int64]:
    """Partner of every process in round ``r`` of :func:`round_robin` (``-1``: a bye).

    One row of :func:`partner_table`, in :math:`O(n)`, without building the rounds.

    Examples
    --------
    >>> from rankopt.probe.schedule import round_partners
    >>> round_partners(4, 0).tolist(), round_partners(3, 1).tolist()
    ([3, 2, 1, 0], [2, -1, 0])
    """
    out = np.full(n, -1, dtype=np.int64)
    a, b = _round_pairs(n, r)
    out[a], out[b] = b, a
    return out


def partner_table(rounds: Sequence[Sequence[Pair]], n: int) -> NDArray[np.int64]:
    """Partner of every process in every round.

    Parameters
    ----------
    rounds : sequence of sequence of (int, int)
        A schedule such as the one returned by :func:`round_robin`.
    n : int
        Number of processes.

    Returns
    -------
    ndarray of int64, shape (len(rounds), n)
        ``table[r, i]`` is the process that ``i`` meets in round ``r``, or
        ``-1`` if ``i`` has a bye.

    Examples
    --------
    >>> from rankopt.probe.schedule import partner_table, round_robin
    >>> partner_table(round_robin(3), 3)
    array([[-1,  2,  1],
           [ 2, -1,  0],
           [ 1,  0, -1]])
    """
    n = _check_n(n)
    table = np.full((len(rounds), n), -1, dtype=np.int64)
    for r, pairs in enumerate(rounds):
        if pairs:
            ab = np.asarray(pairs, dtype=np.int64)
            table[r, ab[:, 0]] = ab[:, 1]
            table[r, ab[:, 1]] = ab[:, 0]
    return table


def _fabrics(levels: Sequence[NDArray[np.int64]], a: int, b: int) -> list[Hashable]:
    """The inside of the group just above the host of ``a`` and of ``b`` (none on one host)."""
    if len(levels) < 2 or levels[0][a] == levels[0][b]:
        return []
    ga, gb = int(levels[1][a]), int(levels[1][b])
    return [("inside", ga)] if ga == gb else [("inside", ga), ("inside", gb)]


def bandwidth_slots(
    latency: NDArray[np.float64],
    hosts: Sequence[str],
    *,
    concurrency: int = 1,
    levels: Sequence[NDArray[np.int64]] | None = None,
) -> list[list[Pair]]:
    """Schedule the bandwidth transfers so that no suspected link is shared.

    Parameters
    ----------
    latency : ndarray, shape (n, n)
        Measured one-way latencies in seconds; used to infer the link
        hierarchy above the hosts when ``levels`` is not given.
    hosts : sequence of str
        Host name of every process.
    concurrency : int, default 1
        How many pairs may use one suspected link at the same time. ``1``
        means every pair is measured alone on every link it crosses, so
        ``bandwidth[i, j]`` is the pair's own bandwidth.
    levels : sequence of ndarray of int, optional
        Group labels per level, finest first (host level first), as returned
        by :func:`rankopt.probe._topology.infer_link_levels`. Inferred from
        ``latency`` and ``hosts`` when omitted.

    Returns
    -------
    list of list of (int, int)
        Slots of pairs ``(a, b)`` with ``a < b``. The pairs of one slot have
        distinct processes and each link is used by at most ``concurrency``
        of them; every unordered pair occurs in exactly one slot.

    Notes
    -----
    A pair uses the uplink of every group that contains exactly one of its
    two processes, the core when it joins two top-level groups, and the
    internal bus of its host when both are on one host (see
    :func:`~rankopt.probe._topology.pair_links`), and the inside of the
    latency group just above the host of each of its processes: racks whose
    latency looks alike may still share a bandwidth-only uplink (and a
    congested VM's latency makes a one-host "group" out of noise), so two pairs
    that touch one such group never run together. Pairs are placed first-fit
    in round-robin order. On a single host, or among hosts whose latency
    shows no tiers, every pair shares the bus or the core and the schedule is
    sequential: ``n (n - 1) / 2`` slots; with ``concurrency >= n // 2`` it is
    the round robin. Each process and link keeps a bit mask of the
    slots it has no room in; the first fit is the lowest zero bit of their
    union, so the cost is :math:`O(P S / w)` word operations for ``P`` pairs,
    ``S`` slots and ``w``-bit words.

    Examples
    --------
    Two hosts with two processes each: the two intra-host pairs run
    together, the four cross-host pairs share the host uplinks and run alone.

    >>> import numpy as np
    >>> from rankopt.probe.schedule import bandwidth_slots
    >>> lat = np.array([[0, 1, 9, 9], [1, 0, 9, 9], [9, 9, 0, 1], [9, 9, 1, 0]]) * 1e-6
    >>> bandwidth_slots(lat, ["a", "a", "b", "b"])
    [[(0, 3)], [(1, 2)], [(0, 2)], [(1, 3)], [(0, 1), (2, 3)]]
    """
    concurrency = int(concurrency)
    if concurrency < 1:
        raise RankoptInputError(f"`concurrency` must be at least 1; got {concurrency} instead.")
    n = len(hosts)
    if levels is None:
        levels = infer_link_levels(latency, hosts)
    slots: list[list[Pair]] = []
    load: list[dict[Hashable, int]] = []
    full: dict[Hashable, int] = {}  # process or link -> bit mask of the slots it has no room in
    for pairs in round_robin(n):
        for a, b in pairs:
            links: list[Hashable] = [*pair_links(levels, a, b), *_fabrics(levels, a, b)]
            keys: list[Hashable] = [a, b, *links]
            taken = 0
            for k in keys:
                taken |= full.get(k, 0)
            s = ((taken + 1) & ~taken).bit_length() - 1  # lowest slot with room for all
            if s == len(slots):
                slots.append([])
                load.append({})
            slots[s].append((a, b))
            bit = 1 << s
            full[a] = full.get(a, 0) | bit
            full[b] = full.get(b, 0) | bit
            for link in links:
                load[s][link] = load[s].get(link, 0) + 1
                if load[s][link] >= concurrency:
                    full[link] = full.get(link, 0) | bit
    return [sorted(slot) for slot in slots]
