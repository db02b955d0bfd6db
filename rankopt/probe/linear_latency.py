"""The linear latency phase: the hierarchy and every block's latency from O(n) pairs.

The models need, per pair of processes, the latency of the level at which the
two meet (same host, same rack, same zone, ...), its spread, and the few
machines that are slower than their level (congested VMs) -- not the
n (n - 1) / 2 pairs of the round robin, whose n - 1 lockstep rounds each last
as long as their slowest pair. This module plans which pairs the probe
measures, in a few *stages* of pairs that each process runs in its own order
(no barrier between pairs: a slow pair holds back only the processes that
meet it later), and fills the full latency matrix from them.

Contents
--------
LatencyPlanner
    The adaptive schedule: :meth:`~LatencyPlanner.next_stage` gives a stage's
    slots, :meth:`~LatencyPlanner.record` takes its measured pairs, until no
    stage is left; :meth:`~LatencyPlanner.result` fills the matrices,
    :meth:`~LatencyPlanner.levels` gives the groups.
stage_slots
    First-fit order of a stage's pairs: the slot of every pair, so that each
    process runs its pairs in slot order without deadlock.
async_makespan
    When every process has finished a stage run that way, from pair durations.

The stages
----------
Hosts come from the host names every process reports at the start. A *node*
is a set of hosts known to form one group; its *children* are the groups one
level down. Nodes are split top down, all nodes of a stage side by side:

1. **hosts and sample**: every process against its host's first process (the
   intra-host latency), and :data:`SAMPLE_DEGREE` random perfect matchings of
   the hosts. Hosts joined by sampled pairs below the top tier form the
   top-level groups (zones) when they make two groups of more than
   :data:`SMALL_GROUP` hosts (the hosts of smaller ones are placed in the
   rounds):
   with few large zones each host meets about half its partners in its own,
   so the expensive pairs between zones are spread over every host instead
   of being paid by one pivot.
2. **rounds**, per node: ``k`` *pivots* drawn from the hosts not yet placed
   (all of them when they are few); each such host meets every pivot --
   in blocks of at most :data:`PIVOT_LOAD` hosts per process, each block with
   its own pivots, so that no pivot meets more -- and the pivots of a block
   meet each other. The node's tiers are split (Otsu's split of the
   log-latencies, then up while the upper class splits again; a split must
   be ``gap`` and :data:`SEPARATION` apart) and tried from the top one down:
   pairs below the threshold join hosts (union-find); a tier that joins
   every host, or only separates single hosts a small step above one group,
   is not the node's level (congested hosts make such tiers). What joined a
   pivot is a child; a host or small group that joined nothing but is
   clearly nearest one group (``gap`` below the next, whatever its own
   factor) joins it; the others wait for the next round, with as many
   pivots as groups seem left (at most :data:`MAX_PIVOTS`) and a member of
   each group the last round found in another block. A node whose pairs show
   one tier is flat. When a node ran in blocks, a last round compares its
   groups two by two (one group found in two blocks is one), and, when two or
   more hosts are still alone, one more has them meet each other (a small
   group whose hosts were all pivots of different blocks). Children of two
   or more hosts are the nodes of the next rounds; when a node is split,
   every host gets :data:`REFERENCE_PAIRS` pairs across its children.
3. **blocks**: between every two sibling groups of two or more hosts,
   random pairs up to :data:`BLOCK_SAMPLES` measured ones, for the block's
   median and spread.

Latencies are compared after dividing out every host's *factor*: the median,
over its pairs in nodes already split, of measured over block latency (the
block's median, or the node's where the host's own pairs are most of the
block). A host whose factor is at least :data:`CONGESTED_FACTOR` is a
congested VM: reported, and its factor kept in the fill; every other host
has factor 1. Because nodes are split top down, a congested host's factor
is known from the level above before its own group is split.

The fill
--------
Every measured direction keeps its value (count 1). Every other pair takes
its block's value: the median of the measured pairs between the two sibling
groups under the pair's lowest common node (the node's median when the block
has fewer than :data:`BLOCK_SAMPLES`), times the factors of the two hosts;
processes of one host take their host's median. ``latency_spread`` of a
filled pair is its block's spread: the median absolute deviation of the
block's pairs, or the median of their own spreads when that is larger.

Cost
----
With ``H`` hosts, a host meets about ``SAMPLE_DEGREE + k`` hosts per level
plus the pivots' duty (at most :data:`PIVOT_LOAD` per process and round);
the simulated jobs of ``bench/bench_probe_sim.py`` measure about 20-30 pairs
per process in 7-9 stages. The planner's time and memory are
:math:`O(n + P)` for ``P`` measured pairs (its host-level fill
:math:`O(H^2)`); only :meth:`LatencyPlanner.result`, which the engine calls
for the :class:`~rankopt.probe.measurement.Measurement`, builds the (n, n)
matrices.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt.probe.hierarchy import DEFAULT_GAP, host_labels, tree_levels

__all__ = [
    "LatencyPlanner",
    "stage_slots",
    "async_makespan",
    "SAMPLE_DEGREE",
    "PIVOTS",
    "BLOCK_SAMPLES",
    "CONGESTED_FACTOR",
]

Pair = tuple[int, int]
#: Random partners of every host in the first stage.
SAMPLE_DEGREE = 6
#: Pivots per node in its first round (doubled after a round that finds no group).
PIVOTS = 8
#: A node with at most this many hosts left to place measures all their pairs.
ALL_PAIRS_MAX = 12
#: Most pivots of one round per block of pending hosts: each pending host meets
#: every pivot of its block, each pivot every pending host of its block.
MAX_PIVOTS = 32
#: Most groups found last round whose members a pending host meets in the next.
MAX_FRESH = 16
#: Pending hosts per block and per process of a host: a pivot's own pairs in a
#: round stay below this many per process.
PIVOT_LOAD = 128
#: Most representatives of known children a host left to place is measured against.
MAX_TARGETS = 64
#: Most hosts alone after a merge round that all meet each other in its last round.
LONE_CHUNK = 64
#: Rounds after which the hosts of a node still unplaced stay groups of one.
MAX_ROUNDS = 12
#: Measured pairs per block of two sibling groups (and per flat group).
BLOCK_SAMPLES = 3
#: New groups of at most this many hosts may still join a larger one by the
#: relative rule (congested hosts whose pairs all sit above the threshold).
SMALL_GROUP = 3
#: A pair with a congested host joins two groups only this far below the threshold.
SLOW_MARGIN = 1.2
#: A tier that leaves one group and hosts alone must be this many times above the
#: group's latency; closer, the hosts alone are slow hosts, not groups of their own.
SINGLES_RATIO = 2.0
#: Pairs across its parent's children every host gets before its own group is split.
REFERENCE_PAIRS = 4
#: Pairs a block needs to be its own reference for the factors (else its node's median).
MIN_BLOCK_PAIRS = 8
#: Host factor at or above which a host is a congested VM.
CONGESTED_FACTOR = 1.3
#: Pairs of known level a host needs for its factor.
MIN_FACTOR_PAIRS = 3
_SEED = 0x1A7E


def stage_slots(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
    """The first-fit slot of every pair ``(a[k], b[k])``: no process twice in a slot.

    Each process runs its pairs in slot order. The earliest unfinished pair
    of the whole stage then always has both processes ready, so the order
    never deadlocks, and no barrier between slots is needed.

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt.probe.linear_latency import stage_slots
    >>> stage_slots(np.array([0, 2, 1, 0]), np.array([1, 3, 2, 3])).tolist()
    [0, 0, 1, 1]
    """
    size = int(max(np.max(a, initial=-1), np.max(b, initial=-1))) + 1
    taken = [0] * size  # per process: bit mask of its slots
    out: list[int] = []
    append = out.append
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        mask = taken[x] | taken[y]
        free = (mask + 1) & ~mask  # lowest slot free for both
        taken[x] |= free
        taken[y] |= free
        append(free.bit_length() - 1)
    return np.array(out, dtype=np.int64)


def async_makespan(
    a: NDArray[np.int64],
    b: NDArray[np.int64],
    slot: NDArray[np.int64],
    seconds: NDArray[np.float64],
    n: int,
) -> float:
    """Seconds until every process has run its pairs, each in slot order.

    A pair starts when both its processes have finished their earlier pairs
    and lasts ``seconds``; there is no barrier between slots.

    Examples
    --------
    Process 1 is in a slow pair first; process 0's second pair waits for it,
    process 3's does not:

    >>> import numpy as np
    >>> from rankopt.probe.linear_latency import async_makespan
    >>> a, b = np.array([1, 0, 3]), np.array([2, 1, 4])
    >>> async_makespan(a, b, np.array([0, 1, 0]), np.array([5.0, 1.0, 1.0]), 5)
    6.0
    """
    ready = np.zeros(n)
    order = np.argsort(slot, kind="stable")
    cuts = np.flatnonzero(np.diff(slot[order])) + 1
    for part in np.split(order, cuts):
        x, y = a[part], b[part]
        end = np.maximum(ready[x], ready[y]) + seconds[part]
        ready[x] = end
        ready[y] = end
    return float(ready.max(initial=0.0))


#: Least separation of two tiers: the distance between their log-medians over the
#: sum of their median absolute deviations (a continuous spread of values, such as
#: zone pairs anywhere in 0.6-1.5 ms, is not two tiers).
SEPARATION = 3.0
#: Splits of the best Otsu scores tried for two tiers.
OTSU_CANDIDATES = 64


def _otsu(x: NDArray[np.float64], gap: float) -> tuple[int, float, float] | None:
    """Otsu's split of sorted log-values ``x``: (size of the lower class, its median,
    the upper median), or ``None``.

    The split of the highest between-class variance among those whose class
    medians are ``gap`` and :data:`SEPARATION` apart (the best
    :data:`OTSU_CANDIDATES` are tried).
    """
    m = x.size
    if m < 2:
        return None
    csum = np.cumsum(x)
    k = np.arange(1, m)
    mean_lo = csum[:-1] / k
    mean_hi = (csum[-1] - csum[:-1]) / (m - k)
    score = k * (m - k) * (mean_hi - mean_lo) ** 2
    # the best split that is two tiers: a third tier can pull Otsu's own between two
    for best in (np.argsort(-score, kind="stable")[:OTSU_CANDIDATES] + 1).tolist():
        below, above = x[:best], x[best:]
        lo, hi = float(np.median(below)), float(np.median(above))
        spread = float(np.median(np.abs(below - lo)) + np.median(np.abs(above - hi)))
        if hi - lo >= np.log(gap) and hi - lo >= SEPARATION * max(spread, 0.02):
            return best, lo, hi
    return None


def _split_at(x: NDArray[np.float64], lo: float, hi: float, gap: float) -> float:
    """The threshold between two tiers of sorted log-values: where they part, near the middle."""
    mid = 0.5 * (lo + hi)
    i = int(np.searchsorted(x, mid))
    cut = 0.5 * (x[max(i - 1, 0)] + x[min(i, x.size - 1)])
    half = 0.5 * np.log(gap)
    return float(np.exp(min(max(cut, mid - half), mid + half)))


def _splits(values: NDArray[np.float64], gap: float) -> list[tuple[float, float, float]]:
    """Candidate thresholds of ``values``: the most significant tier split, then up.

    Otsu's split of the log-values (:func:`_otsu`), then the split of its
    upper class, and so on while one is found. Each entry is (threshold,
    median below, median above); empty when the values show one tier.
    """
    x = np.sort(np.log(np.asarray(values, dtype=np.float64)))
    found: list[tuple[float, float, float]] = []
    lo = 0
    while (cut := _otsu(x[lo:], gap)) is not None:
        size, below, above = cut
        found.append(
            (_split_at(x[lo:], below, above, gap), float(np.exp(below)), float(np.exp(above)))
        )
        lo += size
    return found


def _components(n: int, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
    """Connected-component label of each of ``n`` items joined by the edges ``(a, b)``."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(a)), (a, b)), shape=(n, n))
    return connected_components(graph, directed=False)[1].astype(np.int64)


