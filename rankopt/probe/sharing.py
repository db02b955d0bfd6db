"""How transfers that share an uplink split it: the probe's sharing test.

A collective's step waits for its slowest transfer. When ``K`` transfers of
a step cross one uplink, an even split gives each ``uplink / K``; TCP flows
through one bottleneck do not split evenly, and the slowest of them -- the
one the step waits for -- gets less. Timed on an emulated rack network, a
ring step with ``K`` flows on one uplink lasted about ``K**1.17`` times a
flow alone, not ``K``. The contention model prices the split as
``uplink / K**straggle`` for ``K`` transfers from one group into one group,
as this test runs them, and a transfer crowded at one end only at its fair
share (:attr:`rankopt.Network.straggle`); this module measures
``straggle``.

The test runs ``K`` transfers from distinct hosts of one group to distinct
hosts of a sibling group, all in the same direction (the probe's lower rank
of a pair sends first, so every pair is oriented alike), in steps as a
collective's: every step each pair sends one message from the step's common
start, and the step lasts as long as its slowest transfer; then each pair
sends the other way (not timed here), as every rank of a ring step both
sends and receives. On the emulated racks, steps of one direction only
split the uplink evenly (exponent 1.00-1.01 on three launches), while the
ring's loosely coupled steps do not; the two-way steps read 1.06-1.27, and
priced with that the modelled speedup of a launch order came within 7% of
the measured one (3.82x against 3.58x; 3.00x with an even split). Against one
flow alone, the typical step gives

    ``straggle = log(median over steps of alone / slowest) / log(K)``.

When the typical flow did not slow down by more than
:data:`SHARED_SLOWDOWN`, the uplink was not their limit and the test says
nothing (``None``); the estimate is kept within
:data:`~rankopt._validation.STRAGGLE_RANGE`.

A flow alone is the best rate the probe measured between the two groups,
unless another tenant's load came and went during the test: after every
step one of the pairs runs alone (:func:`sharing_slots`), and where some of
these ran below :data:`REFERENCE_BELOW` of that rate and others did not, the
steps they met are read against them. Beside three paced TCP flows on for
2 s and off for 2 s from one rack to another, the test (about 3 s) read
1.45-1.57 against the rates measured before and 1.2-1.35 so (1.08-1.15 on
the same network without the neighbour). Beside steady TCP flows on the
test's way every flow alone ran slow (0.2-0.75 of the rate before): load
that was there throughout keeps the rate before, which prices what
long-lived flows take from short ones.

Contents
--------
sharing_pairs
    The test's pairs, from the groups the probe found.
sharing_slots
    Its steps, each followed by one of its pairs alone.
flow_groups
    The two groups the test's flows leave and enter.
straggle_exponent
    The exponent from the rates together and alone.
straggle_span
    The exponents of its quartile steps: what the test cannot pin down.
loaded_pairs
    The test's pairs across the most loaded uplink.
elastic_share
    How much of another tenant's load there yields to more flows.

Other tenants
-------------
An uplink that gives one transfer less than its siblings carries another
tenant's load. Paced traffic (UDP at a set rate) keeps its rate whatever runs
beside it, and ``K`` transfers split what is left; TCP flows yield, so ``K``
transfers beside ``m`` of them get about ``K / (K + m)`` of the uplink --
more than ``K`` times less than one alone got. On the emulated racks three
50 Mbit/s TCP flows on a 250 Mbit/s uplink made the model priced with what
was left over-state crossings by 59-107% on some launches -- while on another,
three 1 MiB transfers beside two unpaced TCP flows slowed 5.3 times where an
even split of what one alone got would be 3.2: long-lived flows take more than
a fair share from short ones. Neither can be told from one transfer alone. The
test runs a second time across the most loaded way out of a group
(:func:`loaded_pairs`) and reads how the load answered more flows
(:func:`elastic_share`); the model then counts it as flows beside ours
(:func:`rankopt.models.network.tenant_flows`), fewer than none where it took
more.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import STRAGGLE_RANGE

__all__ = [
    "LOADED_BELOW",
    "LOAD_TO_TELL",
    "MAX_SHARING_FLOWS",
    "REFERENCE_BELOW",
    "SHARED_SLOWDOWN",
    "elastic_share",
    "flow_groups",
    "loaded_pairs",
    "sharing_pairs",
    "sharing_slots",
    "straggle_exponent",
    "straggle_span",
]

#: Most transfers the sharing test runs side by side.
MAX_SHARING_FLOWS = 4
#: Most groups of one parent the test's pair of groups is chosen among.
MAX_SHARING_GROUPS = 8
#: Ways between two groups whose typical rates lie within this factor of the quietest
#: one's are alike for the sharing test's choice.
QUIET_TIE = 1.1
#: The typical flow of the test slowed more than this against alone: the
#: flows shared a limit (an even split of two already halves each).
SHARED_SLOWDOWN = 1.5
#: A flow timed alone between two of the test's steps that ran below this
#: fraction of the best rate the probe saw between the test's groups met load
#: that was not there before: the steps beside it are read against it.
REFERENCE_BELOW = 0.85
#: A way between two sibling groups whose best rate is below this fraction of
#: the fastest way carries load from elsewhere (or a narrower uplink).
LOADED_BELOW = 0.75
#: Least load, in flows like ours (``quiet / loaded - 1``), whose yielding the
#: test can tell from an even split.
LOAD_TO_TELL = 0.25


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


def _typical_rate(
    rates: NDArray[np.float64] | None,
    pairs: Sequence[tuple[int, int]],
    inside: NDArray[np.int64],
    lab: NDArray[np.int64],
) -> float:
    """The median rate from the senders' group to the receivers' (0 without rates).

    The median, not the best: one reading above what the uplink carries (the
    probe's timing of a transfer beside unpaced TCP load read 38.6 MB/s
    through a 31 MB/s uplink) would otherwise pick the way."""
    if rates is None:
        return 0.0
    src = inside[lab[inside] == lab[pairs[0][0]]]
    dst = inside[lab[inside] == lab[pairs[0][1]]]
    got = np.asarray(rates, dtype=np.float64)[np.ix_(src, dst)].ravel()
    got = got[np.isfinite(got) & (got > 0)]
    return float(np.median(got)) if got.size else 0.0


def sharing_pairs(
    groups: Sequence[NDArray[np.int64]],
    most: int = MAX_SHARING_FLOWS,
    rates: NDArray[np.float64] | None = None,
) -> list[tuple[int, int]]:
    """Pairs of the sharing test: ``K`` transfers across one uplink, one direction.

    ``groups`` are the probe's process labels per level, hosts first. The
    test uses the first level above the hosts with two groups of two or more
    hosts under one parent: of the :data:`MAX_SHARING_GROUPS` largest such
    groups, the two (and the direction) whose uplinks are least loaded --
    the median rate ``rates`` (the probe's, bytes/s) shows from one to the
    other, within 10% of the quietest way's (:data:`QUIET_TIE`) -- then, where
    some of those are as quiet the other way (within 10%), one of them, and
    among those the most pairs oriented alike, one process per host. Another
    tenant's load on the tested uplink would read as uneven sharing, and on
    the way back it delays the answers the test's transfers wait for. Where
    every way between two groups is loaded one way or the other, as on three
    racks beside one neighbour, the choice is the quietest way as before.
    (On emulated racks of 3, 2, 2 and 2 hosts beside a steady TCP neighbour,
    the test read no shared limit on two of four probes, once with its
    answers crossing the loaded way and once between two racks quiet both
    ways; on 38 probes of three-rack networks it read one every time.)
    Pairs are ``(low, high)`` ranks, every one
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
        # every way between two groups of one parent: (pairs, rate there, rate back)
        ways: list[tuple[list[tuple[int, int]], float, float]] = []
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
                    for pairs in (_match(a, b, most), _match(b, a, most)):
                        if len(pairs) >= 2:
                            # the low rank of every pair sends first: rates that way
                            there = _typical_rate(rates, pairs, inside, lab)
                            back = _typical_rate(rates, [(y, x) for x, y in pairs], inside, lab)
                            ways.append((pairs, there, back))
        best: list[tuple[int, int]] = []
        if ways:
            top = max(there for _, there, _ in ways)
            # within 10% of the quietest way; of those, the ones as quiet the other way;
            # then the most pairs (the first of them)
            near = [w for w in ways if w[1] * QUIET_TIE >= top]
            both = [w for w in near if w[2] * QUIET_TIE >= w[1]] or near
            best = max(both, key=lambda w: len(w[0]))[0]
        if len(best) >= 2:
            return sorted(best)
    return []


def _level_groups(
    groups: Sequence[NDArray[np.int64]],
) -> list[tuple[NDArray[np.int64], dict[int, list[int]]]]:
    """Per parent group of the first level above the hosts with two groups of
    two or more hosts: the level's labels and each such group's hosts (one
    process each, ascending)."""
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
        found = []
        for p in np.unique(parent).tolist():
            inside = np.flatnonzero(parent == p)
            hosts = {
                int(g): _one_per_host(inside[lab[inside] == g], host_of)
                for g in np.unique(lab[inside]).tolist()
            }
            big = {g: h for g, h in hosts.items() if len(h) >= 2}
            if len(big) >= 2:
                found.append((lab, big))
        if found:
            return found
    return []


def sharing_slots(pairs: Sequence[tuple[int, int]], steps: int) -> list[list[tuple[int, int]]]:
    """The test's slots: one step to bring the connections up to speed, then
    ``steps`` lockstep steps of all ``pairs``, each followed by one of the
    pairs alone (in turn), the step's reference in time.

    Another tenant's load that comes and goes may be on for the whole test
    and off while the probe measured rates alone (or the other way round);
    a flow alone right after each step meets what the step met.

    >>> sharing_slots([(0, 2), (1, 3)], 2)
    [[(0, 2), (1, 3)], [(0, 2), (1, 3)], [(0, 2)], [(0, 2), (1, 3)], [(1, 3)]]
    """
    slots = [list(pairs)]
    for j in range(steps):
        slots += [list(pairs), [pairs[j % len(pairs)]]]
    return slots


def loaded_pairs(
    groups: Sequence[NDArray[np.int64]],
    rates: NDArray[np.float64],
    most: int = MAX_SHARING_FLOWS,
) -> tuple[list[tuple[int, int]], float, float]:
    """Pairs of the sharing test across the most loaded uplink, and its rates.

    At the level :func:`sharing_pairs` tests, every ordered pair of sibling
    groups ``(src, dst)`` is rated by the best rate ``rates`` shows from
    ``src`` to ``dst``; the slowest such way, when below
    :data:`LOADED_BELOW` of the fastest, carries another tenant's load (or
    is a narrower uplink). Returns ``(pairs, loaded, quiet)``: up to
    ``most`` pairs ``(a, b)``, ``a`` of ``src`` below ``b`` of ``dst``
    (the low rank sends first), one process per host, and the two best
    rates (bytes/s); ``([], 0, 0)`` when no way is that much slower or
    fewer than two pairs can be oriented.

    >>> import numpy as np
    >>> rack = np.array([0, 1, 0, 1, 0, 1])
    >>> bw = np.full((6, 6), 30e6)
    >>> bw[np.ix_(rack == 0, rack == 1)] = 10e6     # rack 0's way out is loaded
    >>> loaded_pairs([np.arange(6), rack], bw)
    ([(0, 1), (2, 3), (4, 5)], 10000000.0, 30000000.0)
    """
    rates = np.asarray(rates, dtype=np.float64)
    ways: list[tuple[float, list[tuple[int, int]]]] = []
    top = 0.0
    for lab, hosts in _level_groups(groups):
        for ga, a in hosts.items():
            for gb, b in hosts.items():
                if ga == gb:
                    continue
                src = np.flatnonzero(lab == ga)
                dst = np.flatnonzero(lab == gb)
                r = rates[np.ix_(src, dst)]
                r = r[np.isfinite(r) & (r > 0)]
                if r.size == 0:
                    continue
                best = float(r.max())
                top = max(top, best)
                ways.append((best, _match(a, b, most)))
    for best, pairs in sorted(ways, key=lambda w: w[0]):
        if best >= LOADED_BELOW * top:
            break
        if len(pairs) >= 2:
            return pairs, best, top
    return [], 0.0, 0.0


def elastic_share(
    steps: NDArray[np.float64],
    pairs: Sequence[tuple[int, int]],
    loaded: float,
    quiet: float,
    straggle: float = 1.0,
) -> float | None:
    """How much of the load on a loaded uplink yielded to more flows: the reading, -1..1.

    ``steps[s, a, b]`` are the rates of the sharing test's transfers across
    the loaded uplink (only ``a -> b`` of every pair in ``pairs`` started
    together), ``loaded`` the rate one transfer alone gets there and
    ``quiet`` the rate through the least loaded uplink (bytes/s). ``K``
    transfers alone on a quiet uplink slow ``K**straggle`` times; beside
    ``m`` flows of another tenant that yield as TCP flows do they slow
    ``R = (K**straggle + m) / (1 + m)`` times, so the typical step (median
    of ``loaded / slowest``) gives ``m = (K**straggle - R) / (R - 1)``.
    The load, counted in flows like ours, is ``quiet / loaded - 1``; the
    share of it that yielded is ``m`` over that, within ``[-1, 1]``: 0 for
    paced traffic (it kept its rate: ``R = K**straggle``), 1 for TCP that
    yields. Below 0 the transfers slowed more than an even split of what one
    alone got, which only congestion-controlled load does: long-lived TCP
    flows take more than a fair share from short transfers (on the emulated
    racks three 1 MiB transfers beside two unpaced TCP flows slowed 5.3
    times, not 3.2), while a collective's long back-to-back transfers get
    more of it back; :attr:`rankopt.Network.elastic_range` is then ``(0, 1)``.
    ``None`` when the uplink is not loaded enough to tell (``quiet / loaded
    - 1`` below :data:`LOAD_TO_TELL`) or no step finished.

    Two flows beside two TCP flows of another tenant get a third of the
    uplink each where one alone got a third: it yielded.

    >>> import numpy as np
    >>> steps = np.full((3, 4, 4), 10e6)
    >>> elastic_share(steps, [(0, 2), (1, 3)], loaded=10e6, quiet=30e6)
    1.0

    Paced traffic keeps its rate: the two split what one had.

    >>> elastic_share(steps / 2, [(0, 2), (1, 3)], loaded=10e6, quiet=30e6)
    0.0

    Long-lived flows that take more: each of the two got a quarter.

    >>> elastic_share(steps / 4, [(0, 2), (1, 3)], loaded=10e6, quiet=30e6)
    -0.3333333333333333
    """
    k = len(pairs)
    if k < 2 or not (loaded > 0 and quiet > 0):
        return None
    load = quiet / loaded - 1.0
    if load < LOAD_TO_TELL:
        return None
    rates = np.asarray(steps, dtype=np.float64)
    if rates.ndim == 2:
        rates = rates[None]
    got = rates[:, [a for a, _ in pairs], [b for _, b in pairs]]
    got = got[np.all(np.isfinite(got) & (got > 0), axis=1)]
    if got.shape[0] == 0:
        return None
    slow = float(np.median(loaded / got.min(axis=1)))
    alone = float(k) ** float(straggle)
    if slow <= 1.0:
        return 1.0
    m = (alone - slow) / (slow - 1.0)  # below 0: slowed more than an even split
    return float(min(max(m / load, -1.0), 1.0))


def flow_groups(
    groups: Sequence[NDArray[np.int64]], pairs: Sequence[tuple[int, int]]
) -> tuple[list[int], list[int]]:
    """Every process of the group the test's flows leave, and of the one they enter.

    The finest level above the hosts at which all senders share one group and
    all receivers another; the pair ends themselves when there is none.

    >>> import numpy as np
    >>> rack = np.array([0, 0, 1, 1, 0, 1])
    >>> flow_groups([np.arange(6), rack], [(0, 2), (1, 3)])
    ([0, 1, 4], [2, 3, 5])
    """
    lows = [a for a, _ in pairs]
    highs = [b for _, b in pairs]
    for lab in groups[1:]:
        lab = np.asarray(lab, dtype=np.int64)
        src, dst = set(lab[lows].tolist()), set(lab[highs].tolist())
        if len(src) == 1 and len(dst) == 1 and src != dst:
            return (
                np.flatnonzero(lab == lab[lows[0]]).tolist(),
                np.flatnonzero(lab == lab[highs[0]]).tolist(),
            )
    return lows, highs


def straggle_exponent(
    steps: NDArray[np.float64],
    alone: NDArray[np.float64],
    pairs: Sequence[tuple[int, int]],
    ends: tuple[Sequence[int], Sequence[int]] | None = None,
    refs: Sequence[float] | NDArray[np.float64] | None = None,
) -> float | None:
    """``straggle`` from the sharing test's rates, or ``None`` when nothing was shared.

    ``steps[s, a, b]`` is the rate of the transfer ``a -> b`` in lockstep step
    ``s`` of the test (an (n, n) matrix is one step) and ``alone`` the
    probe's rate matrix (bytes/s). Only the first transfer of every pair
    (low rank to high) started with the others, so only those are read. A
    flow alone is taken at the best rate in ``alone`` from any process of
    ``ends[0]`` to any of ``ends[1]`` (default: the test's senders and
    receivers; :func:`flow_groups` gives their whole groups), since the
    probe's own side-by-side pairs may have slowed some of them. A step lasts ``alone / slowest``
    times a flow alone; when the typical flow slowed by more than
    :data:`SHARED_SLOWDOWN` (an even split of ``K >= 2`` flows slows each
    ``K`` times), the estimate is ``log(mean step) / log(K)``, within
    :data:`~rankopt._validation.STRAGGLE_RANGE`. Steps with a failed
    transfer (rate 0 or not finite) are left out.

    ``refs[s]``: the rate of a flow alone timed right after step ``s``
    (:func:`sharing_slots`). Where some ran below :data:`REFERENCE_BELOW` of
    the best rate alone and others did not, load came and went while the
    test ran, and the steps it met are read against their own flow alone:
    beside a neighbour on for 2 s and off for 2 s, steps of its on phase
    read against the rates of its off phase gave exponents of 1.45-1.57
    where the same network read 1.08-1.15 without it. Where every flow
    alone ran slow the load was there throughout, as it was beside steady
    TCP flows, and the steps keep the best rate alone: long-lived flows take
    more than a fair share from the collective's short ones, and the
    exponent is what prices that.

    Examples
    --------
    Three flows alone at 30 MB/s; in two steps together the slowest got 8.3
    and 9.1 MB/s (an even split would give 10):

    >>> import numpy as np
    >>> alone = np.full((6, 6), 30e6)
    >>> steps = np.full((2, 6, 6), 11e6)
    >>> steps[0, 0, 3], steps[1, 2, 5] = 8.3e6, 9.1e6
    >>> round(straggle_exponent(steps, alone, [(0, 3), (1, 4), (2, 5)]), 2)
    1.13

    The same steps, the first beside load that came for it alone and left a flow
    alone 20 MB/s: read against that.

    >>> slowed = steps.copy()
    >>> slowed[0] *= 2 / 3
    >>> pairs = [(0, 3), (1, 4), (2, 5)]
    >>> round(straggle_exponent(slowed, alone, pairs, refs=[20e6, 30e6]), 2)
    1.13
    >>> round(straggle_exponent(slowed, alone, pairs), 2)  # against the rate before
    1.34
    """
    slow = _step_slowdowns(steps, alone, pairs, ends, refs)
    if slow is None:
        return None
    return _exponent(float(np.median(slow)), len(pairs))


def straggle_span(
    steps: NDArray[np.float64],
    alone: NDArray[np.float64],
    pairs: Sequence[tuple[int, int]],
    ends: tuple[Sequence[int], Sequence[int]] | None = None,
    refs: Sequence[float] | NDArray[np.float64] | None = None,
) -> tuple[float, float] | None:
    """The exponents of the sharing test's quartile steps: ``(lo, hi)``, or ``None``.

    The same reading as :func:`straggle_exponent` (which gives the median
    step) of the steps a quarter and three quarters of the way from the
    fastest: what the test cannot pin down. Steps of one test vary with
    which flow happened to be slowest and with load that came and went
    beside them (another tenant on for some steps and off for others reads
    as a wide span); the draws behind a modelled speedup's interval take
    every value in it (:attr:`rankopt.Network.straggle_range`).

    >>> import numpy as np
    >>> alone = np.full((4, 4), 30e6)
    >>> steps = np.full((4, 4, 4), 15e6)
    >>> steps[:, 0, 2] = [14e6, 12e6, 10e6, 8e6]        # the slowest flow, step by step
    >>> [round(x, 2) for x in straggle_span(steps, alone, [(0, 2), (1, 3)])]
    [1.27, 1.67]
    """
    slow = _step_slowdowns(steps, alone, pairs, ends, refs)
    if slow is None:
        return None
    q1, q3 = np.quantile(slow, [0.25, 0.75])
    k = len(pairs)
    return _exponent(float(q1), k), _exponent(float(q3), k)


def _exponent(step: float, k: int) -> float:
    """``log(step) / log(k)`` within :data:`~rankopt._validation.STRAGGLE_RANGE`."""
    lo, hi = STRAGGLE_RANGE
    return float(min(max(math.log(step) / math.log(k), lo), hi))


def _step_slowdowns(
    steps: NDArray[np.float64],
    alone: NDArray[np.float64],
    pairs: Sequence[tuple[int, int]],
    ends: tuple[Sequence[int], Sequence[int]] | None,
    refs: Sequence[float] | NDArray[np.float64] | None = None,
) -> NDArray[np.float64] | None:
    """``alone / slowest`` of every complete step, or ``None`` when nothing was shared.

    ``alone`` is the best rate alone, or the step's own reference (``refs``)
    where that ran below :data:`REFERENCE_BELOW` of it while another step's
    ran at least that fast: load that came and went during the test."""
    k = len(pairs)
    if k < 2:
        return None
    lows = [a for a, _ in pairs]
    highs = [b for _, b in pairs]
    senders, receivers = ends if ends is not None else (lows, highs)
    rates = np.asarray(steps, dtype=np.float64)
    if rates.ndim == 2:
        rates = rates[None]
    got = rates[:, lows, highs]  # (steps, K)
    best = float(np.max(np.asarray(alone, dtype=np.float64)[np.ix_(senders, receivers)]))
    if not (np.isfinite(best) and best > 0):
        return None
    ref = np.full(got.shape[0], best)
    if refs is not None:
        r = np.asarray(refs, dtype=np.float64).ravel()
        if r.size != got.shape[0]:
            raise ValueError(f"`refs` must hold one rate per step ({got.shape[0]}); got {r.size}.")
        seen = np.isfinite(r) & (r > 0)
        low = seen & (r < REFERENCE_BELOW * best)
        if low.any() and (seen & ~low).any():  # the load came and went during the test
            ref = np.where(low, r, best)
    complete = np.all(np.isfinite(got) & (got > 0), axis=1)
    got, ref = got[complete], ref[complete]
    if got.shape[0] == 0:
        return None
    if float(np.median(ref)) <= SHARED_SLOWDOWN * float(np.median(got)):
        return None  # the flows kept about their rate alone: no shared limit
    return np.asarray(ref / got.min(axis=1))  # each step as long as its slowest
