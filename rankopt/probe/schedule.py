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
SampledPlanner
    The sampled bandwidth schedule: stars find the groups the bandwidth shows,
    then every pair inside a group and a sample of each block between two
    groups; the rest of a block is filled from its measured pairs.

The schedules are pure functions of their inputs, so every rank computes the
same one without communicating.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError
from rankopt.probe._topology import infer_link_levels, pair_links

__all__ = [
    "round_robin",
    "round_partners",
    "partner_table",
    "bandwidth_slots",
    "SampledPlanner",
    "star_mates",
    "BLOCK_SAMPLE_PAIRS",
    "STAR_GAP",
]

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
    pairs: Iterable[Pair] | None = None,
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
    pairs : iterable of (int, int), optional
        Schedule only these pairs (either order); every pair when omitted.

    Returns
    -------
    list of list of (int, int)
        Slots of pairs ``(a, b)`` with ``a < b``. The pairs of one slot have
        distinct processes and each link is used by at most ``concurrency``
        of them; every unordered pair (of ``pairs``) occurs in exactly one slot.

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
    wanted = None if pairs is None else {(min(a, b), max(a, b)) for a, b in pairs}
    for round_pairs in round_robin(n):
        for a, b in round_pairs:
            if wanted is not None and (a, b) not in wanted:
                continue
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


#: Factor between two tiers of a star's rates that makes the hosts above it one group
#: of the sampled schedule: wider than the hierarchy's 1.5
#: (:data:`~rankopt.probe.hierarchy.DEFAULT_GAP`), since a host put in the wrong group
#: gets rates filled in that it never had.
STAR_GAP = 2.0
#: Pairs measured in each block between two groups of the sampled schedule (more
#: where a group has more hosts: every host of both groups is in one of them).
BLOCK_SAMPLE_PAIRS = 8


def star_mates(rates: NDArray[np.float64], gap: float = STAR_GAP) -> NDArray[np.bool_] | None:
    """Which ends of a star belong with its centre: those above its widest tier split.

    ``rates`` are the centre's rates to other hosts (NaN where none was
    measured). Sorted, a split is where the next rate is ``gap`` times lower;
    the hosts above the split where the rates fall the most are the centre's
    group (one slow host below the racks' tier does not make the whole job
    one group). ``None`` when no split shows: the star cannot tell a group
    from the rest. A host this puts in the wrong group is caught later: the
    blocks of its group then read rates twofold apart and are measured in
    full (:class:`SampledPlanner`).

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt.probe.schedule import star_mates
    >>> star_mates(np.array([120e6, 30e6, 31e6, 118e6, np.nan])).tolist()
    [True, False, False, True, False]
    >>> star_mates(np.array([120e6, 30e6, 10e6])).tolist()
    [True, False, False]
    >>> star_mates(np.array([30e6, 31e6, 29e6])) is None
    True
    """
    r = np.asarray(rates, dtype=np.float64)
    ok = np.isfinite(r) & (r > 0)
    vals = np.sort(r[ok])[::-1]
    if vals.size < 2:
        return None
    fall = vals[:-1] / vals[1:]
    if not np.any(fall >= gap):
        return None
    return ok & (r >= vals[int(np.argmax(fall))])