def _group_median(
    keys: NDArray[np.int64], values: NDArray[np.float64], n: int
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Median of ``values`` per key ``0..n-1`` (nan where none) and the count per key."""
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    count = np.bincount(k, minlength=n)
    start = np.r_[0, np.cumsum(count)[:-1]]
    out = np.full(n, np.nan)
    has = count > 0
    lo = start[has] + (count[has] - 1) // 2
    hi = start[has] + count[has] // 2
    out[has] = 0.5 * (v[lo] + v[hi])
    return out, count


@dataclass(eq=False)
class _Node:
    """A group of hosts whose children are being found (see the module docstring)."""

    hosts: NDArray[np.int64]
    depth: int
    pending: list[int]
    children: list[list[int]] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)  # hosts every pending host meets next
    pivots: list[int] = field(default_factory=list)
    fresh: list[list[int]] = field(default_factory=list)  # groups found or grown last round
    split: bool = False  # whether the last round ran in blocks
    blocked: bool = False  # whether any round ran in blocks
    merging: bool = False  # a round comparing the groups found in different blocks
    lone: bool = False  # a last round comparing the hosts still alone after it
    k: int = PIVOTS
    rounds: int = 0
    threshold: float = np.nan
    level: float = np.nan
    low: float = np.nan
    flat: bool = False
    done: bool = False


class LatencyPlanner:
    """The adaptive linear latency schedule of one probe (see the module docstring).

    Every process builds the same planner from the same host names and feeds
    it the same gathered latencies, so all agree on every stage without
    talking; the random choices come from a fixed seed.

    Parameters
    ----------
    hosts : sequence of str
        Host name of every process.
    gap : float
        Ratio between two latency tiers that makes them two levels.
    seed : int
        Seed of the pivots and samples (the same on every process).

    Examples
    --------
    Two zones of four hosts, two processes per host: the first stage (hosts
    and sample), the zones' rounds, then the blocks.

    >>> import numpy as np
    >>> from rankopt.probe.linear_latency import LatencyPlanner
    >>> hosts = [f"h{i // 2}" for i in range(16)]
    >>> zone, host = np.arange(16) // 8, np.arange(16) // 2
    >>> lat = np.where(zone[:, None] == zone[None, :], 50e-6, 1e-3)
    >>> lat[host[:, None] == host[None, :]] = 5e-6
    >>> p = LatencyPlanner(hosts)
    >>> while (slots := p.next_stage()) is not None:
    ...     a, b = p.stage_pairs
    ...     p.record(np.stack([lat[a, b], lat[b, a], 0 * a, 0 * a], axis=1))
    >>> p.levels()[1].tolist()
    [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]
    >>> off = ~np.eye(16, dtype=bool)
    >>> bool(np.allclose(p.result()[0][off], lat[off]))
    True
    """

    def __init__(
        self, hosts: Sequence[str], *, gap: float = DEFAULT_GAP, seed: int = _SEED
    ) -> None:
        self.hosts = tuple(hosts)
        self.n = len(self.hosts)
        self.host_of = host_labels(self.hosts)
        self.n_hosts = int(self.host_of.max()) + 1 if self.n else 0
        self.procs: list[list[int]] = [[] for _ in range(self.n_hosts)]
        for p, h in enumerate(self.host_of.tolist()):
            self.procs[h].append(p)
        self.gap = float(gap)
        self.gen = np.random.default_rng(seed)
        self.stages: list[str] = []
        self.slots_per_stage: list[int] = []
        self.pairs_per_stage: list[int] = []
        #: The pairs of the stage last given: (a, b), a < b, slot by slot.
        self.stage_pairs: tuple[NDArray[np.int64], NDArray[np.int64]] = (
            np.zeros(0, dtype=np.int64),
            np.zeros(0, dtype=np.int64),
        )
        self.stage_slot = np.zeros(0, dtype=np.int64)
        # measured process pairs, one array per stage: a, b, lat_ab, lat_ba, s_ab, s_ba
        self._measured: list[NDArray[np.float64]] = []
        # host pairs measured (g < h) and their better direction, raw
        self._keys = np.zeros(0, dtype=np.int64)  # g * H + h of every measured pair, sorted
        self._key_at = np.zeros(0, dtype=np.int64)  # its index in eg, eh, ev
        self.eg = np.zeros(0, dtype=np.int64)
        self.eh = np.zeros(0, dtype=np.int64)
        self.ev = np.zeros(0)
        self.factor = np.ones(self.n_hosts)
        self.nodes: list[_Node] = []
        #: path[h, d]: the node of depth d that holds host h (-1: none)
        self.path = np.full((self.n_hosts, 1), -1, dtype=np.int64)
        self._phase = "sample"
        counts = np.bincount(self.host_of, minlength=self.n_hosts)
        self._proc_start = np.r_[0, np.cumsum(counts)[:-1]]
        self._proc_count = counts
        self._proc_flat = np.argsort(self.host_of, kind="stable")
        self._references: list[int] = []  # nodes just split, whose hosts need references
        #: The filled host-level latency without the host factors (the blocks), once
        #: :meth:`result` ran: what the bandwidth phase groups hosts with.
        self.host_lat: NDArray[np.float64] | None = None

    # ------------------------------------------------------------------ helpers
    def _known(self, g: NDArray[np.int64], h: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Whether each host pair ``(g, h)``, ``g < h``, was measured."""
        keys = g * self.n_hosts + h
        i = np.searchsorted(self._keys, keys)
        i = np.minimum(i, max(self._keys.size - 1, 0))
        return (
            (self._keys.size > 0) & (self._keys[i] == keys)
            if self._keys.size
            else np.zeros(keys.shape, dtype=bool)
        )

    def _add_node(self, hosts: Sequence[int], depth: int) -> None:
        hs = np.array(sorted(hosts), dtype=np.int64)
        self.nodes.append(_Node(hosts=hs, depth=depth, pending=hs.tolist()))
        if depth >= self.path.shape[1]:
            grow = np.full((self.n_hosts, depth + 1 - self.path.shape[1]), -1, dtype=np.int64)
            self.path = np.hstack([self.path, grow])
        self.path[hs, depth] = len(self.nodes) - 1

    def _norm(self) -> NDArray[np.float64]:
        """Every measured host pair's latency over the two hosts' factors."""
        return self.ev / (self.factor[self.eg] * self.factor[self.eh])

    def _lca(self, g: NDArray[np.int64], h: NDArray[np.int64]) -> tuple[NDArray[np.int64], ...]:
        """Lowest common node of host pairs, its depth, and each host's child key there.

        The child key of a host is the node one level down that holds it, or
        ``-(host + 1)`` when it is a child of one host (or not placed yet).
        """
        pg, ph = self.path[g], self.path[h]
        same = (pg == ph) & (pg >= 0)
        depth = np.cumprod(same, axis=1).sum(axis=1) - 1
        rows = np.arange(len(g))
        node = np.where(depth >= 0, pg[rows, np.maximum(depth, 0)], -1)
        below = np.minimum(depth + 1, self.path.shape[1] - 1)
        inside = depth + 1 < self.path.shape[1]
        kg = np.where(inside & (pg[rows, below] >= 0), pg[rows, below], -(g + 1))
        kh = np.where(inside & (ph[rows, below] >= 0), ph[rows, below], -(h + 1))
        return node, depth, kg, kh

    def _node_array(self, name: str) -> NDArray[Any]:
        return np.array([getattr(nd, name) for nd in self.nodes] or [0.0])

    def _emit(
        self, name: str, host_pairs: NDArray[np.int64], extra: NDArray[np.int64]
    ) -> list[list[Pair]]:
        """Turn host pairs (and process pairs ``extra``) into the stage's slots.

        A host's pairs go to its processes in turn (the ``k``-th pair of a host
        with ``p`` processes to its ``k mod p``-th), so a host's load is spread.
        """
        hp = np.asarray(host_pairs, dtype=np.int64).reshape(-1, 2)
        ends = hp.ravel()
        order = np.argsort(ends, kind="stable")
        rank = np.empty(ends.size, dtype=np.int64)
        first = np.r_[0, np.flatnonzero(np.diff(ends[order])) + 1]
        run = np.arange(ends.size) - np.repeat(first, np.diff(np.r_[first, ends.size]))
        rank[order] = run
        procs = self._proc_flat[self._proc_start[ends] + rank % self._proc_count[ends]]
        procs = procs.reshape(-1, 2)
        ab = np.concatenate([np.asarray(extra, dtype=np.int64).reshape(-1, 2), procs])
        ab = np.sort(ab, axis=1)
        if not ab.size:
            return []
        _, keep = np.unique(ab[:, 0] * self.n + ab[:, 1], return_index=True)
        ab = ab[np.sort(keep)]  # a process pair once per stage, first come first
        slot = stage_slots(ab[:, 0], ab[:, 1])
        order = np.argsort(slot, kind="stable")
        a, b, slot = ab[order, 0], ab[order, 1], slot[order]
        self.stage_pairs, self.stage_slot = (a, b), slot
        self.stages.append(name)
        self.slots_per_stage.append(int(slot.max()) + 1)
        self.pairs_per_stage.append(len(a))
        cuts = np.flatnonzero(np.diff(slot)) + 1
        return [
            list(zip(x.tolist(), y.tolist(), strict=True))
            for x, y in zip(np.split(a, cuts), np.split(b, cuts), strict=True)
        ]

    # ------------------------------------------------------------------ stages
    def next_stage(self) -> list[list[Pair]] | None:
        """The slots of the next stage (process pairs ``a < b``), or ``None`` when done.

        ``stage_pairs`` holds the same pairs as two arrays, slot by slot, in the
        order :meth:`record` expects their values.
        """
        while True:
            if self._phase == "sample":
                self._phase = "rounds"
                extra = [(ps[0], p) for ps in self.procs for p in ps[1:]]
                slots = self._emit("hosts", self._sample_pairs(), np.array(extra, dtype=np.int64))
                if slots:
                    return slots
            elif self._phase == "rounds":
                pairs = self._round_pairs()
                if pairs.size:
                    return self._emit("rounds", pairs, np.zeros((0, 2), dtype=np.int64))
                if any(not node.done for node in self.nodes):
                    self._classify_all()  # every pair known already
                    continue
                self._phase = "blocks"
                self._final_factors()
            elif self._phase == "blocks":
                self._phase = "done"
                slots = self._emit("blocks", self._block_pairs(), np.zeros((0, 2), dtype=np.int64))
                if slots:
                    return slots
            else:
                return None

    def _sample_pairs(self) -> NDArray[np.int64]:
        self._add_node(range(self.n_hosts), 0)
        if self.n_hosts < 2:
            self.nodes[0].done = True
            self.nodes[0].pending = []
            return np.zeros((0, 2), dtype=np.int64)
        parts = []
        for _ in range(min(SAMPLE_DEGREE, self.n_hosts - 1)):
            perm = self.gen.permutation(self.n_hosts)
            g, h = perm[0 : self.n_hosts - 1 : 2], perm[1 : self.n_hosts : 2]
            parts.append(np.stack([np.minimum(g, h), np.maximum(g, h)], axis=1))
        return self._unique_new(np.concatenate(parts))

    def _unique_new(self, pairs: NDArray[np.int64]) -> NDArray[np.int64]:
        """Distinct host pairs ``(g < h)`` not measured yet, in order of first appearance."""
        pairs = np.sort(np.asarray(pairs, dtype=np.int64).reshape(-1, 2), axis=1)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        if not pairs.size:
            return pairs
        _, keep = np.unique(pairs[:, 0] * self.n_hosts + pairs[:, 1], return_index=True)
        pairs = pairs[np.sort(keep)]
        return pairs[~self._known(pairs[:, 0], pairs[:, 1])]

    def _round_pairs(self) -> NDArray[np.int64]:
        """Pairs of the next round of every node still placing hosts."""
        parts = [
            np.array(self._reference_pairs(ni), dtype=np.int64).reshape(-1, 2)
            for ni in self._references
        ]
        self._references = []
        for node in self.nodes:
            if node.done:
                continue
            rest = np.array(node.pending, dtype=np.int64)

            def cross(x: NDArray[np.int64], y: NDArray[np.int64]) -> NDArray[np.int64]:
                return np.stack(np.broadcast_arrays(x[:, None], y[None, :]), -1).reshape(-1, 2)

            if rest.size <= max(ALL_PAIRS_MAX, node.k + 1):
                blocks = [(rest, rest)]
            else:
                # blocks of hosts, each with its own pivots: a pivot meets at most
                # PIVOT_LOAD hosts per process of its host, whatever the node's size
                per = int(np.median(self._proc_count[rest]))
                size = max(PIVOT_LOAD * per, 2 * node.k)
                shuffled = rest[self.gen.permutation(rest.size)]
                m = -(-rest.size // size)
                blocks = []
                for part in np.array_split(shuffled, m):
                    k = min(node.k, part.size)
                    blocks.append((part, np.sort(self.gen.choice(part, size=k, replace=False))))
            if node.merging:
                merge = self._lone_pairs(node) if node.lone else self._merge_pairs(node)
                if merge.size:
                    parts.append(merge)
                else:  # one group of two or more hosts: nothing to join
                    self._finish(node, np.zeros(0))
                continue
            node.pivots = sorted(int(x) for _, q in blocks for x in q.tolist())
            pivots = set(node.pivots)
            known = [t for t in node.targets if t not in pivots][:MAX_TARGETS]
            node.targets = node.pivots + known
            kn = np.array(known, dtype=np.int64)
            parts.append(cross(kn, kn))  # known groups' representatives, all pairs
            # each host waiting meets a random member of every known group: the
            # group's members share the load. Congested members are left out where
            # their factors are known; at the top, where none is known yet, a host
            # meets two members (one congested member must not keep it out)
            for t in known:
                pool = self._usual(next(c for c in node.children if t in c))
                for _ in range(2 if node.depth == 0 else 1):
                    parts.append(
                        np.stack([rest, pool[self.gen.integers(0, pool.size, rest.size)]], 1)
                    )
            for part, piv in blocks:  # pivots meet their block's hosts and each other
                parts.append(cross(part, piv))
                parts.append(cross(piv, piv))
            node.blocked |= len(blocks) > 1
            # the groups last round found or grew: a random member each, per block (a
            # pending host of one met none of its pivots, which sat in another block)
            fresh = [c for c in node.fresh if len(c) > 1][:MAX_FRESH] if node.split else []
            node.split = len(blocks) > 1
            if fresh:
                # a group meets each block through another member (one per block at most)
                fresh = [c for c in fresh if len(c) >= len(blocks)]
                for i, (part, _) in enumerate(blocks):
                    reps = np.array([c[i % len(c)] for c in fresh], dtype=np.int64)
                    parts.append(cross(part, reps))
            node.fresh = []
        if not parts:
            return np.zeros((0, 2), dtype=np.int64)
        return self._unique_new(np.concatenate(parts))

    def _merge_pairs(self, node: _Node) -> NDArray[np.int64]:
        """A pair between every two groups of two or more hosts of ``node``, random members,
        and between every host alone and every such group.

        Rounds run in blocks find one group several times (once per block it
        has a pivot in) and may leave a pivot alone whose group is in other
        blocks; these pairs join the copies. The hosts still alone after them
        meet each other in one more round (:meth:`_lone_pairs`).
        """
        groups = [c for c in node.children if len(c) > 1]
        alone = [c[0] for c in node.children if len(c) == 1]
        pairs = [
            (int(self.gen.choice(a)), int(self.gen.choice(b)))
            for i, a in enumerate(groups)
            for b in groups[i + 1 :]
        ]
        # a pivot alone in its block may have its group in another block; it meets
        # a member not known to be congested (each group's load on two at least)
        pools = [self._usual(c) for c in groups]
        pairs += [(x, int(self.gen.choice(g))) for x in alone for g in pools]
        node.targets = sorted({x for pr in pairs for x in pr})
        return np.array(pairs, dtype=np.int64).reshape(-1, 2)

    def _usual(self, group: Sequence[int]) -> NDArray[np.int64]:
        """The members of ``group`` not known to be congested (all of them when fewer than
        two are).

        A group's representative in a pair that decides where a host goes is
        drawn from these: a congested member's factor is only an estimate,
        and its pairs sit above the group's level by it. Two members at least
        share the group's pairs, so that no process takes them all.
        """
        g = np.asarray(group, dtype=np.int64)
        usual = g[self.factor[g] <= 1.0]
        return usual if usual.size >= 2 else g

    def _lone_pairs(self, node: _Node) -> NDArray[np.int64]:
        """Pairs between the hosts of ``node`` still alone after its merge round.

        A small group (two to a few hosts) whose every host was a pivot of a
        different block, or of a different round, is as many hosts alone,
        none of which met another: no pending host met them, and the merge
        round pairs hosts alone only with groups. They meet each other here,
        all pairs in chunks of at most :data:`LONE_CHUNK` hosts (a host's
        pairs stay bounded; after the merge round few hosts are alone).
        """
        alone = [c[0] for c in node.children if len(c) == 1]
        lone = np.array(alone, dtype=np.int64)[self.gen.permutation(len(alone))]
        parts = [np.zeros((0, 2), dtype=np.int64)]
        for chunk in np.array_split(lone, -(-lone.size // LONE_CHUNK)) if lone.size else []:
            i, j = np.triu_indices(chunk.size, 1)
            parts.append(np.stack([chunk[i], chunk[j]], axis=1))
        node.targets = sorted(alone)
        return np.concatenate(parts)

    def _block_pairs(self) -> NDArray[np.int64]:
        """Random pairs for every block of two sibling groups (and flat group) with few."""
        node, _, kg, kh = self._lca(self.eg, self.eh)
        per_node = np.bincount(node[node >= 0], minlength=len(self.nodes))
        have: dict[tuple[int, int, int], int] = {}
        multi = (kg >= 0) & (kh >= 0)  # both in groups of two or more hosts
        for key in zip(
            node[multi].tolist(),
            np.minimum(kg, kh)[multi].tolist(),
            np.maximum(kg, kh)[multi].tolist(),
            strict=True,
        ):
            have[key] = have.get(key, 0) + 1
        pairs: list[Pair] = []
        for ni, nd in enumerate(self.nodes):
            if nd.flat:
                count = int(per_node[ni]) if len(nd.hosts) > 2 else BLOCK_SAMPLES
                for _ in range(max(BLOCK_SAMPLES - count, 0)):
                    g, h = self.gen.choice(nd.hosts, size=2, replace=False).tolist()
                    pairs.append((min(g, h), max(g, h)))
                continue
            groups = [c for c in nd.children if len(c) > 1]
            keys = [int(self.path[c[0], nd.depth + 1]) for c in groups]
            for i, ci in enumerate(groups):
                for j in range(i + 1, len(groups)):
                    key = (ni, min(keys[i], keys[j]), max(keys[i], keys[j]))
                    for _ in range(max(BLOCK_SAMPLES - have.get(key, 0), 0)):
                        g, h = int(self.gen.choice(ci)), int(self.gen.choice(groups[j]))
                        pairs.append((min(g, h), max(g, h)))
        return self._unique_new(np.array(pairs, dtype=np.int64).reshape(-1, 2))

    # ------------------------------------------------------------------ record
    def record(self, values: NDArray[np.float64]) -> None:
        """Give the planner the latencies of the stage just run.

        Parameters
        ----------
        values : ndarray, shape (m, 4)
            For every pair of ``stage_pairs``, in order: latency ``a -> b``,
            latency ``b -> a`` and their spreads (s). A pair that could not be
            measured holds ``nan``.
        """
        a, b = self.stage_pairs
        v = np.asarray(values, dtype=np.float64).reshape(len(a), 4)
        self._measured.append(np.column_stack([a, b, v]))
        ha, hb = self.host_of[a], self.host_of[b]
        best = np.fmin(v[:, 0], v[:, 1])
        cross = (ha != hb) & np.isfinite(best) & (best > 0)
        g = np.minimum(ha, hb)[cross]
        h = np.maximum(ha, hb)[cross]
        val = best[cross]
        if g.size:
            keys = g * self.n_hosts + h
            order = np.lexsort((val, keys))  # per key, its smallest value first
            keys, g, h, val = keys[order], g[order], h[order], val[order]
            first = np.r_[True, keys[1:] != keys[:-1]]
            keys, g, h, val = keys[first], g[first], h[first], val[first]
            i = np.minimum(np.searchsorted(self._keys, keys), max(self._keys.size - 1, 0))
            old = (
                (self._keys.size > 0) & (self._keys[i] == keys)
                if self._keys.size
                else np.zeros(keys.size, dtype=bool)
            )
            at = self._key_at[i[old]]
            self.ev[at] = np.minimum(self.ev[at], val[old])
            new = ~old
            start = self.ev.size
            self.eg = np.concatenate([self.eg, g[new]])
            self.eh = np.concatenate([self.eh, h[new]])
            self.ev = np.concatenate([self.ev, val[new]])
            all_keys = np.concatenate([self._keys, keys[new]])
            all_at = np.concatenate([self._key_at, start + np.arange(int(new.sum()))])
            srt = np.argsort(all_keys, kind="stable")
            self._keys, self._key_at = all_keys[srt], all_at[srt]
        name = self.stages[-1]
        if name == "hosts":
            self._split_root()
        elif name == "rounds":
            self._classify_all()

    def _split_root(self) -> None:
        """Top-level groups from the sample: hosts joined below the top tier.

        The tiers are tried from the top one down; a split is kept when it gives
        two groups of two or more hosts (a tier that only congested hosts make
        joins almost every host into one group).
        """
        root = self.nodes[0]
        if root.done or self.ev.size < 2:
            return
        for split in reversed(_splits(self.ev, self.gap)):
            low = self.ev < split[0]
            label = _components(self.n_hosts, self.eg[low], self.eh[low])
            size = np.bincount(label, minlength=self.n_hosts)
            big = size > SMALL_GROUP
            groups = [np.flatnonzero(label == c).tolist() for c in np.flatnonzero(big)]
            if len(groups) >= 2:
                break
        else:
            return
        # the large components are the top-level groups (or pieces of them, joined by
        # their representatives' pairs); hosts in small ones meet those representatives
        root.threshold, root.low, root.level = split
        root.children = groups[:MAX_TARGETS]
        root.targets = [c[0] for c in root.children]
        placed = np.zeros(self.n_hosts, dtype=bool)
        for c in root.children:
            placed[c] = True
        root.pending = np.flatnonzero(~placed).tolist()

    def _classify_all(self) -> None:
        """Every node that ran a round: factors first, then each node's hosts placed."""
        self._final_factors()
        node_of_edge, _, _, _ = self._lca(self.eg, self.eh)
        norm = self._norm()
        order = np.argsort(node_of_edge, kind="stable")
        bounds = np.searchsorted(node_of_edge[order], np.arange(len(self.nodes) + 1))
        for ni, node in enumerate(self.nodes):
            if node.done or not node.targets:
                continue
            pick = order[bounds[ni] : bounds[ni + 1]]
            self._classify(ni, node, pick, norm[pick])

    def _classify(
        self, ni: int, node: _Node, edges: NDArray[np.int64], values: NDArray[np.float64]
    ) -> None:
        """Place the node's pending hosts after a round (see the module docstring).

        The node's tiers are tried from the top one down (:func:`_splits`): a
        threshold that joins every host into one group is not the node's
        level (congested hosts' pairs make such a tier above it).
        """
        node.rounds += 1
        hosts = node.hosts
        local = np.full(self.n_hosts, -1, dtype=np.int64)
        local[hosts] = np.arange(hosts.size)
        g, h = self.eg[edges], self.eh[edges]
        pend = np.zeros(self.n_hosts, dtype=bool)
        pend[node.pending] = True
        tgt = np.zeros(self.n_hosts, dtype=bool)
        tgt[node.targets] = True
        touch = pend[g] | pend[h] | tgt[g] | tgt[h]
        anchors = np.array(node.pivots + [x for c in node.children for x in c], dtype=np.int64)
        chosen = None
        # a congested host's factor is an estimate: its pairs must sit deeper in the
        # lower tier to join groups (a factor set too high would bridge two of them)
        slow = (self.factor[g] > 1.0) | (self.factor[h] > 1.0)
        for split in reversed(_splits(values, self.gap) if values.size > 1 else []):
            strict = split[0] / SLOW_MARGIN
            low = touch & (values < np.where(slow, strict, split[0]))
            ea, eb = [local[g[low]]], [local[h[low]]]
            for c in node.children:  # a known child stays one group
                lc = local[np.array(c)]
                ea.append(lc[:-1])
                eb.append(lc[1:])
            label = _components(hosts.size, np.concatenate(ea), np.concatenate(eb))
            has_anchor = np.zeros(hosts.size, dtype=bool)
            has_anchor[label[local[anchors]]] = True
            if np.unique(label).size == 1 and has_anchor[label].all():
                continue  # everything joined: not this node's tier
            sizes = np.bincount(label[has_anchor[label]])
            if np.sum(sizes > 1) == 1 and split[2] < SINGLES_RATIO * split[1]:
                continue  # one group and hosts alone, a small step apart: slow hosts
            chosen = split, label, has_anchor
            break
        if chosen is None:
            if node.children and not node.flat:
                # known children and no tier this round: the pending hosts are alone
                node.children.extend([x] for x in node.pending)
                self._finish(node, values)
                return
            # one tier: the node is flat, every host a child of its own
            node.flat = True
            node.children = [[x] for x in hosts.tolist()]
            node.level = float(np.median(values)) if values.size else np.nan
            self._finish(node, values)
            return
        (node.threshold, node.low, node.level), label, has_anchor = chosen
        self._relative(node, local, label, has_anchor, g, h, values, touch)
        before = sum(len(c) > 1 for c in node.children)
        before_placed = sum(len(c) for c in node.children)
        groups: dict[int, list[int]] = {}
        pending: list[int] = []
        for i, host in enumerate(hosts.tolist()):
            if has_anchor[label[i]]:
                groups.setdefault(int(label[i]), []).append(host)
            else:
                pending.append(host)
        pivots = set(node.pivots)
        node.fresh = [c for c in groups.values() if any(x in pivots for x in c)]
        node.children = sorted(groups.values())
        node.pending = pending
        node.targets = []
        found = sum(len(c) > 1 for c in node.children) - before
        placed = hosts.size - len(pending)
        if found <= 0:
            node.k = min(2 * node.k, MAX_PIVOTS, max(len(pending), 1))
        else:
            # as many pivots as the groups still hidden among the pending hosts
            size = max(placed - before_placed, 1) / found
            hidden = len(pending) / size
            node.k = int(min(MAX_PIVOTS, max(PIVOTS, np.ceil(1.5 * hidden))))
        if node.rounds >= MAX_ROUNDS and pending:
            node.children.extend([x] for x in pending)
            node.pending = []
        if not node.pending:
            if node.blocked and not node.merging:
                node.merging = True  # one more round: join the copies of a group
                node.targets = [node.children[0][0]]
                return
            if node.merging and not node.lone and sum(len(c) == 1 for c in node.children) > 1:
                node.lone = True  # and one more: the hosts still alone meet each other
                node.targets = [node.children[0][0]]
                return
            self._finish(node, values)

    def _relative(
        self,
        node: _Node,
        local: NDArray[np.int64],
        label: NDArray[np.int64],
        has_anchor: NDArray[np.bool_],
        g: NDArray[np.int64],
        h: NDArray[np.int64],
        values: NDArray[np.float64],
        touch: NDArray[np.bool_],
    ) -> None:
        """Join a host still alone (or a new group of at most :data:`SMALL_GROUP`) to the
        group it is clearly nearest (factor-free).

        A congested host's pairs are all slow by its factor, so their ratios
        hold: when its pair to one anchored group is ``gap`` times below the
        second best and the square root of the node's tier ratio below the
        median of the others (with two groups only, both by the larger of the
        two), it joins that group. The others are the other groups' best
        pairs, and its pairs to every other host of the node, grouped or not,
        whichever median is lower (a pair one noisy step below its tier to a
        group among hosts mostly alone is not a group's level). A pair to a
        host known to be congested counts :data:`SLOW_MARGIN` higher (the
        ratios hold over the host's own factor, the other's is an estimate).
        ``label`` is updated in place.
        """
        tiers = float(np.sqrt(node.level / node.low)) if node.low > 0 else self.gap
        lg, lh = local[g], local[h]
        # alone: a pending host that joined nothing, or a pivot that nothing joined
        size = np.bincount(label, minlength=label.size)
        child = np.zeros(label.size, dtype=bool)
        for c in node.children:  # a small group the sample found may still join one
            if len(c) > SMALL_GROUP:
                child[label[local[np.array(c)]]] = True
        alone = (size <= SMALL_GROUP) & ~child
        group = has_anchor & ~alone  # what a host alone may join
        free_g, free_h = alone[label[lg]], alone[label[lh]]
        to_g, to_h = group[label[lg]], group[label[lh]]
        best: dict[int, dict[int, float]] = {}  # per small group: its best pair to each group
        # a pair to a member known to be congested counts SLOW_MARGIN higher: the
        # member's factor is an estimate, and one divided out too far makes the pair
        # look nearer than its tier
        slow_g = np.where(self.factor[g] > 1.0, SLOW_MARGIN, 1.0)
        slow_h = np.where(self.factor[h] > 1.0, SLOW_MARGIN, 1.0)
        # and every pair of it to a host of the node, grouped or not: the level its
        # pairs show away from the group it would join
        every: dict[int, list[tuple[int, float]]] = {}
        for me_arr, other_arr, pick, to, margin in (
            (lg, lh, touch & free_g, to_h, slow_h),
            (lh, lg, touch & free_h, to_g, slow_g),
        ):
            for me, other, v, grouped in zip(
                label[me_arr[pick]].tolist(),
                label[other_arr[pick]].tolist(),
                (values * margin)[pick].tolist(),
                to[pick].tolist(),
                strict=True,
            ):
                if other == me:
                    continue
                every.setdefault(me, []).append((other, v))
                if grouped:
                    seen = best.setdefault(me, {})
                    seen[other] = min(seen.get(other, np.inf), v)
        for me, seen in best.items():
            if len(seen) < 2:
                continue
            ranked = sorted(seen.items(), key=lambda e: e[1])
            first, second = ranked[0][1], ranked[1][1]
            rest = [v for _, v in ranked[1:]]
            away = sorted(v for other, v in every[me] if other != ranked[0][0])
            others = min(
                0.5 * (rest[(len(rest) - 1) // 2] + rest[len(rest) // 2]),
                0.5 * (away[(len(away) - 1) // 2] + away[len(away) // 2]),
            )
            # with three groups or more, the median of the others backs the step
            ratio = self.gap if len(rest) >= 2 else max(self.gap, tiers)
            if first * ratio <= second and first * max(ratio, tiers) <= others:
                label[label == me] = ranked[0][0]
                has_anchor[ranked[0][0]] = True

    def _reference_pairs(self, ni: int) -> list[Pair]:
        """Pairs that give every host of a split node :data:`REFERENCE_PAIRS` across its children.

        Each host meets hosts of other children at the node's level: its
        factor (:meth:`_final_factors`) is then known before its own group is
        split, and the blocks between the children get samples.
        """
        node = self.nodes[ni]
        if node.flat or len(node.children) < 2:
            return []
        child = np.full(self.n_hosts, -1, dtype=np.int64)
        for ci, c in enumerate(node.children):
            child[c] = ci
        inside = (child[self.eg] >= 0) & (child[self.eh] >= 0)
        across = inside & (child[self.eg] != child[self.eh])
        have = np.bincount(
            np.concatenate([self.eg[across], self.eh[across]]), minlength=self.n_hosts
        )
        hosts = node.hosts
        pairs: list[Pair] = []
        for x in hosts[have[hosts] < REFERENCE_PAIRS].tolist():
            others = hosts[child[hosts] != child[x]]
            need = min(REFERENCE_PAIRS - int(have[x]), others.size)
            for y in self.gen.choice(others, size=need, replace=False).tolist():
                pairs.append((min(x, y), max(x, y)))
        return pairs

    def _finish(self, node: _Node, values: NDArray[np.float64]) -> None:
        self._references.append(next(i for i, nd in enumerate(self.nodes) if nd is node))
        node.done = True
        node.pending, node.targets = [], []
        if node.level != node.level:
            node.level = float(np.median(values)) if values.size else np.nan
        for c in node.children:
            if len(c) > 1:
                self._add_node(c, node.depth + 1)

    def _final_factors(self) -> None:
        """Every host's factor from the groups known so far (two passes).

        Each measured host pair whose lowest common node is done is compared
        with its block: the median of the pairs between the same two sibling
        groups (or inside the same flat group), over their hosts' factors. A
        host's factor is the median of its pairs' ratios when it has at least
        :data:`MIN_FACTOR_PAIRS` and it is at least :data:`CONGESTED_FACTOR`;
        1 otherwise. Groups are placed top down, so a node still placing its
        hosts sees the factors its hosts showed a level up: a congested
        host's pairs inside its rack are compared over its factor, not taken
        for a tier of their own.
        """
        self.factor = np.ones(self.n_hosts)
        if not self.ev.size:
            return
        node, _, kg, kh = self._lca(self.eg, self.eh)
        done = self._node_array("done")[np.maximum(node, 0)].astype(bool) & (node >= 0)
        if not done.any():
            return
        node, kg, kh = node[done], kg[done], kh[done]
        eg, eh, ev = self.eg[done], self.eh[done], self.ev[done]
        flat = self._node_array("flat")[node].astype(bool)
        lo = np.where(flat, 0, np.minimum(kg, kh))
        hi = np.where(flat, 0, np.maximum(kg, kh))
        key = np.stack([node, lo, hi], axis=1)
        _, block = np.unique(key, axis=0, return_inverse=True)
        block = block.reshape(-1)
        n_blocks = int(block.max()) + 1
        # a host's own pairs must not make its block's median (a pivot meets every
        # host of a block): its node's median where they are most of the block
        own = np.concatenate([block, block]) * self.n_hosts + np.concatenate([eg, eh])
        _, inv, own_count = np.unique(own, return_inverse=True, return_counts=True)
        own_count = own_count[inv.reshape(-1)]
        size = np.bincount(block, minlength=n_blocks)[np.concatenate([block, block])]
        use_block = (size - own_count >= MIN_BLOCK_PAIRS) & (own_count * 4 <= size)
        for _ in range(2):
            norm = ev / (self.factor[eg] * self.factor[eh])
            med, _ = _group_median(block, norm, n_blocks)
            level, _ = _group_median(node, norm, len(self.nodes))
            both = np.concatenate([block, block])
            expect = np.where(use_block, med[both], level[np.concatenate([node, node])])
            keys = np.concatenate([eg, eh])
            vals = np.concatenate([ev, ev]) / expect / self.factor[np.concatenate([eh, eg])]
            fin = np.isfinite(vals) & (vals > 0)
            hmed, count = _group_median(keys[fin], vals[fin], self.n_hosts)
            new = np.where((count >= MIN_FACTOR_PAIRS) & (hmed >= CONGESTED_FACTOR), hmed, 1.0)
            self.factor = np.nan_to_num(new, nan=1.0)

    # ------------------------------------------------------------------ result
    def levels(self) -> list[NDArray[np.int64]]:
        """Process group labels per level, hosts first (the tree, cut like single linkage)."""
        a: list[int] = []
        b: list[int] = []
        w: list[float] = []
        for node in self.nodes:
            if len(node.children) < 2:
                continue
            level = node.level if node.level == node.level else 1.0
            first = [c[0] for c in node.children]
            a.extend([first[0]] * (len(first) - 1))
            b.extend(first[1:])
            w.extend([level] * (len(first) - 1))
        labels = (
            tree_levels(
                np.array(a, dtype=np.int64),
                np.array(b, dtype=np.int64),
                np.array(w),
                self.n_hosts,
                self.gap,
            )
            if a and self.n_hosts > 2
            else []
        )
        out = [self.host_of.copy()]
        out.extend(lv[self.host_of] for lv in labels)
        return out

    def _rows(self) -> NDArray[np.float64]:
        return np.concatenate(self._measured) if self._measured else np.zeros((0, 6))

    def host_matrix(self, factors: bool = True) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Host-level latency and spread of the fill (diagonal: in-host).

        With ``factors=False`` the congested hosts' factors are left out: the
        blocks alone, which is what grouping needs (a congested host's slower
        links would otherwise blur the tiers its group shows).
        """
        H = self.n_hosts
        lat = np.zeros((H, H))
        spread = np.zeros((H, H))
        rows = self._rows()
        pa, pb = rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64)
        ha, hb = self.host_of[pa], self.host_of[pb]
        cross = ha != hb
        node, _, kg, kh = self._lca(ha[cross], hb[cross])
        f = self.factor
        vals = rows[cross][:, 2:4] / (f[ha[cross]] * f[hb[cross]])[:, None]
        own = rows[cross][:, 4:6]
        order = np.argsort(node, kind="stable")
        bounds = np.searchsorted(node[order], np.arange(len(self.nodes) + 1))
        for ni, nd in enumerate(self.nodes):
            hs = nd.hosts
            if hs.size < 2:
                continue
            pick = order[bounds[ni] : bounds[ni + 1]]
            x = vals[pick].ravel()
            fin = np.isfinite(x)
            level = float(np.median(x[fin])) if fin.any() else nd.level
            if level != level:
                level = 0.0
            level_spread = _mad(x[fin])
            # child of every host of the node (one block for a flat node)
            below = self.path[hs, nd.depth + 1] if nd.depth + 1 < self.path.shape[1] else None
            key = np.where(below >= 0, below, -(hs + 1)) if below is not None else -(hs + 1)
            if nd.flat:
                key = np.zeros(hs.size, dtype=np.int64)
            uniq, idx = np.unique(key, return_inverse=True)
            m = uniq.size
            block = np.full((m, m), level)
            bspread = np.full((m, m), level_spread)
            if m > 1 and pick.size:
                i = np.searchsorted(uniq, kg[pick])
                j = np.searchsorted(uniq, kh[pick])
                bk = np.repeat(np.minimum(i, j) * m + np.maximum(i, j), 2)
                bv = vals[pick].ravel()
                bo = own[pick].ravel()
                ok = np.isfinite(bv)
                med, count = _group_median(bk[ok], bv[ok], m * m)
                dev, _ = _group_median(bk[ok], np.abs(bv[ok] - med[bk[ok]]), m * m)
                oko = np.isfinite(bo)
                own_med, _ = _group_median(bk[oko], bo[oko], m * m)
                enough = count >= BLOCK_SAMPLES
                r, c = np.divmod(np.flatnonzero(enough), m)
                block[r, c] = block[c, r] = med[enough]
                sp = np.fmax(dev[enough], np.nan_to_num(own_med[enough]))
                bspread[r, c] = bspread[c, r] = sp
            lat[np.ix_(hs, hs)] = block[idx[:, None], idx[None, :]]
            spread[np.ix_(hs, hs)] = bspread[idx[:, None], idx[None, :]]
        if factors:
            lat *= f[:, None] * f[None, :]
            spread *= f[:, None] * f[None, :]
        same = ~cross
        x = rows[same][:, 2:4]
        hh = np.repeat(ha[same], 2)
        fin = np.isfinite(x.ravel())
        med, count = _group_median(hh[fin], x.ravel()[fin], H)
        diag = np.where(count > 0, med, 0.0)
        dev = np.abs(x.ravel()[fin] - diag[hh[fin]])
        mad, _ = _group_median(hh[fin], dev, H)
        lat[np.arange(H), np.arange(H)] = diag
        spread[np.arange(H), np.arange(H)] = np.nan_to_num(mad)
        return lat, spread

    def values(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
        """The filled latency ``a -> b`` of process pairs, as :meth:`result` fills it.

        Without building the (n, n) matrix: measured directions keep their
        value, every other pair takes its block's (host-level) value.
        """
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        self._final_factors()
        host_lat = self.host_matrix()[0]
        out = host_lat[self.host_of[a], self.host_of[b]]
        rows = self._rows()
        x = np.concatenate([rows[:, 0], rows[:, 1]]).astype(np.int64)
        y = np.concatenate([rows[:, 1], rows[:, 0]]).astype(np.int64)
        v = np.concatenate([rows[:, 2], rows[:, 3]])
        ok = np.isfinite(v)
        keys = x[ok] * self.n + y[ok]
        order = np.argsort(keys, kind="stable")
        keys, v = keys[order], v[ok][order]
        want = a * self.n + b
        i = np.minimum(np.searchsorted(keys, want), max(keys.size - 1, 0))
        hit = (keys.size > 0) & (keys[i] == want) if keys.size else np.zeros(want.shape, bool)
        out = np.where(hit, v[i] if keys.size else 0.0, out)
        return np.where(a == b, 0.0, out)

    def congested(self) -> list[list[Any]]:
        """``[host name, factor]`` of every congested host, slowest first."""
        first = np.unique(self.host_of, return_index=True)[1]
        out = [
            [self.hosts[int(first[h])], round(float(f), 3)]
            for h, f in enumerate(self.factor.tolist())
            if f > 1.0
        ]
        return sorted(out, key=lambda e: -e[1])

    def result(
        self,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64], dict[str, Any]]:
        """The full (n, n) latency, spread and count matrices and the facts to record.

        Measured directions keep their value and count 1; every other entry is
        its block's (count 0). The dictionary holds ``latency_groups`` (per
        level above the hosts, process labels), ``congested_hosts``
        (``[host, factor]``), ``latency_stages`` (``[name, slots, pairs]``)
        and ``latency_pairs``.
        """
        self._final_factors()
        host_lat, host_spread = self.host_matrix()
        self.host_lat = self.host_matrix(factors=False)[0]
        h = self.host_of
        lat = host_lat[np.ix_(h, h)]
        spread = host_spread[np.ix_(h, h)]
        counts = np.zeros((self.n, self.n), dtype=np.int64)
        rows = self._rows()
        a = rows[:, 0].astype(np.int64)
        b = rows[:, 1].astype(np.int64)
        for x, y, col, scol in ((a, b, 2, 4), (b, a, 3, 5)):
            ok = np.isfinite(rows[:, col])
            lat[x[ok], y[ok]] = rows[ok, col]
            spread[x[ok], y[ok]] = rows[ok, scol]
            counts[x[ok], y[ok]] = 1
        np.fill_diagonal(lat, 0.0)
        np.fill_diagonal(spread, 0.0)
        info = {
            "latency_groups": [lv.tolist() for lv in self.levels()[1:]],
            "congested_hosts": self.congested(),
            "latency_stages": [
                [name, s, p]
                for name, s, p in zip(
                    self.stages, self.slots_per_stage, self.pairs_per_stage, strict=True
                )
            ],
            "latency_pairs": int(len(a)),
        }
        return lat, spread, counts, info


def _mad(x: NDArray[np.float64]) -> float:
    x = np.asarray(x, dtype=np.float64).ravel()
    if not x.size:
        return 0.0
    return float(np.median(np.abs(x - np.median(x))))
