"""The linear bandwidth phase: the hierarchy and its capacities from O(n) transfers.

The contention model needs, per pair, the rate of one transfer, and per group
the capacity of its uplink -- not the rate of every one of the n (n - 1) / 2
pairs. This module plans which transfers the probe runs so that the result
still fills a full bandwidth matrix, with a cost that grows like the number of
hosts.

Contents
--------
LinearPlanner
    The adaptive schedule: call :meth:`~LinearPlanner.next_stage`, measure its
    slots, hand the rates to :meth:`~LinearPlanner.record`, repeat until it
    returns no stage; :meth:`~LinearPlanner.result` fills the matrix.
fill_bandwidth
    The maximin (widest path) fill of unmeasured host pairs.
pack
    First-fit packing of transfers, or bundles of transfers, into slots whose
    members share no process and no suspected link.

The stages
----------
Hosts are represented by their lowest rank. *Domains* are the finest latency
groups above the hosts whose tier is :data:`DOMAIN_GAP` apart (the whole job
when latency shows no such tier); inside a domain nothing is known, so its
transfers run one at a time, while different domains run side by side.

1. **discovery**, per domain: a *star* from the domain's first host to every
   other host of it; its rates fall into tiers (sorted, split where the next
   rate is ``gap`` times the previous). Each tier of two or more hosts is
   *tested* (:func:`_test_pairs`: every pair of up to 8 hosts; beyond, a
   star from its first host and perfect matchings of the others): when no
   tested pair is ``gap`` times faster than the tier's rate, the tier is
   uniform; otherwise a new star starts at the fastest tested pair and the
   tier is split the same way. In the same first stage: one transfer between
   two processes of every host with more than one (its bus), and the
   *representatives* of the latency groups: for the children of every latency
   group, a star from the first child's host and a matching of the children's
   hosts. Children of one group meet at one level, so their representatives
   run at one rate; when one is ``gap`` times faster than another, the
   latency groups are noise (a loaded machine), not the network: discovery
   starts again over the whole job as one domain, and latency no longer
   shapes the groups.
2. **uplinks**: with the groups now known (single linkage on the filled
   matrix, pooled with the latency tiers), each group's uplink is loaded with
   ``k = uplink_flows`` concurrent transfers from ``k`` different members to
   ``k`` different sibling groups; the sum of the ``k`` rates is the uplink's
   capacity when none of them slowed down, else half of it (the round trips
   are not in step, so about half the flows send out at a time), and never
   less than one flow's rate alone (:meth:`LinearPlanner._capacity`). Flows of one test run in one slot, tests that share no
   link run side by side.
3. **interference**: the disjoint pairs already measured alone run all at
   once; a pair that comes out ``gap`` times slower than alone shares a link
   with another (reported, not used in the matrix).

Unmeasured host pairs are filled with the rate of the widest path through
measured pairs (the single-linkage ultrametric): in a hierarchy whose rates
depend on the level at which two hosts meet, that is the rate at their
meeting point, the group-pair representative rate. Filled entries have
``bandwidth_counts == 0``.

Schedule size
-------------
With ``H`` hosts, ``D`` domains of at most ``H_d`` hosts, ``t`` bandwidth
tiers found inside the largest domain (1 when its rates are uniform), ``c_P``
children of latency group ``P``, ``G`` groups on all levels and ``T``
concurrent tests per uplink slot, the bandwidth slots number at most::

    S <= t (H_d - 1) + sum_tiers T(m) + 1 + sum_P (c_P - 1 + floor(c_P / 2))
         + ceil(G / T) + 1

(discovery stars, tier tests, intra-host bus, representatives, uplinks,
interference), where a tier of ``m`` hosts is tested on ``T(m) = m (m - 1) / 2``
pairs up to ``m = 8``, ``T(m) <= 3 (m - 1)`` up to 32 and ``2 (m - 1)`` beyond.
When every level's rates are uniform, ``t = 1``: linear in ``H`` -- e.g. about
``3 H`` slots on ``H > 33`` hosts with flat latency (1,020 for 256 hosts of 4
ranks), against ``n (n - 1) / 2`` for the all-pairs schedule. Each slot moves
``2 (warmup + bandwidth_repeats) * bandwidth_bytes`` per transfer. The
latency phase is unchanged: ``n - 1`` rounds (``n`` for odd ``n``).
:func:`rankopt.probe.plan.plan_probe` gives the exact counts for a job.

What the all-pairs mode adds
----------------------------
Every pair's own rate, measured (not filled): pairs whose rate is not
decided by where they meet -- one slow host, a congested link, a
heterogeneous rack -- show up only there. The linear mode sees a slow host
only through its own transfers (each host is in the star of its domain, so
it does show in its row).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt.probe._topology import pair_links
from rankopt.probe.hierarchy import (
    DEFAULT_GAP,
    host_block_min,
    host_labels,
    infer_host_hierarchy,
    nest_levels,
)

__all__ = ["LinearPlanner", "fill_bandwidth", "pack", "DEFAULT_UPLINK_FLOWS"]

Pair = tuple[int, int]
#: Concurrent flows per uplink capacity test.
DEFAULT_UPLINK_FLOWS = 4
_SHUFFLE_SEED = 0x5EED
#: Factor between latency tiers that makes them discovery domains (and lets latency
#: shape the final groups); the probe's schedule keys split at DEFAULT_GAP (1.5),
#: where a busy machine's noise alone makes tiers.
DOMAIN_GAP = 2.0


def pack(bundles: Sequence[Sequence[Pair]], keys: Sequence[Iterable[Hashable]]) -> list[list[Pair]]:
    """First-fit packing of bundles of transfers into slots.

    Parameters
    ----------
    bundles : sequence of sequence of (int, int)
        Transfers that must run together (one pair, or the flows of one
        uplink test). Pairs are process pairs ``(a, b)``.
    keys : sequence of iterable of hashable
        For each bundle, the resources it occupies (processes, suspected
        links); two bundles with a common key never share a slot.

    Returns
    -------
    list of list of (int, int)
        Slots, each the sorted union of its bundles. Bundles are placed in
        order, each in the lowest slot where none of its keys is taken.

    Examples
    --------
    >>> from rankopt.probe.linear import pack
    >>> pack([[(0, 1)], [(2, 3)], [(1, 2)]], [{0, 1}, {2, 3}, {1, 2}])
    [[(0, 1), (2, 3)], [(1, 2)]]
    """
    slots: list[list[Pair]] = []
    taken: dict[Hashable, int] = {}  # key -> bit mask of the slots that hold it
    for bundle, ks in zip(bundles, keys, strict=True):
        ks = list(ks)
        mask = 0
        for k in ks:
            mask |= taken.get(k, 0)
        s = ((mask + 1) & ~mask).bit_length() - 1
        if s == len(slots):
            slots.append([])
        slots[s].extend((min(a, b), max(a, b)) for a, b in bundle)
        bit = 1 << s
        for k in ks:
            taken[k] = taken.get(k, 0) | bit
    return [sorted(s) for s in slots]


def _tiers(rates: NDArray[np.float64], gap: float) -> list[NDArray[np.int64]]:
    """Indices of ``rates`` split into tiers, fastest first (a jump of ``gap`` splits)."""
    order = np.argsort(-rates, kind="stable")
    r = rates[order]
    cuts = np.flatnonzero(r[:-1] >= gap * np.maximum(r[1:], 1e-300)) + 1
    return [np.sort(part) for part in np.split(order, cuts)]


def _members(lab: NDArray[np.int64]) -> tuple[list[int], list[list[int]]]:
    """The sorted distinct labels of ``lab`` and the indices holding each, ascending."""
    labels, inverse = np.unique(lab, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    cuts = np.cumsum(np.bincount(inverse, minlength=labels.size))[:-1]
    return labels.tolist(), [m.tolist() for m in np.split(order, cuts)]


def _groups_under(
    parent: NDArray[np.int64], lab: NDArray[np.int64]
) -> tuple[list[int], list[list[int]]]:
    """The sorted distinct parents and, for each, the distinct labels of ``lab`` under it."""
    pv, pi = np.unique(parent, return_inverse=True)
    lv, li = np.unique(lab, return_inverse=True)
    pairs = np.unique(pi.astype(np.int64) * lv.size + li)
    cuts = np.flatnonzero(np.diff(pairs // lv.size)) + 1
    return pv.tolist(), [lv[part % lv.size].tolist() for part in np.split(pairs, cuts)]


def _first_of_children(parent: NDArray[np.int64], lab: NDArray[np.int64]) -> list[list[int]]:
    """Per distinct value of ``parent`` (sorted): the lowest index of each label under it.

    Entry ``i`` lists, for the ``i``-th parent value and every distinct value
    ``c`` of ``lab`` among its indices (ascending), the lowest index ``x`` with
    ``parent[x]`` that value and ``lab[x] == c``.
    """
    _, pi = np.unique(parent, return_inverse=True)
    lv, li = np.unique(lab, return_inverse=True)
    key = pi.astype(np.int64) * lv.size + li
    pairs, first = np.unique(key, return_index=True)
    cuts = np.flatnonzero(np.diff(pairs // lv.size)) + 1
    return [part.tolist() for part in np.split(first, cuts)]


#: Tiers of at most this many hosts are tested on every pair: a perfect matching
#: of few hosts often pairs only hosts of different subgroups (4 hosts of two
#: racks of 2: 2 of the 3 matchings do).
TEST_ALL_PAIRS_MAX = 8
#: Perfect matchings that test a tier of up to :data:`TEST_FEW_MAX` hosts (2 beyond).
TEST_MATCHINGS = 4
TEST_FEW_MAX = 32


def _matchings(members: Sequence[int], count: int = 2) -> list[Pair]:
    """``count`` perfect matchings of ``members`` (consecutive, then seeded shuffles), no repeats."""
    m = list(members)
    pairs: list[Pair] = [(m[i], m[i + 1]) for i in range(0, len(m) - 1, 2)]
    seen = {frozenset(p) for p in pairs}
    gen = np.random.default_rng(_SHUFFLE_SEED)
    for _ in range(count - 1 if len(m) > 2 else 0):
        shuffled = [m[i] for i in gen.permutation(len(m))]
        for i in range(0, len(shuffled) - 1, 2):
            p = (shuffled[i], shuffled[i + 1])
            if frozenset(p) not in seen:
                pairs.append(p)
                seen.add(frozenset(p))
    return [(min(a, b), max(a, b)) for a, b in pairs]


def _test_pairs(members: Sequence[int]) -> list[Pair]:
    """The pairs that test whether a tier is uniform (see the module docstring).

    Every pair up to :data:`TEST_ALL_PAIRS_MAX` hosts. Beyond, a star from the
    first member (which finds its subgroup whenever it has one: a tier is the
    set of hosts one rate away from the star that found it, so its subgroups
    are whole groups of the hierarchy) and :data:`TEST_MATCHINGS` perfect
    matchings of the others up to :data:`TEST_FEW_MAX` hosts, two beyond. A
    subgroup goes unseen only when the first member has none and every
    matching pairs hosts of different subgroups: a random matching of ``2 s``
    hosts in two subgroups of ``s`` does so with probability
    ``s! / (2 s - 1)!!`` (0.13 for s = 5, 0.02 for s = 8).
    """
    m = list(members)
    if len(m) <= TEST_ALL_PAIRS_MAX:
        return [(min(a, b), max(a, b)) for i, a in enumerate(m) for b in m[i + 1 :]]
    star = [(min(m[0], h), max(m[0], h)) for h in m[1:]]
    seen = set(star)
    rest = _matchings(m[1:], TEST_MATCHINGS if len(m) <= TEST_FEW_MAX else 2)
    return star + [pr for pr in rest if pr not in seen]


def fill_bandwidth(
    n_hosts: int, edges: dict[Pair, tuple[float, float]]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Host-pair rates from measured pairs: the widest path's bottleneck.

    Parameters
    ----------
    n_hosts : int
        Number of hosts.
    edges : dict of (int, int) -> (float, float)
        Measured host pairs ``(g, h)`` and their (rate, spread), rate in
        bytes/s (the better direction).

    Returns
    -------
    rate, spread : ndarray, shape (n_hosts, n_hosts)
        ``rate[g, h]``: the measured rate, or the largest rate ``r`` such
        that ``g`` and ``h`` are joined by a chain of measured pairs all at
        least ``r`` (the single-linkage merge rate); ``spread`` is the spread
        of the pair that decided it. Hosts never joined get ``nan``.
    measured : ndarray of bool, shape (n_hosts, n_hosts)

    Notes
    -----
    Kruskal's algorithm on the pairs sorted by rate, fastest first; merging
    two components sets every entry between them. Cost
    :math:`O(E \\log E + H^2)`.

    Examples
    --------
    >>> from rankopt.probe.linear import fill_bandwidth
    >>> rate, _, _ = fill_bandwidth(3, {(0, 1): (10.0, 0.0), (1, 2): (2.0, 0.0)})
    >>> rate.tolist()
    [[0.0, 10.0, 2.0], [10.0, 0.0, 2.0], [2.0, 2.0, 0.0]]
    """
    rate = np.full((n_hosts, n_hosts), np.nan)
    spread = np.zeros((n_hosts, n_hosts))
    measured = np.zeros((n_hosts, n_hosts), dtype=bool)
    np.fill_diagonal(rate, 0.0)
    members: list[list[int]] = [[g] for g in range(n_hosts)]
    comp = list(range(n_hosts))
    for (g, h), (r, s) in sorted(edges.items(), key=lambda e: -e[1][0]):
        measured[g, h] = measured[h, g] = True
        cg, ch = comp[g], comp[h]
        if cg == ch:
            continue
        a, b = members[cg], members[ch]
        ia, ib = np.array(a), np.array(b)
        rate[np.ix_(ia, ib)] = r
        rate[np.ix_(ib, ia)] = r
        spread[np.ix_(ia, ib)] = s
        spread[np.ix_(ib, ia)] = s
        if len(a) < len(b):
            cg, ch, a, b = ch, cg, b, a
        for x in b:
            comp[x] = cg
        a.extend(b)
        members[ch] = []
    for (g, h), (r, s) in edges.items():  # a measured pair keeps its own rate
        rate[g, h] = rate[h, g] = r
        spread[g, h] = spread[h, g] = s
    return rate, spread, measured