class SampledPlanner:
    """The sampled bandwidth schedule, stage by stage.

    Call :meth:`next_stage`, measure its slots, hand the gathered matrices to
    :meth:`record`, repeat until it returns ``None``; :meth:`result` fills
    the matrices. Every process runs it on the same gathered rates, so every
    process plans the same stages.

    1. **stars**: one transfer each way from the first process of the lowest
       host not yet in a group to the first process of every other such host,
       one pair at a time (nothing is known of the links yet). The hosts
       :func:`star_mates` puts above the widest split of its rates (to those
       hosts and to the earlier centres) join the centre's group, with the
       groups they are already in. The next star starts at the next host left.
       A star that shows no split ends the stars, and every pair not yet
       measured is measured one at a time, as the all-pairs schedule does
       (on ``levels``, the latency's groups).
    2. **blocks**: every pair inside a group, and in each block of pairs
       between two groups, pairs until ``max(sample, hosts of either group)``
       are measured, taken diagonally so that every host of both groups is in
       one. Pairs inside different groups, and a block's pair beside pairs
       inside other groups, run side by side (:func:`bandwidth_slots` on the
       hosts and the groups).
    3. **rest**: a block whose measured rates one way differ by ``gap`` or more
       (a host in the wrong group, load on some of its pairs) is measured in
       full.

    The pairs of a block left unmeasured are filled, per direction, with the
    median of its measured rates and spreads; their counts stay 0.

    Parameters
    ----------
    hosts : sequence of str
        Host name of every process.
    levels : sequence of ndarray of int, optional
        The latency's groups, hosts first (:func:`infer_link_levels`): the
        schedule of the pairs measured one at a time when the stars show no
        groups. Host labels only when omitted.
    concurrency : int, default 1
        As :func:`bandwidth_slots` takes it.
    gap : float, default :data:`STAR_GAP`
    sample : int, default :data:`BLOCK_SAMPLE_PAIRS`

    Examples
    --------
    Three racks of four hosts, 100 MB/s inside a rack and 25 across: 66 pairs,
    of which the sampled schedule measures 18 inside the racks and 8 per block.

    >>> import numpy as np
    >>> from rankopt.probe.schedule import SampledPlanner
    >>> rack = np.arange(12) // 4
    >>> rate = np.where(rack[:, None] == rack[None, :], 100e6, 25e6)
    >>> planner = SampledPlanner([f"h{i}" for i in range(12)])
    >>> while (stage := planner.next_stage()) is not None:
    ...     ran = np.zeros((12, 12), dtype=np.int64)
    ...     for a, b in (p for slot in stage for p in slot):
    ...         ran[a, b] = ran[b, a] = 1
    ...     planner.record(np.where(ran > 0, rate, 0.0), np.zeros((12, 12)), ran)
    >>> bw, _, counts, found = planner.result()
    >>> int(counts.sum()) // 2, found["sampled_groups"] == rack.tolist()
    (42, True)
    >>> bool(np.array_equal(bw, np.where(np.eye(12, dtype=bool), 0.0, rate)))
    True
    """

    def __init__(
        self,
        hosts: Sequence[str],
        *,
        levels: Sequence[NDArray[np.int64]] | None = None,
        concurrency: int = 1,
        gap: float = STAR_GAP,
        sample: int = BLOCK_SAMPLE_PAIRS,
    ) -> None:
        from rankopt.probe.hierarchy import host_labels

        self.hosts = list(hosts)
        n = self.n = len(self.hosts)
        host_of = host_labels(self.hosts) if levels is None else np.asarray(levels[0])
        self.host_of = np.asarray(host_of, dtype=np.int64)
        self.levels = [self.host_of] if levels is None else [np.asarray(lv) for lv in levels]
        n_hosts = int(self.host_of.max()) + 1 if n else 0
        self.first = np.array(
            [int(np.flatnonzero(self.host_of == h)[0]) for h in range(n_hosts)], dtype=np.int64
        )
        self.group = np.full(n_hosts, -1, dtype=np.int64)
        self.concurrency = int(concurrency)
        self.gap = float(gap)
        self.sample = int(sample)
        self.bw = np.zeros((n, n))
        self.spread = np.zeros((n, n))
        self.counts = np.zeros((n, n), dtype=np.int64)
        self.state = "stars"
        self.center = -1
        self.stages: list[tuple[str, int]] = []

    # -- what has been measured -----------------------------------------------------------
    def _ran(self) -> NDArray[np.bool_]:
        """Pairs measured either way so far, as a symmetric (n, n) mask."""
        ran = self.counts > 0
        return ran | ran.T

    def known_rates(self, me: int) -> NDArray[np.float64]:
        """The rates process ``me`` read as a sender in the stages so far."""
        return self.bw[me, self.counts[me] > 0].copy()

    def record(self, bw: NDArray, spread: NDArray, counts: NDArray) -> None:
        """Keep the gathered rates of the last stage (entries with a count)."""
        new = np.asarray(counts) > 0
        self.bw[new] = np.asarray(bw)[new]
        self.spread[new] = np.asarray(spread)[new]
        self.counts[new] += np.asarray(counts, dtype=np.int64)[new]
        if self.state == "stars" and self.center >= 0:
            self._join(self.center)
            self.center = -1

    def _join(self, c: int) -> None:
        hc = int(self.host_of[c])
        first = self.first
        seen = self._ran()[c, first]
        seen[hc] = False
        both = np.maximum(self.bw[c, first], self.bw[first, c])
        mates = star_mates(np.where(seen, both, np.nan), self.gap)
        if mates is None:
            self.state = "all-pairs"
            return
        members = np.flatnonzero(mates).tolist() + [hc]
        old = {int(self.group[h]) for h in members if self.group[h] >= 0}
        label = min(old) if old else int(self.group.max()) + 1
        joined = np.isin(self.group, list(old)) if old else np.zeros(self.group.size, bool)
        joined[members] = True
        self.group[joined] = label

    # -- the stages -------------------------------------------------------------------------
    def _labels(self) -> NDArray[np.int64]:
        return self.group[self.host_of]

    def _slots(self, name: str, pairs: list[Pair], levels: Sequence[NDArray[np.int64]]) -> Any:
        if not pairs:
            return None
        slots = bandwidth_slots(
            np.zeros((0, 0)), self.hosts, concurrency=self.concurrency, levels=levels, pairs=pairs
        )
        self.stages.append((name, len(slots)))
        return slots

    def _unmeasured(
        self, members: Iterable[int], others: Iterable[int] | None = None
    ) -> list[Pair]:
        a_side = sorted(int(x) for x in members)
        if others is None:
            cand = [(a, b) for i, a in enumerate(a_side) for b in a_side[i + 1 :]]
        else:
            cand = [(min(a, b), max(a, b)) for a in a_side for b in others]
        ran = self._ran()
        return [(a, b) for a, b in cand if not ran[a, b]]

    def _interleaved(self, procs: NDArray[np.int64]) -> list[int]:
        """``procs`` with their hosts taken in turn: one process of each host, then the next."""
        seen: dict[int, int] = {}
        keyed = []
        for p in procs.tolist():
            h = int(self.host_of[p])
            keyed.append((seen.get(h, 0), h, p))
            seen[h] = seen.get(h, 0) + 1
        return [p for _, _, p in sorted(keyed)]

    def _block_sample(self, g: int, h: int, lab: NDArray[np.int64]) -> list[Pair]:
        pg = self._interleaved(np.flatnonzero(lab == g))
        ph = self._interleaved(np.flatnonzero(lab == h))
        hosts_g = len(set(self.host_of[pg].tolist()))
        hosts_h = len(set(self.host_of[ph].tolist()))
        want = min(len(pg) * len(ph), max(self.sample, hosts_g, hosts_h))
        ran = self._ran()
        taken = {(min(a, b), max(a, b)) for a in pg for b in ph if ran[a, b]}  # unordered
        uses = dict.fromkeys(pg + ph, 0)
        for pair in taken:
            for x in pair:
                uses[x] += 1
        hosts_used = {int(self.host_of[x]) for x, k in uses.items() if k}
        out: list[Pair] = []

        def take(a: int, b: int) -> None:
            pair = (min(a, b), max(a, b))
            taken.add(pair)
            out.append(pair)
            for x in pair:
                uses[x] += 1
                hosts_used.add(int(self.host_of[x]))

        # first every host of both groups in one pair, with the least used process across
        for side, other in ((pg, ph), (ph, pg)):
            for a in side:
                if int(self.host_of[a]) not in hosts_used:
                    free = [b for b in other if (min(a, b), max(a, b)) not in taken]
                    take(a, min(free, key=lambda q: uses[q]))
        # then diagonally until the block has its sample
        short, long_ = (pg, ph) if len(pg) <= len(ph) else (ph, pg)
        for k in range(len(long_)):
            for i, a in enumerate(short):
                if len(taken) >= want:
                    return out
                b = long_[(i + k) % len(long_)]
                if (min(a, b), max(a, b)) not in taken:
                    take(a, b)
        return out

    def _uneven(self, g: int, h: int, lab: NDArray[np.int64]) -> bool:
        rows, cols = lab == g, lab == h
        for x, y in ((rows, cols), (cols, rows)):
            sub = self.bw[np.ix_(x, y)][self.counts[np.ix_(x, y)] > 0]
            if sub.size >= 2 and sub.max() >= self.gap * sub.min():
                return True
        return False

    def next_stage(self) -> list[list[Pair]] | None:
        """The slots of the next stage, or ``None`` when every stage has run."""
        while True:
            if self.state == "stars":
                left = np.flatnonzero(self.group < 0)
                if left.size == 1:
                    self.group[left[0]] = int(self.group.max()) + 1
                if left.size <= 1:
                    self.state = "blocks"
                    continue
                c = int(self.first[left[0]])
                pairs = self._unmeasured([c], self.first[left[1:]].tolist())
                if not pairs:  # nothing new to measure: decide on what is known
                    self._join(c)
                    continue
                self.center = c  # decided on when its rates are recorded
                return self._slots("stars", pairs, [self.host_of])
            if self.state == "all-pairs":
                self.state = "done"
                slots = self._slots("all-pairs", self._unmeasured(range(self.n)), self.levels)
                if slots is not None:
                    return slots
                continue
            lab = self._labels()
            groups = np.unique(lab).tolist()
            if self.state == "blocks":
                self.state = "rest"
                pairs = []
                for i, g in enumerate(groups):
                    pairs += self._unmeasured(np.flatnonzero(lab == g))
                    for h in groups[i + 1 :]:
                        pairs += self._block_sample(g, h, lab)
                slots = self._slots("blocks", pairs, [self.host_of, lab])
                if slots is not None:
                    return slots
                continue
            if self.state == "rest":
                self.state = "done"
                pairs = []
                for i, g in enumerate(groups):
                    for h in groups[i + 1 :]:
                        if self._uneven(g, h, lab):
                            pairs += self._unmeasured(
                                np.flatnonzero(lab == g), np.flatnonzero(lab == h).tolist()
                            )
                slots = self._slots("rest", pairs, [self.host_of, lab])
                if slots is not None:
                    return slots
                continue
            return None

    def result(self) -> tuple[NDArray, NDArray, NDArray, dict[str, Any]]:
        """Rates, spreads and counts, each block's unmeasured pairs filled, and what was
        found: ``{"sampled_groups": group of every process (``None`` where the stars
        showed no groups), "filled_pairs": k, "bandwidth_stages": [[stage, slots], ...]}``."""
        bw, spread = self.bw.copy(), self.spread.copy()
        filled = 0
        grouped = bool(np.all(self.group >= 0))
        if grouped:
            lab = self._labels()
            groups = np.unique(lab).tolist()
            for g in groups:
                for h in groups:
                    if g == h:
                        continue
                    block = np.ix_(lab == g, lab == h)
                    have = self.counts[block] > 0
                    if have.all() or not have.any():
                        continue
                    sub_bw, sub_sp = bw[block], spread[block]
                    sub_bw[~have] = np.median(sub_bw[have])
                    sub_sp[~have] = np.median(sub_sp[have])
                    bw[block], spread[block] = sub_bw, sub_sp
                    filled += int((~have).sum())
        found: dict[str, Any] = {
            "sampled_groups": self._labels().tolist() if grouped else None,
            "filled_pairs": filled // 2,
            "bandwidth_stages": [[name, int(s)] for name, s in self.stages],
        }
        return bw, spread, self.counts.copy(), found