@dataclass
class _Task:
    """Hosts of one domain still to be resolved: a star from ``leader`` or a test."""

    domain: int
    kind: str  # "star" | "test"
    hosts: list[int]
    leader: int = -1
    rate: float = np.inf  # tier rate (tests)
    pairs: list[Pair] = field(default_factory=list)


class LinearPlanner:
    """The adaptive linear bandwidth schedule of one probe (see the module docstring).

    Every process builds the same planner from the same inputs and feeds it
    the same gathered rates, so all agree on every stage without talking.

    Parameters
    ----------
    latency : ndarray, shape (n, n) or (H, H)
        Measured one-way latencies (s), per process pair or per host pair
        (hosts in order of first appearance; the closest pair of two hosts,
        :func:`rankopt.probe.hierarchy.host_block_min`). Only the host-level
        matrix is kept: the planner's memory is :math:`O(H^2 + n)`.
    hosts : sequence of str
        Host name of every process.
    levels : sequence of ndarray of int
        Latency link levels, hosts first
        (:func:`rankopt.probe._topology.infer_link_levels`).
    uplink_flows : int
        Concurrent flows per uplink test (``k``).
    gap : float
        Ratio between rates that makes two tiers.
    domains : sequence of ndarray of int, optional
        Latency groups to take as the discovery domains (process labels per
        level, hosts first; the finest level above the hosts is used), such
        as those of the linear latency phase, which already told noise from
        tiers. Default: the latency tiers :data:`DOMAIN_GAP` apart.
    given : sequence of ndarray of int, optional
        The groups, known beforehand (a provider's or scheduler's topology,
        :meth:`rankopt.probe.topology_sources.TopologyLabels.groups`: process
        labels per level, hosts first, nested). Nothing is discovered: the
        first stage (``"representatives"``) measures the bus of every shared
        host and a star and a matching of the children of every group, then
        the uplinks of these groups are tested; ``levels`` and ``domains``
        are replaced by them.

    Examples
    --------
    Four hosts, flat latency, every rate equal: one star (3 slots), one test
    of the three others (their 3 pairs), no uplink test (one process per
    host), one interference slot.

    >>> import numpy as np
    >>> from rankopt.probe.linear import LinearPlanner
    >>> p = LinearPlanner(np.full((4, 4), 3e-5), ["a", "b", "c", "d"],
    ...                   [np.arange(4)])
    >>> sizes = []
    >>> while (stage := p.next_stage()) is not None:
    ...     sizes.append(len(stage))
    ...     p.record({pair: (1e9, 1e9, 0.0, 0.0) for slot in stage for pair in slot})
    >>> sizes
    [3, 3, 1]

    With the groups given (two racks of two hosts), nothing is discovered: one
    slot joins the hosts of each rack (side by side) and another the racks,
    then each rack's uplink is tested with two flows:

    >>> rack = np.array([0, 0, 1, 1])
    >>> p = LinearPlanner(np.full((4, 4), 3e-5), ["a", "b", "c", "d"],
    ...                   [np.arange(4)], given=[np.arange(4), rack])
    >>> while (stage := p.next_stage()) is not None:
    ...     p.record({pair: (1e9, 1e9, 0.0, 0.0) for slot in stage for pair in slot})
    >>> list(zip(p.stages, p.slots_per_stage)), p.groups[1].tolist()
    ([('representatives', 2), ('uplinks', 2), ('interference', 1)], [0, 0, 1, 1])
    """

    def __init__(
        self,
        latency: NDArray[np.float64],
        hosts: Sequence[str],
        levels: Sequence[NDArray[np.int64]],
        *,
        uplink_flows: int = DEFAULT_UPLINK_FLOWS,
        gap: float = DEFAULT_GAP,
        domains: Sequence[NDArray[np.int64]] | None = None,
        given: Sequence[NDArray[np.int64]] | None = None,
    ) -> None:
        self.hosts = tuple(hosts)
        self.given = None if given is None else [np.asarray(lv, dtype=np.int64) for lv in given]
        if self.given is not None:
            levels = domains = self.given
        self.n = len(self.hosts)
        self.host_of = host_labels(self.hosts)
        self.n_hosts = int(self.host_of.max()) + 1 if self.n else 0
        latency = np.asarray(latency, dtype=np.float64)
        #: Host-level latency (single linkage: the closest pair of two hosts, either
        #: direction); the planner never holds an (n, n) matrix of its own.
        self.host_latency = (
            latency
            if latency.shape == (self.n_hosts, self.n_hosts) and self.n_hosts < self.n
            else host_block_min(latency, self.host_of)
        )
        self.procs: list[list[int]] = [[] for _ in range(self.n_hosts)]
        for p, h in enumerate(self.host_of):
            self.procs[int(h)].append(p)
        self.levels = [np.asarray(lv, dtype=np.int64) for lv in levels]
        # host-level latency labels above the hosts (level k >= 1), per host
        first = np.array([ps[0] for ps in self.procs], dtype=np.int64)
        self.host_levels = [lv[first] for lv in self.levels[1:]]
        # domains: only latency tiers DOMAIN_GAP apart (noise makes 1.5x tiers), and only
        # while the representatives' bandwidth does not contradict them
        self._domains = None if domains is None else [np.asarray(lv) for lv in domains]
        if domains is not None:
            strong = [np.asarray(lv, dtype=np.int64) for lv in domains]
        else:
            strong = (
                infer_host_hierarchy(self.host_of, self.host_latency, gap=DOMAIN_GAP)
                if len(self.levels) > 1
                else []
            )
        self.domain = (
            strong[1][first] if len(strong) > 1 else np.zeros(self.n_hosts, dtype=np.int64)
        )
        self.flows = int(uplink_flows)
        self.gap = float(gap)
        self.stage = 0
        self.stages: list[str] = []
        self.slots_per_stage: list[int] = []
        self.edges: dict[Pair, tuple[float, float]] = {}  # host pair -> (best rate, spread)
        self.solo: dict[Pair, tuple[float, float, float, float]] = {}  # process pair -> rates
        self.bus: dict[int, tuple[float, float]] = {}  # host -> intra-host (rate, spread)
        self.tasks: list[_Task] = []
        self.groups: list[NDArray[np.int64]] | None = None
        self.uplink_tests: list[tuple[int, int, list[Pair]]] = []  # (level, group, flows)
        self.capacity: dict[tuple[int, int], tuple[float, float]] = {}
        self.interference: dict[str, Any] = {}
        self._pending: list[Pair] = []
        self._rep_groups: list[list[Pair]] = []
        self._last_slots: list[list[Pair]] = []
        #: Whether the latency groups are used (domains, final groups); False once
        #: the representatives' bandwidth contradicts them.
        self.latency_trusted = len(strong) > 1 or self.given is not None
        self._phase = "discovery"
        for d in np.unique(self.domain) if self.given is None else ():
            members = np.flatnonzero(self.domain == d).tolist()
            if len(members) > 1:
                self.tasks.append(_Task(int(d), "star", members, leader=members[0]))

    # ------------------------------------------------------------------ helpers
    def rep(self, host: int) -> int:
        """The process that represents ``host``: its lowest rank."""
        return self.procs[host][0]

    def _pair_keys(self, a: int, b: int) -> list[Hashable]:
        """Processes, hosts, domains and latency links a process pair occupies."""
        ha, hb = int(self.host_of[a]), int(self.host_of[b])
        keys: list[Hashable] = [("p", a), ("p", b), ("h", ha), ("h", hb)]
        if ha == hb:  # the host's bus: nothing outside the host
            return keys
        keys += [("d", int(self.domain[ha])), ("d", int(self.domain[hb]))]
        keys += [("l", *link) for link in pair_links(self.levels, a, b)]
        return keys

    def _known_keys(self, levels: Sequence[NDArray[np.int64]], a: int, b: int) -> list[Hashable]:
        """Processes, hosts and links (of the groups found) a process pair occupies."""
        ha, hb = int(self.host_of[a]), int(self.host_of[b])
        keys: list[Hashable] = [("p", a), ("p", b), ("h", ha), ("h", hb)]
        return keys + [("l", *link) for link in pair_links(levels, a, b)]

    # ------------------------------------------------------------------ stages
    def next_stage(self) -> list[list[Pair]] | None:
        """The slots of the next stage (process pairs), or ``None`` when done."""
        while True:
            if self._phase == "discovery":
                slots = self._discovery_stage()
                if slots:
                    return self._emit(
                        "discovery" if self.given is None else "representatives", slots
                    )
                if self.tasks:  # every pair of these tasks is known already
                    self._advance()
                    continue
                self._phase = "uplinks"
            elif self._phase == "uplinks":
                self._phase = "interference"
                slots = self._uplink_stage()
                if slots:
                    return self._emit("uplinks", slots)
            elif self._phase == "interference":
                self._phase = "done"
                slots = self._interference_stage()
                if slots:
                    return self._emit("interference", slots)
            else:
                return None

    def _emit(self, name: str, slots: list[list[Pair]]) -> list[list[Pair]]:
        self.stages.append(name)
        self.slots_per_stage.append(len(slots))
        self.stage += 1
        return slots

    def _discovery_stage(self) -> list[list[Pair]]:
        bundles: list[list[Pair]] = []
        for task in self.tasks:
            if task.kind == "star":
                task.pairs = [
                    (min(task.leader, h), max(task.leader, h))
                    for h in task.hosts
                    if h != task.leader
                ]
            else:
                task.pairs = _test_pairs(task.hosts)
            bundles.extend(
                [(self.rep(g), self.rep(h))] for g, h in task.pairs if (g, h) not in self.edges
            )
        if self.stage == 0:
            for ps in self.procs:  # the bus of every shared host
                if len(ps) > 1:
                    bundles.append([(ps[0], ps[1])])
            bundles.extend([(self.rep(g), self.rep(h))] for g, h in self._representatives())
        keys = [self._pair_keys(*b[0]) for b in bundles]
        self._last_slots = pack(bundles, keys)
        return self._last_slots

    def _representatives(self) -> list[Pair]:
        """Host pairs joining the children of every latency group (star + matching).

        Per group ``p`` of a level, its children in label order, each by its
        lowest host: a star from the first child's host and matchings of the
        others (:func:`_matchings`). One sort per level. With the groups
        given, the hosts of every finest group are its children too.
        """
        pairs: list[Pair] = []
        self._rep_groups = []
        nh = self.n_hosts
        # with the groups given, the hosts of every finest group too: no star discovers them
        labs = self.host_levels if self.given is None else [np.arange(nh), *self.host_levels]
        for k, lab in enumerate(labs):
            parent = labs[k + 1] if k + 1 < len(labs) else np.zeros(nh, int)
            for kids in _first_of_children(parent, lab):
                if len(kids) < 2:
                    continue
                star = [(kids[0], h) for h in kids[1:]]
                extra = [pr for pr in _matchings(kids[1:]) if pr not in star]
                pairs.extend(star + extra)
                self._rep_groups.append([(min(a, b), max(a, b)) for a, b in star + extra])
        return pairs

    def _latency_contradicted(self) -> bool:
        """Whether bandwidth says the latency groups are not the network's.

        The children of one latency group meet at one level, so their
        representatives should all run at one rate; one pair ``gap`` times
        faster than another means two "different" groups share a fast link
        -- latency tiers made by noise (a loaded machine), not by the network.
        """
        for group in self._rep_groups:
            rates = [self.edges[p][0] for p in group if p in self.edges]
            if len(rates) > 1 and max(rates) >= self.gap * min(rates):
                return True
        return False

    def record(self, rates: dict[Pair, tuple[float, float, float, float]]) -> None:
        """Give the planner the rates of the stage just run.

        Parameters
        ----------
        rates : dict of (int, int) -> (float, float, float, float)
            For every process pair ``(a, b)`` of the stage: rate ``a -> b``,
            rate ``b -> a`` and their spreads (bytes/s).
        """
        name = self.stages[-1]
        if name in ("discovery", "representatives"):
            self._record_discovery(rates)
        elif name == "uplinks":
            single = self._directed_host_matrix()
            for level, group, flows in self.uplink_tests:
                got = [rates.get((min(a, b), max(a, b))) for a, b in flows]
                self.capacity[(level, group)] = self._capacity(flows, got, single)
        else:
            slowed = []
            ratios = []
            for pair, (r_ab, r_ba, _, _) in rates.items():
                alone = self.solo[pair]
                ratio = max(r_ab, r_ba) / max(alone[0], alone[1])
                ratios.append(ratio)
                if ratio * self.gap <= 1.0:
                    slowed.append(list(pair))
            self.interference = {
                "pairs": len(rates),
                "slowed": slowed,
                "median_ratio": float(np.median(ratios)) if ratios else 1.0,
            }

    def _capacity(
        self,
        flows: Sequence[Pair],
        got: Sequence[tuple[float, float, float, float] | None],
        alone: NDArray[np.float64],
    ) -> tuple[float, float]:
        """An uplink's capacity out of and into its group from its ``k`` concurrent flows.

        Every flow ``(a, b)`` runs from a member ``a`` of the group to a
        process ``b`` of a sibling, then back: its two rates load the two
        directions of the uplink, each estimated on its own (another tenant
        may load only one), against ``alone[h, h']``, the rate from host
        ``h`` to host ``h'`` of a transfer alone. Every timed transfer is a
        round trip, one direction then the other, and the flows of a test are
        not in step: while they slow each other, only about half of them send
        out of the group at any moment, so the sum of their rates counts the
        uplink about twice. A direction whose flows each kept their rate alone
        shows no shared limit: its capacity is at least their sum. Otherwise
        half the sum, and never less than one flow's rate alone in that
        direction (which that flow had to itself).
        """
        out: list[tuple[float, float]] = []
        back: list[tuple[float, float]] = []
        for (a, b), r in zip(flows, got, strict=True):
            if r is None:
                continue
            ha, hb = int(self.host_of[a]), int(self.host_of[b])
            forward = a < b  # the gathered rates are (low -> high, high -> low)
            out.append((r[0] if forward else r[1], float(alone[ha, hb])))
            back.append((r[1] if forward else r[0], float(alone[hb, ha])))
        return self._direction_capacity(out), self._direction_capacity(back)

    def _direction_capacity(self, flows: Sequence[tuple[float, float]]) -> float:
        """One direction's capacity from its flows' (rate together, rate alone)."""
        if not flows:
            return 0.0
        total = float(sum(r for r, _ in flows))
        if all(r * self.gap > s for r, s in flows):
            return total  # no flow slowed down: nothing shared was full
        return max(total / 2.0, max(s for _, s in flows))

    def _directed_host_matrix(self) -> NDArray[np.float64]:
        """Host-pair rates alone, per direction where a transfer measured it.

        The filled host matrix holds the better direction of every measured
        pair; a direction measured slower (another tenant's load on one
        direction of an uplink) keeps its own rate here.
        """
        rate = self._host_matrix()[0].copy()
        for (a, b), (r_ab, r_ba, _, _) in self.solo.items():
            ha, hb = int(self.host_of[a]), int(self.host_of[b])
            if ha != hb:
                rate[ha, hb], rate[hb, ha] = r_ab, r_ba
        return rate

    def _record_discovery(self, rates: dict[Pair, tuple[float, float, float, float]]) -> None:
        for (a, b), value in rates.items():
            ha, hb = int(self.host_of[a]), int(self.host_of[b])
            best = max(value[0], value[1])
            spread = value[2] if value[0] >= value[1] else value[3]
            self.solo[(a, b)] = value
            if ha == hb:
                self.bus[ha] = (best, spread)
            else:
                key = (min(ha, hb), max(ha, hb))
                if key not in self.edges or self.edges[key][0] < best:
                    self.edges[key] = (best, spread)
        contradicted = self.given is None and self.latency_trusted and self._latency_contradicted()
        if self.stage == 1 and contradicted:
            # one domain: every host in one star, its transfers one at a time (exact);
            # what ran side by side may have shared a link the latency did not show
            self.latency_trusted = False
            self.domain = np.zeros(self.n_hosts, dtype=np.int64)
            for slot in self._last_slots:
                for a, b in slot if len(slot) > 1 else ():
                    ha, hb = int(self.host_of[a]), int(self.host_of[b])
                    if ha != hb:
                        self.solo.pop((a, b), None)
                        self.edges.pop((min(ha, hb), max(ha, hb)), None)
            hosts = list(range(self.n_hosts))
            self.tasks = [_Task(0, "star", hosts, leader=0)] if len(hosts) > 1 else []
            return
        self._advance()

    def _advance(self) -> None:
        """The next tasks, from the rates of the current tasks' pairs (all measured)."""
        nxt: list[_Task] = []
        for task in self.tasks:
            got = [self.edges[(min(g, h), max(g, h))][0] for g, h in task.pairs]
            if task.kind == "star":
                others = [h for h in task.hosts if h != task.leader]
                for tier in _tiers(np.array(got), self.gap):
                    members = [others[i] for i in tier]
                    if len(members) > 1:
                        rate = float(np.median(np.array(got)[tier]))
                        nxt.append(_Task(task.domain, "test", members, rate=rate))
            else:
                best = int(np.argmax(got))
                if got[best] >= self.gap * task.rate:
                    lead = task.pairs[best][0]
                    nxt.append(_Task(task.domain, "star", task.hosts, leader=lead))
        self.tasks = nxt

    def _host_matrix(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        rate, spread, _ = fill_bandwidth(self.n_hosts, self.edges)
        if np.isnan(rate).any():  # hosts never joined: the slowest rate measured
            floor = min((r for r, _ in self.edges.values()), default=1.0)
            rate = np.where(np.isnan(rate), floor, rate)
        return rate, spread

    def _final_groups(self) -> list[NDArray[np.int64]]:
        """Process group labels per level: bandwidth tiers pooled with latency tiers."""
        if self.groups is None and self.given is not None:
            self.groups = [lv.copy() for lv in self.given]  # the provider's, as they are
        if self.groups is None:
            rate = self._host_matrix()[0]
            if self._domains is not None and self.latency_trusted:
                # the latency groups given, pooled with the bandwidth's own tiers
                first = np.array([ps[0] for ps in self.procs], dtype=np.int64)
                found = infer_host_hierarchy(self.host_of, None, rate, gap=self.gap)
                pooled = [lv[first] for lv in [*self._domains[1:], *found[1:]]]
                nested = nest_levels(pooled, self.n_hosts)
                self.groups = [self.host_of.copy(), *(lv[self.host_of] for lv in nested)]
            else:
                lat = self.host_latency if self.latency_trusted else None
                self.groups = infer_host_hierarchy(self.host_of, lat, rate, gap=self.gap)
        return self.groups

    def _uplink_stage(self) -> list[list[Pair]]:
        """One capacity test per group of every level (see the module docstring).

        A group's ``k`` sources are its members (level 0), else the lowest
        process of each of its child groups, in label order; its ``k``
        destinations are the ``depth``-th processes of its sibling groups, in
        label order, depth 0 first. Members, children and siblings come from
        one sort per level, and destinations stop at ``k``: the stage costs
        ``O(n log n)`` plus its output, not a scan of the job per sibling.
        """
        levels = self._final_groups()
        bundles: list[list[Pair]] = []
        keys: list[list[Hashable]] = []
        self.uplink_tests = []
        for k, lab in enumerate(levels):
            parent = levels[k + 1] if k + 1 < len(levels) else np.zeros(self.n, dtype=np.int64)
            labels, members = _members(lab)
            # the groups under every parent, in label order (parents keyed by value)
            under = dict(zip(*_groups_under(parent, lab), strict=True))
            first_kids = _first_of_children(lab, levels[k - 1]) if k > 0 else None
            for i, g in enumerate(labels):
                inside = members[i]
                if first_kids is None:
                    sources = inside
                else:  # one host per child group, so the children's uplinks are not the limit
                    sources = first_kids[i]
                siblings = under[int(parent[inside[0]])]
                dests = self._destinations(siblings, int(g), labels, members)
                f = min(self.flows, len(sources), len(dests))
                if f < 2:
                    continue
                flows = [(sources[j], dests[j]) for j in range(f)]
                self.uplink_tests.append((k, int(g), flows))
                bundle_keys: set[Hashable] = set()
                for a, b in flows:
                    bundle_keys.update(self._known_keys(levels, a, b))
                bundles.append(flows)
                keys.append(list(bundle_keys))
        return pack(bundles, keys)

    def _destinations(
        self,
        siblings: list[int],
        g: int,
        labels: list[int],
        members: list[list[int]],
    ) -> list[int]:
        """Up to ``flows`` processes of the groups ``siblings`` (but ``g``), depth by depth."""
        dests: list[int] = []
        for depth in range(self.flows):
            for s in siblings:
                if s == g:
                    continue
                ms = members[bisect_left(labels, s)]
                if depth < len(ms):
                    dests.append(ms[depth])
                    if len(dests) == self.flows:
                        return dests
        return dests

    def _interference_stage(self) -> list[list[Pair]]:
        used: set[int] = set()
        chosen: list[Pair] = []
        for a, b in sorted(self.solo):
            if self.host_of[a] == self.host_of[b] or a in used or b in used:
                continue
            chosen.append((a, b))
            used.update((a, b))
        return [chosen] if len(chosen) > 1 else []

    # ------------------------------------------------------------------ result
    def _process_matrix(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        host_rate, host_spread = self._host_matrix()
        h = self.host_of
        bw = host_rate[np.ix_(h, h)].copy()
        spread = host_spread[np.ix_(h, h)].copy()
        same = h[:, None] == h[None, :]
        if self.bus:
            bus_rate = np.array([self.bus.get(g, (np.nan, 0.0))[0] for g in range(self.n_hosts)])
            bus_spread = np.array([self.bus.get(g, (0.0, 0.0))[1] for g in range(self.n_hosts)])
            fallback = float(np.nanmax(bus_rate))
            bus_rate = np.where(np.isnan(bus_rate), fallback, bus_rate)
            bw = np.where(same, bus_rate[h][:, None], bw)
            spread = np.where(same, bus_spread[h][:, None], spread)
        np.fill_diagonal(bw, 0.0)
        np.fill_diagonal(spread, 0.0)
        return bw, spread

    def result(
        self,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64], dict[str, Any]]:
        """The full (n, n) bandwidth, spread and count matrices and the facts to record.

        Measured directions keep their own rate and count 1; every other
        entry is filled (count 0). The returned dictionary holds
        ``groups`` (list of per-level process labels, finest first),
        ``uplink_capacity`` (per level, per group: ``[out, in]`` bytes/s
        from ``uplink_flows`` concurrent flows, ``None`` where not tested),
        ``uplink_flows``, ``interference``, ``bandwidth_stages`` and
        ``bandwidth_pairs``.
        """
        bw, spread = self._process_matrix()
        counts = np.zeros((self.n, self.n), dtype=np.int64)
        for (a, b), (r_ab, r_ba, s_ab, s_ba) in self.solo.items():
            bw[a, b], bw[b, a] = r_ab, r_ba
            spread[a, b], spread[b, a] = s_ab, s_ba
            counts[a, b] = counts[b, a] = 1
        levels = self._final_groups()
        capacity: list[list[list[float] | None]] = []
        for k, lab in enumerate(levels):
            row = [self.capacity.get((k, int(g))) for g in range(int(lab.max()) + 1)]
            capacity.append([None if c is None else list(c) for c in row])
        info: dict[str, Any] = {
            "groups": [lv.tolist() for lv in levels],
            "uplink_capacity": capacity,
            "uplink_flows": self.flows,
            "interference": self.interference,
            "bandwidth_stages": [
                [name, s] for name, s in zip(self.stages, self.slots_per_stage, strict=True)
            ],
            "bandwidth_pairs": len(self.solo),
            "latency_groups_used": bool(self.latency_trusted and self.given is None),
            "groups_given": self.given is not None,
        }
        return bw, spread, counts, info
